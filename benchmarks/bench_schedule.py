"""Scheduling speed: the primitives of the example derivations (matmul and
transpose, from naive procs to tiled kernels) and of the standard library's matmul
and permute kernels, without check(), interpreting or compiling.

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
    ap.add_argument("--cpu", action="store_true",
                    help="process CPU time instead of wall time (steadier on a busy machine)")
    ns = ap.parse_args(argv)
    sys.path.insert(0, os.path.join(ns.root, "examples"))
    sys.path.insert(0, ns.root)
    matmul = importlib.import_module("matmul_schedule")
    transpose = importlib.import_module("transpose_schedule")
    runs = [("example matmul derivation", lambda: matmul.derive(check=False, interp=False)),
            ("example transpose derivation", lambda: transpose.derive(verify=False)),
            ("stdlib matmul and permute kernels", _stdlib())]
    total = 0.0
    for name, f in runs:
        best = min(_time(f, ns.cpu) for _ in range(ns.repeat))
        total += best
        print(f"{best * 1000:9.1f} ms  {name}")
    print(f"{total * 1000:9.1f} ms  total  ({os.path.abspath(ns.root)})")
    return 0


def _stdlib():
    try:
        from gpudsl.stdlib import matmul as mm, permute as pm
    except ImportError:  # before the standard library was split per node family
        from gpudsl.stdlib import matmul_schedule as mm, permute_schedule as pm

    def build():
        for f in (mm.big_kernel, mm.cut_kernel, mm.guarded_kernel, mm.vecmat_kernel,
                  pm._kernel, pm.permute_algorithm):
            f.cache_clear()
        mm.big_kernel(False)
        mm.big_kernel(True)
        for v in (1, 2, 4):
            mm.cut_kernel(False, v)
        mm.guarded_kernel(False)
        mm.guarded_kernel(True)
        mm.vecmat_kernel()
        for perm in ((1, 0), (0, 2, 1), (2, 1, 0)):
            for kind in ("vcopy", "copy", "tiled", "cut"):
                try:
                    pm._kernel(perm, kind)
                except Exception:  # a kind this permutation does not have: refused
                    pass

    return build


def _time(f, cpu: bool = False) -> float:
    clock = time.process_time if cpu else time.perf_counter
    t0 = clock()
    f()
    return clock() - t0


if __name__ == "__main__":
    raise SystemExit(main())
