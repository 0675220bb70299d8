"""Issue 11: one inliner (gpudsl/ir/inline.py) with one meaning: scalars are passed
by value, windows alias the caller's array, and the callee's names never capture
the caller's (legality checks inline calls through it too)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, THREADS, SchedulingError, f32, par, proc, proc_from_source, seq,
                    size, sync)
from gpudsl.ir.nodes import Call
from gpudsl.ir.visitor import walk
from gpudsl.schedule import fission, inline, parallelize_loop, reorder_loops


@proc
def sub(a: f32, x: [f32][2]):
    x[0] = 5.0
    x[1] = a


@proc
def by_value(x: f32[2]):
    sub(x[0], x[0:2])


@proc
def by_value_in_threads(x: f32[2]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            sub(x[0], x[0:2])


@proc
def sub_twice(a: f32, y: [f32][2]):
    sub(a, y[0:2])


@proc
def by_value_nested(x: f32[3]):
    sub_twice(x[1], x[1:3])


def _run(p, **arrays):
    out = {k: v.copy() for k, v in arrays.items()}
    gpudsl.interpret(p, **out)
    return out


def _x():
    return np.array([1.0, 0.0], np.float32)


# ------------------------------------------------------------------ by value


@pytest.mark.parametrize("p", [by_value, by_value_in_threads], ids=lambda p: p.name)
def test_inline_passes_scalars_by_value(p):
    assert list(_run(p, x=_x())["x"]) == [5, 1]
    q = inline(p, "sub(_)")
    assert list(_run(q, x=_x())["x"]) == [5, 1]
    assert not any(isinstance(n, Call) for n in walk(q.ir.body))


def test_by_value_temporary_lives_where_the_frontend_puts_allocations():
    host = str(inline(by_value, "sub(_)"))
    assert "a: f32 @ GLOBAL" in host
    threads = str(inline(by_value_in_threads, "sub(_)"))
    assert "a: f32 @ REGISTER" in threads


@pytest.mark.parametrize("p", [by_value, by_value_in_threads], ids=lambda p: p.name)
def test_inlined_proc_prints_and_parses_back_equal(p):
    q = inline(p, "sub(_)")
    r = proc_from_source(str(q), {"sub": sub})
    assert r == q
    assert str(r) == str(q)
    assert list(_run(r, x=_x())["x"]) == [5, 1]


def test_inline_one_level_keeps_the_nested_call_and_its_meaning():
    x = np.array([7.0, 1.0, 0.0], np.float32)
    assert list(_run(by_value_nested, x=x)["x"]) == [7, 5, 1]
    q = inline(by_value_nested, "sub_twice(_)")
    assert "sub(" in str(q)
    r = proc_from_source(str(q), {"sub": sub, "sub_twice": sub_twice})
    assert r == q
    assert list(_run(q, x=x)["x"]) == [7, 5, 1]
    q2 = inline(q, "sub(_)")
    assert list(_run(q2, x=x)["x"]) == [7, 5, 1]


def _inline_all(p):
    while any(isinstance(n, Call) for n in walk(p.ir.body)):
        p = inline(p, _first_call(p))
    return p


def _first_call(p):
    return next(f"{n.proc.name}(_)" for n in walk(p.ir.body) if isinstance(n, Call))


@pytest.mark.parametrize("p", [by_value, by_value_nested], ids=lambda p: p.name)
def test_generated_code_of_the_inlined_proc_passes_by_value(p):
    x = np.array([7.0, 1.0, 0.0], np.float32)[:p.ir.params[0].shape[0].val]
    want = _run(p, x=x)["x"]
    for q in (p, _inline_all(p)):
        got = x.copy()
        q.compile("emulator")(x=got)
        np.testing.assert_array_equal(got, want)


def test_check_sees_the_value_passed():
    assert by_value_in_threads.check().ok
    assert inline(by_value_in_threads, "sub(_)").check().ok


@proc
def zero_then_fill(a: f32, x: [f32][4], y: [f32][4]):
    for t in par(0, 4) @ THREADS:
        x[t] = 0.0
    sync()
    for t in par(0, 4) @ THREADS:
        y[t] = a


@proc
def reads_before_the_barrier(x: f32[8], y: f32[8]):
    for b in par(0, 2) @ BLOCKS:
        zero_then_fill(x[4 * b], x[4 * b:4 * b + 4], y[4 * b:4 * b + 4])


def test_check_reads_a_scalar_argument_at_the_call():
    """``a`` is read before the first barrier, where thread 0 writes x[4 * b]: a race
    (check() used to read it after the barrier and prove the proc race-free)."""
    y = _run(reads_before_the_barrier, x=np.arange(1, 9, dtype=np.float32),
             y=np.zeros(8, np.float32))["y"]
    assert list(y) == [1, 1, 1, 1, 5, 5, 5, 5]
    rep = reads_before_the_barrier.check()
    assert "race" in rep.kinds(), str(rep)
    assert any(loc.line == reads_before_the_barrier.ir.body[0].body[0].loc.line
               for d in rep.of_kind("race") for loc in d.locations), str(rep)


# ------------------------------------------------------------------ capture


@proc
def h(n: size, w: [f32][n], v: f32):
    for i in seq(0, n):
        w[i] += v


@proc
def capture(w: f32[4]):
    for l in seq(1, 3):
        for i in seq(0, 4):
            h(2, w[l:l + 2], w[i // 2])


@proc
def capture_fission(w: f32[4], y: f32[4]):
    for l in seq(1, 3):
        for i in seq(0, 4):
            h(2, w[l:l + 2], w[i // 2])
            y[i] = w[i] + y[i]


@proc
def capture_par(y: f32[5]):
    for i in seq(0, 3):
        h(2, y[i:i + 2], 1.0)


def _meaning_kept_or_refused(p, rewrite, **arrays):
    before = _run(p, **arrays)
    try:
        q = rewrite()
    except SchedulingError:
        return None
    after = _run(q, **arrays)
    for k in before:
        np.testing.assert_array_equal(after[k], before[k], err_msg=f"{k} differs")
    return q


def test_reorder_loops_sees_the_callee_loop_apart_from_the_caller_loop():
    w = np.array([1, 2, 3, 4], np.float32)
    assert list(_run(capture, w=w)["w"]) == [1, 16, 51, 38]
    _meaning_kept_or_refused(capture, lambda: reorder_loops(capture, "l"), w=w)


def test_fission_sees_the_callee_loop_apart_from_the_caller_loop():
    w = np.array([1, 2, 3, 4], np.float32)
    y = np.array([1, 2, 3, 4], np.float32)
    p = capture_fission
    _meaning_kept_or_refused(p, lambda: fission(p, p.find("h(_)").after()), w=w, y=y)


def test_parallelize_loop_sees_overlapping_windows_of_iterations():
    with pytest.raises(SchedulingError):
        parallelize_loop(capture_par, "i")
    assert capture_par.check().ok  # a seq loop: no race before the rewrite


def test_inline_renames_the_callee_loop_away_from_the_caller_names():
    w = np.array([1, 2, 3, 4], np.float32)
    q = inline(capture, "h(_)")
    assert "for i_1 in seq(0, 2)" in str(q)
    np.testing.assert_array_equal(_run(q, w=w)["w"], _run(capture, w=w)["w"])
    assert proc_from_source(str(q), {}) == q
