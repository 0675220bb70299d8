"""Primitives on procs with async copies (SPEC 2.8): a statement never moves across an
async_commit / async_wait (reorder_stmts), a barrier that orders a copy's landing is
not deleted, a rewrite whose result has an access in flight is refused by the async
guard; rewrites that keep the order are accepted and still prove."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import SchedulingError
from gpudsl.schedule import (delete_sync, divide_loop, expand_dim, reorder_stmts, rotate_loop,
                             stage_mem)

from .cases import PROCS
from .test_language import _args


def _same(p, q, n=3):
    a, b = _args(p, n=n), _args(p, n=n)
    gpudsl.interpret(p, **a)
    gpudsl.interpret(q, detect_races=True, **b)
    assert np.array_equal(a["y"], b["y"])


def test_reorder_refuses_async_statements():
    p = PROCS["double_buffered"]
    with pytest.raises(SchedulingError, match="synchronizing statement"):
        reorder_stmts(p, p.find("async_commit()").expand(0, 1))
    with pytest.raises(SchedulingError, match="synchronizing statement"):
        reorder_stmts(p, p.find("async_commit() #1").expand(0, 1))


@pytest.mark.parametrize("which", ["sync()", "sync() #1"])
def test_delete_sync_refused(which):
    with pytest.raises(SchedulingError):
        delete_sync(PROCS["double_buffered"], which)


def test_guard_refuses_a_premature_result():
    """Moving the use into the copy's thread loop (here: by hand-built IR through a
    primitive that would not know better) is caught by the async guard."""
    from gpudsl.schedule.async_guard import broken_async
    p, bad = PROCS["staged"], PROCS["no_sync"]
    why = broken_async(p.ir, bad.ir)
    assert why is not None and "in flight" in why[0]
    assert broken_async(p.ir, p.ir) is None


def test_accepted_rewrites_keep_the_proof():
    p = PROCS["double_buffered"]
    q = divide_loop(p, "i", 2, ["io", "ii"], tail="cut")
    assert q.check().ok
    _same(p, q, n=5)
    r = rotate_loop(p, "i", 1)
    assert r.check().ok
    _same(p, r)
    s = expand_dim(PROCS["staged"], "s", 1, "0")
    assert "async_copy(s[0, 4 * t:4 * t + 4]" in str(s) and s.check().ok
    _same(PROCS["staged"], s)


def test_stage_mem_refuses_async_copied_array():
    p = PROCS["staged"]
    with pytest.raises(SchedulingError, match="async copy"):
        stage_mem(p, "for t in _: _", "x[b, 0:64]", "xs")
