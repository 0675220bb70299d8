"""One candidate measured: prove, compile, prune, verify, time, as a function of
picklable arguments so that it runs in this process or as a task elsewhere (a Ray task
with one GPU, see ``distributed.py``).  The database is written by the caller."""
from __future__ import annotations

import time

import numpy as np

from . import candidate_pipeline as pl


def sizes_of(proc, args: dict) -> dict:
    """Size parameters that equal an argument's dimension directly (for check())."""
    sizes = {}
    for prm in proc.ir.params:
        if not prm.is_array or prm.name not in args:
            continue
        for d, actual in zip(prm.shape, np.shape(args[prm.name])):
            nm = getattr(d, "name", None)
            if isinstance(nm, str) and type(d).__name__ == "Var":
                sizes.setdefault(nm, int(actual))
    names = {prm.name for prm in proc.ir.params if not prm.is_array}
    return {k: v for k, v in sizes.items() if k in names}


def written(proc, args) -> list[str]:
    from ..ir.binding import written_params

    w = written_params(proc.ir)
    return [p.name for p in proc.ir.params if p.name in w and p.name in args]


def measure(proc, args: dict, expected: dict, backend: str, limits, warmup: int, reps: int,
            rtol: float, atol: float, flops=None, bytes_moved=None):
    """(record fields, timer or None): status, error, resources, threads and, for a
    correct candidate, its times."""
    rec = {"timestamp": time.time()}
    kernel, info = pl.prove_and_compile(proc, backend, sizes_of(proc, args), limits)
    rec.update(status=info["status"], error=info.get("error"),
               resources=info.get("resources"), threads=info.get("threads"))
    if kernel is None:
        return rec, None
    bad = pl.verify(kernel, args, expected, rtol, atol)
    if bad:
        rec.update(status=bad[0], error=bad[1])
        return rec, None
    timer = pl.Timer(kernel, backend, args, written(proc, args))
    try:
        times = timer.run(warmup, reps)
    except Exception as e:
        rec.update(status=pl.LAUNCH_ERROR, error=pl._reason(e))
        return rec, None
    med, spread = pl.summarize(times)
    rec.update(median_ms=med, spread_ms=spread, times_ms=list(times))
    if flops:
        rec.update(rate=flops / (med * 1e-3) / 1e9, unit="GFLOP/s")
    elif bytes_moved:
        rec.update(rate=bytes_moved / (med * 1e-3) / 1e9, unit="GB/s")
    return rec, timer


def remote_measure(build, config, args, expected, backend, limits, warmup, reps, rtol, atol,
                   flops=None, bytes_moved=None) -> dict:
    """``measure`` in another process: builds the proc again from the (picklable)
    schedule function; returns the record fields only."""
    p, fail = pl.build_proc(build, config)
    if fail:
        return {"status": fail[0], "error": fail[1], "timestamp": time.time()}
    rec, _ = measure(p, args, expected, backend, limits, warmup, reps, rtol, atol, flops,
                     bytes_moved)
    return rec
