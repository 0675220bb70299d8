"""Barriers, inlining, replace and vectorize."""
from __future__ import annotations

import pytest

from gpudsl import BLOCKS, SHARED, THREADS, SchedulingError, check
from gpudsl.schedule import (delete_sync, divide_loop, inline, insert_sync, replace,
                             vectorize)

from . import procs as P
from .helpers import assert_refused, assert_same_meaning


def test_insert_sync_at_block_level():
    c = P.independent_phases.find_loop("i2")
    q = insert_sync(P.independent_phases, c.before())
    assert str(q).count("sync()") == 2
    assert_same_meaning(P.independent_phases, q, n=2)


def test_insert_sync_inside_thread_loop_is_refused():
    c = P.independent_phases.find("t[_] = _")
    with pytest.raises(SchedulingError) as e:
        insert_sync(P.independent_phases, c.after())
    assert_refused(e, "insert_sync", "procs.py")


def test_delete_sync_that_orders_conflicts_is_refused():
    with pytest.raises(SchedulingError) as e:
        delete_sync(P.blur_block, "sync()")
    text = assert_refused(e, "delete_sync", "procs.py")
    assert "t[" in text and e.value.witness


def test_delete_sync_that_orders_nothing():
    # y[b, i2] reads t[i2], written by thread i2 itself: the barrier is not needed
    q = delete_sync(P.independent_phases, "sync()")
    assert "sync()" not in str(q)
    assert check(q).ok
    assert_same_meaning(P.independent_phases, q, n=2)


def test_delete_redundant_sync():
    c = P.independent_phases.find_loop("i2")
    q = insert_sync(P.independent_phases, c.before())
    q2 = delete_sync(q, "sync() #1")
    assert str(q2).count("sync()") == 1


def test_inline():
    q = inline(P.add_rows, "vadd(_)")
    assert "y[i, k] += x[i, k]" in str(q) or "y[i," in str(q)
    assert_same_meaning(P.add_rows, q, n=3)


def test_replace_with_instr():
    q = divide_loop(P.saxpy, "i", 4, ["io", "ii"], tail="perfect")
    q2 = replace(q, "ii", P.axpy4)
    assert "axpy4(a, x[4 * io:4 * io + 4], y[4 * io:4 * io + 4])" in str(q2)
    assert_same_meaning(P.saxpy, q2, n=16)
    # a cursor into what became the call forwards to the call (an Into edit)
    body = q.find_loop("ii").body()
    inner = q2.forward(type(body)(q, "stmt", body.addr))
    assert isinstance(inner.node(), type(q2.find("axpy4(_)").node()))
    assert inner.addr == q2.forward(q.find_loop("ii")).addr
    with pytest.raises(SchedulingError) as e:
        replace(P.transpose, "j", P.axpy4)
    assert_refused(e, "replace", "procs.py")


def test_vectorize_proved_alignment():
    q = vectorize(P.tiled_copy, "v", 4)
    assert "vcopy4_GLOBAL_GLOBAL(y[b, 4 * t:4 * t + 4], x[b, 4 * t:4 * t + 4])" in str(q)
    assert_same_meaning(P.tiled_copy, q, n=2)


def test_vectorize_misaligned_is_refused():
    with pytest.raises(SchedulingError) as e:
        vectorize(P.odd_copy, "v", 4)
    text = assert_refused(e, "vectorize", "procs.py")
    assert "aligned" in text


def test_vectorize_needs_exact_width():
    with pytest.raises(SchedulingError) as e:
        vectorize(P.tiled_copy, "v", 2)
    assert_refused(e, "vectorize", "procs.py")


def test_cursor_gap_forwarding_for_sync():
    c = P.independent_phases.find_loop("i2")
    g = c.before()
    q = insert_sync(P.independent_phases, g)
    assert q.forward(c).node().iter == "i2"
    assert q.forward(c).prev().node().__class__.__name__ == "Sync"
