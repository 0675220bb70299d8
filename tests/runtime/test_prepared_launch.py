"""The CUDA backend's prepared launcher (``runtime/prepared.py``), on the recording fake
driver (``runtime/fake_driver.py``; the kernels compiled by NVRTC, nothing run): the
second call of a signature skips the checks and the planning and packs the same
parameters the full path packs; every bad input is still refused after a good call of
the same shape was prepared, and nothing is launched for it."""
from __future__ import annotations

import struct

import numpy as np
import pytest

from gpudsl import BLOCKS, THREADS, LaunchError, f32, i32, par, proc, size
from gpudsl.runtime import fake_driver
from gpudsl.runtime.device import DeviceBuffer
from gpudsl.runtime.interop import DeviceArray


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def shift(n: size, k: i32, x: f32[n], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = x[128 * b + t] + k


@pytest.fixture
def fake():
    with fake_driver.installed() as drv:
        yield drv


def _f32(slot: int) -> float:
    return struct.unpack("<f", struct.pack("<I", slot & 0xFFFFFFFF))[0]


def test_the_second_call_is_prepared_and_packs_what_the_full_path_packs(fake, monkeypatch):
    k = saxpy.compile("cuda")
    x, y = DeviceBuffer(1024), DeviceBuffer(1024)
    k(1024, 2.0, x, y)   # the full path: every check, the plan, then the entry
    full = fake.launches[-1]
    assert len(k._fast) == 1
    monkeypatch.setattr(type(k), "bind", lambda *a, **kw: pytest.fail("full path taken"))
    k(1024, 2.0, x, y)
    fast = fake.launches[-1]
    assert fast == full and fast.slots == (1024, fast.slots[1], x.ptr, y.ptr)
    assert _f32(fast.slots[1]) == 2.0 and fast.grid == (4, 1, 1) and fast.block == (256, 1, 1)
    monkeypatch.undo()
    k(a=-0.5, x=y, y=x, n=1024)   # by name: another signature (its own first call) ...
    monkeypatch.setattr(type(k), "bind", lambda *a, **kw: pytest.fail("full path taken"))
    k(n=1024, a=3.0, x=y, y=x)    # ... then prepared: new values, new addresses
    last = fake.launches[-1]
    assert _f32(last.slots[1]) == 3.0 and last.slots[2:] == (y.ptr, x.ptr)
    assert len(fake.kernel_launches()) == 4
    assert "cuMemcpyHtoD_v2" not in fake.calls and "cuCtxSynchronize" not in fake.calls


def test_integer_scalars_are_range_checked_on_the_prepared_path(fake):
    k = shift.compile("cuda")
    x, y = DeviceBuffer(256), DeviceBuffer(256)
    k(256, -7, x, y)
    k(256, 5, x, y)
    assert fake.launches[-1].slots[1] & 0xFFFFFFFF == 5
    k(256, -7, x, y)
    assert fake.launches[-1].slots[1] & 0xFFFFFFFF == (-7) & 0xFFFFFFFF
    n = len(fake.launches)
    with pytest.raises(LaunchError, match="range|int32|k"):
        k(256, 2 ** 31, x, y)
    assert len(fake.launches) == n


@pytest.mark.parametrize("bad", ["dtype", "shape", "alias", "readonly", "strided", "size"])
def test_bad_inputs_are_refused_after_a_good_call_was_prepared(fake, bad):
    k = saxpy.compile("cuda")
    x, y = DeviceBuffer(1024), DeviceBuffer(1024)
    k(1024, 2.0, x, y)
    k(1024, 2.0, x, y)   # prepared
    n = len(fake.launches)
    args = {"dtype": (1024, 2.0, DeviceBuffer(1024, np.float64), y),
            "shape": (1024, 2.0, x, DeviceBuffer(512)),
            "alias": (1024, 2.0, y, y),
            "readonly": (1024, 2.0, x, DeviceArray(y.ptr, (1024,), np.dtype(np.float32),
                                                   readonly=True, owner=y)),
            "strided": (1024, 2.0, DeviceArray(x.ptr, (1024,), np.dtype(np.float32),
                                               strides=(8,), owner=x), y),
            "size": (1000, 2.0, x, y)}[bad]
    with pytest.raises(LaunchError):
        k(*args)
    assert len(fake.launches) == n   # refused before any launch
    # a partial overlap between two views of one buffer, after the views were prepared
    if bad == "alias":
        buf = DeviceBuffer(2048)
        lo = DeviceArray(buf.ptr, (1024,), np.dtype(np.float32), owner=buf)
        hi = DeviceArray(buf.ptr + 4096, (1024,), np.dtype(np.float32), owner=buf)
        k(1024, 1.0, lo, hi)
        k(1024, 1.0, lo, hi)
        mid = DeviceArray(buf.ptr + 2048, (1024,), np.dtype(np.float32), owner=buf)
        with pytest.raises(LaunchError):
            k(1024, 1.0, lo, mid)
        assert len(fake.launches) == n + 2


def test_a_thread_without_the_context_gets_it_and_launches_again(fake):
    k = saxpy.compile("cuda")
    x, y = DeviceBuffer(1024), DeviceBuffer(1024)
    real = fake.cuLaunchKernel
    codes = iter([0, 201, 0])   # the full path; CUDA_ERROR_INVALID_CONTEXT; the retry
    fake.cuLaunchKernel = lambda *a: (real(*a), next(codes))[1]
    k(1024, 2.0, x, y)
    n = len(fake.calls)
    k(1024, 2.0, x, y)
    assert fake.calls[n:] == ["cuLaunchKernel", "cuCtxGetCurrent", "cuCtxSetCurrent",
                              "cuLaunchKernel"] or fake.calls[n:].count("cuLaunchKernel") == 2


def test_a_failed_prepared_launch_is_a_launch_error_naming_the_kernel(fake):
    k = saxpy.compile("cuda")
    x, y = DeviceBuffer(1024), DeviceBuffer(1024)
    real = fake.cuLaunchKernel
    codes = iter([0, 0, 700])   # the full path, prepared, CUDA_ERROR_ILLEGAL_ADDRESS
    fake.cuLaunchKernel = lambda *a: (real(*a), next(codes))[1]
    k(1024, 2.0, x, y)
    k(1024, 2.0, x, y)
    with pytest.raises(LaunchError, match="launching saxpy"):
        k(1024, 2.0, x, y)


def test_the_stream_is_torchs_current_one_read_at_each_call(monkeypatch):
    import sys
    import types

    from gpudsl.runtime.prepared import pointer_getter, stream_getter

    class Tensor:
        device = types.SimpleNamespace(index=1, type="cuda")
        is_cuda = True

        def data_ptr(self):
            return 0xABC00
    current = {1: 0xBEEF}
    fake = types.SimpleNamespace(Tensor=Tensor, _C=types.SimpleNamespace(
        _cuda_getCurrentRawStream=lambda index: current[index]))
    monkeypatch.setitem(sys.modules, "torch", fake)
    stream = stream_getter([Tensor()])
    assert stream() == 0xBEEF
    current[1] = 0   # torch's default stream: the legacy one
    assert stream() is None
    assert pointer_getter(Tensor())(Tensor()) == 0xABC00
    assert stream_getter([DeviceBuffer.__new__(DeviceBuffer)])() is None
    assert pointer_getter(np.zeros(2)) is None


@pytest.mark.gpu
def test_torch_cuda_tensors_on_the_prepared_path_honour_the_current_stream():
    torch = pytest.importorskip("torch")
    k = saxpy.compile("cuda")
    x = torch.arange(1024, dtype=torch.float32, device="cuda")
    y = torch.ones_like(x)
    k(1024, 2.0, x, y)
    k(1024, 2.0, x, y)
    assert len(k._fast) == 1
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        k(1024, 1.0, x, y)
    s.synchronize()
    torch.testing.assert_close(y, 1 + 5 * x)
    with pytest.raises(LaunchError):
        k(1024, 1.0, x.double(), y)
