"""Rewrite primitives around ranged and split barriers (docs/language.md (synchronization)): insert_sync and
delete_sync learn ranges; no primitive moves an access across a barrier, an arrive
or a wait without check()'s proof (schedule/sync_guard.py)."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import GLOBAL, SchedulingError, check, interpret, proc_from_source
from gpudsl.schedule import delete_sync, divide_loop, fission, insert_sync, set_unroll

from .cases import PROCS
from .test_language import _args


def _same_meaning(p, q):
    a, b = _args(p, n=5, seed=3), _args(p, n=5, seed=3)
    interpret(p, **a)
    interpret(q, **b)
    for k in a:
        assert np.array_equal(a[k], b[k])


def test_insert_ranged_sync_makes_the_producer_consumer_loop_proved():
    p = PROCS["pc_nosync"]
    q = insert_sync(p, p.find_loop("t #1").before(), threads=(0, 64))
    assert "sync(0, 64)" in str(q)
    assert proc_from_source(str(q)) == q
    assert check(q).ok
    _same_meaning(p, q)


@pytest.mark.parametrize("threads", [(64, 0), (0,), "0, 64", (-32, 0), (0.0, 32)])
def test_insert_sync_checks_its_range(threads):
    p = PROCS["pc_nosync"]
    with pytest.raises(SchedulingError, match="threads must be"):
        insert_sync(p, p.find_loop("t #1").before(), threads=threads)


def test_delete_ranged_sync_that_orders_is_refused():
    with pytest.raises(SchedulingError, match="orders accesses"):
        delete_sync(PROCS["pc_sync"], "sync(0, 64)")


def test_delete_ranged_sync_that_orders_nothing():
    p = proc_from_source("""
@proc
def p(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[t] = x[t]
        sync(0, 64)
        for t in par(0, 64) @ THREADS:
            y[t] = y[t] + 1.0
""")
    q = delete_sync(p, "sync(0, 64)")
    assert "sync" not in str(q) and check(q).ok


def test_fission_between_arrive_and_wait_is_refused():
    """Sequentially the split is legal (each iteration has its own row of s); the
    arrives would all run before the first wait: a phase parity overrun."""
    p = proc_from_source("""
@proc
def p(n: size, x: f32[n, 64], y: f32[n, 64]):
    assert n <= 8
    for b in par(0, 1) @ BLOCKS:
        s: f32[8, 64] @ SHARED
        bar: barrier @ SHARED
        for i in seq(0, n):
            for t in par(0, 64) @ THREADS:
                s[i, t] = x[i, t]
            arrive(bar, 0, 64)
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[i, 63 - t]
""")
    assert check(p).ok
    with pytest.raises(SchedulingError, match="ranged or split barrier") as e:
        fission(p, p.find("arrive(bar, 0, 64)").after())
    assert "parity" in str(e.value)


def test_fission_across_a_ranged_barrier_is_refused():
    p = PROCS["pc_sync"]
    with pytest.raises(SchedulingError):
        fission(p, p.find("sync(0, 64)").after())


def test_rewrites_that_keep_the_orderings_pass():
    for name in ("pc_sync", "pc_split", "split_loop"):
        p = PROCS[name]
        q = set_unroll(p, "i", True)
        assert check(q).ok
        r = divide_loop(p, "i", 2, ["io", "ii"], tail="cut")
        assert check(r).ok, str(check(r))
        _same_meaning(p, r)


@pytest.mark.parametrize("call", [
    lambda p: __import__("gpudsl.schedule", fromlist=["x"]).set_memory(p, "full", GLOBAL),
    lambda p: __import__("gpudsl.schedule", fromlist=["x"]).lift_alloc(p, "full"),
    lambda p: __import__("gpudsl.schedule", fromlist=["x"]).sink_alloc(p, "full"),
    lambda p: __import__("gpudsl.schedule", fromlist=["x"]).expand_dim(p, "full", "2", "0"),
])
def test_alloc_primitives_leave_split_barriers_alone(call):
    """Found by the differential test: set_memory and lift_alloc made procs that do not
    parse back (a barrier in GLOBAL memory, a barrier outside the block)."""
    with pytest.raises(SchedulingError, match="split barrier, not an array"):
        call(PROCS["pc_split"])


def test_guard_remembers_only_that_a_proc_has_no_barrier_issue(monkeypatch):
    """A schedule's result is asked again as the next primitive's input: the guard
    remembers that it has no barrier issue (schedule/memo.py); issues themselves are
    asked afresh each time, so their messages are the proc's own."""
    from gpudsl.schedule import memo, sync_guard
    monkeypatch.setattr(memo, "_RECENT", [])   # answers of earlier tests
    asked = []
    real = sync_guard.barrier_issues
    monkeypatch.setattr(sync_guard, "barrier_issues", lambda ir: asked.append(ir) or real(ir))
    p = PROCS["pc_split"]
    q = set_unroll(p, "i", True)
    r = divide_loop(q, "i", 2, ["io", "ii"], tail="cut")
    assert len(asked) == 3 and len({id(x) for x in asked}) == 3   # p, q's IR, r's IR
    assert check(r).ok
    _same_meaning(p, r)
    bad = PROCS["wait_never"]
    assert real(bad.ir)   # a barrier issue: asked again each time, same answer
    asked.clear()
    first = sync_guard._barrier_issues(bad.ir)
    again = sync_guard._barrier_issues(bad.ir)
    assert len(asked) == 2 and first and [d.message for d in first] == [d.message for d in again]
