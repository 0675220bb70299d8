"""One candidate through the pipeline: build → prove → compile → prune on resources →
verify against the reference → time.  Every failure is a status with a reason, never an
exception that stops the run."""
from __future__ import annotations

import math
import traceback

import numpy as np

from ..errors import CheckError, Error, SchedulingError
from ..targets import target

# statuses, in pipeline order; only "ok" records have times
BUILD_ERROR = "build_error"     # the schedule function raised (not a primitive's refusal)
REFUSED = "refused"             # a primitive refused (SchedulingError)
UNPROVED = "unproved"           # check() did not prove the proc: never compiled, never run
COMPILE_ERROR = "compile_error"
PRUNED = "pruned"               # spills or resources beyond the limits
LAUNCH_ERROR = "launch_error"
WRONG = "wrong"                 # differs from the reference: never timed
OK = "ok"


class Limits:
    """What prunes a compiled candidate (ptxas figures from NVRTC, which needs no GPU):
    any spill by default, registers per thread, shared memory per block, threads."""

    def __init__(self, max_spill_bytes: int = 0, max_registers: int | None = None,
                 max_shared_bytes: int | None = None, max_threads: int | None = None,
                 arch: str | None = None):
        t = target(arch)   # the architecture's limits, unless given
        max_registers = t.max_registers_per_thread if max_registers is None else max_registers
        max_threads = t.max_threads_per_block if max_threads is None else max_threads
        max_shared_bytes = t.static_shared_bytes if max_shared_bytes is None \
            else max_shared_bytes
        self.max_spill_bytes = max_spill_bytes
        self.max_registers = max_registers
        self.max_shared_bytes = max_shared_bytes
        self.max_threads = max_threads

    def violations(self, resources: dict, threads: int | None) -> list[str]:
        out = []
        for kname, r in (resources or {}).items():
            spill = r.get("spill_stores_bytes", 0) + r.get("spill_loads_bytes", 0)
            if spill > self.max_spill_bytes:
                out.append(f"{kname} spills {spill} bytes (ptxas)")
            if r.get("registers", 0) > self.max_registers:
                out.append(f"{kname} uses {r['registers']} registers > {self.max_registers}")
            if r.get("shared_bytes", 0) > self.max_shared_bytes:
                out.append(f"{kname} uses {r['shared_bytes']} bytes of shared memory > "
                           f"{self.max_shared_bytes}")
        if threads is not None and threads > self.max_threads:
            out.append(f"{threads} threads per block > {self.max_threads}")
        return out


def _reason(e: BaseException) -> str:
    msg = str(e).strip() or type(e).__name__
    return f"{type(e).__name__}: {msg}"[:2000]


def build_proc(build, config):
    """(proc, None) or (None, (status, reason))."""
    try:
        p = build(config)
    except SchedulingError as e:
        return None, (REFUSED, _reason(e))
    except Exception as e:  # a user's schedule function: any failure is recorded
        return None, (BUILD_ERROR, _reason(e) + "\n" + traceback.format_exc(limit=3)[-800:])
    if not hasattr(p, "check") or not hasattr(p, "compile"):
        return None, (BUILD_ERROR, f"the schedule function returned {type(p).__name__}, "
                      "not a Proc")
    return p, None


def threads_of(kernel) -> int | None:
    best = None
    try:
        for info in kernel.kernels.values():
            n = 1
            for d in info.block:
                n *= int(d)
            best = n if best is None else max(best, n)
    except Exception:
        return None
    return best


def resources_of(kernel) -> dict | None:
    try:
        return {k: {f: getattr(r, f) for f in ("registers", "shared_bytes",
                                              "spill_stores_bytes", "spill_loads_bytes")}
                for k, r in kernel.resources.items()}
    except Exception:
        return None  # no NVRTC here: nothing to prune on


