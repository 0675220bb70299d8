"""Deriving a fast transpose from the naive one, proved at every milestone.

naive → 32x32 tiles on BLOCKS/THREADS → tile staged in SHARED with a barrier →
thread loops reordered for coalesced writes → tile padded to 32x33 (no shared
memory bank conflicts).

Run: ``python examples/transpose_schedule.py``.
"""
from __future__ import annotations

import time

import numpy as np

import gpudsl
from gpudsl import BLOCKS, SHARED, THREADS, f32, proc, seq, size
from gpudsl.schedule import (divide_loop, insert_sync, pad_dim, parallelize_loop,
                             reorder_loops, stage_mem)


@proc
def transpose(n: size, m: size, x: f32[n, m], y: f32[m, n]):
    assert n % 32 == 0 and m % 32 == 0
    for i in seq(0, n):
        for j in seq(0, m):
            y[j, i] = x[i, j]


def milestone(name: str, p, log: list, verify: bool = True):
    """Prove ``p`` with check() and compare it with numpy on random data."""
    if verify:
        report = gpudsl.check(p)
        if not report.ok:
            raise AssertionError(f"{name}: check() failed\n{report}")
        x = np.random.default_rng(0).standard_normal((64, 96)).astype(np.float32)
        y = np.zeros((96, 64), np.float32)
        gpudsl.interpret(p, x=x, y=y)
        np.testing.assert_array_equal(y, x.T)
    log.append((name, p))
    return p


def derive(verify: bool = True):
    log: list = []
    p = milestone("naive", transpose, log, verify=False)

    # 1. 32x32 tiles: blocks over tiles, one thread per element
    p = divide_loop(p, "i", 32, ["bi", "ti"], tail="perfect")
    p = divide_loop(p, "j", 32, ["bj", "tj"], tail="perfect")
    p = reorder_loops(p, "ti")
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "ti", THREADS)
    p = parallelize_loop(p, "tj", THREADS)
    p = milestone("tiles", p, log, verify)

    # 2. stage the tile of x in shared memory; copy with all threads; barrier
    threads = p.find_loop("ti")
    p = stage_mem(p, threads, "x[32*bi:32*bi+32, 32*bj:32*bj+32]", "tile", SHARED)
    p = parallelize_loop(p, "tile_in0", THREADS)
    p = parallelize_loop(p, "tile_in1", THREADS)
    p = insert_sync(p, p.forward(threads).before())
    p = milestone("shared", p, log, verify)

    # 3. threadIdx.x walks ti: consecutive threads write consecutive y elements
    p = reorder_loops(p, p.forward(threads))
    p = milestone("coalesced", p, log, verify)

    # 4. pad the tile's rows to 33 floats: the column reads hit 32 different banks
    p = pad_dim(p, "tile", 1, 33)
    p = milestone("padded", p, log, verify)
    return p, log


def main():
    t0 = time.perf_counter()
    p, log = derive()
    dt = time.perf_counter() - t0
    for name, q in log:
        print(f"# --- {name}")
        print(q)
    print(f"# derivation with checks: {dt * 1000:.0f} ms")
    return p


if __name__ == "__main__":
    main()
