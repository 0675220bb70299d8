"""Kept encodings (gpudsl/ir/smt_memo.py): an expression encoded again gives the term
the encoder would build again, never a term of another thread state, another constant
type, or an unknown that must be fresh."""
from __future__ import annotations

import z3

from gpudsl.ir import BinOp, Const, Var
from gpudsl.ir.nodes import Read
from gpudsl.ir.smt import Encoder, _ids
from gpudsl.ir.types import INDEX, bool_ as BOOL, i32

from .corpus import own_slot


def _enc(written=()):
    return Encoder(own_slot.ir, written=set(written))


def _count(e):
    """(k + 2) * 3 - t % 4: an expression of loop counters, as a barrier count is."""
    return BinOp("-", BinOp("*", BinOp("+", Var("k"), Const(2), INDEX), Const(3), INDEX),
                 BinOp("%", Var("t"), Const(4), INDEX), INDEX)


def test_the_same_term_again():
    t = _enc().thread("1")
    t.declare("k"), t.declare("t")
    e = _count(None)
    first = t.expr(e)
    again = t.expr(_count(None))           # an equal expression, another object
    assert again.eq(first)
    fresh = _enc().thread("1")
    fresh.declare("k"), fresh.declare("t")
    assert fresh.expr(e).eq(first)         # what an encoder without memory builds


def test_a_rebound_variable_is_seen():
    t = _enc().thread("1")
    t.declare("k"), t.declare("t")
    e = _count(None)
    before = t.expr(e)
    t.vars["k"] = z3.Int("other")
    after = t.expr(e)
    assert not after.eq(before)
    assert "other" in str(after)
    t.vars = dict(t.vars, t=z3.IntVal(5))   # a new dict, as phases._env makes
    assert "t@1" not in str(t.expr(e))


def test_threads_apart():
    enc = _enc()
    t1, t2 = enc.thread("1"), enc.thread("2")
    for t in (t1, t2):
        t.declare("k"), t.declare("t")
    assert not t1.expr(_count(None)).eq(t2.expr(_count(None)))


def test_constant_types_apart():
    # Const(1) == Const(True) == Const(1.0) as IR values, but they encode apart
    t = _enc().thread("1")
    assert z3.is_int_value(t.expr(Const(1, INDEX)))
    assert z3.is_true(t.expr(Const(True, INDEX)))
    assert z3.is_int_value(t.expr(Const(1, INDEX)))


def test_reads_of_written_memory_stay_fresh():
    # each top-level expression's read of written memory is its own unknown
    t = _enc(written={"x"}).thread("1")
    t.declare("t")
    e = BinOp("+", Read("x", (Var("t"),), i32), Const(1, i32), i32)
    a, b = t.expr(e), t.expr(e)
    assert not a.eq(b)


def test_fresh_unknowns_stay_fresh():
    # a bitwise operation beyond every linear form makes an unknown each time
    t = _enc().thread("1")
    t.declare("k"), t.declare("t")
    e = BinOp("^", Var("t", i32), Var("k", i32), i32)
    n = _ids.n
    a = t.expr(e)
    assert _ids.n > n
    b = t.expr(e)
    assert not a.eq(b)


def test_ranges_are_part_of_the_state():
    # t ^ (1 << k) with k in a small constant range: cases; without: bit-vectors
    t = _enc().thread("1")
    t.declare("k"), t.declare("t")
    e = BinOp("^", Var("t", i32), BinOp("<<", Const(1, i32), Var("k", i32), i32), i32)
    t.ranges["k"] = (0, 3)
    cases = t.expr(e)
    assert "bits@" not in cases.sexpr()
    del t.ranges["k"]
    vectors = t.expr(e)
    assert "bits@" in vectors.sexpr() and not vectors.eq(cases)
    t.ranges["k"] = (0, 3)
    assert t.expr(e).eq(cases)


def test_a_made_variable_is_declared_each_time():
    # a '__' variable (a fresh barrier count) is made in the thread on first use
    enc = _enc()
    t = enc.thread("1")
    e = BinOp("+", Var("__bc_7"), Const(1), INDEX)
    a = t.expr(e)
    assert "__bc_7" in t.vars
    u = enc.thread("1")   # another env with the same tag, as phases._env makes
    assert u.expr(e).eq(a)
    assert "__bc_7" in u.vars


def test_conditions_kept_apart_from_integers():
    t = _enc().thread("1")
    t.declare("k")
    c = BinOp("<", Var("k"), Const(3), BOOL)
    assert z3.is_bool(t.cond(c)) and z3.is_bool(t.expr(c))
