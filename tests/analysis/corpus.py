"""The test corpus of check(): procs with their expected verdicts.

``CASES`` is a list of :class:`Case`: a proc, bindings, the expected verdict
(``"ok"`` or a diagnostic kind; a set when either kind is acceptable) and whether a
race witness must reproduce in the interpreter's race detector.  Used by
``test_corpus.py`` and ``benchmarks/bench_check.py``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from gpudsl import (BLOCKS, REGISTER, SHARED, THREADS, atomic_add, f32, i32, index, instr,
                    par, proc, seq, size, sync)


@dataclass
class Case:
    name: str
    proc: object
    expect: object  # "ok" or kind or set of kinds
    bindings: dict = field(default_factory=dict)
    repro: bool = True  # a race witness reproduces in the interpreter
    warn: bool = False  # a warning is expected


CASES: list[Case] = []


def case(expect, repro=True, warn=False, **bindings):
    def deco(p):
        CASES.append(Case(p.name + ("" if not bindings else
                                    "[" + ",".join(f"{k}={v}" for k, v in bindings.items()) + "]"),
                          p, expect, bindings, repro, warn))
        return p
    return deco


# ---------------------------------------------------------------- notes: straight line

@case("ok")
@proc
def own_slot(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[t] = y[t] + x[t]


@case("race")
@proc
def shared_scalar_store(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32 @ SHARED
        for t in par(0, 64) @ THREADS:
            s = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s


@case("race")
@proc
def neighbour_sum_one_phase(x: f32[65], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[65] @ SHARED
        for t in par(0, 65) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            s[t] = s[t] + s[t + 1]
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


@case("ok")
@proc
def neighbour_sum_staged(x: f32[65], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[65] @ SHARED
        r: f32[65]
        for t in par(0, 65) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            r[t] = s[t] + s[t + 1]
        sync()
        for t in par(0, 64) @ THREADS:
            s[t] = r[t]
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


@case("ok")
@proc
def write_sync_read_neighbour(x: f32[128], y: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[128] @ SHARED
        for t in par(0, 128) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 128) @ THREADS:
            y[t] = s[(t + 1) % 128] - s[t]


# ---------------------------------------------------------------- notes: 2-D

@case("ok")
@proc
def tile_own_element(x: f32[16, 16], y: f32[16, 16]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16, 16] @ SHARED
        for i in par(0, 16) @ THREADS:
            for j in par(0, 16) @ THREADS:
                s[i, j] = x[i, j]
                s[i, j] = s[i, j] * 2.0
                y[i, j] = s[i, j]


@case("race")
@proc
def tile_row_below(x: f32[16, 16], y: f32[16, 16]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[17, 16] @ SHARED
        for i in par(0, 16) @ THREADS:
            for j in par(0, 16) @ THREADS:
                s[i, j] = x[i, j]
                s[i + 1, j] = 0.0


@case("ok")
@proc
def transpose_tiled(n: size, x: f32[n, n], y: f32[n, n]):
    assert n % 32 == 0
    for bi in par(0, n // 32) @ BLOCKS:
        for bj in par(0, n // 32) @ BLOCKS:
            tile: f32[32, 33] @ SHARED
            for i in par(0, 32) @ THREADS:
                for j in par(0, 32) @ THREADS:
                    tile[i, j] = x[32 * bi + i, 32 * bj + j]
            sync()
            for i in par(0, 32) @ THREADS:
                for j in par(0, 32) @ THREADS:
                    y[32 * bj + i, 32 * bi + j] = tile[j, i]


@case("race")
@proc
def transpose_no_sync(n: size, x: f32[n, n], y: f32[n, n]):
    assert n % 32 == 0
    for bi in par(0, n // 32) @ BLOCKS:
        for bj in par(0, n // 32) @ BLOCKS:
            tile: f32[32, 33] @ SHARED
            for i in par(0, 32) @ THREADS:
                for j in par(0, 32) @ THREADS:
                    tile[i, j] = x[32 * bi + i, 32 * bj + j]
            for i in par(0, 32) @ THREADS:
                for j in par(0, 32) @ THREADS:
                    y[32 * bj + i, 32 * bi + j] = tile[j, i]


# ---------------------------------------------------------------- notes: loops

@case("ok")
@proc
def tree_reduction(n: size, x: f32[n], y: f32[n // 256]):
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
            y[b] = s[0]


@case("race")
@proc
def tree_reduction_no_sync(x: f32[256], y: f32[1]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 8):
            for t in par(0, 256) @ THREADS:
                if t < (128 >> k):
                    s[t] += s[t + (128 >> k)]
        sync()
        for t in par(0, 1) @ THREADS:
            y[0] = s[0]


@case("ok")
@proc
def hillis_steele_scan(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[256] @ SHARED
        r: f32[256]
        for t in par(0, 256) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 8):
            for t in par(0, 256) @ THREADS:
                if t >= (1 << k):
                    r[t] = s[t - (1 << k)]
            sync()
            for t in par(0, 256) @ THREADS:
                if t >= (1 << k):
                    s[t] += r[t]
            sync()
        for t in par(0, 256) @ THREADS:
            y[t] = s[t]


@case("race")
@proc
def hillis_steele_one_sync(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 8):
            for t in par(0, 256) @ THREADS:
                if t >= (1 << k):
                    s[t] += s[t - (1 << k)]
            sync()
        for t in par(0, 256) @ THREADS:
            y[t] = s[t]


@case("ok")
@proc
def matmul_tiled(n: size, a: f32[n, n], b: f32[n, n], c: f32[n, n]):
    assert n % 16 == 0
    for bi in par(0, n // 16) @ BLOCKS:
        for bj in par(0, n // 16) @ BLOCKS:
            sa: f32[16, 16] @ SHARED
            sb: f32[16, 16] @ SHARED
            acc: f32[16, 16]
            for i in par(0, 16) @ THREADS:
                for j in par(0, 16) @ THREADS:
                    acc[i, j] = 0.0
            for k in seq(0, n // 16):
                for i in par(0, 16) @ THREADS:
                    for j in par(0, 16) @ THREADS:
                        sa[i, j] = a[16 * bi + i, 16 * k + j]
                        sb[i, j] = b[16 * k + i, 16 * bj + j]
                sync()
                for i in par(0, 16) @ THREADS:
                    for j in par(0, 16) @ THREADS:
                        for kk in seq(0, 16):
                            acc[i, j] += sa[i, kk] * sb[kk, j]
                sync()
            for i in par(0, 16) @ THREADS:
                for j in par(0, 16) @ THREADS:
                    c[16 * bi + i, 16 * bj + j] = acc[i, j]


@case("race", n=32)
@proc
def matmul_missing_second_sync(n: size, a: f32[n, n], b: f32[n, n], c: f32[n, n]):
    assert n % 16 == 0
    for bi in par(0, n // 16) @ BLOCKS:
        for bj in par(0, n // 16) @ BLOCKS:
            sa: f32[16, 16] @ SHARED
            sb: f32[16, 16] @ SHARED
            acc: f32[16, 16]
            for i in par(0, 16) @ THREADS:
                for j in par(0, 16) @ THREADS:
                    acc[i, j] = 0.0
            for k in seq(0, n // 16):
                for i in par(0, 16) @ THREADS:
                    for j in par(0, 16) @ THREADS:
                        sa[i, j] = a[16 * bi + i, 16 * k + j]
                        sb[i, j] = b[16 * k + i, 16 * bj + j]
                sync()
                for i in par(0, 16) @ THREADS:
                    for j in par(0, 16) @ THREADS:
                        for kk in seq(0, 16):
                            acc[i, j] += sa[i, kk] * sb[kk, j]
            for i in par(0, 16) @ THREADS:
                for j in par(0, 16) @ THREADS:
                    c[16 * bi + i, 16 * bj + j] = acc[i, j]


@case("race", n=32)
@proc
def matmul_missing_first_sync(n: size, a: f32[n, n], b: f32[n, n], c: f32[n, n]):
    assert n % 16 == 0
    for bi in par(0, n // 16) @ BLOCKS:
        for bj in par(0, n // 16) @ BLOCKS:
            sa: f32[16, 16] @ SHARED
            acc: f32[16, 16]
            for i in par(0, 16) @ THREADS:
                for j in par(0, 16) @ THREADS:
                    acc[i, j] = 0.0
            for k in seq(0, n // 16):
                for i in par(0, 16) @ THREADS:
                    for j in par(0, 16) @ THREADS:
                        sa[i, j] = a[16 * bi + i, 16 * k + j]
                for i in par(0, 16) @ THREADS:
                    for j in par(0, 16) @ THREADS:
                        for kk in seq(0, 16):
                            acc[i, j] += sa[i, kk] * b[16 * k + kk, 16 * bj + j]
                sync()
            for i in par(0, 16) @ THREADS:
                for j in par(0, 16) @ THREADS:
                    c[16 * bi + i, 16 * bj + j] = acc[i, j]


# ---------------------------------------------------------------- notes: non-affine

@case("ok")
@proc
def rotate_mod(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[(t + 1) % 64] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


@case("race")
@proc
def mod16_collide(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t % 16] = x[t]


@case("ok")
@proc
def per_thread_chunk(n: size, w: size, x: f32[n], y: f32[n]):
    assert n == 64 * w
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, w):
                y[t * w + i] = x[t * w + i] + 1.0


@case("ok", w=8, n=512)
@proc
def per_thread_chunk_bound(n: size, w: size, x: f32[n], y: f32[n]):
    assert n == 64 * w
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, w):
                y[t * w + i] = x[t * w + i] + 1.0


@case("race", w=8, n=512)
@proc
def per_thread_chunk_overlap(n: size, w: size, x: f32[n], y: f32[n]):
    assert n == 64 * w
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, w):
                if t * (w - 1) + i < n:
                    y[t * (w - 1) + i] = x[t * w + i] + 1.0


# ---------------------------------------------------------------- notes: grid

@case("race")
@proc
def two_blocks_same_y(x: f32[64], y: f32[64]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[t] = x[t]


@case("ok")
@proc
def two_blocks_shared(x: f32[128], y: f32[128]):
    for b in par(0, 2) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[64 * b + t]
        sync()
        for t in par(0, 64) @ THREADS:
            y[64 * b + t] = s[63 - t]


@case("race")
@proc
def global_neighbour_after_sync(y: f32[513]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = 1.0
        sync()
        for t in par(0, 256) @ THREADS:
            y[256 * b + t + 1] = 2.0


@case("ok")
@proc
def only_block_zero_writes(x: f32[64], y: f32[64]):
    for b in par(0, 8) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if b == 0:
                y[t] = x[t]


# ---------------------------------------------------------------- notes: barriers

@case({"mapping", "divergence"})
@proc
def sync_in_thread_loop(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            x[t] = 1.0
            sync()


@case({"mapping", "divergence"})
@proc
def sync_under_thread_if(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if t < 32:
                sync()
            x[t] = 1.0


@case("divergence")
@proc
def sync_under_register_if(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        flag: f32[64]
        for t in par(0, 64) @ THREADS:
            flag[t] = x[t]
        if flag[0] > 0.0:
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = flag[t]


@case("ok")
@proc
def sync_under_size_if(n: size, x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        if n > 4:
            sync()
        else:
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[63 - t]


@case("race")
@proc
def sync_only_if_size(n: size, x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        if n > 4:
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[63 - t]


@case("ok")
@proc
def sync_under_block_if(x: f32[256], y: f32[256]):
    for b in par(0, 4) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[64 * b + t]
        if b % 2 == 0:
            sync()
            for t in par(0, 64) @ THREADS:
                y[64 * b + t] = s[63 - t]
        else:
            for t in par(0, 64) @ THREADS:
                y[64 * b + t] = s[t]


# ---------------------------------------------------------------- notes: atomics

@case("ok")
@proc
def atomic_counter(x: f32[256], c: f32[1]):
    for b in par(0, 4) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            atomic_add(c[0], x[64 * b + t])


@case("race")
@proc
def atomic_and_plain_read(x: f32[256], c: f32[1], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            atomic_add(c[0], x[t])
            y[t] = c[0]


# ---------------------------------------------------------------- notes: bounds

@case("bounds")
@proc
def thread_loop_too_wide(x: f32[65]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 65) @ THREADS:
            s[t] = x[t]


@case("bounds")
@proc
def grid_one_too_many(n: size, x: f32[n], y: f32[n]):
    assert n % 64 == 0
    for b in par(0, n // 64 + 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[64 * b + t] = x[64 * b + t]


# ---------------------------------------------------------------- notes: resources

@case("resource")
@proc
def too_many_threads(x: f32[2048]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 2048) @ THREADS:
            x[t] = 0.0


@case("resource")
@proc
def too_much_shared(x: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[65536] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[t]


# ================================================================ our own cases

# ---- halos (1-D stencil)

@case("ok")
@proc
def stencil_halo(n: size, x: f32[n + 2], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        s: f32[130] @ SHARED
        for t in par(0, 128) @ THREADS:
            s[t + 1] = x[128 * b + t + 1]
            if t == 0:
                s[0] = x[128 * b]
            if t == 127:
                s[129] = x[128 * b + 129]
        sync()
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = s[t] + s[t + 1] + s[t + 2]


@case("race", n=256)
@proc
def stencil_halo_no_sync(n: size, x: f32[n + 2], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        s: f32[130] @ SHARED
        for t in par(0, 128) @ THREADS:
            s[t + 1] = x[128 * b + t + 1]
            if t == 0:
                s[0] = x[128 * b]
            if t == 127:
                s[129] = x[128 * b + 129]
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = s[t] + s[t + 1] + s[t + 2]


@case("race", n=256)
@proc
def stencil_halo_overlap(n: size, x: f32[n + 2], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        s: f32[130] @ SHARED
        for t in par(0, 128) @ THREADS:
            s[t + 1] = x[128 * b + t + 1]
            if t == 0:
                s[2] = x[128 * b]
        sync()
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = s[t + 1]


@case("bounds", n=256)
@proc
def stencil_halo_missing_pad(n: size, x: f32[n], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = x[128 * b + t] + x[128 * b + t + 1]


@case("ok")
@proc
def stencil_guarded(n: size, x: f32[n], y: f32[n]):
    assert n % 128 == 0
    for b in par(0, n // 128) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            if 128 * b + t + 1 < n:
                y[128 * b + t] = x[128 * b + t] + x[128 * b + t + 1]


# ---- grid-stride loops

@case("ok")
@proc
def grid_stride(n: size, x: f32[n], y: f32[n]):
    assert n % 1024 == 0
    for b in par(0, 4) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            for i in seq(0, n // 1024):
                y[1024 * i + 256 * b + t] = 2.0 * x[1024 * i + 256 * b + t]


@case("race", n=2048)
@proc
def grid_stride_wrong(n: size, x: f32[n], y: f32[n]):
    assert n % 1024 == 0
    for b in par(0, 4) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            for i in seq(0, n // 1024):
                y[256 * i + 256 * b + t] = 2.0 * x[256 * i + 256 * b + t]


@case("ok")
@proc
def grid_stride_guarded(n: size, x: f32[n], y: f32[n]):
    for b in par(0, 4) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            for i in seq(0, (n + 1023) // 1024):
                if 1024 * i + 256 * b + t < n:
                    y[1024 * i + 256 * b + t] = x[1024 * i + 256 * b + t]


# ---- parameter-dependent collisions

@case("ok")
@proc
def shifted_read(n: size, k: index, x: f32[n], y: f32[n]):
    assert n == 256
    assert k >= 0
    assert k < 16
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 240) @ THREADS:
            y[t] = x[t + k]


@case("race")
@proc
def stride_param_collide(k: index, y: f32[256]):
    assert k >= 0
    assert k < 4
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[k * t] = 1.0


@case("ok")
@proc
def stride_param_positive(k: index, y: f32[256]):
    assert k >= 1
    assert k < 4
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[k * t] = 1.0


@case("race")
@proc
def inplace_shift_param(k: index, y: f32[512]):
    assert k >= 0
    assert k < 256
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[t + k] = y[t] + 1.0


@case("ok", k=0)
@proc
def inplace_shift_param_zero(k: index, y: f32[512]):
    assert k >= 0
    assert k < 256
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[t + k] = y[t] + 1.0


# ---- windows

@proc
def swap_pair(z: [f32][2] @ SHARED):
    z[0] = z[1]


@proc
def copy_in(m: size, src: [f32][m], dst: [f32][m] @ SHARED):
    for i in seq(0, m):
        dst[i] = src[i]


@case("race")
@proc
def window_overlap(x: f32[65]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[65] @ SHARED
        for t in par(0, 65) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            swap_pair(s[t:t + 2])


@case("ok")
@proc
def window_disjoint(x: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[128] @ SHARED
        for t in par(0, 128) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            swap_pair(s[2 * t:2 * t + 2])
        sync()
        for t in par(0, 128) @ THREADS:
            x[t] = s[t]


@case("ok")
@proc
def window_copy_chunks(x: f32[512], y: f32[512]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[512] @ SHARED
        for t in par(0, 64) @ THREADS:
            copy_in(8, x[8 * t:8 * t + 8], s[8 * t:8 * t + 8])
        sync()
        for t in par(0, 64) @ THREADS:
            for i in seq(0, 8):
                y[64 * i + t] = s[64 * i + t]


@case("race")
@proc
def window_copy_overlap(x: f32[512], y: f32[512]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[512] @ SHARED
        for t in par(0, 64) @ THREADS:
            copy_in(8, x[7 * t:7 * t + 8], s[7 * t:7 * t + 8])


@case("bounds")
@proc
def window_outside(x: f32[512], y: f32[512]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[512] @ SHARED
        for t in par(0, 64) @ THREADS:
            copy_in(8, x[8 * t + 1:8 * t + 9], s[8 * t:8 * t + 8])


# ---- atomics

@case("ok")
@proc
def histogram_atomic(n: size, idx: i32[n], h: f32[16]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if idx[64 * b + t] >= 0 and idx[64 * b + t] < 16:
                atomic_add(h[idx[64 * b + t]], 1.0)


@case("race", repro=False)
@proc
def histogram_plain(n: size, idx: i32[n], h: f32[16]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if idx[64 * b + t] >= 0 and idx[64 * b + t] < 16:
                h[idx[64 * b + t]] += 1.0


@case("ok")
@proc
def atomic_then_sync_read(x: f32[256], c: f32[1], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            atomic_add(c[0], x[t])
        sync()
        for t in par(0, 256) @ THREADS:
            y[t] = c[0]


@case("race")
@proc
def atomic_across_blocks_read(x: f32[256], c: f32[1], y: f32[256]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            atomic_add(c[0], x[128 * b + t])
        sync()
        for t in par(0, 128) @ THREADS:
            y[128 * b + t] = c[0]


# ---- data-dependent indices

@case("ok")
@proc
def slice_copy_data_begin(n: size, m: size, begin: i32[1], x: f32[n], out: f32[m]):
    for b in par(0, (m + 63) // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if 64 * b + t < m and begin[0] >= 0 and begin[0] + 64 * b + t < n:
                out[64 * b + t] = x[begin[0] + 64 * b + t]


@case("ok")
@proc
def replace_slice_data(n: size, m: size, begin: i32[1], x: f32[n], r: f32[m]):
    for b in par(0, (m + 63) // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if 64 * b + t < m and begin[0] >= 0 and begin[0] + 64 * b + t < n:
                x[begin[0] + 64 * b + t] = r[64 * b + t]


@case("race", repro=False)
@proc
def gather_scatter_data(n: size, perm: i32[n], y: f32[n]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if perm[64 * b + t] >= 0 and perm[64 * b + t] < n:
                y[perm[64 * b + t]] = 1.0


@case("bounds")
@proc
def gather_unguarded(n: size, perm: i32[n], x: f32[n], y: f32[n]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[64 * b + t] = x[perm[64 * b + t]]


# ---- block-level registers

@case("ok")
@proc
def block_register_rows(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        r: f32[64, 4]
        for t in par(0, 64) @ THREADS:
            for i in seq(0, 4):
                r[t, i] = x[t] * 2.0
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = r[t, 0] + r[t, 3]


@case("mapping")
@proc
def block_register_neighbour(x: f32[65], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        r: f32[65]
        for t in par(0, 65) @ THREADS:
            r[t] = x[t]
        for t in par(0, 64) @ THREADS:
            y[t] = r[t + 1]


@case("mapping")
@proc
def block_register_scalar(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        acc: f32
        for t in par(0, 64) @ THREADS:
            acc = x[t]
        for t in par(0, 64) @ THREADS:
            y[t] = acc


@case("ok")
@proc
def thread_local_register(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            acc: f32
            acc = 0.0
            for i in seq(0, 4):
                acc += x[t]
            y[t] = acc


# ---- phases across seq loops

@case("ok")
@proc
def ping_pong(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 64] @ SHARED
        for t in par(0, 64) @ THREADS:
            buf[0, t] = x[t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 64) @ THREADS:
                buf[(k + 1) % 2, t] = buf[k % 2, (t + 1) % 64] + 1.0
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = buf[0, t]


@case("race")
@proc
def back_edge_race(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for k in seq(0, 4):
            for t in par(0, 64) @ THREADS:
                s[t] = x[t] + 1.0
            sync()
            for t in par(0, 64) @ THREADS:
                y[t] = s[(t + 1) % 64]


@case("ok")
@proc
def back_edge_fixed(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for k in seq(0, 4):
            for t in par(0, 64) @ THREADS:
                s[t] = x[t] + 1.0
            sync()
            for t in par(0, 64) @ THREADS:
                y[t] = s[(t + 1) % 64]
            sync()


@case("race")
@proc
def after_loop_race(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for k in seq(0, 4):
            for t in par(0, 64) @ THREADS:
                s[t] = x[t]
            sync()
            for t in par(0, 64) @ THREADS:
                y[t] = s[63 - t]
        for t in par(0, 64) @ THREADS:
            s[t] = 0.0


@case("race")
@proc
def before_loop_race(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        for k in seq(0, 4):
            for t in par(0, 64) @ THREADS:
                y[t] = s[63 - t]
            sync()


@case("ok")
@proc
def uniform_data_bound(cnt: i32[1], x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for k in seq(0, cnt[0]):
            for t in par(0, 64) @ THREADS:
                s[t] = x[t]
            sync()
            for t in par(0, 64) @ THREADS:
                y[t] = s[63 - t]
            sync()


# ---- bit tricks

@case("ok")
@proc
def xor_butterfly(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        r: f32[64]
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 64) @ THREADS:
                r[t] = s[t ^ (1 << k)]
            sync()
            for t in par(0, 64) @ THREADS:
                s[t] = s[t] + r[t]
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


@case("race")
@proc
def mask_collide(x: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t & 15] = x[t]


@case("race")
@proc
def shift_right_collide(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t >> 1] = x[t]


@case("ok")
@proc
def shift_left_spread(x: f32[64], y: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[t << 1] = x[t]
            y[(t << 1) | 1] = x[t]


# ---- warp-style reduction without barriers (warps are not lock-step)

@case("race")
@proc
def warp_reduce_no_sync(x: f32[64], y: f32[1]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 32) @ THREADS:
            s[t] += s[t + 32]
            s[t] += s[t + 16]


# ---- kernels in sequence, multi-dimensional grids

@case("ok")
@proc
def two_kernels(x: f32[256], y: f32[256], z: f32[256]):
    for b in par(0, 4) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[64 * b + t] = x[64 * b + t]
    for b in par(0, 4) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            z[64 * b + t] = y[(64 * b + t + 1) % 256]


@case("ok")
@proc
def grid_2d(n: size, m: size, x: f32[n, m], y: f32[n, m]):
    assert n % 8 == 0
    assert m % 32 == 0
    for bi in par(0, n // 8) @ BLOCKS:
        for bj in par(0, m // 32) @ BLOCKS:
            for i in par(0, 8) @ THREADS:
                for j in par(0, 32) @ THREADS:
                    y[8 * bi + i, 32 * bj + j] = x[8 * bi + i, 32 * bj + j] + 1.0


@case("ok")
@proc
def one_d_loop_in_2d_block(x: f32[8, 32], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for i in par(0, 8) @ THREADS:
            for j in par(0, 32) @ THREADS:
                x[i, j] = 0.0
        for j in par(0, 32) @ THREADS:
            y[j] = 1.0


@case("ok")
@proc
def narrower_thread_loop(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 32) @ THREADS:
            y[t] = s[2 * t] + s[2 * t + 1]


@case("race")
@proc
def one_d_loop_in_2d_block_collide(x: f32[8, 32], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for i in par(0, 8) @ THREADS:
            for j in par(0, 32) @ THREADS:
                x[i, j] = 0.0
        for j in par(0, 32) @ THREADS:
            y[j] = 1.0
        for i in par(0, 8) @ THREADS:
            for j in par(0, 32) @ THREADS:
                y[j] = x[i, j]


# ---- mapping rules

@case("mapping", warn=True)
@proc
def threads_outside_blocks(x: f32[64]):
    for t in par(0, 64) @ THREADS:
        x[t] = 0.0


@case("mapping")
@proc
def four_block_dims(x: f32[2, 2, 2, 2]):
    for a in par(0, 2) @ BLOCKS:
        for b in par(0, 2) @ BLOCKS:
            for c in par(0, 2) @ BLOCKS:
                for d in par(0, 2) @ BLOCKS:
                    for t in par(0, 1) @ THREADS:
                        x[a, b, c, d] = 0.0


@case("mapping")
@proc
def shared_in_thread_loop(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            s: f32[64] @ SHARED
            s[t] = x[t]


@case("mapping")
@proc
def write_at_block_level(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        x[b] = 0.0


@case("ok", warn=True)
@proc
def host_par_map(n: size, x: f32[n], y: f32[n]):
    for i in par(0, n):
        y[i] = 2.0 * x[i]


@case("race", repro=False, warn=True)
@proc
def host_par_accumulate(n: size, x: f32[n], y: f32[1]):
    for i in par(0, n):
        y[0] += x[i]


@case("ok")
@proc
def unmapped_threads_in_blocks(n: size, x: f32[n], y: f32[n]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in par(0, 1):
                y[64 * b + t + i] = x[64 * b + t]


@case("race", repro=False)
@proc
def unmapped_par_in_thread_collide(y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in par(0, 4):
                y[t] = 1.0


# ---- instr

@instr("{dst_data}[0] = {src_data}[0];")
def copy1(src: [f32][1], dst: [f32][1] @ SHARED):
    dst[0] = src[0]


@case("ok")
@proc
def instr_copy(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            copy1(x[t:t + 1], s[t:t + 1])
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[63 - t]


@case("race")
@proc
def instr_copy_race(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            copy1(x[t:t + 1], s[t // 2:t // 2 + 1])


@proc
def small_copy(m: size, src: [f32][m], dst: [f32][m] @ SHARED):
    assert m <= 8
    for i in seq(0, m):
        dst[i] = src[i]


@proc
def nested_copy(src: [f32][16], dst: [f32][16] @ SHARED):
    small_copy(8, src[0:8], dst[0:8])
    small_copy(8, src[8:16], dst[8:16])


@case("bounds")
@proc
def callee_assert_broken(x: f32[1024]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[1024] @ SHARED
        for t in par(0, 64) @ THREADS:
            small_copy(16, x[16 * t:16 * t + 16], s[16 * t:16 * t + 16])


@case("ok")
@proc
def nested_windows(x: f32[1024], y: f32[1024]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[1024] @ SHARED
        for t in par(0, 64) @ THREADS:
            nested_copy(x[16 * t:16 * t + 16], s[16 * t:16 * t + 16])
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[1023 - t]


@case("race")
@proc
def nested_windows_overlap(x: f32[1024], y: f32[1024]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[1024] @ SHARED
        for t in par(0, 64) @ THREADS:
            nested_copy(x[15 * t:15 * t + 16], s[15 * t:15 * t + 16])


# ---------------------------------------------------------------- issue 13 (own module)

from . import corpus_issue13  # noqa: E402,F401  (registers its cases)
