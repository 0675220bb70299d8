"""A recording fake of the CUDA driver (``libcuda``), for testing and timing the GPU
host path on a machine without a GPU.

:func:`installed` puts a :class:`FakeDriver` where gpudsl looks for the driver
(``device._cu``, ``driver.libcuda``, the driver's probe and the device's architecture),
and restores the real ones on exit.  Every driver function then returns success and
hands out fresh handles and non-overlapping device addresses through its
out-parameters; nothing runs and no device memory exists (a copy to the host writes
zeros).  What the fake keeps:

- ``calls``: every driver function called, by name, in order;
- ``launches``: each ``cuLaunchKernel`` as a :class:`Launched` (function handle, grid,
  block, dynamic shared bytes, stream, the parameter slots as 64-bit words read back
  from the ``void*[]`` array, and whether a stream capture was under way);
- ``replays``: the number of ``cuGraphLaunch`` calls;
- ``allocated`` / ``freed``: the device addresses ``cuMemAlloc`` handed out and
  ``cuMemFree`` was given, in order (``DeviceBuffer.free`` reaches the fake too);
  ``allocated_while_capturing``: the allocations made while a capture was under way
  (a real driver refuses them: ``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``).

A capture is under way from ``cuStreamBeginCapture`` to ``cuStreamEndCapture`` on that
stream, and ``cuStreamIsCapturing`` says so for that stream only.

Kernels are compiled for real (NVRTC needs no GPU), so a test sees the launches the
CUDA backend would make: ``proc.compile("cuda")``, ``gpudsl.ops`` with
``ops.backend`` returning ``"cuda"``, a ``Model`` compiled with ``device="cuda"``.
"""
from __future__ import annotations

import contextlib
import ctypes
import gc
from typing import NamedTuple

_BYREF = type(ctypes.byref(ctypes.c_int()))


class Launched(NamedTuple):
    function: int
    grid: tuple
    block: tuple
    shared_bytes: int
    stream: int
    slots: tuple      # each parameter's 8-byte slot, as an unsigned integer
    captured: bool    # enqueued while a stream capture was under way


class FakeDriver:
    """``libcuda`` as recorders (see the module's text)."""

    def __init__(self):
        self.calls: list[str] = []
        self.launches: list[Launched] = []
        self.replays = 0
        self.capturing = False
        self.capture_stream = None   # the handle of the stream being captured
        self.allocated: list[int] = []
        self.freed: list[int] = []
        self.allocated_while_capturing: list[int] = []
        self._handle = 0x100
        self._address = 0x7F00_0000_0000

    def __getattr__(self, name: str):
        if not name.startswith("cu"):
            raise AttributeError(name)

        def fn(*args):
            return self._call(name, args)
        fn.__name__ = name
        setattr(self, name, fn)   # argument types set on it stay; the next lookup is direct
        return fn

    def _call(self, name: str, args: tuple) -> int:
        self.calls.append(name)
        if name == "cuLaunchKernel":
            f, gx, gy, gz, bx, by, bz, smem, stream, params = args[:10]
            slots = tuple(ctypes.c_uint64.from_address(params[i]).value
                          for i in range(len(params))) if params is not None else ()
            self.launches.append(Launched(_value(f), (gx, gy, gz), (bx, by, bz), smem,
                                          _value(stream), slots, self.capturing))
            return 0
        if name.startswith("cuStreamBeginCapture"):
            self.capturing, self.capture_stream = True, _value(args[0])
        elif name == "cuStreamEndCapture":
            self.capturing, self.capture_stream = False, None
        elif name == "cuStreamIsCapturing":   # CU_STREAM_CAPTURE_STATUS_ACTIVE / NONE
            args[1]._obj.value = int(self.capturing and _value(args[0]) == self.capture_stream)
            return 0
        elif name == "cuGraphLaunch":
            self.replays += 1
        elif name.startswith("cuMemcpyDtoH"):   # device memory reads as zeros
            ctypes.memset(int(args[0]), 0, int(args[2]))
        elif name == "cuMemAlloc_v2":
            args[0]._obj.value = self._address
            self.allocated.append(self._address)
            if self.capturing:
                self.allocated_while_capturing.append(self._address)
            self._address += -(-max(int(args[1]), 1) // 4096) * 4096
            return 0
        elif name == "cuMemFree_v2":
            self.freed.append(_value(args[0]))
            return 0
        for a in args:  # out-parameters: a fresh handle
            if isinstance(a, _BYREF) and isinstance(a._obj, (ctypes.c_void_p,
                                                             ctypes.c_uint64)):
                a._obj.value = self._handle
                self._handle += 1
        return 0

    def kernel_launches(self, captured: bool | None = None) -> list[Launched]:
        """The launches, or those made inside (True) or outside (False) a capture."""
        return [ln for ln in self.launches if captured is None or ln.captured == captured]


def _value(handle) -> int:
    if handle is None:
        return 0
    return int(getattr(handle, "value", handle) or 0)


@contextlib.contextmanager
def installed(arch: str = "sm_90"):
    """Use a fresh :class:`FakeDriver` as the CUDA driver inside the ``with`` block
    (a device of architecture ``arch``); yields it."""
    from . import device, driver, graphs, tensor_maps

    fake = FakeDriver()
    saved = (device._cu, device._api, driver.libcuda, driver._available, driver._arch,
             graphs._typed, tensor_maps._CACHE, tensor_maps._PINNED)
    device._cu, device._api, driver.libcuda = (lambda: fake), fake, (lambda: fake)
    driver._available, driver._arch, graphs._typed = True, arch, False
    # the fake's device memory is its own: no tensor map built on another device is found
    tensor_maps._CACHE, tensor_maps._PINNED = {}, {}
    try:
        yield fake
    finally:
        # what was made under the fake (streams, graphs, buffers in reference cycles)
        # dies under it: collected later, its __del__ would call another driver (a
        # fake address freed there, or a deadlock inside device._cu's first call)
        gc.collect()
        (device._cu, device._api, driver.libcuda, driver._available, driver._arch,
         graphs._typed, tensor_maps._CACHE, tensor_maps._PINNED) = saved
        device._inflight.clear()


__all__ = ["FakeDriver", "Launched", "installed"]
