"""Tiny matmul candidates for the autotuner's tests, one per failure kind, 32x32x32."""
from __future__ import annotations

from gpudsl import BLOCKS, THREADS, f32, instr, par, proc, seq, size
from gpudsl.stdlib.matmul import matmul_algorithm, schedule_matmul


@proc
def racy_matmul(m: size, n: size, k: size, a: f32[m, n], b: f32[n, k], c: f32[m, k]):
    # every thread of a block writes the whole row: a race check() refuses
    for i in par(0, m) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            for j in seq(0, k):
                c[i, j] = 0.0
                for p in seq(0, n):
                    c[i, j] += a[i, p] * b[p, j]


@instr("this is not C {y} {x};")
def broken_acc(x: [f32][1] @ GLOBAL, y: [f32][1] @ GLOBAL):
    for q in seq(0, 1):
        y[q] += x[q]


@proc
def uncompilable_matmul(m: size, n: size, k: size, a: f32[m, n], b: f32[n, k],
                        c: f32[m, k]):
    assert m == 32 and n == 32 and k == 32
    for i in par(0, 32) @ BLOCKS:
        for j in par(0, 32) @ THREADS:
            c[i, j] = 0.0
            for p in seq(0, 32):
                broken_acc(a[i, p:p + 1], c[i, j:j + 1])


@proc
def wrong_matmul(m: size, n: size, k: size, a: f32[m, n], b: f32[n, k], c: f32[m, k]):
    # b read transposed: proved safe for square shapes, but not a @ b
    assert m == n and n == k
    for i in par(0, m) @ BLOCKS:
        for j in par(0, k) @ THREADS:
            c[i, j] = 0.0
            for p in seq(0, n):
                c[i, j] += a[i, p] * b[j, p]


def build(c):
    """variant "tiled": the standard library's big-tile schedule with these tiles;
    the others are the failure kinds."""
    v = c["variant"]
    if v == "racy":
        return racy_matmul
    if v == "uncompilable":
        return uncompilable_matmul
    if v == "wrong":
        return wrong_matmul
    if v == "crash":
        raise RuntimeError("the schedule function fails for this configuration")
    bm, bn, bk, tm, tn = c["bm"], c["bn"], c["bk"], c["tm"], c["tn"]
    return schedule_matmul(matmul_algorithm(False, (bm, bn, bk)), bm=bm, bn=bn, bk=bk,
                           tm=tm, tn=tn, vec=4, blocks_per_sm=c.get("bps", 2))


def reference(a, b, c):
    return a @ b
