"""Value ranges of index terms, for the width of index arithmetic.

The interpreter and ``check()`` compute index expressions (type ``index``) exactly;
the generated C computes them in ``int`` in a 32-bit translation unit.  That is the
same only when every index term, not just the sizes and the final index, stays within
32 bits: ``(n * m + t) % 10`` with ``n = m = 65537`` has a final index of 9 but a
product of 2**32 + 2**17 + 1.  :func:`index_terms_fit` bounds every index-typed
subexpression of the (inlined) proc by interval arithmetic, given the sizes and index
parameters of a launch: loop variables range over their bounds, reads over their type.
A launch whose terms may leave 32 bits gets the 64-bit translation unit.  A term that
leaves 64 bits for these sizes whatever the data (``1 << s`` for ``s`` up to 70) would
compute modulo 2**64 in C but exactly in the interpreter: the launch is refused with the
term and its range (a ``gpudsl.LaunchError``).  Terms whose range comes from data read at
run time decide nothing (their bound is the type's, not a fact; an ``i64`` element makes
its expression ``long long`` in C anyway).
"""
from __future__ import annotations

from ..errors import LaunchError
from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Builtin, Call, Const, Expr, For, If,
                        Read, Reduce, UnOp, Var, WindowArg, Interval, Point)
from ..ir.types import INDEX

INF = 2 ** 200
LO32, HI32 = -2 ** 31, 2 ** 31 - 1
_WIDTH = {"i8": 8, "i16": 16, "i32": 32, "i64": 64, "u8": 8, "u16": 16, "u32": 32, "u64": 64}


LO64, HI64 = -2 ** 63, 2 ** 63 - 1


# an index term leaves the 64-bit range for the sizes of a launch
IndexTooWide = LaunchError


class _State:
    wide = False
    sizes = ""


def index_terms_fit(body, env: dict) -> bool:
    """True when every index-typed subexpression of ``body`` provably stays within a
    signed 32-bit int for the sizes and index parameters in ``env``; raises
    :class:`IndexTooWide` when one leaves 64 bits whatever the data."""
    scope = {k: (int(v), int(v), False) for k, v in env.items()}
    st = _State()
    st.sizes = ", ".join(f"{k}={int(v)}" for k, v in sorted(env.items()))
    _block(body, scope, st)
    return not st.wide


def _block(stmts, scope, st):
    for s in stmts:
        if isinstance(s, For):
            lo, hi = _rng(s.lo, scope, st), _rng(s.hi, scope, st)
            inner = dict(scope)
            inner[s.iter] = (lo[0], max(lo[0], hi[1] - 1), lo[2] or hi[2])
            _block(s.body, inner, st)
        elif isinstance(s, If):
            _rng(s.cond, scope, st)
            _block(s.body, scope, st)
            _block(s.orelse, scope, st)
        elif isinstance(s, (Assign, Reduce, Atomic)):
            for e in tuple(s.idx) + (s.rhs,) + ((s.cmp,) if getattr(s, "cmp", None) else ()):
                _rng(e, scope, st)
        elif isinstance(s, Call):
            for a in s.args:
                _rng(a, scope, st)
        elif isinstance(s, Alloc):
            for e in s.shape:
                _rng(e, scope, st)
        else:
            for name in ("lo", "hi"):
                e = getattr(s, name, None)
                if isinstance(e, Expr):
                    _rng(e, scope, st)


def _type_range(ty, data=True):
    if ty == INDEX:
        return (-INF, INF, True)
    w = _WIDTH.get(getattr(ty, "name", ""))
    if w is None:
        return (0, 1, data) if getattr(ty, "name", "") == "bool" else None
    if getattr(ty, "name", "").startswith("u"):
        return (0, 2 ** w - 1, data)
    return (-2 ** (w - 1), 2 ** (w - 1) - 1, data)


