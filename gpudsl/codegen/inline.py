"""Inlining calls of sub-procs before code generation.

Code generation emits one flat body per kernel: every call of a ``@proc`` is
replaced by the callee's body, with

- size and index parameters substituted by the argument expressions,
- scalar parameters substituted by the argument expression (or, when the callee
  writes memory that the argument reads, by a fresh REGISTER scalar holding the
  value at the call, so the pass-by-value meaning is kept),
- window parameters resolved into index arithmetic on the caller's array:
  ``w[i, j]`` with ``w = x[r, a:b, c:d]`` becomes ``x[r, a + i, c + j]``,
- the callee's loop variables and allocations renamed where they would clash
  with a name of the caller (the original name is kept when it is free, so the
  generated code stays readable).

Calls of ``@instr`` procs stay calls (their template is emitted), with their
window arguments resolved the same way.  Statements keep the source locations
of the callee, so ``#line`` directives point into the callee's source.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Call, Const, Expr, For, Interval,
                        Point, ProcDef, Read, Reduce, Stmt, Var, WindowArg)
from ..ir.types import INDEX, REGISTER
from ..ir.visitor import Transformer, bound_names, fresh_name, free_vars, walk


def add(a: Expr, b: Expr) -> Expr:
    """``a + b`` with the trivial cases folded (keeps generated indices short)."""
    if isinstance(a, Const) and a.val == 0 and a.ty.is_integer:
        return b
    if isinstance(b, Const) and b.val == 0 and b.ty.is_integer:
        return a
    if isinstance(a, Const) and isinstance(b, Const) and a.ty == b.ty and a.ty.is_integer:
        return Const(a.val + b.val, a.ty, a.loc)
    return BinOp("+", a, b, INDEX, getattr(b, "loc", None))


def compose_index(win: WindowArg, idx: tuple) -> tuple:
    """Indices into ``win``'s dimensions → indices into the underlying array."""
    if not win.idx:
        return tuple(idx)
    out = []
    it = iter(idx)
    for part in win.idx:
        if isinstance(part, Point):
            out.append(part.pt)
        else:
            out.append(add(part.lo, next(it)))
    return tuple(out)


def compose_window(win: WindowArg, inner: WindowArg) -> WindowArg:
    """``inner`` (a window of the window parameter bound to ``win``) as a window
    of ``win``'s underlying array."""
    if not inner.idx:
        return replace(win, loc=inner.loc or win.loc)
    if not win.idx:
        return WindowArg(win.name, inner.idx, win.ty, inner.loc)
    out = []
    it = iter(inner.idx)
    for part in win.idx:
        if isinstance(part, Point):
            out.append(part)
            continue
        q = next(it)
        if isinstance(q, Point):
            out.append(Point(add(part.lo, q.pt), q.loc))
        else:
            out.append(Interval(add(part.lo, q.lo), add(part.lo, q.hi), q.loc))
    return WindowArg(win.name, tuple(out), win.ty, inner.loc)


class _Subst(Transformer):
    """Rewrites a callee body into the caller's names."""

    def __init__(self, var_env, scalar_env, win_env, renames):
        self.var_env = var_env
        self.scalar_env = scalar_env
        self.win_env = win_env
        self.renames = renames

    def _name(self, n: str) -> str:
        return self.renames.get(n, n)

    def visit_Var(self, e: Var):
        if e.name in self.var_env:
            return self.var_env[e.name]
        if e.name in self.renames:
            return replace(e, name=self.renames[e.name])
        return e

    def visit_Read(self, e: Read):
        e = self.generic(e)
        if e.name in self.scalar_env and not e.idx:
            return self.scalar_env[e.name]
        if e.name in self.win_env:
            w = self.win_env[e.name]
            return Read(w.name, compose_index(w, e.idx), e.ty, e.loc)
        return replace(e, name=self._name(e.name)) if e.name in self.renames else e

    def visit_WindowArg(self, e: WindowArg):
        e = self.generic(e)
        if e.name in self.win_env:
            return compose_window(self.win_env[e.name], e)
        return replace(e, name=self._name(e.name)) if e.name in self.renames else e

    def _target(self, s):
        s = self.generic(s)
        if s.name in self.win_env:
            w = self.win_env[s.name]
            return replace(s, name=w.name, idx=compose_index(w, s.idx))
        return replace(s, name=self._name(s.name)) if s.name in self.renames else s

    visit_Assign = visit_Reduce = visit_Atomic = _target

    def visit_Alloc(self, s: Alloc):
        s = self.generic(s)
        return replace(s, name=self._name(s.name)) if s.name in self.renames else s

    def visit_For(self, s: For):
        s = self.generic(s)
        return replace(s, iter=self._name(s.iter)) if s.iter in self.renames else s


