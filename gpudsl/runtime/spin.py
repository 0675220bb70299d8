"""A kernel that keeps the GPU busy for a chosen time, so that the host runs ahead.

:func:`gpudsl.runtime.timing.measure` queues it just before its start event: while the
GPU spins, the host enqueues the start event, the timed calls and the stop event, so
the events bracket the device's work alone, not the host's Python between launches on
an idle GPU (CUTLASS's profiler and nvbench hide launch latency the same way).  The
kernel touches no memory, so it leaves the L2 as the flush (or the previous run) left
it.  Whether it did cover the host's work is checked, not assumed: ``covered()``
asks the driver whether the event after the spin has completed yet.

This module knows nothing of the IR.
"""
from __future__ import annotations

import ctypes

SPIN_SOURCE = r"""
extern "C" __global__ void gpudsl_spin(long long cycles) {
    long long start = clock64();
    while (clock64() - start < cycles) { }
}
"""
CU_DEVICE_ATTRIBUTE_CLOCK_RATE = 13  # kHz
CUDA_ERROR_NOT_READY = 600


class Spinner:
    """``spin(us)``: one thread spinning about ``us`` microseconds on the legacy
    default stream (SM clock cycles from the device's clock rate; a slower clock spins
    longer, never shorter)."""

    def __init__(self):
        from .device import _cu, check
        from .driver import device_arch, device_attribute
        from .nvrtc import compile_cubin

        lib = _cu()
        self._image = compile_cubin(SPIN_SOURCE, device_arch(), name="gpudsl_spin.cu").cubin
        self._mod, self._fn = ctypes.c_void_p(0), ctypes.c_void_p(0)
        check(lib.cuModuleLoadData(ctypes.byref(self._mod), self._image), "cuModuleLoadData")
        lib.cuModuleGetFunction.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_void_p,
                                            ctypes.c_char_p]
        check(lib.cuModuleGetFunction(ctypes.byref(self._fn), self._mod, b"gpudsl_spin"),
              "looking up gpudsl_spin")
        self.khz = device_attribute(CU_DEVICE_ATTRIBUTE_CLOCK_RATE) or 2_000_000

    def spin(self, us: float) -> None:
        from .device import _cu, check

        cycles = ctypes.c_longlong(int(us * self.khz / 1000))
        params = (ctypes.c_void_p * 1)(ctypes.cast(ctypes.pointer(cycles), ctypes.c_void_p))
        check(_cu().cuLaunchKernel(self._fn, 1, 1, 1, 1, 1, 1, 0, None, params, None),
              "launching gpudsl_spin")


_SPINNER: Spinner | None = None


def spinner() -> Spinner:
    global _SPINNER
    if _SPINNER is None:
        _SPINNER = Spinner()
    return _SPINNER


def still_running(lib, event) -> bool:
    """Whether ``event`` (recorded after the spin) has not completed yet: the spin was
    still running, so everything the host enqueued meanwhile waited behind it."""
    lib.cuEventQuery.argtypes = [ctypes.c_void_p]
    res = lib.cuEventQuery(event)
    if res not in (0, CUDA_ERROR_NOT_READY):
        from .device import check

        check(res, "cuEventQuery")
    return res == CUDA_ERROR_NOT_READY
