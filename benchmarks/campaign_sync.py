"""User kernels with the synchronization of SPEC 2.7 for the GPU campaign's smoke and
sanitizer steps (``campaign_kernels.py --sync``): a warp-specialized producer/consumer
loop over ``buf[i % 2]`` joined by a ranged barrier, the same loop with split
(mbarrier) barriers, and a block reduction with ``warp_sum`` plus one SHARED exchange.
Each is proved by ``compile()`` and compared with numpy.  Importing this module fails
while the language lacks these constructs; the campaign then says so and runs the rest.
"""
from __future__ import annotations

import numpy as np

from gpudsl import (BLOCKS, SHARED, THREADS, arrive, barrier, f32, par, proc, seq, size,
                    sync, wait, warp_sum)


@proc
def ranged_pipeline(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:          # warp 0 produces
                buf[i % 2, t] = x[i, t]
            sync(0, 64)
            for t in par(32, 64) @ THREADS:         # warp 1 consumes
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0


@proc
def split_pipeline(n: size, x: f32[n, 32], y: f32[n, 32]):
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
def warp_block_sum(nb: size, x: f32[nb, 256], out: f32[nb]):
    for b in par(0, nb) @ BLOCKS:
        part: f32[8] @ SHARED
        for t in par(0, 256) @ THREADS:
            s: f32
            s = warp_sum(x[b, t])
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
                out[b] = total


def _target() -> str:
    from gpudsl.stdlib.ops import target

    return target()


def cases():
    """(name, function of a numpy Generator returning (result, expected))."""
    def pipeline(p):
        def f(g):
            x = g.standard_normal((7, 32), np.float32)
            y = np.zeros_like(x)
            p.compile(_target())(x=x, y=y)
            return y, 2 * x
        return f

    def block_sum(g):
        x = g.standard_normal((5, 256), np.float32)
        out = np.zeros(5, np.float32)
        warp_block_sum.compile(_target())(x=x, out=out)
        return out, x.astype(np.float64).sum(1)

    return [("ranged barrier pipeline", pipeline(ranged_pipeline)),
            ("split barrier pipeline", pipeline(split_pipeline)),
            ("warp_sum block reduction", block_sum)]
