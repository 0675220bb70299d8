"""Emulator compile and run times, with and without the precompiled header (issue 40).

    python benchmarks/emulator_compile.py [--reps 3]

For each mode (``before``: ``GPUDSL_EMU_PCH=0``, the plain g++ path; ``after``: the
precompiled ``gpudsl_emu_sys.h``) a fresh process with an empty cache folder compiles
three small stdlib kernels (silu pointwise, softmax rows, a 64x64 matmul) and a 256x256
matmul, then runs the 256x256 matmul.  Printed per kernel: the g++ seconds of
``build_emulator_module`` (best of ``--reps`` processes) and, for ``after``, the one-off
PCH build (the first compile of a process with an empty cache pays it once per flags).
The run column is the best of 5 launches of the matmul.  The machine's load average is
printed: on a shared machine, figures are only comparable within one run.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile

CHILD = r"""
import json, sys, time
import numpy as np
from gpudsl.runtime import emulator, emu_pch
from gpudsl.stdlib.matmul import matmul_kernel
from gpudsl.stdlib.pointwise import plan_unary
from gpudsl.stdlib.softmax import plan_softmax

times = []
orig = emulator._compile
def timed(*a, **k):
    t = time.perf_counter(); orig(*a, **k); times.append(time.perf_counter() - t)
emulator._compile = timed
orig_pch = emu_pch.include_dir
pch = []
def timed_pch(*a, **k):
    t = time.perf_counter(); r = orig_pch(*a, **k); pch.append(time.perf_counter() - t); return r
emulator.emu_pch.include_dir = timed_pch

out = {}
for name, p in [("silu", plan_unary("silu", 4096)), ("softmax", plan_softmax(256)),
                ("matmul64", matmul_kernel((64, 64), (64, 64))[0]),
                ("matmul256", matmul_kernel((256, 256), (256, 256))[0])]:
    p.compile("emulator")
    out[name] = times[-1]
out["pch_first"] = pch[0] if pch else 0.0
proc, bind = matmul_kernel((256, 256), (256, 256))
k = proc.compile("emulator")
rng = np.random.default_rng(0)
a, b = rng.random((256, 256), np.float32), rng.random((256, 256), np.float32)
c = np.zeros((256, 256), np.float32)
runs = []
for _ in range(5):
    t = time.perf_counter(); k(a=a, b=b, c=c, **bind); runs.append(time.perf_counter() - t)
assert np.allclose(c, a @ b, rtol=1e-4)
out["run_matmul256"] = min(runs)
print(json.dumps(out))
"""


def child(pch: bool) -> dict:
    with tempfile.TemporaryDirectory(prefix="gpudsl-bench-cache-") as cache:
        env = dict(os.environ, GPUDSL_EMU_PCH="1" if pch else "0", GPUDSL_CACHE_DIR=cache)
        r = subprocess.run([sys.executable, "-c", CHILD], env=env, capture_output=True,
                           text=True, check=True)
    return json.loads(r.stdout.strip().splitlines()[-1])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--reps", type=int, default=3)
    reps = ap.parse_args().reps
    print(f"load average before: {os.getloadavg()[0]:.2f}, CPUs: {os.cpu_count()}")
    best: dict[str, dict] = {}
    for _ in range(reps):
        for mode, pch in (("before", False), ("after", True)):
            r = child(pch)
            b = best.setdefault(mode, r)
            for key, v in r.items():
                b[key] = min(b[key], v)
    keys = ["silu", "softmax", "matmul64", "matmul256"]
    print(f"{'g++ seconds (best of %d)' % reps:28}" + "".join(f"{k:>11}" for k in keys)
          + f"{'PCH once':>10}{'run 256^2':>11}")
    for mode in ("before", "after"):
        r = best[mode]
        print(f"{mode:28}" + "".join(f"{r[k]:11.2f}" for k in keys)
              + f"{r['pch_first']:10.2f}{r['run_matmul256']:11.4f}")
    print(f"load average after: {os.getloadavg()[0]:.2f}")


if __name__ == "__main__":
    main()
