"""``python -m tests.schedule.differential --seconds N [--seed S] [--out DIR]``

The long mode of the differential test of the primitives: runs random cases
for N seconds, prints per-primitive (tried, accepted, refused, failures), the
distinct failures, and writes each as a reproducing script under ``--out``.
``--case K`` replays one case and prints its steps.
"""
from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

from .run import Runner


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m tests.schedule.differential")
    ap.add_argument("--seconds", type=float, default=60.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--cases", type=int, default=None, help="stop after this many cases")
    ap.add_argument("--start", type=int, default=0, help="first case number")
    ap.add_argument("--case", type=int, default=None, help="replay one case, verbosely")
    ap.add_argument("--out", type=Path, default=Path("differential-failures"))
    ap.add_argument("--no-check", action="store_true", help="skip the check() oracle (c)")
    ap.add_argument("--shrink-seconds", type=float, default=10.0,
                    help="time to shrink each written failure (0: no shrinking)")
    ap.add_argument("-q", "--quiet", action="store_true")
    a = ap.parse_args(argv)
    runner = Runner(a.seed, with_check=not a.no_check)
    if a.case is not None:
        fs = runner.case(a.case)
        print(runner.program(a.case)[1].source)
        for f in fs:
            print(f.repro())
        print(runner.stats.table())
        return 1 if fs else 0

    def progress(f):
        if not a.quiet:
            print(f"case {f.case}: {f.prim}: {f.cls}: {f.message[:160]}", flush=True)

    t0 = time.monotonic()
    runner.run(a.seconds, start=a.start, max_cases=a.cases, progress=progress)
    print(f"\n{time.monotonic() - t0:.0f} s, seed {a.seed}")
    print(runner.stats.table())
    print(f"inconclusive comparisons (large values, solver unknown): "
          f"{runner.oracle.inconclusive}")
    print(f"results check() reports as unfinished schedules (a broken mapping rule): "
          f"{runner.oracle.unfinished}")
    d = runner.distinct()
    print(f"\n{len(runner.failures)} failures, {len(d)} distinct:")
    for (prim, cls, _), f in sorted(d.items(), key=lambda kv: kv[0]):
        print(f"  {prim}: {cls}: {f.message[:140]} (case {f.case})")
    if runner.failures:
        paths = runner.write(a.out, shrink_seconds=a.shrink_seconds)
        print(f"reproductions written to {a.out}/ ({len(paths)} files)")
    return 1 if runner.failures else 0


if __name__ == "__main__":
    sys.exit(main())
