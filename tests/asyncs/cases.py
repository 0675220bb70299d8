"""The async-copy procs of issue 23: a staged copy, the double-buffered staged loop with
async copies, and their broken twins (a premature read, a missing wait, a wait of the
wrong depth, a missing barrier after the wait).  ``EXPECT`` gives the verdict of each."""
from __future__ import annotations

from gpudsl import (BLOCKS, SHARED, THREADS, async_commit, async_copy,  # noqa: F401
                    async_wait, f32, par, proc, seq, size, sync)

@proc
def staged(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 16) @ THREADS:
            async_copy(s[4 * t:4 * t + 4], x[b, 4 * t:4 * t + 4])
        async_commit()
        async_wait(0)
        sync()
        for t in par(0, 64) @ THREADS:
            y[b, t] = s[63 - t]

@proc
def premature(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[t], x[b, t])
            y[b, t] = s[t]
        async_commit()
        async_wait(0)

@proc
def no_wait(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 16) @ THREADS:
            async_copy(s[4 * t:4 * t + 4], x[b, 4 * t:4 * t + 4])
        async_commit()
        sync()
        for t in par(0, 64) @ THREADS:
            y[b, t] = s[63 - t]

@proc
def no_sync(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 16) @ THREADS:
            async_copy(s[4 * t:4 * t + 4], x[b, 4 * t:4 * t + 4])
        async_commit()
        async_wait(0)
        for t in par(0, 64) @ THREADS:
            y[b, t] = s[63 - t]

@proc
def double_buffered(n: size, x: f32[n, 256], y: f32[n, 256]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 256] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(buf[0, 4 * t:4 * t + 4], x[0, 4 * t:4 * t + 4])
        async_commit()
        for i in seq(0, n):
            if i + 1 < n:
                for t in par(0, 64) @ THREADS:
                    async_copy(buf[(i + 1) % 2, 4 * t:4 * t + 4], x[i + 1, 4 * t:4 * t + 4])
            async_commit()
            async_wait(1)
            sync()
            for t in par(0, 256) @ THREADS:
                y[i, t] = buf[i % 2, 255 - t] * 2.0
            sync()

@proc
def wrong_depth(n: size, x: f32[n, 256], y: f32[n, 256]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 256] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(buf[0, 4 * t:4 * t + 4], x[0, 4 * t:4 * t + 4])
        async_commit()
        for i in seq(0, n):
            if i + 1 < n:
                for t in par(0, 64) @ THREADS:
                    async_copy(buf[(i + 1) % 2, 4 * t:4 * t + 4], x[i + 1, 4 * t:4 * t + 4])
            async_commit()
            async_wait(2)
            sync()
            for t in par(0, 256) @ THREADS:
                y[i, t] = buf[i % 2, 255 - t] * 2.0
            sync()

@proc
def one_buffer(n: size, x: f32[n, 256], y: f32[n, 256]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 256] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(buf[0, 4 * t:4 * t + 4], x[0, 4 * t:4 * t + 4])
        async_commit()
        for i in seq(0, n):
            if i + 1 < n:
                for t in par(0, 64) @ THREADS:
                    async_copy(buf[0, 4 * t:4 * t + 4], x[i + 1, 4 * t:4 * t + 4])
            async_commit()
            async_wait(1)
            sync()
            for t in par(0, 256) @ THREADS:
                y[i, t] = buf[0, 255 - t] * 2.0
            sync()

@proc
def thread_level(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[t], x[b, t])
            async_commit()
            async_wait(0)
            y[b, t] = s[t] + 1.0


PROCS = {p.name: p for p in (staged, premature, no_wait, no_sync, double_buffered,
                             wrong_depth, one_buffer, thread_level)}
EXPECT = {"staged": "ok", "premature": "race", "no_wait": "race", "no_sync": "race",
          "double_buffered": "ok", "wrong_depth": "race", "one_buffer": "race",
          "thread_level": "ok"}
