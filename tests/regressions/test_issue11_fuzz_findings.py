"""Regressions for what the differential test of the primitives found after the
first fixes of issue 11 were merged (tests/schedule/differential)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import GLOBAL, SchedulingError, proc_from_source
from gpudsl.schedule import delete_sync, divide_loop, inline, stage_mem
from gpudsl.schedule.cursors import Cursor

NS = {k: getattr(gpudsl, k) for k in gpudsl.__all__}


def _p(text):
    return proc_from_source(text, dict(NS))


def test_a_block_cursor_where_a_statement_is_wanted_is_refused_not_a_crash():
    p = _p('''@proc
def p0(n: size, w: f32[4]):
    for j2 in seq(0, 4):
        pass
''')
    with pytest.raises(SchedulingError, match="inline: expected a call"):
        inline(p, Cursor(p, "block", (0,), 1))
    with pytest.raises(SchedulingError, match="delete_sync: expected a sync"):
        delete_sync(p, Cursor(p, "block", (0,), 1))
    q = _p('''@proc
def q0(n: size, w: f32[4]):
    w[0] = 1.0
    w[1] = 2.0
''')
    with pytest.raises(SchedulingError, match="expected one statement"):
        inline(q, Cursor(q, "block", (0,), 2))


def test_stage_mem_refuses_copies_that_every_thread_makes_of_a_shared_window():
    # every thread would copy the whole of y in and out: a race the original has not
    p = _p('''@proc
def p951(n: size, x: f32[n, 8], y: f32[n, 8]):
    for b in par(0, n) @ BLOCKS:
        for t2 in par(0, 8) @ THREADS:
            if t2 < 4:
                y[b, t2] = x[b, t2 + 4] - x[b, t2]
''')
    assert p.check().ok
    with pytest.raises(SchedulingError, match="would run in every iteration of the "
                       "parallel loop"):
        stage_mem(p, Cursor(p, "block", (0, "body", 0, "body", 0, "body", 0), 1), "y",
                  "st0", GLOBAL)


def test_stage_mem_of_a_window_each_thread_owns_is_kept():
    p = _p('''@proc
def own(n: size, x: f32[n, 8], y: f32[n, 8]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            y[b, t] = x[b, t] + 1.0
''')
    q = stage_mem(p, p.find("y[_] = _"), "y[b, t]", "r", gpudsl.REGISTER)
    assert q.check().ok
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    y0, y1 = np.zeros_like(x), np.zeros_like(x)
    gpudsl.interpret(p, x=x, y=y0)
    gpudsl.interpret(q, x=x, y=y1)
    assert np.array_equal(y0, y1)


SYNC_LOOP = '''@proc
def rounds(n: size, x: f32[n, 8], y: f32[n, 8]):
    for b in par(0, n) @ BLOCKS:
        s: f32[8] @ SHARED
        for rr in seq(0, {rounds}):
            for t in par(0, 8) @ THREADS:
                s[t] = x[b, t] + y[b, t]
            sync()
            for t in par(0, 8) @ THREADS:
                y[b, t] += s[(t + 1) % 8]
            sync()
'''


@pytest.mark.parametrize("rounds", [2, 3])
def test_divide_loop_guard_around_a_barrier_keeps_the_proof(rounds):
    # issue 13: check() follows barriers under a uniform if on seq variables, so
    # tail="guard" may put the sync() under its guard (the issue 11 workaround, which
    # refused a remainder and dropped the guard, is gone)
    p = _p(SYNC_LOOP.format(rounds=rounds))
    assert p.check().ok
    q = divide_loop(p, "rr", 2, ["o0", "ii0"], tail="guard")
    assert "if " in str(q)
    assert q.check().ok
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    y0, y1 = np.ones_like(x), np.ones_like(x)
    gpudsl.interpret(p, x=x, y=y0)
    gpudsl.interpret(q, x=x, y=y1, detect_races=True)
    assert np.array_equal(y0, y1)


def test_divide_loop_guard_around_a_barrier_with_a_remainder_races_without_second_sync():
    # the guard's twin: one barrier per round only; check() and the detector agree
    p = _p(SYNC_LOOP.format(rounds=3).replace(
        "                y[b, t] += s[(t + 1) % 8]\n            sync()\n",
        "                y[b, t] += s[(t + 1) % 8]\n"))
    q = divide_loop(p, "rr", 2, ["o0", "ii0"], tail="guard")
    rep = q.check()
    assert rep.kinds() == {"race"}, str(rep)
    x = np.arange(16, dtype=np.float32).reshape(2, 8)
    with pytest.raises(gpudsl.RaceError):
        gpudsl.interpret(q, x=x, y=np.ones_like(x), detect_races=True)
    q2 = divide_loop(p, "rr", 2, ["o0", "ii0"], tail="cut")
    assert q2.check().kinds() == {"race"}


def test_fission_that_splits_a_trailing_barrier_off_its_loop_is_refused():
    # found by the long differential run of the last session: fission with n_lifts=2
    # put the trailing sync() of the rr loop into a kernel of its own, so nothing
    # separated iteration rr's reads of s from iteration rr + 1's writes
    from gpudsl.schedule import fission, insert_sync

    p = _p('''@proc
def p2591(n: size, x: f32[n, 8], y: f32[n, 8]):
    for b in par(0, n) @ BLOCKS:
        s: f32[8] @ SHARED
        for rr in seq(0, 2):
            for t in par(0, 8) @ THREADS:
                s[t] = x[b, 7 - t] * 2.0 + y[b, t]
            sync()
            for t2 in par(0, 8) @ THREADS:
                if t2 < 4:
                    y[b, t2] = s[t2 + 4] - s[t2]
''')
    p = insert_sync(p, Cursor(p, "gap", (0, "body", 1, "body", 3)))
    assert p.check().ok
    with pytest.raises(SchedulingError, match="barriers would no longer order"):
        fission(p, Cursor(p, "gap", (0, "body", 1, "body", 3)), n_lifts=2)
