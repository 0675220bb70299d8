"""Corpus cases of issue 13 (check()'s precision): registered into
:data:`tests.analysis.corpus.CASES` by ``corpus.py`` (imported at its end).  Each
form has its safe kernel and an unsafe twin."""
from __future__ import annotations

from gpudsl import BLOCKS, SHARED, THREADS, f32, i32, par, proc, seq, size, sync

from .corpus import case

# ---------------------------------------------------------------- phases: uniform control


@case("ok")
@proc
def sync_under_seq_if(x: f32[16]):
    # the minimal form: barriers under a block-level if on a seq variable
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for ii in seq(0, 4):
            if ii > 0:
                for t in par(0, 16) @ THREADS:
                    a[t] = 1.0
                sync()
                for t in par(0, 16) @ THREADS:
                    x[t] = a[t + 1]
                sync()


@case("race")
@proc
def sync_under_seq_if_racy(x: f32[16]):
    # no barrier between the read of one iteration and the write of the next
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for ii in seq(0, 4):
            if ii > 0:
                for t in par(0, 16) @ THREADS:
                    a[t] = 1.0
                sync()
                for t in par(0, 16) @ THREADS:
                    x[t] = a[t + 1]


@case("ok")
@proc
def sync_in_triangular_loop(x: f32[16]):
    # a seq loop whose trip count is an outer seq variable (0 trips at i = 0)
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for i in seq(0, 4):
            for j in seq(0, i):
                for t in par(0, 16) @ THREADS:
                    a[t] = 1.0
                sync()
                for t in par(0, 16) @ THREADS:
                    x[t] = a[t + 1]
                sync()


@case("race")
@proc
def sync_in_triangular_loop_racy(x: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for i in seq(0, 4):
            for j in seq(0, i):
                for t in par(0, 16) @ THREADS:
                    a[t] = 1.0
                sync()
                for t in par(0, 16) @ THREADS:
                    x[t] = a[t + 1]


@case("ok")
@proc
def conditional_then_unconditional_sync(x: f32[16]):
    # the fuzzer's form: `if q == 0: sync()` before an unconditional sync()
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for q in seq(0, 1):
            for t in par(0, 16) @ THREADS:
                a[t] = 1.0
            if q == 0:
                sync()
            sync()
            for t in par(0, 16) @ THREADS:
                x[t] = a[t + 1]


@case("race")
@proc
def conditional_sync_only(x: f32[16]):
    # the barrier is skipped at q = 1
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for q in seq(0, 2):
            for t in par(0, 16) @ THREADS:
                a[t] = 1.0
            if q == 0:
                sync()
            for t in par(0, 16) @ THREADS:
                x[t] = a[t + 1]


@case("ok")
@proc
def sync_in_loop_running_once_at_least(n: size, x: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for t in par(0, 16) @ THREADS:
            a[t] = 1.0
        for j in seq(0, n):
            sync()
        for t in par(0, 16) @ THREADS:
            x[t] = a[t + 1]


@case("race")
@proc
def sync_in_loop_running_zero_times(n: size, x: f32[16]):
    # at n = 1 the loop runs zero times: no barrier
    for b in par(0, 1) @ BLOCKS:
        a: f32[17] @ SHARED
        for t in par(0, 16) @ THREADS:
            a[t] = 1.0
        for j in seq(1, n):
            sync()
        for t in par(0, 16) @ THREADS:
            x[t] = a[t + 1]


# ---------------------------------------------------------------- SHARED in a seq loop


@case("ok")
@proc
def shared_in_seq_loop(x: f32[2], y: f32[2]):
    for b in par(0, 1) @ BLOCKS:
        for it in seq(0, 2):
            tr: f32[2] @ SHARED
            for t in par(0, 2) @ THREADS:
                tr[t] = x[t]
            sync()
            for t in par(0, 2) @ THREADS:
                y[t] = tr[1 - t]
            sync()


@case("race")
@proc
def shared_in_seq_loop_racy(x: f32[2], y: f32[2]):
    # one copy per block: the read of iteration 0 and the write of iteration 1 race
    for b in par(0, 1) @ BLOCKS:
        for it in seq(0, 2):
            tr: f32[2] @ SHARED
            for t in par(0, 2) @ THREADS:
                tr[t] = x[t]
            sync()
            for t in par(0, 2) @ THREADS:
                y[t] = tr[1 - t]
