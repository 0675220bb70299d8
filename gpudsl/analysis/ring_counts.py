"""Counting the statements on one element of a barrier ring (docs/language.md
(synchronization), "Barrier rings"), in closed form.

A ring statement ``arrive(full[e], lo, hi)`` counts for element ``E`` as the indicator
``select(e == E, 1, 0)``.  In a loop the indicator depends on the loop variable, so
the barrier counts of :mod:`.phases` sum it over the iterations here.  For the forms
rings are written in, ``e = (i + c) % k`` (``c`` free of ``i``, ``k`` a constant) and
``e = i + c``, the sum over ``lo <= i < hi`` is exact:

- ``#{i in [lo, hi): (i + c) % k == E} = G(hi) - G(lo)`` with
  ``G(x) = (x + c) // k + select((x + c) % k > E, 1, 0)`` (floor division; ``G`` grows by
  one exactly where ``(x + c) % k == E``), for ``0 <= E < k`` (0 otherwise); the ``//``
  and ``%`` are the same for every element, which keeps the solver's work small;
- ``#{i in [lo, hi): i + c == E} = select(lo <= E - c < hi, 1, 0)``.

Other forms give None (the caller then uses a fresh unknown: sound, "unknown" in the
report).
"""
from __future__ import annotations

from ..ir.nodes import BinOp, Builtin, Const, Expr, Var
from ..ir.types import INDEX, bool_
from ..ir.visitor import walk


def indicator(index: Expr, element: Expr) -> Expr:
    """1 when a ring statement on ``index`` counts for ``element``, else 0."""
    return Builtin("select", (BinOp("==", index, element, bool_), Const(1), Const(0)), INDEX)


def _mentions(e: Expr, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk(e))


def _b(op, a, b, ty=INDEX):
    return BinOp(op, a, b, ty)


def _offset(e: Expr, var: str):
    """``c`` when ``e`` is ``var + c`` (``c`` free of ``var``), else None."""
    if isinstance(e, Var) and e.name == var:
        return Const(0)
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        if not _mentions(e.rhs, var):
            c = _offset(e.lhs, var)
            if c is not None:
                return _b(e.op, c, e.rhs)
        elif e.op == "+" and not _mentions(e.lhs, var):
            c = _offset(e.rhs, var)
            if c is not None:
                return _b("+", e.lhs, c)
    return None


def _hits(cond: Expr, var: str, lo: Expr, hi: Expr):
    """How many ``var`` in ``[lo, hi)`` (``lo <= hi``) satisfy ``cond``, a ring
    element test ``index == E`` (either way round); None for other conditions."""
    if not (isinstance(cond, BinOp) and cond.op == "=="):
        return None
    for idx, E in ((cond.lhs, cond.rhs), (cond.rhs, cond.lhs)):
        if _mentions(E, var):
            continue
        if isinstance(idx, BinOp) and idx.op == "%" and isinstance(idx.rhs, Const) and \
                isinstance(idx.rhs.val, int) and idx.rhs.val > 0:
            c = _offset(idx.lhs, var)
            if c is None:
                continue
            k = idx.rhs

            def G(x):  # G(x + 1) - G(x) = [(x + c) % k == E]; its // and % do not
                # depend on E, so the k elements of a ring share them in the solver
                y = _b("+", x, c)
                above = _b(">", _b("%", y, k), E, bool_)
                return _b("+", _b("//", y, k), Builtin("select", (above, Const(1), Const(0)),
                                                       INDEX))
            inside = _b("and", _b(">=", E, Const(0), bool_), _b("<", E, k, bool_), bool_)
            return Builtin("select", (inside, _b("-", G(hi), G(lo)), Const(0)), INDEX)
        c = _offset(idx, var)
        if c is not None:
            j = _b("-", E, c)
            hit = _b("and", _b("<=", lo, j, bool_), _b("<", j, hi, bool_), bool_)
            return Builtin("select", (hit, Const(1), Const(0)), INDEX)
    return None


def sum_over(c: Expr, var: str, lo: Expr, hi: Expr):
    """``sum(c for var in range(lo, hi))`` in closed form, or None.  ``c`` is a
    per-iteration barrier count: sums, constant multiples and selects of counts."""
    hi = Builtin("max", (lo, hi), INDEX)
    return _sum(c, var, lo, hi)


def _sum(c, var, lo, hi):
    if not _mentions(c, var):
        return _b("*", _b("-", hi, lo), c)
    if isinstance(c, BinOp) and c.op == "+":
        a, b = _sum(c.lhs, var, lo, hi), _sum(c.rhs, var, lo, hi)
        return None if a is None or b is None else _b("+", a, b)
    if isinstance(c, BinOp) and c.op == "*":
        for k, x in ((c.lhs, c.rhs), (c.rhs, c.lhs)):
            if not _mentions(k, var):
                s = _sum(x, var, lo, hi)
                return None if s is None else _b("*", k, s)
        return None
    if isinstance(c, Builtin) and c.name == "select":
        cond, a, b = c.args
        if not _mentions(cond, var):
            sa, sb = _sum(a, var, lo, hi), _sum(b, var, lo, hi)
            if sa is None or sb is None:
                return None
            return Builtin("select", (cond, sa, sb), INDEX)
        if _mentions(a, var) or _mentions(b, var):
            return None
        n = _hits(cond, var, lo, hi)
        if n is None:
            return None
        return _b("+", _b("*", a, n), _b("*", b, _b("-", _b("-", hi, lo), n)))
    return None


__all__ = ["indicator", "sum_over"]
