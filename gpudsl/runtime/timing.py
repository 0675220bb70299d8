"""The one way gpudsl times GPU work (``gpudsl bench``, the autotuner, benchmarks).

:func:`measure` times any callable that enqueues work on the legacy default stream
(a compiled gpudsl kernel, a PyTorch or CuPy operation, a device copy):

1. ``warmup`` untimed calls (compilation, module loading, first-touch costs);
2. then ``reps`` repetitions, each: ``restore()`` when given (the caller puts in-place
   arguments back), the L2 cache flushed by writing a buffer several times the L2's
   size (:func:`flush_bytes`, sized from the device attribute), a CUDA event, ``inner``
   calls, a CUDA event; the repetition's time is the events' difference over ``inner``.
   ``restore`` and the flush are outside the timed region;
3. the median and the spread (interquartile range, plus min and max) of the repetitions.

Between the flush and the start event a one-thread kernel spins (``gpudsl.runtime.spin``)
for a few times the host time one call took in the warm-up: the host enqueues the
start event, the calls and the stop event while the GPU is still spinning, so the
events time the device's work and not the Python between launches on an idle GPU (the
first GPU campaign measured 0.5 ms of it around a 7 us kernel).  Each repetition checks
that the spin outlasted the host's enqueueing; ``covered`` counts those that did, and a
call that synchronizes inside (a result read back to the host) is timed with its host
work, with a note.  ``host_ms`` is the host's own time per call (the launch overhead).

``backend="emulator"`` times the same loop on the CPU with ``time.perf_counter`` (no
flush: there is no GPU cache) and labels the result ``emulated``; such figures say
nothing about a GPU and are never to be mixed with GPU ones.

This module knows nothing of the IR: it times callables.
"""
from __future__ import annotations

import ctypes
import statistics
import time
import warnings
from dataclasses import asdict, dataclass, field
from typing import Callable

from .driver import device_attribute

MIN_FLUSH_BYTES = 256 * 1024 * 1024  # notes/performance.md: "write a 256 MB buffer"
FLUSH_L2_MULTIPLE = 4  # and at least 4x the L2 the device reports
CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE = 38
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16

TIMED = ("cuda", "emulator")   # the backends measure() times


@dataclass
class Timing:
    """Times of one measurement, in milliseconds per call."""

    times_ms: list[float]
    median_ms: float
    spread_ms: float  # interquartile range (max - min under 4 repetitions)
    min_ms: float
    max_ms: float
    method: str  # "cuda-events" or "perf_counter"
    emulated: bool
    warmup: int
    reps: int
    inner: int = 1
    flush_bytes: int = 0  # 0: the L2 was not flushed
    restored: bool = False  # in-place arguments restored before each repetition
    notes: list[str] = field(default_factory=list)
    host_ms: float | None = None  # median host time per call (the launch overhead)
    covered: int | None = None  # repetitions whose host work the spin covered

    def rate(self, amount: float) -> float:
        """``amount`` (FLOPs or bytes) per second at the median time."""
        return amount / (self.median_ms * 1e-3)

    def to_dict(self) -> dict:
        return asdict(self)


def summarize(times: list[float]) -> tuple[float, float]:
    """(median, spread) of ``times``; the spread is the interquartile range, or max - min
    under four values."""
    if not times:
        raise ValueError("summarize: no times")
    med = statistics.median(times)
    if len(times) >= 4:
        q = statistics.quantiles(times, n=4)
        return med, q[2] - q[0]
    return med, max(times) - min(times)


def flush_bytes(l2_bytes: int | None) -> int:
    """How many bytes to write between repetitions so that nothing of the last one stays
    in L2: at least 256 MB, and at least four times the L2 (H100: 50 MB -> 256 MB; a
    126 MB L2 -> 504 MB).  ``None`` (unknown L2) -> 256 MB."""
    if not l2_bytes or l2_bytes < 0:
        return MIN_FLUSH_BYTES
    return max(MIN_FLUSH_BYTES, FLUSH_L2_MULTIPLE * int(l2_bytes))


# ------------------------------------------------------------------ the driver's side

_EVENT_SIGS = {
    "cuEventCreate": [ctypes.POINTER(ctypes.c_void_p), ctypes.c_uint],
    "cuEventRecord": [ctypes.c_void_p, ctypes.c_void_p],
    "cuEventSynchronize": [ctypes.c_void_p],
    "cuEventElapsedTime": [ctypes.POINTER(ctypes.c_float), ctypes.c_void_p, ctypes.c_void_p],
    "cuEventDestroy_v2": [ctypes.c_void_p],
}


