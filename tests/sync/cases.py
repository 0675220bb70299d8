"""The procs of docs/language.md (synchronization) (issue 22): ranged and split barriers, the design's
warp-specialized producer/consumer loop and its broken twins.  ``EXPECT`` gives the
verdict of each: "ok", a race, or a deadlock ("divergence" in check()); "unknown": race
free and deadlock free, but check() cannot count its barrier instances."""
from __future__ import annotations

from gpudsl import BLOCKS, SHARED, THREADS, arrive, barrier, f32, par, proc, seq, size, sync, wait  # noqa: F401

@proc
def pc_sync(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            sync(0, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0

@proc
def pc_nosync(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0

@proc
def pc_wrong_range(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            sync(0, 32)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0

@proc
def pc_one_buf(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[0, t] = x[i, t]
            sync(0, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[0, t - 32] * 2.0

@proc
def pc_split(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        full: barrier @ SHARED
        empty: barrier @ SHARED
        arrive(empty, 32, 64)
        for i in seq(0, n):
            wait(empty, 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            arrive(full, 0, 32)
            wait(full, 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0
            arrive(empty, 32, 64)


@proc
def pc_split_cond(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        full: barrier @ SHARED
        empty: barrier @ SHARED
        for i in seq(0, n):
            if i >= 1:
                wait(empty, 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            arrive(full, 0, 32)
            wait(full, 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0
            arrive(empty, 32, 64)


@proc
def pc_split_noempty(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        full: barrier @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            arrive(full, 0, 32)
            wait(full, 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0

@proc
def split_loop(n: size, x: f32[n, 64], y: f32[n, 64], z: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        bar: barrier @ SHARED
        for i in seq(0, n):
            for t in par(0, 64) @ THREADS:
                s[i % 2, t] = x[i, t]
            arrive(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                z[i, t] = x[i, t] + 1.0
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[i % 2, 63 - t]

@proc
def wait_never(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        bar: barrier @ SHARED
        for i in seq(0, n):
            for t in par(0, 64) @ THREADS:
                s[t] = x[i, t]
            wait(bar, 0, 64)
            arrive(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[63 - t]


# barrier rings (issue 35): one split barrier per slot, indexed by the step
@proc
def ring4(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[4, 32] @ SHARED
        full: barrier[4] @ SHARED
        empty: barrier[4] @ SHARED
        for j in seq(0, 4):
            arrive(empty[j], 32, 64)
        for i in seq(0, n):
            wait(empty[i % 4], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 4, t] = x[i, t]
            arrive(full[i % 4], 0, 32)
            wait(full[i % 4], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 4, t - 32] * 2.0
            arrive(empty[i % 4], 32, 64)

@proc
def ring4_wrong_element(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[4, 32] @ SHARED
        full: barrier[4] @ SHARED
        empty: barrier[4] @ SHARED
        for j in seq(0, 4):
            arrive(empty[j], 32, 64)
        for i in seq(0, n):
            wait(empty[i % 4], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 4, t] = x[i, t]
            arrive(full[i % 4], 0, 32)
            wait(full[(i + 1) % 4], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 4, t - 32] * 2.0
            arrive(empty[i % 4], 32, 64)

@proc
def ring2_four_slots(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[4, 32] @ SHARED
        full: barrier[4] @ SHARED
        empty: barrier[4] @ SHARED
        for j in seq(0, 4):
            arrive(empty[j], 32, 64)
        for i in seq(0, n):
            wait(empty[i % 4], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            arrive(full[i % 4], 0, 32)
            wait(full[i % 4], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0
            arrive(empty[i % 4], 32, 64)


EXPECT = {
    "pc_sync": "ok", "pc_nosync": "race", "pc_wrong_range": "race", "pc_one_buf": "race",
    "pc_split": "ok", "pc_split_cond": "unknown", "pc_split_noempty": "divergence", "split_loop": "ok",
    "wait_never": "divergence", "ring4": "ok", "ring4_wrong_element": "divergence",
    "ring2_four_slots": "race",
}
PROCS = {name: globals()[name] for name in EXPECT}
