"""``gpudsl demo``: the docs/index.md example, end to end.

Defines saxpy, prints it, runs it in the reference interpreter against numpy,
proves it with check() (and shows the report of a deliberately racy variant),
prints its CUDA, and runs it on the GPU when there is one, else on the CPU
emulator, comparing with numpy.
"""
from __future__ import annotations

import numpy as np

from gpudsl import BLOCKS, THREADS, f32, par, proc, size


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def saxpy_racy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            # Every thread also updates its right neighbour: two threads write y[i].
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]
            if t < 255:
                y[256 * b + t + 1] = y[256 * b + t + 1] + 1.0


def _section(title: str, out):
    print(f"\n== {title}", file=out)


def run(out=None) -> int:
    """Run the demo; returns a process exit code."""
    import sys

    from gpudsl import interpret

    out = out or sys.stdout
    rng = np.random.default_rng(0)
    n, a = 4096, np.float32(2.0)
    x = rng.standard_normal(n, dtype=np.float32)
    y0 = rng.standard_normal(n, dtype=np.float32)
    want = a * x + y0

    _section("the proc", out)
    print(saxpy, file=out, end="")

    _section("reference interpreter", out)
    y = y0.copy()
    interpret(saxpy, a=a, x=x, y=y)
    ok = np.allclose(y, want, rtol=1e-6, atol=1e-6)
    print(f"interpret(saxpy, n={n}) {'matches' if ok else 'DIFFERS FROM'} numpy "
          f"(max abs error {np.max(np.abs(y - want)):.2e})", file=out)
    status = 0 if ok else 1

    _section("check()", out)
    report = saxpy.check()
    print(f"saxpy.check() for every n (symbolic, under the asserts): {report}", file=out)
    status |= 0 if report.ok else 1
    racy = saxpy_racy.check(n=4096)
    print("a deliberately racy variant, saxpy_racy.check(n=4096):", file=out)
    print(racy, file=out)
    status |= 1 if racy.ok else 0  # the checker must catch it

    _section("CUDA C (n bound to 4096)", out)
    print(saxpy.cuda_source(n=n), file=out)

    from gpudsl.runtime.driver import driver_available

    target = "cuda" if driver_available() else "emulator"
    _section(f"running on the {'GPU' if target == 'cuda' else 'CPU emulator (no GPU here)'}",
             out)
    kernel = saxpy.compile(target)
    y = y0.copy()
    kernel(a=a, x=x, y=y)
    ok = np.allclose(y, want, rtol=1e-6, atol=1e-6)
    print(f"{target}: saxpy {'matches' if ok else 'DIFFERS FROM'} numpy "
          f"(max abs error {np.max(np.abs(y - want)):.2e})", file=out)
    status |= 0 if ok else 1
    print("\ndemo " + ("passed" if status == 0 else "FAILED"), file=out)
    return status
