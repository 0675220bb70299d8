"""check() time per proc over the analysis test corpus (tests/analysis/corpus.py),
plus a few random procs of the soundness test's shape.

Run: .venv/bin/python benchmarks/bench_check.py [--repeat 3]
Prints per-proc times (best of --repeat, cache cleared between runs), the median and
the max.  Targets (issue 13): median < 50 ms, max < 2 s on a 2-core machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--quiet", action="store_true")
    ns = ap.parse_args(argv)
    from gpudsl.analysis import check as check_mod  # noqa: F401
    from gpudsl.analysis import check as _check
    from gpudsl.analysis.check import _cache
    from tests.analysis.corpus import CASES

    times = []
    for c in CASES:
        best = float("inf")
        for _ in range(ns.repeat):
            _cache.clear()
            t0 = time.perf_counter()
            rep = _check(c.proc, **c.bindings)
            best = min(best, time.perf_counter() - t0)
        times.append((best, c.name, rep.stats.get("queries", 0),
                      "ok" if rep.ok else ",".join(sorted(rep.kinds()))))
    if not ns.quiet:
        for t, name, q, verdict in sorted(times, reverse=True):
            print(f"{t * 1000:9.1f} ms  {q:4d} queries  {verdict:12s} {name}")
    vals = [t for t, *_ in times]
    med, mx = statistics.median(vals), max(vals)
    print(f"\n{len(vals)} procs: median {med * 1000:.1f} ms, max {mx * 1000:.1f} ms "
          f"({max(times)[1]}), total {sum(vals):.2f} s")
    ok = med < 0.05 and mx < 2
    print("targets (median < 50 ms, max < 2 s):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
