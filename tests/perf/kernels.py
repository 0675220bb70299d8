"""Kernels with known performance figures (tests/perf)."""
from __future__ import annotations

from gpudsl import BLOCKS, SHARED, THREADS, f32, par, proc, seq, size, sync


@proc
def transpose_naive(n: size, x: f32[n, n], y: f32[n, n]):
    assert n % 32 == 0
    for bi in par(0, n // 32) @ BLOCKS:
        for bj in par(0, n // 32) @ BLOCKS:
            t: f32[32, 32] @ SHARED
            for ty in par(0, 32) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    t[ty, tx] = x[32 * bi + ty, 32 * bj + tx]
            sync()
            for ty in par(0, 32) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    y[32 * bj + ty, 32 * bi + tx] = t[tx, ty]


@proc
def transpose_padded(n: size, x: f32[n, n], y: f32[n, n]):
    assert n % 32 == 0
    for bi in par(0, n // 32) @ BLOCKS:
        for bj in par(0, n // 32) @ BLOCKS:
            t: f32[32, 33] @ SHARED
            for ty in par(0, 32) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    t[ty, tx] = x[32 * bi + ty, 32 * bj + tx]
            sync()
            for ty in par(0, 32) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    y[32 * bj + ty, 32 * bi + tx] = t[tx, ty]


@proc
def column_read(n: size, x: f32[n, n], y: f32[n]):
    """Each thread sums a row: at each step the warp reads a column (32 rows)."""
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = 0.0
            for j in seq(0, n):
                y[32 * b + t] += x[32 * b + t, j]


@proc
def row_read(n: size, x: f32[n, n], y: f32[n]):
    """Each thread sums a column: the warp reads a row."""
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = 0.0
            for j in seq(0, n):
                y[32 * b + t] += x[j, 32 * b + t]


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]
