"""Issue 11, memory primitives: each keeps the proc's meaning or refuses.

Accepted rewrites are compared in the interpreter on integer-valued inputs at several
sizes, parsed back from their printed form, and (for kernels) kept race-free."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, GLOBAL, REGISTER, SHARED, THREADS, SchedulingError, f32, par,
                    proc, seq, size, sync)
from gpudsl.ir.printer import print_expr
from gpudsl.proc import proc_from_source
from gpudsl.schedule import expand_dim, lift_alloc, set_memory, sink_alloc, stage_mem


def _args(p, sizes, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for prm in p.ir.params:
        if prm.kind == "size":
            out[prm.name] = sizes[prm.name]
        else:
            shp = tuple(int(eval(print_expr(e), {}, dict(sizes))) for e in prm.shape)
            out[prm.name] = rng.integers(-4, 5, size=shp).astype(np.float32)
    return out


def same_meaning(p1, p2, *size_sets, races=False):
    for sizes in size_sets:
        for seed in (0, 1):
            a = _args(p1, sizes, seed)
            b = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in a.items()}
            gpudsl.interpret(p1, **a)
            gpudsl.interpret(p2, detect_races=races, **b) if races else \
                gpudsl.interpret(p2, **b)
            for k, v in a.items():
                if isinstance(v, np.ndarray):
                    np.testing.assert_array_equal(b[k], v, err_msg=f"{k} at {sizes}")


def parses_back(p, ns=None):
    assert proc_from_source(str(p), dict(ns or {})) == p


# ------------------------------------------------------------------ sink_alloc


@proc
def carried(n: size, x: f32[n], y: f32[n]):
    c: f32[2]
    for i in seq(0, n):
        c[1] = 1.0
        y[i] = c[0] + c[1]
        c[0] = x[i]


@proc
def per_iteration(n: size, x: f32[n], y: f32[n]):
    c: f32[2]
    for i in seq(0, n):
        for j in seq(0, 2):
            c[j] = x[i] + j
        y[i] = c[0] + c[1]


def test_sink_alloc_refuses_a_value_carried_in_one_element():
    with pytest.raises(SchedulingError, match="flows from one iteration"):
        sink_alloc(carried, "c")


def test_sink_alloc_per_element_overwrite_is_proved():
    q = sink_alloc(per_iteration, "c")
    assert str(q).index("for i") < str(q).index("c: f32[2]")
    same_meaning(per_iteration, q, {"n": 1}, {"n": 5})
    parses_back(q)


# ------------------------------------------------------------------ expand_dim


@proc
def first_init(n: size, x: f32[n, 4], y: f32[n]):
    a: f32
    for i in seq(0, n):
        if i == 0:
            a = 0.0
        for j in seq(0, 4):
            a += x[i, j]
        y[i] = a


@proc
def each_init(n: size, x: f32[n, 4], y: f32[n]):
    a: f32
    for i in seq(0, n):
        a = 0.0
        for j in seq(0, 4):
            a += x[i, j]
        y[i] = a


def test_expand_dim_refuses_an_accumulator_carried_across_iterations():
    with pytest.raises(SchedulingError, match="is read where it has another"):
        expand_dim(first_init, "a", "n", "i")


def test_expand_dim_of_a_per_iteration_accumulator():
    q = expand_dim(each_init, "a", "n", "i")
    assert "a[i] += x[i, j]" in str(q)
    same_meaning(each_init, q, {"n": 1}, {"n": 3})
    parses_back(q)


# ------------------------------------------------------------------ set_memory / mapping


@proc
def reverse_tile(x: f32[64], y: f32[64]):
    for b in par(0, 2) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[32 * b + t]
        sync()
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = s[31 - t]


@proc
def own_tile(x: f32[64], y: f32[64]):
    for b in par(0, 2) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[32 * b + t]
        sync()
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = 2.0 * s[t]


@proc
def reg_tile(x: f32[64], y: f32[64]):
    for b in par(0, 2) @ BLOCKS:
        s: f32[32] @ REGISTER
        for t in par(0, 32) @ THREADS:
            s[t] = x[32 * b + t]
        for t in par(0, 32) @ THREADS:
            y[32 * b + t] = s[t]


def test_set_memory_shared_read_by_another_thread_stays_shared():
    assert reverse_tile.check().ok
    with pytest.raises(SchedulingError, match="belongs to another thread"):
        set_memory(reverse_tile, "s", REGISTER)


def test_set_memory_to_register_where_each_thread_owns_its_row():
    q = set_memory(own_tile, "s", REGISTER)
    assert q.check().ok
    same_meaning(own_tile, q, {}, races=True)
    parses_back(q)


def test_expand_dim_of_a_block_level_register_array_is_refused():
    assert reg_tile.check().ok
    with pytest.raises(SchedulingError, match="mapping rule"):
        expand_dim(reg_tile, "s", 2, "0")


@proc
def fill4(v: [f32][4] @ GLOBAL):
    for i in seq(0, 4):
        v[i] = 1.0


@proc
def calls_fill(y: f32[4]):
    t: f32[4]
    fill4(t[0:4])
    for i in seq(0, 4):
        y[i] = t[i]


def test_set_memory_of_an_argument_the_callee_wants_in_global():
    with pytest.raises(SchedulingError, match="GLOBAL memory"):
        set_memory(calls_fill, "t", SHARED)


# ------------------------------------------------------------------ lift_alloc


@proc
def two_branches(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        if i < 2:
            a: f32
            a = x[i]
            y[i] = a
        else:
            a: f32
            a = 2.0 * x[i]
            y[i] = a


@proc
def two_loops(n: size, x: f32[n], y: f32[n]):
    for j in seq(0, n):
        a: f32
        a = 3.0 * x[j]
        y[j] = a
    for i in seq(0, n):
        a: f32
        a = x[i] + y[i]
        y[i] = a


@proc
def reads_fresh(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        a: f32
        y[i] = a
        a = x[i]


def test_lift_alloc_out_of_one_branch_renames_it():
    q = lift_alloc(two_branches, "a")
    parses_back(q)
    same_meaning(two_branches, q, {"n": 1}, {"n": 4})


def test_lift_alloc_past_an_allocation_of_the_same_name():
    q = lift_alloc(two_loops, two_loops.find_alloc("a #1"))
    parses_back(q)
    same_meaning(two_loops, q, {"n": 1}, {"n": 4})


def test_lift_alloc_refuses_when_a_read_would_see_another_iteration():
    with pytest.raises(SchedulingError, match="another iteration"):
        lift_alloc(reads_fresh, "a")


# ------------------------------------------------------------------ stage_mem


@proc
def halves(x: f32[8]):
    for i in seq(0, 4):
        x[i] = x[i + 4] * 2.0 + x[i]


@proc
def halves_overlap(x: f32[8]):
    for i in seq(0, 4):
        x[i] = x[i + 3] * 2.0


@proc
def ragged(n: size, x: f32[n]):
    for io in seq(0, (n + 3) // 4):
        for ii in seq(0, 4):
            if 4 * io + ii < n:
                x[4 * io + ii] += 1.0


@proc
def guarded_point(n: size, m: size, x: f32[n]):
    for i in seq(0, m):
        if i < n:
            x[i] += 1.0


def test_stage_mem_stages_the_covered_accesses_only():
    q = stage_mem(halves, halves.find_loop("i"), "x[0:4]", "t", GLOBAL)
    assert "x[i + 4]" in str(q) and "t[i] = x[i + 4] * 2.0 + t[i]" in str(q)
    same_meaning(halves, q, {})
    parses_back(q)


def test_stage_mem_refuses_an_uncovered_access_that_touches_the_window():
    with pytest.raises(SchedulingError, match="misses"):
        stage_mem(halves_overlap, halves_overlap.find_loop("i"), "x[0:4]", "t", GLOBAL)


def test_stage_mem_window_partly_outside_the_array_guards_the_copies():
    q = stage_mem(ragged, ragged.find_loop("ii"), "x[4 * io:4 * io + 4]", "t", GLOBAL)
    assert "if 4 * io + t_in0 < n:" in str(q)
    same_meaning(ragged, q, {"n": 1}, {"n": 5}, {"n": 8}, {"n": 11})
    parses_back(q)


def test_stage_mem_of_a_point_under_a_guard():
    q = stage_mem(guarded_point, guarded_point.find("if _: _"), "x[i]", "t", GLOBAL)
    assert "if i < n:" in str(q)
    same_meaning(guarded_point, q, {"n": 2, "m": 5}, {"n": 5, "m": 2}, {"n": 3, "m": 3})
    parses_back(q)
