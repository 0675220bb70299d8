"""GPU launching: real tests (marked gpu) and a fake-driver test of the ctypes plumbing."""
import ctypes
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from gpudsl.errors import LaunchError
from gpudsl.runtime import device, driver
from gpudsl.runtime.interop import DeviceArray, as_device_array, dltensor_to_array
from gpudsl.runtime.signature import KernelSig

from .kernels import SIGS, SOURCE

HERE = Path(__file__).resolve().parent


@pytest.fixture
def fake_driver(tmp_path, monkeypatch):
    """Point gpudsl.runtime.driver at a fake libcuda that runs kernels as host code."""
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("no C compiler")
    so = tmp_path / "libfakecuda.so"
    subprocess.run([cc, "-shared", "-fPIC", "-O1", str(HERE / "fake_libcuda.c"), "-o", str(so)],
                   check=True)
    lib = ctypes.CDLL(str(so))
    monkeypatch.setattr(driver, "_lib", lib)
    monkeypatch.setattr(driver, "_lib_tried", True)
    monkeypatch.setattr(driver, "_available", True)
    monkeypatch.setattr(driver, "_arch", None)   # the fake device's, forgotten afterwards
    monkeypatch.setattr(device, "_api", None)
    monkeypatch.setattr(device, "_ctx", ctypes.c_void_p(0))
    yield lib
    device._inflight.clear()


def test_device_plumbing_with_a_fake_driver(fake_driver):
    sig = KernelSig("scale", ["float*", "int", "float"])
    mod = device.DeviceModule(b"not really a cubin", [sig])
    host = np.arange(10, dtype=np.float32)
    buf = device.DeviceBuffer.from_numpy(host)
    mod.launch("scale", (3, 2), (32, 4), [buf, np.int32(10), np.float32(1.5)], shared_bytes=64)
    device.synchronize()
    np.testing.assert_array_equal(buf.to_numpy(), host * 1.5)
    vals = (ctypes.c_uint64 * 32)()
    cfg = (ctypes.c_uint * 7)()
    assert fake_driver.fake_last(vals, cfg) == 1
    assert list(cfg) == [3, 2, 1, 32, 4, 1, 64]
    assert vals[0] == buf.ptr and vals[1] == 10
    assert np.uint64(vals[2]).astype(np.uint32).view(np.float32) == np.float32(1.5)
    # a "device array" from another library, through __cuda_array_interface__
    view = device.DeviceBuffer.zeros(4, np.float32)
    mod.launch("scale", 1, 1, [DeviceArray(view.ptr, (4,), np.dtype(np.float32)), 4, 2.0])
    with pytest.raises(LaunchError, match="host numpy array"):
        mod.launch("scale", 1, 1, [host, np.int32(10), np.float32(1)])
    with pytest.raises(LaunchError, match="float32 elements"):
        mod.launch("scale", 1, 1, [device.DeviceBuffer(3, np.int32), np.int32(3), np.float32(1)])
    with pytest.raises(LaunchError, match="CUDA_ERROR_NOT_FOUND"):
        device.DeviceModule(b"x", [KernelSig("missing", ["int"])])
    buf.free()


def test_the_launch_limits_are_the_modules_target(fake_driver):
    """issue 41: the launch limits were the default target's, fixed at import; they are
    the description of the architecture the module was built for."""
    from gpudsl.targets import TARGETS, Target, register_target

    sig = KernelSig("scale", ["float*", "int", "float"])
    register_target(Target("sm_toy", (9, 0), max_threads_per_block=16,
                           static_shared_bytes=1024))
    try:
        toy, h100 = device.DeviceModule(b"x", [sig], "sm_toy"), device.DeviceModule(b"x", [sig])
        assert h100.target.name == "sm_90a"       # the (fake) 9.0 device's own
        buf = device.DeviceBuffer.zeros(8, np.float32)
        args = [buf, np.int32(8), np.float32(2)]
        with pytest.raises(LaunchError, match="more than 16 threads"):
            toy.launch("scale", 1, 32, args)
        h100.launch("scale", 1, 32, args)
        # 2 KiB of shared memory: over the toy's static limit (the launch opts in), not sm_90a's
        toy.launch("scale", 1, 8, args, shared_bytes=2048)
        h100.launch("scale", 1, 8, args, shared_bytes=2048)
        assert toy._dyn_smem == {"scale": 2048} and h100._dyn_smem == {}
        device.synchronize()
        buf.free()
    finally:
        del TARGETS["sm_toy"]


