"""Seeing through calls: inline every ``Call`` of a proc body, windows included.

``inline_body(proc_def)`` returns ``(body, extra_bounds)``: a call-free copy of the
body where

- the callee's size/index parameters are replaced by the argument expressions,
  its scalar parameters (``Read(p, ())``) by the argument values,
- accesses to a window parameter ``z[i, j]`` become accesses to the caller's
  array with composed indices (``s[t:t+2]`` passed as ``z``: ``z[i]`` → ``s[t + i]``),
- the callee's loop variables and allocations are renamed to fresh names.

``extra_bounds`` maps ``id(node)`` of a rewritten access (``Read``, ``Assign``,
``Reduce``, ``Atomic``) to a list of ``(index_expr, extent_expr)`` pairs: the bounds
the access must respect inside the callee's window (the window's own extents),
checked in addition to the bounds of the underlying array (``keep`` pins those
nodes so their ids stay valid).  Two internal statements are emitted before each
inlined body, which the effects pass turns into obligations: ``Assign("__window__",
(), window)`` for each window argument (it must lie inside its array) and
``Assign("__pred__", (), assert)`` for each assert of the callee (the call must
satisfy it).
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (Alloc, Assign, BinOp, Call, Const, Expr, For, Interval, Point,
                        ProcDef, Read, Stmt, Var, WindowArg)
from ..ir.types import INDEX
from ..ir.visitor import Transformer, bound_names, walk

WINDOW_CHECK = "__window__"


def _add(a: Expr, b: Expr) -> Expr:
    if isinstance(b, Const) and b.val == 0:
        return a
    if isinstance(a, Const) and a.val == 0:
        return b
    return BinOp("+", a, b, INDEX)


class _Ctx:
    """How the callee's names map to the caller's."""

    def __init__(self):
        self.vars: dict[str, Expr] = {}        # size/index params, renamed loop vars
        self.scalars: dict[str, Expr] = {}     # scalar params → argument value
        self.arrays: dict[str, tuple] = {}     # array param → (base name, dims, extents)
        self.names: dict[str, str] = {}        # renamed allocations


class _Inliner(Transformer):
    def __init__(self, taken: set[str], extra: dict, keep: list):
        self.taken = taken
        self.extra = extra
        self.keep = keep  # keeps rewritten nodes alive so their id() stays unique
        self.counter = 0

    def fresh(self, base: str) -> str:
        self.counter += 1
        name = f"{base}_{self.counter}"
        while name in self.taken:
            self.counter += 1
            name = f"{base}_{self.counter}"
        self.taken.add(name)
        return name

    # ------------------------------------------------------------ top level

    def visit_Call(self, s: Call):
        args = tuple(self.visit(a) for a in s.args)
        return self.inline(s, args)

    def inline(self, call: Call, args) -> tuple:
        callee: ProcDef = call.proc
        ctx = _Ctx()
        checks = []
        for p, a in zip(callee.params, args):
            if p.kind in ("size", "index"):
                ctx.vars[p.name] = a
            elif p.kind == "scalar":
                ctx.scalars[p.name] = a
            else:
                assert isinstance(a, WindowArg)
                ctx.arrays[p.name] = (a.name, a.idx)
                if a.idx:
                    checks.append(a)
        for n in bound_names(callee.body):
            ctx.names[n] = self.fresh(n)
        sub = _Subst(ctx, self)
        body = sub.visit_block(callee.body)
        body = self.visit_block(body)  # nested calls
        pre = []
        for w in checks:
            # Window placement: a read of the window's corners, checked for bounds.
            pre.append(_window_check(w, call))
        for pred in callee.preds:
            pre.append(Assign("__pred__", (), sub.visit(pred), call.loc))
        return tuple(pre) + body


def _window_check(w: WindowArg, call: Call) -> Stmt:
    """An internal statement: ``__window__[...] = 0`` whose index list holds, for each
    dimension of the base array, a tuple-like pair encoded as Interval/Point kept in
    ``rhs`` (a WindowArg).  The effects pass recognises ``WINDOW_CHECK``."""
    return Assign(WINDOW_CHECK, (), w, call.loc)


class _Subst(Transformer):
    """Rewrites one callee body into the caller's names."""

    def __init__(self, ctx: _Ctx, owner: _Inliner):
        self.ctx = ctx
        self.owner = owner

    def visit_Var(self, e: Var):
        if e.name in self.ctx.vars:
            return self.ctx.vars[e.name]
        if e.name in self.ctx.names:
            return replace(e, name=self.ctx.names[e.name])
        return e

    def _access(self, name: str, idx: tuple, node):
        """(new name, new idx, window-local bounds or None)."""
        if name in self.ctx.names:
            return self.ctx.names[name], idx, None
        if name not in self.ctx.arrays:
            return name, idx, None
        base, widx = self.ctx.arrays[name]
        if not widx:
            return base, idx, None
        out = []
        local = []
        it = iter(idx)
        for w in widx:
            if isinstance(w, Point):
                out.append(w.pt)
            else:
                i = next(it)
                out.append(_add(w.lo, i))
                local.append((i, BinOp("-", w.hi, w.lo, INDEX)))
        return base, tuple(out), local

    def _record(self, new, local, old):
        self.owner.keep.append(new)
        prev = self.owner.extra.get(id(old))
        lst = list(prev or [])
        if local:
            # the window-local indices are expressed in the caller's names already
            lst = [(a, b) for a, b in lst]
            lst.extend(local)
        if lst:
            self.owner.extra[id(new)] = lst

    def visit_Read(self, e: Read):
        if not e.idx and e.name in self.ctx.scalars:
            return self.ctx.scalars[e.name]
        e2 = self.generic(e)
        name, idx, local = self._access(e2.name, e2.idx, e2)
        new = replace(e2, name=name, idx=idx)
        self._record(new, local, e)
        return new

    def _stmt(self, s):
        s2 = self.generic(s)
        name, idx, local = self._access(s2.name, s2.idx, s2)
        new = replace(s2, name=name, idx=idx)
        self._record(new, local, s)
        return new

    visit_Assign = visit_Reduce = visit_Atomic = _stmt

    def visit_Alloc(self, s: Alloc):
        s2 = self.generic(s)
        return replace(s2, name=self.ctx.names.get(s2.name, s2.name))

    def visit_For(self, s: For):
        s2 = self.generic(s)
        return replace(s2, iter=self.ctx.names.get(s2.iter, s2.iter))

    def visit_WindowArg(self, w: WindowArg):
        w2 = self.generic(w)
        if w2.name in self.ctx.names:
            return replace(w2, name=self.ctx.names[w2.name])
        if w2.name not in self.ctx.arrays:
            return w2
        base, widx = self.ctx.arrays[w2.name]
        if not widx:
            return replace(w2, name=base)
        if not w2.idx:
            return replace(w2, name=base, idx=widx)
        out = []
        it = iter(w2.idx)
        for w in widx:
            if isinstance(w, Point):
                out.append(w)
            else:
                inner = next(it)
                if isinstance(inner, Point):
                    out.append(Point(_add(w.lo, inner.pt), inner.loc))
                else:
                    out.append(Interval(_add(w.lo, inner.lo), _add(w.lo, inner.hi), inner.loc))
        return replace(w2, name=base, idx=tuple(out))

    def visit_Call(self, s: Call):
        # nested calls: rewrite arguments into caller names; the outer inliner
        # inlines the call afterwards.
        return replace(s, args=tuple(self.visit(a) for a in s.args))


def inline_body(p: ProcDef):
    """``(body, extra_bounds, keep)``; see the module docstring."""
    if not any(isinstance(n, Call) for n in walk(p.body)):
        return p.body, {}, []
    taken = set(bound_names(p.body)) | {q.name for q in p.params}
    for n in walk(p.body):
        if isinstance(n, Var):
            taken.add(n.name)
    extra: dict = {}
    keep: list = []
    body = _Inliner(taken, extra, keep).visit_block(p.body)
    return body, extra, keep