def prove_and_compile(proc, backend: str, sizes: dict, limits: Limits, want_resources=True):
    """(kernel, info) where info has status/error/resources/threads; kernel None unless ok."""
    try:
        report = proc.check(**sizes)
    except Error as e:
        return None, {"status": UNPROVED, "error": _reason(e)}
    if not report.ok:
        first = report.diagnostics[0] if report.diagnostics else None
        why = f"{first.kind}: {first.message}" if first is not None else "not proved"
        return None, {"status": UNPROVED, "error": why}
    try:
        kernel = proc.compile(backend, check=False, **sizes)
        kernel.proved = True  # proved just above, with these sizes
        kernel.report = report
        kernel.module  # the code exists (sizes that must be bound raise here)
    except Exception as e:
        return None, {"status": COMPILE_ERROR, "error": _reason(e)}
    res = resources_of(kernel) if want_resources else None
    threads = threads_of(kernel)
    bad = limits.violations(res, threads)
    info = {"status": OK, "error": None, "resources": res, "threads": threads}
    if bad:
        info.update(status=PRUNED, error="; ".join(bad))
        return None, info
    return kernel, info


def prepare(build, config, backend, sizes, limits):
    """The part of the pipeline an executor runs (in another process): build, prove,
    compile (which fills the disk cache), read ptxas resources."""
    p, fail = build_proc(build, config)
    if fail:
        return {"status": fail[0], "error": fail[1]}
    _, info = prove_and_compile(p, backend, sizes, limits)
    info["source"] = str(p)
    return info


def _copy(args: dict) -> dict:
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def expected_outputs(reference, args: dict, written: list[str]) -> dict:
    """What the written arguments must hold after a run: ``reference`` is a Proc (run by
    the interpreter) or a callable returning the written array, or a tuple / dict of them."""
    work = _copy(args)
    if hasattr(reference, "interpret"):
        reference.interpret(**work)
        return {n: work[n] for n in written}
    out = reference(**work)
    if isinstance(out, dict):
        return {n: np.asarray(out[n]) for n in written}
    if isinstance(out, (tuple, list)):
        return {n: np.asarray(v) for n, v in zip(written, out)}
    if len(written) != 1:
        raise Error(f"autotune: the reference returned one array, but the proc writes "
                    f"{', '.join(written)}", None, "return a dict {name: array}")
    return {written[0]: np.asarray(out)}


def verify(kernel, args: dict, expected: dict, rtol: float, atol: float):
    """None when the kernel's outputs match, else (status, reason)."""
    work = _copy(args)
    try:
        kernel(**work)
    except Exception as e:
        return LAUNCH_ERROR, _reason(e)
    for n, want in expected.items():
        got = np.asarray(work[n])
        if got.shape != want.shape or not np.allclose(got, want, rtol=rtol, atol=atol,
                                                      equal_nan=True):
            err = float(np.max(np.abs(got.astype(np.float64) - want))) \
                if got.shape == want.shape else math.inf
            return WRONG, f"{n} differs from the reference (max abs error {err:.3g})"
    return None


class Timer:
    """Times a kernel on its backend with ``gpudsl.runtime.timing.measure`` (the one
    timing function: CUDA events, warm-up, L2 flushed between repetitions; perf_counter on
    the emulator), the written arguments restored before each call, outside the timed
    region."""

    def __init__(self, kernel, backend: str, args: dict, written: list[str]):
        self.kernel, self.backend = kernel, backend
        self.orig = args
        self.written = written
        self.last = None  # the last Timing (method, flush, spread...)
        if backend == "cuda":
            from ..runtime.device import DeviceBuffer

            self.work = {k: (DeviceBuffer.from_numpy(v) if isinstance(v, np.ndarray) else v)
                         for k, v in args.items()}
        else:
            self.work = _copy(args)

    def _restore(self):
        for n in self.written:
            w = self.work[n]
            if self.backend == "cuda":
                w.copy_from(self.orig[n])
            else:
                np.copyto(w, self.orig[n])

    def _call(self):
        self.kernel(**self.work)

    def once(self) -> float:
        """One repetition in ms."""
        return self.run(0, 1)[0]

    def run(self, warmup: int, reps: int) -> list[float]:
        from ..runtime.timing import measure

        self.last = measure(self._call, backend=self.backend, warmup=warmup, reps=reps,
                            restore=self._restore if self.written else None)
        return self.last.times_ms


def summarize(times: list[float]) -> tuple[float, float]:
    """(median, spread) in ms; the spread is the interquartile range."""
    from ..runtime.timing import summarize as _summarize

    return _summarize(times)