def written_names(body) -> set[str]:
    """Arrays and scalars written in ``body`` (instr calls: the arguments of
    parameters the instr's body writes)."""
    out: set[str] = set()
    for n in walk(body):
        if isinstance(n, (Assign, Reduce, Atomic)):
            out.add(n.name)
        elif isinstance(n, Call):
            w = written_names(n.proc.body)
            for p, a in zip(n.proc.params, n.args):
                if isinstance(a, WindowArg) and p.name in w:
                    out.add(a.name)
    return out


class Inliner:
    def __init__(self, taken: set[str]):
        self.taken = set(taken)
        self._inlined: dict[int, ProcDef] = {}

    def callee(self, p: ProcDef) -> ProcDef:
        """``p`` with its own calls inlined (memoised per callee)."""
        key = id(p)
        if key not in self._inlined:
            inner = Inliner(set(free_vars(p.body)) | bound_names(p.body)
                            | {q.name for q in p.params})
            self._inlined[key] = replace(p, body=inner.block(p.body))
        return self._inlined[key]

    def block(self, body: tuple) -> tuple:
        out: list[Stmt] = []
        for s in body:
            out.extend(self.stmt(s))
        return tuple(out)

    def stmt(self, s: Stmt) -> tuple:
        if isinstance(s, Call):
            if s.proc.instr is not None:
                return (s,)
            return self.expand(s)
        if isinstance(s, For):
            return (replace(s, body=self.block(s.body)),)
        if hasattr(s, "orelse"):  # If
            return (replace(s, body=self.block(s.body), orelse=self.block(s.orelse)),)
        return (s,)

    def expand(self, call: Call) -> tuple:
        callee = self.callee(call.proc)
        renames = {}
        for name in sorted(bound_names(callee.body)):
            new = fresh_name(name, self.taken)
            self.taken.add(new)
            if new != name:
                renames[name] = new
        var_env, scalar_env, win_env = {}, {}, {}
        pre: list[Stmt] = []
        for p, a in zip(callee.params, call.args):
            if p.kind in ("size", "index"):
                var_env[p.name] = a
            elif p.kind == "scalar":
                scalar_env[p.name] = a
            else:
                win_env[p.name] = a
        # Pass-by-value: a scalar argument that reads memory the callee writes is
        # evaluated once into a fresh register scalar before the body.
        mapped_writes = set()
        for n in written_names(callee.body):
            mapped_writes.add(win_env[n].name if n in win_env else renames.get(n, n))
        for pname, a in list(scalar_env.items()):
            reads = {n.name for n in walk(a) if isinstance(n, Read)}
            if reads & mapped_writes:
                tmp = fresh_name(pname, self.taken)
                self.taken.add(tmp)
                pre.append(Alloc(tmp, a.ty, (), REGISTER, call.loc))
                pre.append(Assign(tmp, (), a, call.loc))
                scalar_env[pname] = Read(tmp, (), a.ty, call.loc)
        body = _Subst(var_env, scalar_env, win_env, renames).visit_block(callee.body)
        return tuple(pre) + tuple(body)


def inline_calls(p: ProcDef) -> ProcDef:
    """``p`` with every call of a non-instr proc replaced by the callee's body."""
    if not any(isinstance(n, Call) and n.proc.instr is None for n in walk(p.body)):
        return p
    taken = free_vars(p.body) | bound_names(p.body) | {q.name for q in p.params}
    return replace(p, body=Inliner(taken).block(p.body))