def _cuda():
    """libcuda with the event functions' argument types set (after device.py's setup)."""
    from .device import _cu

    lib = _cu()
    for name, argtypes in _EVENT_SIGS.items():
        fn = getattr(lib, name)
        if fn.argtypes != argtypes:
            fn.argtypes = argtypes
            fn.restype = ctypes.c_int
    return lib


def l2_bytes() -> int | None:
    """The L2 cache size the device reports (H100: 50 MB), or None."""
    return device_attribute(CU_DEVICE_ATTRIBUTE_L2_CACHE_SIZE)


def device_facts() -> dict:
    """What a timing result must be stored with: the device's name, the driver's CUDA
    version, compute capability, multiprocessors and L2 size (None where unknown)."""
    from .driver import device_arch, driver_available, libcuda

    facts = {"device": None, "driver_cuda_version": None, "arch": None, "sms": None,
             "l2_bytes": None}
    if not driver_available():
        return facts
    lib = libcuda()
    try:
        name = ctypes.create_string_buffer(256)
        lib.cuDeviceGetName.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int]
        if lib.cuDeviceGetName(name, 256, 0) == 0:
            facts["device"] = name.value.decode(errors="replace")
        v = ctypes.c_int(0)
        lib.cuDriverGetVersion.argtypes = [ctypes.POINTER(ctypes.c_int)]
        if lib.cuDriverGetVersion(ctypes.byref(v)) == 0:
            facts["driver_cuda_version"] = f"{v.value // 1000}.{v.value % 1000 // 10}"
    except Exception:
        pass
    facts.update(arch=device_arch(), l2_bytes=l2_bytes(),
                 sms=device_attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT))
    return facts


class _Event:
    def __init__(self, lib):
        from .device import check

        self.lib, self.ev = lib, ctypes.c_void_p(0)
        check(lib.cuEventCreate(ctypes.byref(self.ev), 0), "cuEventCreate")

    def record(self):
        from .device import check

        check(self.lib.cuEventRecord(self.ev, None), "cuEventRecord")  # the default stream

    def ms_since(self, start: "_Event") -> float:
        from .device import check

        check(self.lib.cuEventSynchronize(self.ev), "cuEventSynchronize")
        out = ctypes.c_float(0)
        check(self.lib.cuEventElapsedTime(ctypes.byref(out), start.ev, self.ev),
              "cuEventElapsedTime")
        return float(out.value)

    def __del__(self):
        try:
            if self.ev.value:
                self.lib.cuEventDestroy_v2(self.ev)
        except Exception:
            pass


class L2Flusher:
    """A device buffer of :func:`flush_bytes` bytes, overwritten by ``flush()`` (a memset on
    the default stream, a different byte each time)."""

    def __init__(self, nbytes: int | None = None):
        from .device import DeviceBuffer

        self.nbytes = int(nbytes) if nbytes else flush_bytes(l2_bytes())
        self.buf = DeviceBuffer(self.nbytes, "uint8")
        self._n = 0

    def flush(self) -> None:
        from .device import _cu, check

        self._n = (self._n + 1) % 251
        check(_cu().cuMemsetD8_v2(self.buf.ptr, self._n, self.nbytes), "cuMemsetD8 (L2 flush)")


_FLUSHER: L2Flusher | None = None


def _flusher(nbytes: int | None) -> L2Flusher:
    global _FLUSHER
    want = int(nbytes) if nbytes else flush_bytes(l2_bytes())
    if _FLUSHER is None or _FLUSHER.nbytes != want:
        _FLUSHER = None
        _FLUSHER = L2Flusher(want)
    return _FLUSHER


# ------------------------------------------------------------------ measuring

