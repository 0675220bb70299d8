"""Interpreter speed: a 64x64x64 naive matmul and a 256-thread block reduction
over 2^16 elements, with and without race detection.

Run: .venv/bin/python benchmarks/bench_interpreter.py
(A script, not a test.  Times are the best of a few runs, after a first run
that compiles the proc to Python.)
"""
from __future__ import annotations

import time

import numpy as np

from gpudsl import BLOCKS, SHARED, THREADS, f32, interpret, par, proc, seq, size, sync  # noqa


@proc
def matmul(n: size, m: size, k: size, a: f32[n, k], b: f32[k, m], c: f32[n, m]):
    for i in par(0, n):
        for j in par(0, m):
            for kk in seq(0, k):
                c[i, j] += a[i, kk] * b[kk, j]


@proc
def matmul_mapped(n: size, m: size, k: size, a: f32[n, k], b: f32[k, m], c: f32[n, m]):
    for i in par(0, n) @ BLOCKS:
        for j in par(0, m) @ THREADS:
            for kk in seq(0, k):
                c[i, j] += a[i, kk] * b[kk, j]


@proc
def block_sum(n: size, x: f32[n], out: f32[n // 256]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        s: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[256 * b + t]
        sync()
        for k in seq(0, 8):
            for t in par(0, 256) @ THREADS:
                if t < (128 >> k):
                    s[t] += s[t + (128 >> k)]
            sync()
        for t in par(0, 1) @ THREADS:
            out[b] = s[0]


def best_of(fn, reps=3):
    fn()  # compile once
    times = []
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main():
    rng = np.random.default_rng(0)
    a = rng.standard_normal((64, 64)).astype(np.float32)
    b = rng.standard_normal((64, 64)).astype(np.float32)
    c = np.zeros((64, 64), np.float32)

    def mm(race=False):
        c[...] = 0
        interpret(matmul, detect_races=race, a=a, b=b, c=c)

    t_mm = best_of(mm)
    assert np.allclose(c, a @ b, atol=1e-4)
    t_mm_r = best_of(lambda: mm(True), reps=1)

    def mm_mapped(race=False):
        c[...] = 0
        interpret(matmul_mapped, detect_races=race, a=a, b=b, c=c)

    t_mmm = best_of(mm_mapped)
    t_mmm_r = best_of(lambda: mm_mapped(True), reps=1)
    assert np.allclose(c, a @ b, atol=1e-4)

    x = rng.standard_normal(1 << 16).astype(np.float32)
    out = np.zeros(256, np.float32)

    def red(race=False):
        interpret(block_sum, detect_races=race, x=x, out=out)

    t_red = best_of(red)
    assert np.allclose(out, x.reshape(256, 256).sum(1), atol=1e-3)
    t_red_r = best_of(lambda: red(True), reps=1)

    print("gpudsl interpreter benchmark")
    print(f"  matmul 64x64x64 (naive, 262144 multiply-adds): {t_mm * 1e3:8.1f} ms"
          f"   with detect_races: {t_mm_r * 1e3:8.1f} ms (host-level par loops: not watched)")
    print(f"  same, i @ BLOCKS and j @ THREADS:              {t_mmm * 1e3:8.1f} ms"
          f"   with detect_races: {t_mmm_r * 1e3:8.1f} ms")
    print(f"  block reduction 2^16 f32, 256-thread blocks:   {t_red * 1e3:8.1f} ms"
          f"   with detect_races: {t_red_r * 1e3:8.1f} ms")


if __name__ == "__main__":
    main()
