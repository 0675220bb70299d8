"""check()'s corpus of atomics with results, the other atomic ops and CONST memory
(issue 13): safe and unsafe twins.  Same :class:`Case` shape as ``corpus.py``."""
from __future__ import annotations

from gpudsl import (BLOCKS, CONST, SHARED, THREADS, atomic_add, atomic_and, atomic_cas,  # noqa
                    atomic_exch, atomic_inc, atomic_max, atomic_min, atomic_or, atomic_sub,
                    atomic_xor, f32, i32, i64, par, proc, seq, size, sync)

from .corpus import Case

CASES: list[Case] = []


def case(expect, repro=True, warn=False, **bindings):
    def deco(p):
        CASES.append(Case(p.name, p, expect, bindings, repro, warn))
        return p
    return deco


# ---------------------------------------------------------------- old values

@case("ok")
@proc
def ticket_own_slot(c: i32[1], tickets: i32[128]):
    """A work-queue ticket per thread, stored in the thread's own slot."""
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            k: i32
            k = atomic_add(c[0], 1)
            tickets[b * 64 + t] = k


@case("race")
@proc
def ticket_shared_scalar(c: i32[1], tickets: i32[64]):
    """Twin: the old value goes into one SHARED scalar that every thread writes."""
    for b in par(0, 1) @ BLOCKS:
        k: i32 @ SHARED
        for t in par(0, 64) @ THREADS:
            k = atomic_add(c[0], 1)
            tickets[t] = k


@case("race")
@proc
def ticket_plain_reset(c: i32[1], tickets: i32[64]):
    """Twin: an atomic and a plain write of the same counter in one phase."""
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            k: i32
            k = atomic_add(c[0], 1)
            tickets[t] = k
            if t == 63:
                c[0] = 0


@case("ok")
@proc
def ticket_reset_after_sync(c: i32[1], tickets: i32[64]):
    """Twin made safe: the reset waits behind a barrier."""
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            k: i32
            k = atomic_add(c[0], 1)
            tickets[t] = k
        sync()
        for t in par(0, 64) @ THREADS:
            if t == 0:
                c[0] = 0


@case("race", repro=False)
@proc
def ticket_as_index(c: i32[1], out: i32[64]):
    """The old value is per-thread data, never known distinct: writing out[k] is
    reported (check() cannot prove tickets distinct), data-dependent."""
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            k: i32
            k = atomic_inc(c[0], 63)
            out[k] = t


# ---------------------------------------------------------------- the other ops

@case("ok")
@proc
def every_op(n: size, a: i32[n], f: f32[n], c: i32[8], g: f32[4], old: i32[n]):
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if b * 32 + t < n:
                atomic_sub(c[0], a[b * 32 + t])
                atomic_and(c[1], a[b * 32 + t])
                atomic_or(c[2], a[b * 32 + t])
                atomic_xor(c[3], a[b * 32 + t])
                atomic_inc(c[4], 5)
                atomic_exch(c[5], 7)
                atomic_cas(c[6], 0, 1)
                atomic_max(c[7], a[b * 32 + t])
                atomic_min(g[0], f[b * 32 + t])
                atomic_exch(g[1], f[b * 32 + t])
                atomic_sub(g[2], f[b * 32 + t])
                k: i32
                k = atomic_cas(c[6], 1, 2)
                old[b * 32 + t] = k


@case("race")
@proc
def cas_then_plain_read(c: i32[1], out: i32[64]):
    """Twin: a plain read of a cell other threads update by compare-and-swap."""
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            atomic_cas(c[0], t, t + 1)
            out[t] = c[0]


@case("race")
@proc
def exch_and_plain_write(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            atomic_exch(x[t], 1.0)
            x[63 - t] = 2.0


# ---------------------------------------------------------------- CONST

@case("ok")
@proc
def const_weights(n: size, w: f32[n] @ CONST, x: f32[n], y: f32[n]):
    for b in par(0, (n + 63) // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if b * 64 + t < n:
                y[b * 64 + t] = x[b * 64 + t] * w[b * 64 + t]


@case("mapping")
@proc
def const_written(n: size, w: f32[n] @ CONST, y: f32[n]):
    for b in par(0, (n + 63) // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if b * 64 + t < n:
                w[b * 64 + t] = y[b * 64 + t]


@proc
def scale_into(m: size, v: f32[m] @ CONST):
    for i in seq(0, m):
        v[i] = v[i] * 2.0


@case("mapping")
@proc
def const_written_by_callee(w: f32[64] @ CONST, y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            scale_into(64, w)


@case("mapping")
@proc
def const_atomic(w: i32[4] @ CONST):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            atomic_add(w[t], 1)
