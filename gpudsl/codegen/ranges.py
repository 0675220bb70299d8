"""Value ranges of index terms, for the width of index arithmetic.

The interpreter and ``check()`` compute index expressions (type ``index``) exactly;
the generated C computes them in ``int`` in a 32-bit translation unit.  That is the
same only when every index term, not just the sizes and the final index, stays within
32 bits: ``(n * m + t) % 10`` with ``n = m = 65537`` has a final index of 9 but a
product of 2**32 + 2**17 + 1.  :func:`index_terms_fit` bounds every index-typed
subexpression of the (inlined) proc by interval arithmetic, given the sizes and index
parameters of a launch: loop variables range over their bounds, reads over their type.
A launch whose terms may leave 32 bits gets the 64-bit translation unit (exact up to
the 64-bit range, where the wrapping i64 semantics of the interpreter take over).
"""
from __future__ import annotations

from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Builtin, Call, Const, Expr, For, If,
                        Read, Reduce, UnOp, Var, WindowArg, Interval, Point)
from ..ir.types import INDEX

INF = 2 ** 200
LO32, HI32 = -2 ** 31, 2 ** 31 - 1
_WIDTH = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}


class _Leaves(Exception):
    """An index term may leave 32 bits."""


def index_terms_fit(body, env: dict) -> bool:
    """True when every index-typed subexpression of ``body`` provably stays within a
    signed 32-bit int for the sizes and index parameters in ``env``."""
    scope = {k: (int(v), int(v)) for k, v in env.items()}
    try:
        _block(body, scope)
    except _Leaves:
        return False
    return True


def _block(stmts, scope):
    for s in stmts:
        if isinstance(s, For):
            lo, hi = _rng(s.lo, scope), _rng(s.hi, scope)
            inner = dict(scope)
            inner[s.iter] = (lo[0], max(lo[0], hi[1] - 1))
            _block(s.body, inner)
        elif isinstance(s, If):
            _rng(s.cond, scope)
            _block(s.body, scope)
            _block(s.orelse, scope)
        elif isinstance(s, (Assign, Reduce, Atomic)):
            for e in tuple(s.idx) + (s.rhs,) + ((s.cmp,) if getattr(s, "cmp", None) else ()):
                _rng(e, scope)
        elif isinstance(s, Call):
            for a in s.args:
                _rng(a, scope)
        elif isinstance(s, Alloc):
            for e in s.shape:
                _rng(e, scope)
        else:
            for name in ("lo", "hi"):
                e = getattr(s, name, None)
                if isinstance(e, Expr):
                    _rng(e, scope)


def _type_range(ty):
    if ty == INDEX:
        return (-INF, INF)
    w = _WIDTH.get(getattr(ty, "name", ""))
    if w is None:
        return (0, 1) if getattr(ty, "name", "") == "bool" else None
    if getattr(ty, "name", "").startswith("u"):
        return (0, 2 ** w - 1)
    return (-2 ** (w - 1), 2 ** (w - 1) - 1)


def _rng(e, scope):
    r = _eval(e, scope)
    if r is not None and getattr(e, "ty", None) == INDEX and (r[0] < LO32 or r[1] > HI32):
        raise _Leaves()
    return r if r is not None else (-INF, INF)


def _eval(e, scope):
    if isinstance(e, Const):
        v = e.val
        return (int(v), int(v)) if isinstance(v, (int, bool)) else None
    if isinstance(e, Var):
        return scope.get(e.name, (-INF, INF))
    if isinstance(e, Read):
        for i in e.idx:
            _rng(i, scope)
        return _type_range(e.ty)
    if isinstance(e, WindowArg):
        for w in e.idx:
            for x in ((w.lo, w.hi) if isinstance(w, Interval) else (getattr(w, "pt", None),)):
                if isinstance(x, Expr):
                    _rng(x, scope)
        return None
    if isinstance(e, UnOp):
        a = _rng(e.arg, scope)
        if e.op == "-":
            r = (-a[1], -a[0])
        else:
            r = (0, 1) if e.op == "not" else _type_range(e.ty)
        return _fixed(e, r)
    if isinstance(e, BinOp):
        a, b = _rng(e.lhs, scope), _rng(e.rhs, scope)
        return _fixed(e, _binop(e.op, a, b))
    if isinstance(e, Builtin):
        args = [_rng(x, scope) for x in e.args]
        return _fixed(e, _builtin(e.name, args, e.ty))
    for c in getattr(e, "args", ()) or ():
        if isinstance(c, Expr):
            _rng(c, scope)
    return _type_range(getattr(e, "ty", None))


def _fixed(e, r):
    """A fixed-width (i32/i64) result wraps into its type's range; others are ``r``."""
    if e.ty != INDEX:
        return _type_range(e.ty) if getattr(e.ty, "is_integer", False) else \
            ((0, 1) if getattr(e.ty, "name", "") == "bool" else None)
    return r


def _corners(f, a, b):
    vals = [f(x, y) for x in (a[0], a[1]) for y in (b[0], b[1])]
    return (max(min(vals), -INF), min(max(vals), INF))


def _mag(a):
    return max(abs(a[0]), abs(a[1]))


def _binop(op, a, b):
    if op in ("+",):
        return (a[0] + b[0], a[1] + b[1])
    if op == "-":
        return (a[0] - b[1], a[1] - b[0])
    if op == "*":
        return _corners(lambda x, y: x * y, a, b)
    if op == "//":
        if b[0] > 0 or b[1] < 0:
            return _corners(lambda x, y: x // y, a, b)
        return (-_mag(a), _mag(a))
    if op == "%":
        if b[0] > 0:
            return (0, b[1] - 1)
        if b[1] < 0:
            return (b[0] + 1, 0)
        m = _mag(b)
        return (-m, m)
    if op == "<<":
        if b[0] >= 0 and b[1] <= 190:
            return _corners(lambda x, y: x * 2 ** y, a, b)
        return (-INF, INF)
    if op == ">>":
        return (min(a[0], 0), max(a[1], 0))
    if op in ("&", "|", "^"):
        if a[0] >= 0 and b[0] >= 0:
            if op == "&":
                return (0, min(a[1], b[1]))
            return (0, 2 ** max(a[1], b[1]).bit_length() - 1)
        k = max(_mag(a), _mag(b)).bit_length()
        return (-2 ** k, 2 ** k - 1)
    return (0, 1)   # comparisons, and, or


def _builtin(name, args, ty):
    if name in ("min", "max") and len(args) == 2:
        f = min if name == "min" else max
        return (f(args[0][0], args[1][0]), f(args[0][1], args[1][1]))
    if name == "select" and len(args) == 3:
        return (min(args[1][0], args[2][0]), max(args[1][1], args[2][1]))
    if name == "abs" and len(args) == 1:
        m = _mag(args[0])
        lo = 0 if args[0][0] <= 0 <= args[0][1] else min(abs(args[0][0]), abs(args[0][1]))
        return (lo, m)
    if ty == INDEX and len(args) == 1:
        return args[0]   # a conversion to index is exact
    r = _type_range(ty)
    return r if r is not None else (-INF, INF)


__all__ = ["index_terms_fit"]
