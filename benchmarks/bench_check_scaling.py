"""check() time against the number of statements (issue 13).

Two families of generated kernels, each a single block with a SHARED buffer:

- ``straight``: N statements in a straight line: phases of a thread loop writing the
  buffer, a ``sync()``, a thread loop reading neighbours of it, a ``sync()`` (each
  thread loop counts as one statement, each sync as one);
- ``unrolled``: the same phases as if a seq loop had been unrolled, each phase on
  its own slice of a larger buffer, with per-phase thread-level ifs;
- ``body``: one thread loop of N statements (``z[t] = y[t] * k`` and
  ``y[t] = z[t] + x[(t + k) % 64]`` alternating; issue 28);
- ``top``: N statements of top-level (host) code on a 64-element array.

Run: .venv/bin/python benchmarks/bench_check_scaling.py [--sizes 10,50,100,200,2000]
Targets: 200 statements < 2 s, 2000 statements < 30 s; ``body`` and ``top`` of 10,000
statements < 10 s (``--sizes 1000,10000 --kinds body,top``).
"""
from __future__ import annotations

import argparse
import os
import sys
import time

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
sys.path.insert(0, ROOT)

HEAD = '''@proc
def {name}(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[{n_s}] @ SHARED
'''


def straight(n: int) -> str:
    """``n`` block-level statements (thread loops and syncs), 4 per phase."""
    out = [HEAD.format(name=f"straight{n}", n_s=65)]
    k = 0
    while k < n:
        ph = k // 4
        out.append(f"        for t in par(0, 64) @ THREADS:\n"
                   f"            s[t] = x[t] * {ph + 1}.0\n")
        out.append("        sync()\n")
        out.append(f"        for t in par(0, 64) @ THREADS:\n"
                   f"            y[t] = y[t] + s[t + 1]\n")
        out.append("        sync()\n")
        k += 4
    return "".join(out)


def unrolled(n: int) -> str:
    """``n`` block-level statements: phases on slices ``s[64*ph + t]`` with guards."""
    phases = (n + 3) // 4
    out = [HEAD.format(name=f"unrolled{n}", n_s=64 * 4 + 1)]
    k = 0
    while k < n:
        ph = (k // 4) % 4
        out.append(f"        for t in par(0, 64) @ THREADS:\n"
                   f"            if t < 63:\n"
                   f"                s[{64 * ph} + t] = x[t] + {k}.0\n")
        out.append("        sync()\n")
        out.append(f"        for t in par(0, 64) @ THREADS:\n"
                   f"            if t > 0:\n"
                   f"                y[t] = y[t] + s[{64 * ph} + t - 1]\n")
        out.append("        sync()\n")
        k += 4
    del phases
    return "".join(out)


def body(n: int) -> str:
    """One thread loop of ``n`` statements."""
    out = [HEAD.format(name=f"body{n}", n_s=64), "        for t in par(0, 64) @ THREADS:\n"]
    for k in range(n):
        out.append(f"            s[t] = y[t] * {k}.0\n" if k % 2 == 0 else
                   f"            y[t] = s[t] + x[(t + {k}) % 64]\n")
    return "".join(out)


def top(n: int) -> str:
    """``n`` statements of top-level code."""
    out = [f"@proc\ndef top{n}(x: f32[64], y: f32[64]):\n"]
    for k in range(n):
        out.append(f"    y[{k % 64}] = y[{k % 64}] + x[{(k * 7) % 64}]\n")
    return "".join(out)


def measure(kind: str, n: int):
    from gpudsl import BLOCKS, SHARED, THREADS, f32, par, proc, proc_from_source, seq, sync
    from gpudsl.analysis import check
    from gpudsl.analysis.check import _cache

    ns = dict(BLOCKS=BLOCKS, SHARED=SHARED, THREADS=THREADS, f32=f32, par=par, proc=proc,
              seq=seq, sync=sync)
    src = {"straight": straight, "unrolled": unrolled, "body": body, "top": top}[kind](n)
    p = proc_from_source(src, ns)
    _cache.clear()
    t0 = time.perf_counter()
    rep = check(p)
    dt = time.perf_counter() - t0
    return dt, rep


def main(argv=None) -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sizes", default="10,50,100,200,2000")
    ap.add_argument("--kinds", default="straight,unrolled")
    ns = ap.parse_args(argv)
    sizes = [int(x) for x in ns.sizes.split(",")]
    ok = True
    for kind in ns.kinds.split(","):
        for n in sizes:
            dt, rep = measure(kind, n)
            verdict = "ok" if rep.ok else ",".join(sorted(rep.kinds()))
            print(f"{kind:9s} {n:5d} statements: {dt:8.2f} s  {rep.stats['queries']:6d} "
                  f"queries  {rep.stats['accesses']:6d} accesses  {verdict}")
            limit = 2.0 if n <= 200 else (10.0 if kind in ("body", "top") else 30.0)
            if dt > limit or not rep.ok:
                ok = False
    print("targets (200 statements < 2 s, 2000 < 30 s, all ok):", "met" if ok else "MISSED")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())
