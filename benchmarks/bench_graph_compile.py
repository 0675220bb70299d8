"""``graph.compile`` time of a chain of N pointwise nodes (issue 28).

The chain: ``relu(x)``, then ``+ x`` and ``relu`` alternately, on an 8 x 64 float32
input (``--chain mixed``: a fixed pseudo-random sequence of ``+ x``, ``+ w``, ``* x``,
``* w``, relu and silu, which does not repeat itself); the whole chain fuses into one
kernel.  Each N is compiled in a fresh process with
an empty disk cache (``cold``: derived, proved and compiled), then compiled again in
another fresh process on that cache (``warm``: read back from the disk cache).

Run: python benchmarks/bench_graph_compile.py [--sizes 50,100,1000] [--no-warm] [--chain mixed]
Targets: N = 1,000 cold < 30 s; warm < 1 s.  ``cpu`` is the CPU time of the compile
(the process and its compiler subprocesses): on a shared machine it moves less than
the wall time; ``load`` is the 1-minute load average after the row.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))

CHILD = r'''
import json, resource, sys, time


def cpu():
    own, kids = (resource.getrusage(w) for w in (resource.RUSAGE_SELF,
                                                  resource.RUSAGE_CHILDREN))
    return own.ru_utime + own.ru_stime + kids.ru_utime + kids.ru_stime


t0 = time.perf_counter()
from gpudsl import graph
t1 = time.perf_counter()
n, mixed = int(sys.argv[1]), sys.argv[2] == "mixed"
x = graph.InputTensor("x", "float32", [8, 64])
w = graph.InputTensor("w", "float32", [8, 64])
y = x
ops = [lambda y: y + x, lambda y: y.relu(), lambda y: y * w, lambda y: y.silu(),
       lambda y: y + w, lambda y: y * x]
state = 12345
for i in range(n):
    if mixed:  # a chain that does not repeat itself (a fixed pseudo-random sequence)
        state = (state * 1103515245 + 12345) % 2 ** 31
        y = ops[state % len(ops)](y)
    else:
        y = (y + x) if i % 2 else y.relu()
t2, c2 = time.perf_counter(), cpu()
model = graph.compile(y, device="emulator")
t3, c3 = time.perf_counter(), cpu()
print(json.dumps({"import": t1 - t0, "build": t2 - t1, "compile": t3 - t2, "cpu": c3 - c2,
                  "kernels": len(model.kernels)}))
'''


def run_child(n: int, cache: str, profile: str | None = None, kind: str = "repeating") -> dict:
    env = dict(os.environ, GPUDSL_CACHE_DIR=cache,
               PYTHONPATH=ROOT + os.pathsep + os.environ.get("PYTHONPATH", ""))
    cmd = [sys.executable]
    if profile:
        cmd += ["-m", "cProfile", "-o", profile]
    with tempfile.TemporaryDirectory() as d:
        script = os.path.join(d, "child.py")
        with open(script, "w") as f:
            f.write(CHILD)
        out = subprocess.run(cmd + [script, str(n), kind], env=env, check=True,
                             capture_output=True, text=True).stdout
    return json.loads(out.strip().splitlines()[-1])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="50,100,1000")
    ap.add_argument("--no-warm", action="store_true", help="only the cold compile")
    ap.add_argument("--chain", choices=("repeating", "mixed"), default="repeating",
                    help="relu and + x alternately (default), or a pseudo-random mix of "
                         "add/mul/relu/silu that does not repeat itself")
    ap.add_argument("--profile", metavar="DIR",
                    help="write a cProfile of each cold compile to DIR/cold-N.prof")
    args = ap.parse_args(argv)
    print(f"{'N':>6} {'cold compile s':>15} {'(cpu s)':>8} {'warm compile s':>15} "
          f"{'(cpu s)':>8} {'kernels':>8}  load", flush=True)
    for n in map(int, args.sizes.split(",")):
        with tempfile.TemporaryDirectory() as cache:
            prof = os.path.join(args.profile, f"cold-{n}.prof") if args.profile else None
            cold = run_child(n, cache, prof, args.chain)
            warm = None if args.no_warm else run_child(n, cache, kind=args.chain)
        w = f"{warm['compile']:15.2f} {warm['cpu']:8.2f}" if warm else f"{'-':>15} {'-':>8}"
        print(f"{n:>6} {cold['compile']:15.2f} {cold['cpu']:8.2f} {w} {cold['kernels']:>8}  "
              f"{os.getloadavg()[0]:.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
