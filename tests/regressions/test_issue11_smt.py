"""Issue 11: one SMT layer for check() and the legality of the rewrite primitives."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import (BLOCKS, SHARED, THREADS, SchedulingError, check, f32, par, proc, seq,
                    size, sync)
from gpudsl.schedule import cut_loop, delete_sync, divide_loop


@proc
def copy8(n: size, x: f32[n], y: f32[n]):
    assert n >= 8
    for i in seq(0, n):
        y[i] = x[i]


def _run(p, n=8):
    x = np.arange(n, dtype=np.float32) + 1
    y = np.zeros(n, dtype=np.float32)
    p.interpret(n=n, x=x, y=y)
    return y


def test_cut_loop_three_argument_max_is_never_out_of_bounds():
    # max(0, 4, n + 5) is n + 5 > n: the cut lies outside the loop's range.  The old
    # legality encoder read only max(0, 4) and accepted an out-of-bounds proc.
    try:
        q = cut_loop(copy8, "i", "max(0, 4, n + 5)")
    except SchedulingError:
        return
    assert check(q).ok
    assert np.array_equal(_run(q), _run(copy8))


def test_cut_loop_three_argument_min_is_proved():
    # min(8, 4, n) is 4: a legal cut; the encoder must model all three arguments
    try:
        q = cut_loop(copy8, "i", "min(8, n, 4)")
    except SchedulingError as e:
        assert "cut_loop" in str(e)
        return
    assert check(q).ok
    assert np.array_equal(_run(q), _run(copy8))


def test_cut_loop_one_argument_min_raises_scheduling_error():
    with pytest.raises(SchedulingError):
        cut_loop(copy8, "i", "min(n)")


@proc
def shift_after_loop(n: size, K: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        s: f32[33] @ SHARED
        for k in seq(0, K):
            for t in par(0, 32) @ THREADS:
                s[t] = x[b, t]
            sync()
        for t2 in par(0, 32) @ THREADS:
            y[b, t2] = s[t2 + 1]


def test_delete_sync_of_loop_sees_the_code_after_the_loop():
    # without the barrier, the last iteration's write s[t] races with the read
    # s[t2 + 1] after the loop (the old check looked at the loop body only)
    assert check(shift_after_loop).kinds() <= {"warning"} or check(shift_after_loop).ok
    with pytest.raises(SchedulingError) as e:
        delete_sync(shift_after_loop, "sync()")
    assert "delete_sync" in str(e.value)


@proc
def own_rows(n: size, K: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        s: f32[32] @ SHARED
        for k in seq(0, K):
            for t in par(0, 32) @ THREADS:
                s[t] = x[b, t]
            sync()
        for t2 in par(0, 32) @ THREADS:
            y[b, t2] = s[t2]


def test_delete_sync_that_orders_nothing_in_a_loop_is_accepted():
    q = delete_sync(own_rows, "sync()")
    assert "sync()" not in str(q)
    assert check(q).ok


def test_legality_uses_the_shared_solver():
    from gpudsl.ir import smt

    before = smt.queries()
    divide_loop(copy8, "i", 4, ["io", "ii"], tail="cut")
    cut_loop(copy8, "i", "4")
    assert smt.queries() > before


def test_one_smt_layer():
    # the Z3 solvers and the encoder live in gpudsl/ir/smt.py only
    import pathlib
    import re

    import gpudsl
    import gpudsl.schedule.legality as legality

    root = pathlib.Path(gpudsl.__file__).parent
    def defining(pattern):
        return sorted(str(f.relative_to(root)) for f in root.rglob("*.py")
                      if re.search(pattern, f.read_text(), re.M))

    # the solver in ir/smt_solver.py, the encoder in ir/smt.py; their helpers (memo,
    # ints, scope, interrupt) beside them in the same layer, never elsewhere
    assert defining(r"z3\.Solver\(") == ["ir/smt_solver.py"]
    assert defining(r"^class Encoder\b") == ["ir/smt.py"]
    assert all(f.startswith("ir/smt") for f in defining(r"^class Enc"))
    assert not hasattr(legality, "Enc")
    with pytest.raises(ImportError):
        import gpudsl.analysis.smt  # noqa: F401


@proc
def wrap_race(n: size, K: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        s: f32[32] @ SHARED
        for k in seq(0, K):
            for t in par(0, 32) @ THREADS:
                s[t] = x[b, t]
            sync()
            for t2 in par(0, 32) @ THREADS:
                y[b, t2] = s[31 - t2]
            sync()


def test_delete_sync_inside_a_loop_body_is_refused():
    with pytest.raises(SchedulingError):
        delete_sync(wrap_race, "sync()")
    with pytest.raises(SchedulingError):
        delete_sync(wrap_race, "sync() #1")