class _CAI:
    def __init__(self, ptr, shape, typestr, strides=None):
        self.__cuda_array_interface__ = {"data": (ptr, False), "shape": shape,
                                         "typestr": typestr, "strides": strides, "version": 2}


def test_cuda_array_interface_parsing():
    a = as_device_array(_CAI(0xABC000, (4, 8), "<f4"))
    assert (a.ptr, a.shape, a.dtype, a.c_contiguous) == (0xABC000, (4, 8), np.float32, True)
    t = as_device_array(_CAI(0x1000, (4, 8), "<f4", strides=(4, 16)))  # a transpose
    assert not t.c_contiguous
    assert as_device_array(_CAI(0x1000, (4, 8), "<f4", strides=(32, 4))).c_contiguous


def test_dlpack_parsing_on_a_host_array():
    x = np.arange(24, dtype=np.int64).reshape(4, 6)[:, 1:5]
    d = dltensor_to_array(x.__dlpack__(), x, device_types=(1,))  # kDLCPU for the test
    assert d.ptr == x.ctypes.data and d.shape == (4, 4) and d.dtype == np.int64
    assert d.strides == x.strides and not d.c_contiguous
    with pytest.raises(LaunchError, match="not on a CUDA device"):
        as_device_array(np.zeros(3))


@pytest.mark.gpu
def test_gpu_kernels_match_numpy():
    from gpudsl.runtime.nvrtc import compile_cubin
    from gpudsl.runtime.driver import device_arch
    r = compile_cubin(SOURCE, device_arch())
    mod = device.DeviceModule(r.cubin, SIGS)
    n = 5000
    x = np.random.rand(n).astype(np.float32)
    y = np.random.rand(n).astype(np.float32)
    dx, dy = device.DeviceBuffer.from_numpy(x), device.DeviceBuffer.from_numpy(y)
    blocks = -(-n // 256)
    mod.launch("saxpy2d", (-(-blocks // 4), 4), 256, [np.int32(n), np.float32(2), dx, dy])
    M, N, K = 70, 45, 83
    A, B = np.random.rand(M, K).astype(np.float32), np.random.rand(K, N).astype(np.float32)
    dA, dB, dC = (device.DeviceBuffer.from_numpy(A), device.DeviceBuffer.from_numpy(B),
                  device.DeviceBuffer.zeros((M, N)))
    mod.launch("matmul16", (-(-N // 16), -(-M // 16)), (16, 16), [dA, dB, dC, M, N, K])
    out = device.DeviceBuffer.zeros(blocks)
    mod.launch("reduce256", blocks, 256, [dx, out, n])
    device.synchronize()
    np.testing.assert_allclose(dy.to_numpy(), 2 * x + y, rtol=1e-6)
    np.testing.assert_allclose(dC.to_numpy(), A @ B, rtol=1e-4)
    pad = np.zeros(blocks * 256, np.float32)
    pad[:n] = x
    np.testing.assert_allclose(out.to_numpy(), pad.reshape(-1, 256).sum(1), rtol=1e-5)


@pytest.mark.gpu
def test_gpu_zero_copy_from_torch_and_cupy():
    from gpudsl.runtime.nvrtc import compile_cubin
    from gpudsl.runtime.driver import device_arch
    mod = device.DeviceModule(compile_cubin(SOURCE, device_arch()).cubin, SIGS)
    n = 1000
    libs = []
    try:
        import torch
        libs.append(("torch", lambda a: torch.from_numpy(a).cuda(), lambda t: t.cpu().numpy()))
    except ImportError:
        pass
    try:
        import cupy
        libs.append(("cupy", cupy.asarray, cupy.asnumpy))
    except ImportError:
        pass
    if not libs:
        pytest.skip("neither torch nor cupy is installed")
    for name, to_dev, to_host in libs:
        x = np.random.rand(n).astype(np.float32)
        y = np.random.rand(n).astype(np.float32)
        dx, dy = to_dev(x), to_dev(y)
        mod.launch("saxpy2d", 4, 256, [np.int32(n), np.float32(3), dx, dy])
        device.synchronize()
        np.testing.assert_allclose(to_host(dy), 3 * x + y, rtol=1e-6, err_msg=name)
