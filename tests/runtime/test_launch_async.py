"""Launch policy of the CUDA backend, without a GPU: a call whose arguments are all on
the device is enqueued on the caller's stream and returns (as PyTorch's operations do);
a call with host arrays copies, launches and synchronizes; ``CUDA_LAUNCH_BLOCKING=1``
makes every call wait.  (The first GPU campaign measured 0.5 ms per ``gpudsl.ops`` call,
every one of them synchronizing.)"""
import sys
import types

import numpy as np
import pytest

from gpudsl import LaunchError

from gpudsl.runtime import device, driver, launch
from gpudsl.runtime.interop import DeviceArray
from gpudsl.runtime.launch import ArrayArg, ArrayRef, CudaBackend, Launch


class Recorder:
    def __init__(self):
        self.launches, self.syncs = [], 0

    def launch(self, name, grid, block, args, shared=0, stream=None):
        device._inflight.append(("slots", name))  # what DeviceModule.launch keeps
        self.launches.append((name, stream, tuple(type(a).__name__ for a in args)))


@pytest.fixture
def backend(monkeypatch):
    rec = Recorder()
    b = CudaBackend.__new__(CudaBackend)
    b.capture_output, b.output, b.sigs, b._dev = False, "", [], rec
    monkeypatch.setattr(driver, "driver_available", lambda: True)

    def sync():
        rec.syncs += 1
        device._inflight.clear()
    monkeypatch.setattr(device, "synchronize", sync)
    monkeypatch.delenv("CUDA_LAUNCH_BLOCKING", raising=False)
    yield b, rec
    device._inflight.clear()


def _dev_arg(name, value=None):
    d = DeviceArray(0x1000, (4,), np.dtype(np.float32))
    return ArrayArg(name, value if value is not None else d, None, d, (4,), True)


PLAN = [Launch("k", (1, 1, 1), (32, 1, 1), (ArrayRef("x"), 4))]


def test_device_arrays_are_enqueued_without_a_synchronization(backend):
    b, rec = backend
    assert b.run({"x": _dev_arg("x")}, [], PLAN) == ""
    assert rec.launches == [("k", None, ("DeviceArray", "int"))] and rec.syncs == 0
    assert device._inflight == []  # nothing kept alive: the arrays are the caller's


def test_launch_blocking_waits(backend, monkeypatch):
    b, rec = backend
    monkeypatch.setenv("CUDA_LAUNCH_BLOCKING", "1")
    b.run({"x": _dev_arg("x")}, [], PLAN)
    assert rec.syncs == 1


def test_torch_tensors_go_on_torchs_current_stream(backend, monkeypatch):
    b, rec = backend

    class Tensor:
        device = "cuda:0"
    fake = types.SimpleNamespace(Tensor=Tensor, cuda=types.SimpleNamespace(
        current_stream=lambda dev: types.SimpleNamespace(cuda_stream=0xBEEF)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    b.run({"x": _dev_arg("x", Tensor())}, [], PLAN)
    assert rec.launches[-1][1] == 0xBEEF and rec.syncs == 0
    fake.cuda.current_stream = lambda dev: types.SimpleNamespace(cuda_stream=0)
    b.run({"x": _dev_arg("x", Tensor())}, [], PLAN)
    assert rec.launches[-1][1] is None  # torch's default stream: the legacy one


def test_host_arrays_and_temporaries_still_synchronize(backend, monkeypatch):
    b, rec = backend
    copied = []

    class Buf:
        ptr = 0x2000

        def copy_to(self, h):
            copied.append(h)
    monkeypatch.setattr(device.DeviceBuffer, "from_numpy", classmethod(lambda cls, a: Buf()))
    monkeypatch.setattr(device.DeviceBuffer, "zeros", classmethod(lambda cls, s, d: Buf()))
    h = np.zeros(4, np.float32)
    b.run({"x": ArrayArg("x", h, h, None, (4,), True)}, [], PLAN)
    assert rec.syncs == 1 and copied == [h]
    b.run({"x": _dev_arg("x")}, [("t", (4,), np.float32)], PLAN)
    assert rec.syncs == 2  # a temporary of the call's own: freed after the wait


def test_temporaries_of_a_torch_call_come_from_torchs_allocator(backend, monkeypatch):
    """With torch tensors the call's GLOBAL temporaries are zeroed tensors of torch's
    caching allocator (stream-ordered reuse), and the call does not wait."""
    b, rec = backend
    made = []

    class Tensor:
        is_cuda, device = True, "cuda:0"

        def __init__(self, n=0):
            self.n = n

        def data_ptr(self):
            return 0x9000

    def zeros(n, dtype, device):
        made.append((n, dtype, device))
        return Tensor(n)
    fake = types.SimpleNamespace(Tensor=Tensor, uint8="uint8", zeros=zeros, cuda=types.SimpleNamespace(
        current_stream=lambda dev: types.SimpleNamespace(cuda_stream=0)))
    monkeypatch.setitem(sys.modules, "torch", fake)
    plan = [Launch("k", (1, 1, 1), (32, 1, 1), (ArrayRef("x"), ArrayRef("t")))]
    b.run({"x": _dev_arg("x", Tensor())}, [("t", (3, 5), np.float32)], plan)
    assert made == [(60, "uint8", "cuda:0")] and rec.syncs == 0
    assert rec.launches[-1] == ("k", None, ("DeviceArray", "DeviceArray"))


class FakeTorchCuda:
    """What gpudsl reads of a PyTorch CUDA tensor; its ``__cuda_array_interface__``
    (a dict built in Python on every read) must not be touched."""
    is_cuda, requires_grad = True, False

    def __init__(self, shape, dtype="torch.float32", strides=None):
        self.shape, self.dtype, self._strides = shape, dtype, strides

    def data_ptr(self):
        return 0xD000

    def is_contiguous(self):
        return self._strides is None

    def stride(self):
        return self._strides

    @property
    def __cuda_array_interface__(self):
        raise AssertionError("the interface was read")


def test_torch_cuda_tensors_are_read_through_their_accessors():
    from gpudsl.runtime.interop import as_device_array

    d = as_device_array(FakeTorchCuda((4, 8)))
    assert (d.ptr, d.shape, d.dtype, d.strides, d.c_contiguous) == \
        (0xD000, (4, 8), np.dtype(np.float32), None, True)
    t = as_device_array(FakeTorchCuda((8, 4), strides=(1, 8)))  # a transpose
    assert t.strides == (4, 32) and not t.c_contiguous
    b = as_device_array(FakeTorchCuda((2,), "torch.bfloat16"))
    assert b.bfloat16 and b.dtype == np.uint16
    g = FakeTorchCuda((2,))
    g.requires_grad = True  # refused by PyTorch's own export: the general path decides
    with pytest.raises(LaunchError, match="not a device array"):  # (this fake has none)
        as_device_array(g)