def measure(fn: Callable[[], object], *, backend: str | None = None, warmup: int = 3,
            reps: int = 10, inner: int = 1, restore: Callable[[], object] | None = None,
            flush: bool = True, flush_nbytes: int | None = None, target=None) -> Timing:
    """Time ``fn()`` (see the module's docstring).  ``restore`` runs before every call,
    warm-up included, outside the timed region: pass it when ``fn`` writes arguments
    that it also reads.  ``flush=False`` keeps the L2 warm (to measure L2-resident
    working sets as a following kernel would see them).  ``backend``: ``"cuda"`` (the
    default) or ``"emulator"`` (``target=`` is its old spelling, deprecated)."""
    if target is not None:
        warnings.warn(f"measure(target={target!r}): the way code runs is the backend: write "
                      f"backend={target!r}", DeprecationWarning, stacklevel=2)
        if backend not in (None, target):
            raise ValueError(f"measure: backend={backend!r} and target={target!r} disagree")
        backend = target
    backend = backend or "cuda"
    if backend not in TIMED:
        raise ValueError(f"measure: unknown backend {backend!r} (backends: "
                         f"{', '.join(TIMED)})")
    if reps < 1 or inner < 1 or warmup < 0:
        raise ValueError("measure: reps and inner must be >= 1, warmup >= 0")
    for _ in range(warmup):
        if restore is not None:
            restore()
        fn()
    if backend == "emulator":
        times = []
        for _ in range(reps):
            if restore is not None:
                restore()
            t0 = time.perf_counter()
            for _ in range(inner):
                fn()
            times.append((time.perf_counter() - t0) * 1e3 / inner)
        return _result(times, "perf_counter", True, warmup, reps, inner, 0, restore)
    return _measure_cuda(fn, warmup, reps, inner, restore, flush, flush_nbytes)


MIN_SPIN_US, MAX_SPIN_US = 100.0, 50_000.0


def _measure_cuda(fn, warmup, reps, inner, restore, flush, flush_nbytes) -> Timing:
    from .device import synchronize
    from .spin import spinner, still_running

    lib = _cuda()
    flusher = _flusher(flush_nbytes) if flush else None
    start, stop = _Event(lib), _Event(lib)
    spin_us, waits = _probe(fn, inner, spinner(), lib, start)
    times, hosts, covered = [], [], 0
    for _ in range(reps):
        if restore is not None:
            restore()
        if flusher is not None:
            flusher.flush()
        if not waits:
            spinner().spin(spin_us)
        start.record()
        t0 = time.perf_counter()
        for _ in range(inner):
            fn()
        host = time.perf_counter() - t0
        ok = not waits and still_running(lib, start.ev)
        stop.record()
        times.append(stop.ms_since(start) / inner)
        hosts.append(host * 1e3 / inner)
        covered += ok
        if not ok and not waits:
            spin_us = min(2 * spin_us, MAX_SPIN_US)  # the host was slower than the spin
    synchronize()  # a fault in the timed work raises here
    notes = (["the call waits for the GPU (it reads a result back): its times include "
              "the host's work"] if waits else
             [f"{reps - covered} of {reps} repetitions include host time: the host "
              "enqueued more slowly than the spin"] if covered < reps else [])
    return _result(times, "cuda-events", False, warmup, reps, inner,
                   flusher.nbytes if flusher else 0, restore, notes,
                   statistics.median(hosts), covered)


PROBE_SPIN_US = 20_000.0


def _probe(fn, inner, spin, lib, start) -> tuple[float, bool]:
    """One more warm call behind a 20 ms spin: returns the spin to use (a few times
    the host's time per call) and whether the call waits for the GPU (its host time
    covers the spin, and the spin has ended when it returns): such a call cannot be
    separated from its host work, and spinning before it would only be waited for."""
    from .device import synchronize
    from .spin import still_running

    synchronize()
    spin.spin(PROBE_SPIN_US)
    start.record()
    t0 = time.perf_counter()
    fn()
    host = time.perf_counter() - t0
    ahead = still_running(lib, start.ev)
    synchronize()
    waits = not ahead and host * 1e6 >= 0.8 * PROBE_SPIN_US
    return min(max(4e6 * host * inner, MIN_SPIN_US), MAX_SPIN_US), waits


def _result(times, method, emulated, warmup, reps, inner, flushed, restore, notes=(),
            host_ms=None, covered=None) -> Timing:
    med, spread = summarize(times)
    notes = (["emulated: CPU time of the emulator, not a GPU figure"] if emulated else []) + \
        list(notes)
    return Timing(times_ms=list(times), median_ms=med, spread_ms=spread, min_ms=min(times),
                  max_ms=max(times), method=method, emulated=emulated, warmup=warmup,
                  reps=reps, inner=inner, flush_bytes=flushed, restored=restore is not None,
                  notes=notes, host_ms=host_ms, covered=covered)


__all__ = ["Timing", "measure", "summarize", "flush_bytes", "l2_bytes", "device_attribute",
           "L2Flusher", "MIN_FLUSH_BYTES", "device_facts"]
