"""A normaliser for integer index expressions, and ``simplify``.

Integer expressions are read as polynomials over *atoms* (control variables and
opaque sub-expressions such as ``n // 256`` or data-dependent reads), constants
are folded and like terms collected.  Terms keep the order in which they first
appear, coefficients are written first and the constant last, so
``(io * 16 + 0) + ii`` prints as ``16 * io + ii``.

``//`` and ``%`` by a positive constant are simplified with the ranges of the
enclosing loops: ``(16 * io + ii) // 16`` is ``io`` and ``(16 * io + ii) % 16``
is ``ii`` when ``0 <= ii < 16``.
"""
from __future__ import annotations

import math

from ..ir.nodes import (BinOp, Builtin, Const, Expr, For, If, Pass, Point,
                        ProcDef, Read, UnOp, Var, WindowArg)
from ..ir.types import INDEX, bool_
from ..ir.visitor import Transformer

INF = math.inf


def _is_int(e: Expr) -> bool:
    return e.ty.kind == "index"  # fixed-width integers wrap: not polynomials


# ------------------------------------------------------------------ polynomials
# A polynomial is a dict {monomial: coeff}; a monomial is a sorted tuple of atom
# keys ("" + name for variables, "~" + printed text for opaque atoms); the
# empty monomial holds the constant.  Dict order is first-appearance order.


class _Ctx:
    def __init__(self, ranges):
        self.ranges = ranges or {}
        self.atoms: dict[str, Expr] = {}

    def atom(self, e: Expr) -> dict:
        if isinstance(e, Var):
            key = e.name
        else:
            from ..ir.printer import print_expr

            key = "~" + print_expr(e) + "#" + str(hash(e))
        self.atoms[key] = e
        return {(key,): 1}


def _add(a: dict, b: dict, sign: int = 1) -> dict:
    out = dict(a)
    for m, c in b.items():
        out[m] = out.get(m, 0) + sign * c
    return {m: c for m, c in out.items() if c != 0}


def _mul(a: dict, b: dict) -> dict:
    out: dict = {}
    for m1, c1 in a.items():
        for m2, c2 in b.items():
            m = tuple(sorted(m1 + m2))
            out[m] = out.get(m, 0) + c1 * c2
    return {m: c for m, c in out.items() if c != 0}


def _const_of(p: dict):
    if not p:
        return 0
    if len(p) == 1 and () in p:
        return p[()]
    return None


def _range(p: dict, ctx: _Ctx):
    """Inclusive (lo, hi) of a polynomial from the loop ranges, or None."""
    lo = hi = 0
    for m, c in p.items():
        if m == ():
            lo += c
            hi += c
            continue
        if len(m) != 1 or m[0] not in ctx.ranges:
            return None
        a, b = ctx.ranges[m[0]]
        x, y = c * a, c * b
        if x > y:
            x, y = y, x
        lo += x
        hi += y
    return lo, hi


