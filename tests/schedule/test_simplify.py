"""The affine normaliser."""
from __future__ import annotations

from hypothesis import given, settings, strategies as st

from gpudsl.ir.nodes import BinOp, Const, Var
from gpudsl.ir.printer import print_expr
from gpudsl.ir.types import INDEX
from gpudsl.schedule.simplify import normalize


def b(op, x, y):
    return BinOp(op, x, y, INDEX)


io, ii, n = Var("io"), Var("ii"), Var("n")


def p(e, ranges=None):
    return print_expr(normalize(e, ranges))


def test_collect_and_order():
    assert p(b("+", b("+", b("*", io, Const(16)), Const(0)), ii)) == "16 * io + ii"
    assert p(b("-", b("+", ii, io), ii)) == "io"
    assert p(b("+", b("*", Const(2), b("+", io, Const(3))), Const(-6))) == "2 * io"
    assert p(b("-", Const(0), io)) == "-io"
    assert p(b("-", n, b("*", Const(4), io))) == "n - 4 * io"
    assert p(b("*", b("+", n, Const(1)), Const(2))) == "2 * n + 2"


def test_div_mod_with_ranges():
    e = b("+", b("*", Const(16), io), ii)
    r = {"ii": (0, 15)}
    assert p(b("//", e, Const(16)), r) == "io"
    assert p(b("%", e, Const(16)), r) == "ii"
    assert p(b("//", e, Const(16))) == "(16 * io + ii) // 16"
    assert p(b("//", b("*", Const(32), io), Const(16))) == "2 * io"
    assert p(b("//", Const(17), Const(4))) == "4"


def test_idempotent_on_printed_forms():
    e = normalize(b("+", b("*", io, Const(16)), b("-", ii, Const(3))))
    assert normalize(e) == e


_vals = st.integers(-20, 20)


@st.composite
def exprs(draw, depth=3):
    if depth == 0 or draw(st.booleans()):
        return draw(st.sampled_from([io, ii, n, Const(draw(st.integers(-5, 5)))]))
    op = draw(st.sampled_from(["+", "-", "*", "//", "%"]))
    x, y = draw(exprs(depth=depth - 1)), draw(exprs(depth=depth - 1))
    if op in ("//", "%"):
        y = Const(draw(st.integers(1, 7)))
    return b(op, x, y)


def _eval(e, env):
    if isinstance(e, Const):
        return e.val
    if isinstance(e, Var):
        return env[e.name]
    if e.__class__.__name__ == "UnOp":
        return -_eval(e.arg, env)
    a, c = _eval(e.lhs, env), _eval(e.rhs, env)
    ops = {"+": lambda: a + c, "-": lambda: a - c, "*": lambda: a * c,
           "//": lambda: a // c, "%": lambda: a % c}
    return ops[e.op]()


@settings(max_examples=300, deadline=None)
@given(exprs(), _vals, st.integers(0, 15), st.integers(1, 40))
def test_normalize_keeps_values(e, vio, vii, vn):
    env = {"io": vio, "ii": vii, "n": vn}
    assert _eval(normalize(e, {"ii": (0, 15), "n": (1, float("inf"))}), env) == _eval(e, env)
