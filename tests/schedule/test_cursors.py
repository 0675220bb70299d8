"""Cursors, patterns and forwarding."""
from __future__ import annotations

import pytest

from gpudsl import REGISTER, SchedulingError
from gpudsl.ir.nodes import Alloc, Assign, For, Read, Reduce
from gpudsl.schedule import (divide_loop, fission, find, reorder_loops, simplify,
                             stage_mem, unroll_loop)

from . import procs as P


def test_find_loop_and_occurrences():
    c = P.two_loops.find_loop("i")
    assert isinstance(c.node(), For) and c.node().iter == "i"
    q = fission(P.rowsum, P.rowsum.find("s[_] = _").after())
    c0, c1 = q.find_loop("i"), q.find_loop("i #1")
    assert c0.addr != c1.addr and c1.addr[-1] == 1
    assert len(q.find_loop("i", many=True)) == 2
    with pytest.raises(SchedulingError):
        q.find_loop("i #2")


def test_statement_and_expression_patterns():
    assert isinstance(P.rowsum.find("s[_] = _").node(), Assign)
    assert isinstance(P.rowsum.find("s[_] += _").node(), Reduce)
    assert isinstance(P.rowsum.find("for j in _: _").node(), For)
    e = P.scale2.find("x[_] * a")
    assert e.kind == "expr" and e.node().op == "*"
    assert len(P.scale2.find("x[_]", many=True)) == 2
    assert isinstance(P.blur_block.find("t: _").node(), Alloc)
    assert isinstance(P.blur_block.find_alloc("t").node(), Alloc)
    assert P.blur_block.find("sync()").node().__class__.__name__ == "Sync"
    with pytest.raises(SchedulingError):
        P.rowsum.find("z[_] = _")


def test_navigation():
    c = P.rowsum.find("s[_] += _")
    loop_j = c.parent()
    assert loop_j.node().iter == "j"
    assert loop_j.parent().node().iter == "i"
    b = loop_j.parent().body()
    assert len(b.node()) == 2
    g = c.parent().before()
    assert g.kind == "gap" and g.addr == loop_j.addr
    assert c.parent().after().addr[-1] == loop_j.addr[-1] + 1
    assert loop_j.prev().node().name == "s"


def test_forwarding_through_a_chain():
    red = P.rowsum.find("s[_] += _")
    loop_i = P.rowsum.find_loop("i")
    q = stage_mem(P.rowsum, loop_i.body(), "s[i]", "acc", REGISTER)
    q = divide_loop(q, "j", 2, ["jo", "ji"], tail="guard")
    q = simplify(q)
    f = q.forward(red)
    assert isinstance(f.node(), Reduce) and f.node().name == "acc"
    assert q.forward(loop_i).node().iter == "i"
    # forwarding is transitive from any ancestor
    assert q.forward(loop_i) == q.forward(q.forward(loop_i))


def test_forwarding_reorder_and_fission():
    loop_i = P.transpose.find_loop("i")
    stmt = P.transpose.find("y[_] = _")
    q = reorder_loops(P.transpose, loop_i)
    assert q.forward(loop_i).node().iter == "i"
    assert isinstance(q.forward(stmt).node(), Assign)
    c = P.rowsum.find("s[_] = _")
    inner = P.rowsum.find_loop("j")
    q = fission(P.rowsum, c.after())
    assert q.forward(inner).node().iter == "j"
    assert q.forward(c).node().name == "s"


def test_forwarding_removed_statement_fails_cleanly():
    loop = P.copy16.find_loop("i")
    q = divide_loop(P.copy16, loop, 4, ["io", "ii"], tail="perfect")
    ii = q.find_loop("ii")
    q2 = unroll_loop(q, ii)
    with pytest.raises(SchedulingError) as e:
        q2.forward(ii)
    assert e.value.primitive == "forward"


def test_strings_and_cursors_interchangeable():
    a = divide_loop(P.saxpy, "i", 16, ["io", "ii"], tail="perfect")
    b = divide_loop(P.saxpy, P.saxpy.find_loop("i"), 16, ["io", "ii"], tail="perfect")
    assert a == b


def test_forwarding_stage_and_lift():
    red = P.rowsum.find("s[_] += _")
    loop_j = P.rowsum.find_loop("j")
    q = stage_mem(P.rowsum, P.rowsum.find_loop("i").body(), "s[i]", "acc", REGISTER)
    from gpudsl.schedule import expand_dim, lift_alloc

    q = expand_dim(q, "acc", "n", "i")
    q = lift_alloc(q, "acc")
    assert q.forward(red).node().name == "acc"
    assert q.forward(loop_j).node().iter == "j"
    assert q.find_alloc("acc").addr == (0,)


def test_forwarding_is_derived_from_edits():
    # issue 21: primitives state where statements went; the forwarding follows the
    # most specific edit, and an address no edit covers was removed
    from gpudsl.schedule.cursors import InvalidCursor, Into, Moved, MovedRange, fwd_edits

    a = (2,)
    f = fwd_edits(a, 1, [Moved((0,), (2, "body", 0)), Moved((0, "body", 0), (2,)),
                         Moved((0, "body", 0, "body"), (2, "body", 0, "body"))])
    assert f((0,)) == (0,) and f((3,)) == (3,)          # outside: unchanged
    assert f((2,)) == (2, "body", 0)                    # the outer loop moved in
    assert f((2, "body", 0)) == (2,)                    # the inner loop moved out
    assert f((2, "body", 0, "body", 4)) == (2, "body", 0, "body", 4)
    g = fwd_edits((1,), 2, [MovedRange((0, "body"), 0, 3, (1, "body"), 0),
                            MovedRange((0, "body"), 3, None, (2, "body"), 0)])
    assert g((1, "body", 4, "body", 0)) == (2, "body", 1, "body", 0)
    assert g((1, "body", 2)) == (1, "body", 2) and g((5,)) == (6,)
    with pytest.raises(InvalidCursor):
        g((1,))                                         # the split loop itself: gone
    h = fwd_edits((0,), 3, [Into((), (1,))], n_old=2)
    assert h((1, "body", 0)) == (1,) and h((2,)) == (3,)