def _poly(e: Expr, ctx: _Ctx) -> dict:
    if isinstance(e, Const) and not isinstance(e.val, bool):
        return {(): int(e.val)} if e.val != 0 else {}
    if isinstance(e, Var):
        return ctx.atom(e)
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        return _add(_poly(e.lhs, ctx), _poly(e.rhs, ctx), 1 if e.op == "+" else -1)
    if isinstance(e, BinOp) and e.op == "*":
        return _mul(_poly(e.lhs, ctx), _poly(e.rhs, ctx))
    if isinstance(e, UnOp) and e.op == "-":
        return {m: -c for m, c in _poly(e.arg, ctx).items()}
    if isinstance(e, BinOp) and e.op in ("//", "%"):
        a = _poly(e.lhs, ctx)
        b = _poly(e.rhs, ctx)
        cb = _const_of(b)
        ca = _const_of(a)
        if ca is not None and cb not in (None, 0):
            return _poly(Const(ca // cb if e.op == "//" else ca % cb), ctx)
        if cb is not None and cb > 0:
            if cb == 1:
                return a if e.op == "//" else {}
            q = {m: c for m, c in a.items() if c % cb == 0}
            r = {m: c for m, c in a.items() if c % cb != 0}
            rr = _range(r, ctx)
            if rr is not None and 0 <= rr[0] and rr[1] < cb:
                if e.op == "//":
                    return {m: c // cb for m, c in q.items()}
                return r
            if not r and e.op == "%":
                return {}
            if not r and e.op == "//":
                return {m: c // cb for m, c in q.items()}
        lhs = _expr(a, ctx)
        rhs = _expr(b, ctx)
        return ctx.atom(BinOp(e.op, lhs, rhs, e.ty, e.loc))
    # opaque: normalise inside
    return ctx.atom(normalize_inner(e, ctx.ranges))


def _term(m: tuple, c: int, ctx: _Ctx) -> Expr:
    prod = None
    for k in m:
        a = ctx.atoms[k]
        prod = a if prod is None else BinOp("*", prod, a, INDEX)
    if c == 1:
        return prod
    return BinOp("*", Const(c), prod, INDEX)


def _expr(p: dict, ctx: _Ctx) -> Expr:
    terms = [(m, c) for m, c in p.items() if m != ()]
    const = p.get((), 0)
    out = None
    for m, c in terms:
        if out is None:
            if c == -1:
                out = UnOp("-", _term(m, 1, ctx), INDEX)
            else:
                out = _term(m, c, ctx)
        elif c > 0:
            out = BinOp("+", out, _term(m, c, ctx), INDEX)
        else:
            out = BinOp("-", out, _term(m, -c, ctx), INDEX)
    if out is None:
        return Const(const)
    if const > 0:
        out = BinOp("+", out, Const(const), INDEX)
    elif const < 0:
        out = BinOp("-", out, Const(-const), INDEX)
    return out


def normalize(e: Expr, ranges: dict | None = None) -> Expr:
    """The normal form of an expression (integer parts collected and folded)."""
    if isinstance(e, (Const, Var)):
        return e
    if _is_int(e):
        ctx = _Ctx(ranges)
        out = _expr(_poly(e, ctx), ctx)
        return out if out != e else e
    return normalize_inner(e, ranges)


def linear_form(e: Expr, names: set, ranges: dict | None = None):
    """``(coefficients, rest)``: ``e`` as ``sum(c[v] * v for v in names) + rest`` with
    integer coefficients and ``rest`` free of ``names`` (``//`` and ``%`` simplified
    with ``ranges``), or None when ``e`` is not linear in ``names``."""
    from ..ir.visitor import free_vars

    ctx = _Ctx(ranges)
    poly = _poly(e, ctx)
    coef, rest = {}, {}
    for m, c in poly.items():
        inner = [k for k in m if k in names]
        opaque = [k for k in m if k.startswith("~") and free_vars(ctx.atoms[k]) & names]
        if opaque or len(inner) > 1 or (inner and len(m) > 1):
            return None
        if inner:
            coef[inner[0]] = c
        else:
            rest[m] = c
    return coef, _expr(rest, ctx)


def normalize_inner(e: Expr, ranges=None) -> Expr:
    """Normalise the integer sub-expressions of ``e`` (``e`` itself kept)."""
    if isinstance(e, Read):
        idx = tuple(normalize(i, ranges) for i in e.idx)
        return e if idx == e.idx else e.with_(idx=idx)
    if isinstance(e, WindowArg):
        idx = []
        for w in e.idx:
            if isinstance(w, Point):
                idx.append(w.with_(pt=normalize(w.pt, ranges)))
            else:
                idx.append(w.with_(lo=normalize(w.lo, ranges), hi=normalize(w.hi, ranges)))
        return e.with_(idx=tuple(idx))
    if isinstance(e, BinOp):
        lhs, rhs = normalize(e.lhs, ranges), normalize(e.rhs, ranges)
        if e.ty == bool_:
            return _fold_bool(e.with_(lhs=lhs, rhs=rhs), ranges)
        if isinstance(lhs, Const) and isinstance(rhs, Const) and e.ty.is_float and \
                e.op in ("+", "-", "*"):
            v = {"+": lhs.val + rhs.val, "-": lhs.val - rhs.val, "*": lhs.val * rhs.val}[e.op]
            return Const(v, e.ty, e.loc)
        return e.with_(lhs=lhs, rhs=rhs)
    if isinstance(e, UnOp):
        a = normalize(e.arg, ranges)
        if e.op == "not" and isinstance(a, Const):
            return Const(not a.val, bool_)
        return e.with_(arg=a)
    if isinstance(e, Builtin):
        return e.with_(args=tuple(normalize(a, ranges) for a in e.args))
    return e


def _fold_bool(e: BinOp, ranges) -> Expr:
    if e.op in ("and", "or"):
        a, b = e.lhs, e.rhs
        for x, y in ((a, b), (b, a)):
            if isinstance(x, Const):
                if e.op == "and":
                    return y if x.val else Const(False, bool_)
                return Const(True, bool_) if x.val else y
        return e
    if e.op in ("<", "<=", ">", ">=", "==", "!=") and _is_int(e.lhs) and _is_int(e.rhs):
        ctx = _Ctx(ranges)
        d = _add(_poly(e.lhs, ctx), _poly(e.rhs, ctx), -1)
        r = _range(d, ctx)
        if r is not None:
            lo, hi = r
            verdict = {
                "<": (hi < 0, lo >= 0), "<=": (hi <= 0, lo > 0),
                ">": (lo > 0, hi <= 0), ">=": (lo >= 0, hi < 0),
                "==": (lo == hi == 0, lo > 0 or hi < 0),
                "!=": (lo > 0 or hi < 0, lo == hi == 0),
            }[e.op]
            if verdict[0]:
                return Const(True, bool_)
            if verdict[1]:
                return Const(False, bool_)
    return e


def const_seq_nest(L: For):
    """``(loops, body)``: the perfect nest of ``seq`` loops in ``L``'s body (each the only
    statement of the one before, unmapped, from 0 to a constant) and what it holds;
    ``loops`` stops at the first statement that is not such a loop, and a loop that is
    not one (a par loop, a bound that is not constant) is returned as the body."""
    loops, body = [], L.body
    while len(body) == 1 and isinstance(body[0], For):
        f = body[0]
        if f.kind != "seq" or f.mapping is not None or const_value(f.lo) != 0 or \
                const_value(f.hi) is None:
            break
        loops.append(f)
        body = f.body
    return loops, body


def const_value(e: Expr):
    """The integer value of ``e`` if it is constant, else None."""
    n = normalize(e)
    if isinstance(n, Const) and not isinstance(n.val, bool):
        return int(n.val)
    return None


def loop_range(s: For, ranges: dict | None = None):
    """Inclusive (lo, hi) of a loop's variable when its bounds are constant
    (upper bound may be +inf), else None."""
    lo = const_value(s.lo)
    if lo is None:
        return None
    hi = const_value(s.hi)
    return (lo, hi - 1 if hi is not None else INF)


# ------------------------------------------------------------------ simplify a proc


class _Simplifier(Transformer):
    """Normalises every expression, with loop ranges (no statement moves:
    :func:`simplify_ir` then removes the ``if``s whose condition is constant)."""

    def __init__(self, size_names):
        self.ranges = {n: (1, INF) for n in size_names}

    def visit_For(self, s: For):
        lo, hi = normalize(s.lo, self.ranges), normalize(s.hi, self.ranges)
        r = (const_value(lo), const_value(hi))
        saved = self.ranges.get(s.iter)
        if r[0] is not None:
            self.ranges[s.iter] = (r[0], (r[1] - 1) if r[1] is not None else INF)
        else:
            self.ranges.pop(s.iter, None)
        body = self.visit_block(s.body)
        if saved is None:
            self.ranges.pop(s.iter, None)
        else:
            self.ranges[s.iter] = saved
        if lo == s.lo and hi == s.hi and body is s.body:
            return s
        return s.with_(lo=lo, hi=hi, body=body)

    def generic(self, node):
        if isinstance(node, Expr):
            n = normalize(node, self.ranges)
            return node if n == node else n
        return super().generic(node)

    def visit_Interval(self, w):
        return w.with_(lo=normalize(w.lo, self.ranges), hi=normalize(w.hi, self.ranges))

    def visit_Point(self, w):
        return w.with_(pt=normalize(w.pt, self.ranges))


def simplify_ir(pdef: ProcDef):
    """The simplified proc, as a :class:`~gpudsl.schedule.edits.Rewrite` (the cursors
    of a dropped ``if``'s kept branch follow it)."""
    from ..ir.addresses import block_of, iter_stmts, stmt_at
    from .edits import same_shape, unwrap
    from .fresh import freshen_top_allocs, names_outside

    sizes = [p.name for p in pdef.params if p.kind == "size"]
    simp = _Simplifier(sizes)
    body = simp.visit_block(pdef.body)
    preds = tuple(normalize(x) for x in pdef.preds)
    out = same_shape(pdef, pdef.with_(body=body, preds=preds))
    pdef = out.ir
    # constant ifs, innermost and last first so recorded addresses stay valid
    targets = [(a, s) for a, s in iter_stmts(pdef)
               if isinstance(s, If) and isinstance(s.cond, Const)]
    targets.sort(key=lambda t: t[0], reverse=True)
    for a, _ in targets:
        s = stmt_at(pdef, a)
        kept = s.body if s.cond.val else s.orelse
        fld = "body" if s.cond.val else "orelse"
        # the branch's allocations move into the enclosing block: no name twice there
        kept = freshen_top_allocs(tuple(kept or ()), names_outside(pdef, a))
        if not kept and len(block_of(pdef, a[:-1])) == 1:
            # the block would be empty: a ``pass``, the form the parser gives it (an
            # empty block printed as ``pass`` parsed back to a different proc)
            kept = (Pass(s.loc),)
        out = out.then(unwrap, a, fld, kept)
        pdef = out.ir
    return out


__all__ = ["normalize", "const_value", "loop_range", "simplify_ir", "INF", "Pass"]
