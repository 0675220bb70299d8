"""The code generation test corpus: procs that are proper GPU kernels, with their
argument makers.  Each CORPUS entry: (proc, bindings for compile, args maker(rng)).

``mixed_dims`` has a 1-D thread loop in a 2-D block: code generation runs it on
threadIdx.y == 0 only (the proc's sequential meaning), and check() models it the
same way."""
from __future__ import annotations

import numpy as np

from gpudsl import (BLOCKS, REGISTER, SHARED, THREADS, atomic_add, atomic_max, exp,
                    f16, f32, f64, i32, i64, index, instr, par, proc, seq, size, sqrt, sync)

# ---------------------------------------------------------------- basics


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def add2d(m: size, n: size, x: f32[m, n], y: f32[m, n]):
    for bi in par(0, (m + 15) // 16) @ BLOCKS:
        for bj in par(0, (n + 15) // 16) @ BLOCKS:
            for ti in par(0, 16) @ THREADS:
                for tj in par(0, 16) @ THREADS:
                    if 16 * bi + ti < m and 16 * bj + tj < n:
                        y[16 * bi + ti, 16 * bj + tj] = x[16 * bi + ti, 16 * bj + tj] + 1.0


@proc
def grid3(a: size, b: size, c: size, x: f32[a, b, c, 4], y: f32[a, b, c, 4]):
    for i in par(0, a) @ BLOCKS:
        for j in par(1, b) @ BLOCKS:
            for k in par(0, c) @ BLOCKS:
                for t in par(0, 4) @ THREADS:
                    y[i, j, k, t] = x[i, j, k, t] + x[i, j - 1, k, t]


# ---------------------------------------------------------------- several kernels, temporaries


@proc
def two_kernels(n: size, x: f32[n], y: f32[n]):
    assert n % 64 == 0
    tmp: f32[n]
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            tmp[64 * b + t] = x[64 * b + t] * 2.0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[64 * b + t] = tmp[n - 1 - (64 * b + t)] + 1.0


@proc
def host_code(n: size, x: f32[n], stats: f32[2], y: f32[n]):
    assert n % 32 == 0
    total: f32
    total = 0.0
    for i in seq(0, n):
        total += x[i]
    stats[0] = total / f32(n)
    for it in seq(0, 3):
        for b in par(0, n // 32) @ BLOCKS:
            for t in par(0, 32) @ THREADS:
                y[32 * b + t] = y[32 * b + t] * 0.5 + x[32 * b + t] - f32(it)
    stats[1] = y[0] + y[n - 1]


# ---------------------------------------------------------------- shared memory, sync


@proc
def rowsum(n: size, x: f32[n, 256], out: f32[n]):
    for b in par(0, n) @ BLOCKS:
        s: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[b, t]
        sync()
        for k in seq(0, 8):
            for t in par(0, 256) @ THREADS:
                if t < (128 >> k):
                    s[t] += s[t + (128 >> k)]
            sync()
        for t in par(0, 1) @ THREADS:
            out[b] = s[0]


@proc
def matmul_tiled(m: size, n: size, k: size, a: f32[m, k], b: f32[k, n], c: f32[m, n]):
    assert m % 16 == 0 and n % 16 == 0 and k % 16 == 0
    for bi in par(0, m // 16) @ BLOCKS:
        for bj in par(0, n // 16) @ BLOCKS:
            ta: f32[16, 16] @ SHARED
            tb: f32[16, 16] @ SHARED
            acc: f32[16, 16] @ REGISTER
            for ti in par(0, 16) @ THREADS:
                for tj in par(0, 16) @ THREADS:
                    acc[ti, tj] = 0.0
            for kk in seq(0, k // 16):
                for ti in par(0, 16) @ THREADS:
                    for tj in par(0, 16) @ THREADS:
                        ta[ti, tj] = a[16 * bi + ti, 16 * kk + tj]
                        tb[ti, tj] = b[16 * kk + ti, 16 * bj + tj]
                sync()
                for ti in par(0, 16) @ THREADS:
                    for tj in par(0, 16) @ THREADS:
                        for q in seq(0, 16, unroll=True):
                            acc[ti, tj] += ta[ti, q] * tb[q, tj]
                sync()
            for ti in par(0, 16) @ THREADS:
                for tj in par(0, 16) @ THREADS:
                    c[16 * bi + ti, 16 * bj + tj] = acc[ti, tj]


@proc
def transpose(m: size, n: size, x: f32[m, n], y: f32[n, m]):
    assert m % 32 == 0 and n % 32 == 0
    for bi in par(0, m // 32) @ BLOCKS:
        for bj in par(0, n // 32) @ BLOCKS:
            tile: f32[32, 33] @ SHARED
            for ty in par(0, 8) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    for r in seq(0, 4):
                        tile[ty * 4 + r, tx] = x[32 * bi + ty * 4 + r, 32 * bj + tx]
            sync()
            for ty in par(0, 8) @ THREADS:
                for tx in par(0, 32) @ THREADS:
                    for r in seq(0, 4):
                        y[32 * bj + ty * 4 + r, 32 * bi + tx] = tile[tx, ty * 4 + r]


# ---------------------------------------------------------------- thread mapping


@proc
def narrow(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[b, t]
        sync()
        for t in par(0, 16) @ THREADS:
            y[b, t] = s[t] * 2.0
        for t in par(16, 48) @ THREADS:
            y[b, t] = s[63 - t]
        for t in par(48, 64) @ THREADS:
            y[b, t] = -s[t]


@proc
def mixed_dims(n: size, x: f32[n, 8, 32], out: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        s: f32[8, 32] @ SHARED
        for ty in par(0, 8) @ THREADS:
            for tx in par(0, 32) @ THREADS:
                s[ty, tx] = x[b, ty, tx]
        sync()
        for tx in par(0, 32) @ THREADS:
            out[b, tx] = 0.0
            for r in seq(0, 8):
                out[b, tx] += s[r, tx]


@proc
def blockregs(n: size, x: f32[n, 128], y: f32[n, 128]):
    for b in par(0, n) @ BLOCKS:
        r: f32[32, 4] @ REGISTER
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 4):
                r[t, j] = x[b, 4 * t + j]
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 4):
                y[b, 4 * t + j] = r[t, 3 - j] + r[t, j]


@proc
def late_block(n: size, bs: size, x: f32[n, bs], y: f32[n, bs]):
    assert bs <= 256
    for b in par(0, n) @ BLOCKS:
        for t in par(0, bs) @ THREADS:
            y[b, t] = x[b, t] * 3.0


# ---------------------------------------------------------------- atomics


@proc
def histogram(n: size, x: i32[n], v: f32[n], h: i32[8], mx: f32[1]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        sh: i32[8] @ SHARED
        for t in par(0, 8) @ THREADS:
            sh[t] = 0
        sync()
        for t in par(0, 64) @ THREADS:
            atomic_add(sh[x[64 * b + t] % 8], 1)
            atomic_max(mx[0], v[64 * b + t])
        sync()
        for t in par(0, 8) @ THREADS:
            atomic_add(h[t], sh[t])


# ---------------------------------------------------------------- calls, windows, instr


@proc
def scale_win(m: size, w: [f32][m] @ GLOBAL, s: f32):
    for i in seq(0, m):
        w[i] = w[i] * s


@proc
def load_win(src: [f32][4] @ GLOBAL, dst: [f32][4] @ SHARED):
    for i in seq(0, 4):
        dst[i] = src[i]


@proc
def windows(n: size, x: f32[n, 4, 16], y: f32[n, 4, 16]):
    for b in par(0, n) @ BLOCKS:
        s: f32[16, 4] @ SHARED
        for t in par(0, 16) @ THREADS:
            load_win(x[b, 0:4, t], s[t, 0:4])
        sync()
        for t in par(0, 16) @ THREADS:
            for j in seq(0, 4):
                y[b, j, t] = s[t, 3 - j]
            scale_win(4, y[b, 0:4, t], 0.5)


@instr("*(float4*){dst_data} = *(const float4*){src_data};")
def copy4(dst: [f32][4] @ GLOBAL, src: [f32][4] @ GLOBAL):
    for i in seq(0, 4):
        dst[i] = src[i]


@instr("{dst} = fmaf({a}, {x}, {dst});")
def fma_acc(dst: [f32][1] @ REGISTER, a: f32, x: f32):
    dst[0] = a * x + dst[0]


@proc
def vec_copy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        r: f32[64, 1] @ REGISTER
        for t in par(0, 64) @ THREADS:
            copy4(y[256 * b + 4 * t:256 * b + 4 * t + 4], x[256 * b + 4 * t:256 * b + 4 * t + 4])
            r[t, 0] = 1.0
            fma_acc(r[t, 0:1], a, x[256 * b + 4 * t])
            y[256 * b + 4 * t + 1] = r[t, 0]


# ---------------------------------------------------------------- integer semantics and types


@proc
def floor_ops(n: size, k: index, x: i32[n], y: i32[n], z: i64[n]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = x[32 * b + t] // 3 + x[32 * b + t] % 5
            z[32 * b + t] = (32 * b + t - k) // 4 + (32 * b + t - k) % 7


@proc
def types(n: size, x: f64[n], m: i64[n], flags: bool[n], y: f64[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            if flags[b]:
                y[b] = exp(x[b]) + f64(m[b] // 2)
            else:
                y[b] = sqrt(abs(x[b])) + max(x[b], 0.0)


# ---------------------------------------------------------------- arguments


def _f32(rng, *shape):
    return rng.standard_normal(shape).astype(np.float32)


CORPUS = {
    "saxpy": (saxpy, {}, lambda r: dict(a=2.5, x=_f32(r, 1024), y=_f32(r, 1024))),
    "add2d": (add2d, {}, lambda r: dict(x=_f32(r, 37, 50), y=np.zeros((37, 50), np.float32))),
    "grid3": (grid3, {}, lambda r: dict(x=_f32(r, 3, 4, 5, 4), y=np.zeros((3, 4, 5, 4),
                                                                          np.float32))),
    "two_kernels": (two_kernels, {}, lambda r: dict(x=_f32(r, 256),
                                                    y=np.zeros(256, np.float32))),
    "host_code": (host_code, {}, lambda r: dict(x=_f32(r, 96), stats=np.zeros(2, np.float32),
                                                y=_f32(r, 96))),
    "rowsum": (rowsum, {}, lambda r: dict(x=_f32(r, 20, 256), out=np.zeros(20, np.float32))),
    "matmul_tiled": (matmul_tiled, {}, lambda r: dict(a=_f32(r, 48, 32), b=_f32(r, 32, 64),
                                                      c=np.zeros((48, 64), np.float32))),
    "transpose": (transpose, {}, lambda r: dict(x=_f32(r, 64, 96),
                                                y=np.zeros((96, 64), np.float32))),
    "narrow": (narrow, {}, lambda r: dict(x=_f32(r, 5, 64), y=np.zeros((5, 64), np.float32))),
    "mixed_dims": (mixed_dims, {}, lambda r: dict(x=_f32(r, 6, 8, 32),
                                                  out=np.zeros((6, 32), np.float32))),
    "blockregs": (blockregs, {}, lambda r: dict(x=_f32(r, 7, 128),
                                                y=np.zeros((7, 128), np.float32))),
    "late_block": (late_block, {}, lambda r: dict(x=_f32(r, 9, 48),
                                                  y=np.zeros((9, 48), np.float32))),
    "histogram": (histogram, {}, lambda r: dict(x=r.integers(0, 1000, 512).astype(np.int32),
                                                v=_f32(r, 512), h=np.zeros(8, np.int32),
                                                mx=np.full(1, -100.0, np.float32))),
    "windows": (windows, {}, lambda r: dict(x=_f32(r, 3, 4, 16),
                                            y=np.zeros((3, 4, 16), np.float32))),
    "vec_copy": (vec_copy, {}, lambda r: dict(a=1.5, x=_f32(r, 512),
                                              y=np.zeros(512, np.float32))),
    "floor_ops": (floor_ops, {}, lambda r: dict(k=50, x=r.integers(-100, 100, 64)
                                                .astype(np.int32), y=np.zeros(64, np.int32),
                                                z=np.zeros(64, np.int64))),
    "types": (types, {}, lambda r: dict(x=r.standard_normal(10), m=r.integers(-9, 9, 10),
                                        flags=r.integers(0, 2, 10).astype(bool),
                                        y=np.zeros(10))),
}

CHECKED = list(CORPUS)


@proc
def big_shared(n: size, x: f32[n, 16384], y: f32[n, 16384]):
    for b in par(0, n) @ BLOCKS:
        s: f32[16384] @ SHARED
        c: f32 @ SHARED
        for t in par(0, 256) @ THREADS:
            for j in seq(0, 64):
                s[64 * t + j] = x[b, 64 * t + j]
        for t in par(0, 1) @ THREADS:
            c = 2.0
        sync()
        for t in par(0, 256) @ THREADS:
            for j in seq(0, 64):
                y[b, 64 * t + j] = s[16383 - (64 * t + j)] * c


CORPUS["big_shared"] = (big_shared, {}, lambda r: dict(x=_f32(r, 2, 16384),
                                                       y=np.zeros((2, 16384), np.float32)))
CHECKED.append("big_shared")


@proc
def half_ops(n: size, x: f16[n], y: f16[n], z: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[b] = x[b] * 2.0 + exp(x[b])
            z[b] = f32(x[b]) + f32(max(x[b], y[b]))


@proc
def host_if(n: size, k: index, x: f32[n], y: f32[n]):
    if k > 0:
        for b in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                y[b] = x[b] + 1.0
    else:
        for b in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                y[b] = x[b] - 1.0


CORPUS["half_ops"] = (half_ops, {}, lambda r: dict(
    x=np.linspace(-1, 1, 16).astype(np.float16), y=np.zeros(16, np.float16),
    z=np.zeros(16, np.float32)))
CORPUS["host_if_pos"] = (host_if, {}, lambda r: dict(k=2, x=_f32(r, 8), y=np.zeros(8, np.float32)))
CORPUS["host_if_neg"] = (host_if, {}, lambda r: dict(k=-2, x=_f32(r, 8),
                                                      y=np.zeros(8, np.float32)))
CHECKED += ["half_ops", "host_if_pos"]
