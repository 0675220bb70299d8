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


# ---------------------------------------------------------------- bitwise arithmetic


@case("ok")
@proc
def xor_butterfly_guarded(x: f32[64], y: f32[64]):
    # the form: a shift amount from a loop counter, under (t ^ (1 << k)) > t
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 64) @ THREADS:
                if (t ^ (1 << k)) > t:
                    s[t] = s[t] + s[t ^ (1 << k)]
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


@case("race")
@proc
def xor_butterfly_unguarded(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 64) @ THREADS:
                s[t] = s[t] + s[t ^ (1 << k)]
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


@case("ok")
@proc
def bit_reversal_permute(x: f32[8], y: f32[8]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[8] @ SHARED
        for t in par(0, 8) @ THREADS:
            s[((t & 1) << 2) | (t & 2) | ((t >> 2) & 1)] = x[t]
        sync()
        for t in par(0, 8) @ THREADS:
            y[t] = s[t]


@case("race")
@proc
def bit_reversal_collide(x: f32[8], y: f32[8]):
    # drops the middle bit: two threads write one cell
    for b in par(0, 1) @ BLOCKS:
        s: f32[8] @ SHARED
        for t in par(0, 8) @ THREADS:
            s[((t & 1) << 2) | ((t >> 2) & 1)] = x[t]
        sync()
        for t in par(0, 8) @ THREADS:
            y[t] = s[t]


@case("ok")
@proc
def morton_interleave(x: f32[4, 4], y: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        for i in par(0, 4) @ THREADS:
            for j in par(0, 4) @ THREADS:
                y[(j & 1) | ((i & 1) << 1) | ((j & 2) << 1) | ((i & 2) << 2)] = x[i, j]


@case("race")
@proc
def morton_interleave_collide(x: f32[4, 4], y: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        for i in par(0, 4) @ THREADS:
            for j in par(0, 4) @ THREADS:
                y[(j & 1) | ((i & 1) << 1) | ((j & 2) << 1) | ((i & 1) << 2)] = x[i, j]


@case("ok")
@proc
def shift_by_counter_stride(x: f32[64], y: f32[64]):
    # tree reduction with a stride 1 << k from a loop counter
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 64) @ THREADS:
                if t % (2 << k) == 0:
                    s[t] = s[t] + s[t + (1 << k)]
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[t]


# ---------------------------------------------------------------- values


@case("ok")
@proc
def same_cell_read_twice_never_taken(buf: f32[64, 4], out: f32[1]):
    # one thread's two reads of buf[y, k] in one condition are one value
    for b in par(0, 1) @ BLOCKS:
        for y in par(0, 64) @ THREADS:
            for k in seq(0, 4):
                buf[y, k] = 2.0
        for y in par(0, 64) @ THREADS:
            for k in seq(0, 4):
                if buf[y, k] == 0 and buf[y, k] != 0:
                    out[0] = 1.0


@case("ok")
@proc
def same_int_cell_read_twice_never_taken(buf: i32[64, 4], out: f32[1]):
    for b in par(0, 1) @ BLOCKS:
        for y in par(0, 64) @ THREADS:
            for k in seq(0, 4):
                buf[y, k] = 2
        for y in par(0, 64) @ THREADS:
            for k in seq(0, 4):
                if buf[y, k] == 0 and buf[y, k] != 0:
                    out[0] = 1.0


@case("race", repro=False)
@proc
def same_cell_read_twice_maybe_taken(buf: f32[64, 4], out: f32[1]):
    for b in par(0, 1) @ BLOCKS:
        for y in par(0, 64) @ THREADS:
            for k in seq(0, 4):
                buf[y, k] = 2.0
        for y in par(0, 64) @ THREADS:
            for k in seq(0, 4):
                if buf[y, k] == 0 or buf[y, k] != 0:
                    out[0] = 1.0


@case("race", repro=False)
@proc
def float_nan_guard_may_be_taken(buf: f32[64], out: f32[1]):
    # false for every real, true for NaN: NaN is modelled
    for b in par(0, 1) @ BLOCKS:
        for y in par(0, 64) @ THREADS:
            if not (buf[y] < 0.0) and not (buf[y] >= 0.0):
                out[0] = 1.0


@case("ok")
@proc
def index_local_from_thread(x: f32[64], out: f32[64]):
    # `j = t; out[j] = ...` is `out[t] = ...`
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            j: i32
            j = t
            out[j] = x[t]


@case("race")
@proc
def index_local_collide(x: f32[64], out: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            j: i32
            j = t // 2
            out[j] = x[t]


@case("ok")
@proc
def index_local_in_seq_loop(n: size, x: f32[n, 64], out: f32[n, 64]):
    assert n <= 1024
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, n):
                r: i32
                r = n - 1 - i
                if r >= 0:
                    out[r, t] = x[i, t]


@case({"race", "bounds"}, repro=False)
@proc
def index_local_assigned_twice(x: f32[64], out: f32[64]):
    # two assignments: the local is data again
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            j: i32
            j = t
            j = t + 1
            out[j] = x[t]


@case("bounds", repro=False)
@proc
def index_local_may_wrap(n: size, x: f32[n, 64], out: f32[n, 64]):
    # without a bound on n, n - 1 - i may not fit the i32 local: not proved
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, n):
                r: i32
                r = n - 1 - i
                if r >= 0:
                    out[r, t] = x[i, t]
