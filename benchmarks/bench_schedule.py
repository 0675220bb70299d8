"""Scheduling speed: the primitives of the example derivations (matmul and
transpose, from naive procs to tiled kernels), without check() or interpreting.

Run: .venv/bin/python benchmarks/bench_schedule.py [--repeat 3] [--root DIR]
Prints the best of --repeat for each derivation and their sum.  ``--root`` runs
another checkout's code (e.g. an older commit's worktree) with this script, so two
versions can be compared in the same run of the machine.
"""
from __future__ import annotations

import argparse
import importlib
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--root", default=HERE, help="checkout whose gpudsl and examples to time")
    ns = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ns.root, "examples"))
    sys.path.insert(0, ns.root)
    matmul = importlib.import_module("matmul_schedule")
    transpose = importlib.import_module("transpose_schedule")
    runs = [("example matmul derivation", lambda: matmul.derive(check=False, interp=False)),
            ("example transpose derivation", lambda: transpose.derive(verify=False))]
    total = 0.0
    for name, f in runs:
        best = min(_time(f) for _ in range(ns.repeat))
        total += best
        print(f"{best * 1000:9.1f} ms  {name}")
    print(f"{total * 1000:9.1f} ms  total  ({os.path.abspath(ns.root)})")
    return 0


def _time(f) -> float:
    t0 = time.perf_counter()
    f()
    return time.perf_counter() - t0


if __name__ == "__main__":
    raise SystemExit(main())
