"""Naive procs the scheduling tests start from."""
from __future__ import annotations

from gpudsl import GLOBAL, instr, f32, i32, par, proc, seq, size, index, BLOCKS, THREADS, SHARED, sync


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 16 == 0
    for i in seq(0, n):
        y[i] = a * x[i] + y[i]


@proc
def axpy_any(n: size, a: f32, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = a * x[i] + y[i]


@proc
def transpose(n: size, m: size, x: f32[n, m], y: f32[m, n]):
    for i in seq(0, n):
        for j in seq(0, m):
            y[j, i] = x[i, j]


@proc
def prefix(n: size, x: f32[n], y: f32[n]):
    for i in seq(1, n):
        y[i] = y[i - 1] + x[i]


@proc
def shift2d(n: size, x: f32[n, n]):
    for i in seq(1, n):
        for j in seq(0, n - 1):
            x[i, j] = x[i - 1, j + 1] + 1.0


@proc
def two_loops(n: size, x: f32[n], y: f32[n], z: f32[n]):
    for i in seq(0, n):
        y[i] = 2.0 * x[i]
    for j in seq(0, n):
        z[j] = y[j] + 1.0


@proc
def two_loops_back(n: size, x: f32[n], y: f32[n], z: f32[n]):
    assert n >= 2
    for i in seq(0, n - 1):
        y[i] = 2.0 * x[i]
    for j in seq(0, n - 1):
        z[j] = y[j + 1] + 1.0


@proc
def rowsum(n: size, m: size, x: f32[n, m], s: f32[n]):
    for i in seq(0, n):
        s[i] = 0.0
        for j in seq(0, m):
            s[i] += x[i, j]


@proc
def carried(n: size, x: f32[n], y: f32[n]):
    assert n >= 2
    for i in seq(0, n - 1):
        y[i] = x[i] * 2.0
        x[i + 1] = y[i] + 1.0


@proc
def total(n: size, x: f32[n], s: f32[1]):
    for i in seq(0, n):
        s[0] += x[i]


@proc
def fill(n: size, y: f32[n], c: f32[1]):
    for i in seq(0, n):
        for r in seq(0, 3):
            y[i] = c[0] * 2.0


@proc
def copy16(x: f32[16], y: f32[16]):
    for i in seq(0, 16):
        y[i] = x[i]


@proc
def tiled_copy(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 16) @ THREADS:
            for v in seq(0, 4):
                y[b, 4 * t + v] = x[b, 4 * t + v]


@proc
def odd_copy(n: size, x: f32[n, 66], y: f32[n, 66]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 16) @ THREADS:
            for v in seq(0, 4):
                y[b, 4 * t + v + 1] = x[b, 4 * t + v + 1]


@proc
def blur_block(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        t: f32[32] @ SHARED
        for i in par(0, 32) @ THREADS:
            t[i] = x[b, i]
        sync()
        for i2 in par(0, 32) @ THREADS:
            y[b, i2] = t[31 - i2] + t[i2]


@proc
def independent_phases(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        t: f32[32] @ SHARED
        for i in par(0, 32) @ THREADS:
            t[i] = x[b, i]
        sync()
        for i2 in par(0, 32) @ THREADS:
            y[b, i2] = t[i2] * 2.0


@proc
def scale2(x: f32[8], y: f32[8], a: f32):
    for i in seq(0, 8):
        y[i] = x[i] * a + x[i] * a


@proc
def vadd(n: size, x: [f32][n] @ GLOBAL, y: [f32][n] @ GLOBAL):
    for i in seq(0, n):
        y[i] += x[i]


@proc
def add_rows(n: size, x: f32[n, 8], y: f32[n, 8]):
    for i in seq(0, n):
        vadd(8, x[i, 0:8], y[i, 0:8])


@instr("{y} += {x};")
def add1(x: [f32][1] @ GLOBAL, y: [f32][1] @ GLOBAL):
    for k in seq(0, 1):
        y[k] += x[k]


@instr("axpy4({a}, &{x}, &{y});")
def axpy4(a: f32, x: [f32][4] @ GLOBAL, y: [f32][4] @ GLOBAL):
    for k in seq(0, 4):
        y[k] = a * x[k] + y[k]
