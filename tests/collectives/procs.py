"""Procs with warp collectives shared by the collective tests."""
from __future__ import annotations

from gpudsl import (BLOCKS, SHARED, THREADS, all_lanes, any_lanes, ballot, f32, i32, i64,  # noqa
                    par, proc, select, seq, shfl, shfl_down, shfl_up, shfl_xor, size, sync,
                    warp_max, warp_min, warp_sum)


@proc
def shuffles(x: f32[64], y: f32[64, 4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            v: f32
            v = x[t]
            y[t, 0] = shfl(v, (t + 5) % 32)
            y[t, 1] = shfl_xor(v, 3)
            y[t, 2] = shfl_down(v, 2)
            y[t, 3] = shfl_up(v, 7)


@proc
def reductions(x: f32[64], q: i32[64], y: f32[64, 3], r: i32[64, 3]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[t, 0] = warp_sum(x[t])
            y[t, 1] = warp_max(x[t])
            y[t, 2] = warp_min(x[t])
            r[t, 0] = warp_sum(q[t])
            r[t, 1] = warp_max(q[t])
            r[t, 2] = warp_min(q[t])


@proc
def votes(x: f32[64], m: i64[64], c: i32[64, 2]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            m[t] = ballot(x[t] > 0.5)
            c[t, 0] = select(any_lanes(x[t] > 0.9), 1, 0)
            c[t, 1] = select(all_lanes(x[t] > 0.1), 1, 0)


@proc
def wide_types(a: f64[32], b: i64[32], y: f64[32], z: i64[32]):
    for blk in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[t] = warp_sum(a[t]) + shfl_xor(a[t], 16)
            z[t] = warp_max(b[t]) + shfl(b[t], 31 - t) + warp_sum(t)


@proc
def block_sum(n: size, x: f32[n, 256], out: f32[n]):
    """A block reduction: a warp_sum per warp, one SHARED exchange, a warp_sum
    of the partial sums by the first warp."""
    for row in par(0, n) @ BLOCKS:
        part: f32[8] @ SHARED
        for t in par(0, 256) @ THREADS:
            s: f32
            s = warp_sum(x[row, t])
            if t % 32 == 0:
                part[t // 32] = s
        sync()
        for t in par(0, 32) @ THREADS:
            v: f32
            v = 0.0
            if t < 8:
                v = part[t]
            total: f32
            total = warp_sum(v)
            if t == 0:
                out[row] = total


@proc
def butterfly(n: size, x: f32[n], y: f32[n]):
    assert n % 32 == 0
    assert n <= 1024
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, n) @ THREADS:
            s: f32
            s = x[t]
            for k in seq(0, 5):
                s += shfl_xor(s, 16 >> k)
            if any_lanes(s > 0.0):
                y[t] = shfl_down(s, 1)


@proc
def lane_if(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if t % 2 == 0:
                y[t] = shfl(x[t], 0)


@proc
def part_warp(n: size, x: f32[n], y: f32[n]):
    assert n <= 1024
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, n) @ THREADS:
            y[t] = warp_sum(x[t])


@proc
def lane_out(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[t] = shfl(x[t], t)


@proc
def lane_loop(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for k in seq(0, t % 3):
                y[t] = warp_max(x[t])


@proc
def nested(x: f32[4, 32], y: f32[4, 32]):
    for b in par(0, 1) @ BLOCKS:
        for w in par(0, 4) @ THREADS:
            for t in par(0, 32) @ THREADS:
                y[w, t] = warp_sum(x[w, t]) + shfl(x[w, t], (t + w) % 32)


@proc
def nested_bad(x: f32[4, 16], y: f32[4, 16]):
    for b in par(0, 1) @ BLOCKS:
        for w in par(0, 4) @ THREADS:
            for t in par(0, 16) @ THREADS:
                y[w, t] = warp_sum(x[w, t])


@proc
def racy(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
            y[t] = warp_sum(s[(t + 1) % 64])


GOOD = [shuffles, reductions, votes, wide_types, block_sum, butterfly, nested]