def _rng(e, scope, st):
    """The range ``(lo, hi, from_data)`` of ``e``; checks it where ``e`` is an index."""
    r = _eval(e, scope, st)
    if r is None:
        return (-INF, INF, True)
    if getattr(e, "ty", None) == INDEX and (r[0] < LO32 or r[1] > HI32) and not r[2]:
        st.wide = True
        if r[0] < LO64 or r[1] > HI64:
            from ..ir.printer import print_expr

            raise IndexTooWide(
                f"the index term {print_expr(e)} may reach {_show(r)}"
                f"{' with ' + st.sizes if st.sizes else ''}: beyond 64-bit index "
                "arithmetic (C would wrap it, the interpreter and check() do not)",
                getattr(e, "loc", None),
                "bound the term (a smaller shift amount or loop range), or compute it in "
                "i64 (i64(...)) where wrapping is meant")
    return r


def _show(r):
    def one(v):
        if abs(v) <= 2 ** 62:
            return str(v)
        a = abs(v)
        p = f"2^{a.bit_length() - 1}" if a & (a - 1) == 0 else f"about 2^{a.bit_length() - 1}"
        return "-" + p if v < 0 else p
    return f"[{one(r[0])}, {one(r[1])}]"


def _eval(e, scope, st):
    if isinstance(e, Const):
        v = e.val
        return (int(v), int(v), False) if isinstance(v, (int, bool)) else None
    if isinstance(e, Var):
        return scope.get(e.name, (-INF, INF, True))
    if isinstance(e, Read):
        for i in e.idx:
            _rng(i, scope, st)
        return _type_range(e.ty)
    if isinstance(e, WindowArg):
        for w in e.idx:
            for x in ((w.lo, w.hi) if isinstance(w, Interval) else (getattr(w, "pt", None),)):
                if isinstance(x, Expr):
                    _rng(x, scope, st)
        return None
    if isinstance(e, UnOp):
        a = _rng(e.arg, scope, st)
        if e.op == "-":
            r = (-a[1], -a[0], a[2])
        else:
            r = (0, 1, a[2]) if e.op == "not" else _type_range(e.ty)
        return _fixed(e, r)
    if isinstance(e, BinOp):
        a, b = _rng(e.lhs, scope, st), _rng(e.rhs, scope, st)
        lo, hi = _binop(e.op, a, b)
        return _fixed(e, (lo, hi, a[2] or b[2]))
    if isinstance(e, Builtin):
        args = [_rng(x, scope, st) for x in e.args]
        lo, hi = _builtin(e.name, args, e.ty)
        cast = len(args) == 1 and e.name not in _KNOWN and getattr(e.ty, "is_integer", False)
        return _fixed(e, (lo, hi, any(a[2] for a in args) or
                          (e.name not in _KNOWN and not cast)))
    for c in getattr(e, "args", ()) or ():
        if isinstance(c, Expr):
            _rng(c, scope, st)
    return _type_range(getattr(e, "ty", None))


_KNOWN = ("min", "max", "select", "abs")


def _fixed(e, r):
    """A fixed-width (i32/i64) result is ``r`` where ``r`` lies in its type's range (no
    wrap), else the type's range; an index result is ``r``."""
    if e.ty != INDEX:
        if getattr(e.ty, "is_integer", False):
            t = _type_range(e.ty, r[2])
            return r if t is not None and t[0] <= r[0] and r[1] <= t[1] else t
        return (0, 1, r[2]) if getattr(e.ty, "name", "") == "bool" else None
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
    if op == "<<":  # a negative amount gives 0 (gpudsl.ir.numeric)
        if b[1] < 0:
            return (0, 0)
        if b[1] <= 190:
            r = _corners(lambda x, y: x * 2 ** y, a, (max(b[0], 0), b[1]))
            return (min(r[0], 0), max(r[1], 0)) if b[0] < 0 else r
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
    if len(args) == 1 and name not in _KNOWN and getattr(ty, "is_integer", False):
        return args[0][:2]   # a conversion: exact into index, checked by _fixed otherwise
    r = _type_range(ty)
    return r[:2] if r is not None else (-INF, INF)


__all__ = ["index_terms_fit", "IndexTooWide"]
