"""Deriving a tiled matmul from the naive one, proved at every milestone.

naive → 16x16 blocks and threads → the accumulator staged into a per-thread
REGISTER, expanded and lifted to block level → the k loop divided, fissioned and
moved outside the thread loops → A and B tiles staged in SHARED, copy loops
mapped to THREADS, barriers inserted.

Run: ``python examples/matmul_schedule.py``; it prints each milestone and the
time the derivation takes (all primitives plus the checks).
"""
from __future__ import annotations

import time

import numpy as np

import gpudsl
from gpudsl import BLOCKS, REGISTER, SHARED, THREADS, f32, proc, seq, size
from gpudsl.schedule import (divide_loop, expand_dim, fission, insert_sync, lift_alloc,
                             parallelize_loop, reorder_loops, stage_mem)


@proc
def matmul(n: size, m: size, kk: size, A: f32[n, kk], B: f32[kk, m], C: f32[n, m]):
    assert n % 16 == 0 and m % 16 == 0 and kk % 16 == 0
    for i in seq(0, n):
        for j in seq(0, m):
            C[i, j] = 0.0
            for k in seq(0, kk):
                C[i, j] += A[i, k] * B[k, j]


def run_numpy_check(p, n=32, m=48, kk=64, seed=0):
    rng = np.random.default_rng(seed)
    A = rng.standard_normal((n, kk)).astype(np.float32)
    B = rng.standard_normal((kk, m)).astype(np.float32)
    C = np.zeros((n, m), np.float32)
    gpudsl.interpret(p, A=A, B=B, C=C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)


def milestone(name, p, log, check=True, interp=True):
    if check:
        report = gpudsl.check(p)
        if not report.ok:
            raise AssertionError(f"{name}: check() failed\n{report}")
    if interp:
        run_numpy_check(p)
    log.append((name, p))
    return p


def derive(check: bool = True, interp: bool = True):
    log: list = []
    p = milestone("naive", matmul, log, check=False, interp=interp)

    # 1. 16x16 output tiles per block, one thread per output element
    p = divide_loop(p, "i", 16, ["bi", "ti"], tail="perfect")
    p = divide_loop(p, "j", 16, ["bj", "tj"], tail="perfect")
    p = reorder_loops(p, "ti")
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "ti", THREADS)
    p = parallelize_loop(p, "tj", THREADS)
    p = milestone("blocks and threads", p, log, check, interp)

    # 2. accumulate in a register of each thread, expanded to the block's threads
    #    and allocated at block level (so that the k loop can leave the thread loops)
    p = stage_mem(p, p.find_loop("tj").body(), "C[16*bi + ti, 16*bj + tj]", "acc",
                  REGISTER)
    p = expand_dim(p, "acc", 16, "tj")
    p = expand_dim(p, "acc", 16, "ti")
    p = lift_alloc(p, "acc", n_lifts=2)
    p = milestone("register accumulator", p, log, check, interp)

    # 3. the k loop in 16-wide steps, split from the initialisation and the
    #    write-back, and moved outside the thread loops
    p = divide_loop(p, "k", 16, ["ko", "ki"], tail="perfect")
    p = fission(p, p.find("acc[_] = 0.0").after(), n_lifts=2)
    p = fission(p, p.find_loop("ko").after(), n_lifts=2)
    p = reorder_loops(p, "tj #1")
    p = reorder_loops(p, "ti #1")
    p = milestone("k outside the threads", p, log, check, interp)

    # 4. A and B tiles in shared memory, copied by all threads, between barriers
    compute = p.find_loop("ti #1")
    p = stage_mem(p, compute, "A[16*bi:16*bi + 16, 16*ko:16*ko + 16]", "As", SHARED)
    p = stage_mem(p, p.forward(compute), "B[16*ko:16*ko + 16, 16*bj:16*bj + 16]", "Bs",
                  SHARED)
    for copy_loop in ("As_in0", "As_in1", "Bs_in0", "Bs_in1"):
        p = parallelize_loop(p, copy_loop, THREADS)
    p = insert_sync(p, p.find_loop("ko").body().before())  # readers of the last tile
    p = insert_sync(p, p.forward(compute).before())  # the tiles are complete
    p = milestone("shared tiles", p, log, check, interp)
    return p, log


def timed_derivation():
    """Seconds for the derivation: all primitives plus check() at each milestone
    (interpretation excluded)."""
    t0 = time.perf_counter()
    derive(check=True, interp=False)
    return time.perf_counter() - t0


def main():
    p, log = derive()
    for name, q in log:
        print(f"# --- {name}")
        print(q)
    dt = min(timed_derivation() for _ in range(3))
    print(f"# derivation (primitives + check() at each milestone): {dt * 1000:.0f} ms")
    return p


if __name__ == "__main__":
    main()
