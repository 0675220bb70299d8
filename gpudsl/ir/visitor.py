"""Generic traversal of the IR: walking, rebuilding, substituting.

The rewrite primitives and the analyses use these instead of writing a case per
node class.  Children are the fields that hold nodes or tuples of nodes, except
``Call.proc`` (the callee is a separate proc; see :func:`inline_calls` style
passes for seeing through calls).
"""
from __future__ import annotations

from dataclasses import fields, replace
from functools import lru_cache
from typing import Callable, Iterator

from .nodes import (Alloc, Arrive, AsyncCopy, Atomic, Wait, Assign, Call, Expr, For, If, Node,
                    Read, Reduce, Stmt, TmaLoad, Var, WindowArg)


@lru_cache(maxsize=None)
def _child_fields(cls) -> tuple[str, ...]:
    out = []
    for f in fields(cls):
        if f.name == "loc" or f.metadata.get("child") is False:
            continue
        if f.name in ("ty", "mem", "mapping"):
            continue
        out.append(f.name)
    return tuple(out)


def children(node: Node) -> Iterator[Node]:
    """The direct child nodes of ``node``, in field order."""
    for name in _child_fields(type(node)):
        v = getattr(node, name)
        if isinstance(v, Node):
            yield v
        elif isinstance(v, tuple):
            for x in v:
                if isinstance(x, Node):
                    yield x


def walk(node: Node | tuple) -> Iterator[Node]:
    """Every node under ``node`` (pre-order), ``node`` included.  Accepts a
    statement block (tuple) too."""
    stack = list(reversed(node)) if isinstance(node, tuple) else [node]
    while stack:
        n = stack.pop()
        yield n
        stack.extend(reversed(list(children(n))))


_KINDS: dict = {}  # id(statement or block) -> (it, its kinds): nodes are immutable


def kinds(node) -> frozenset:
    """The classes of every node under ``node`` (a node or a statement block, through
    ``Call.proc`` into the callees' bodies).  Remembered per statement and block, so
    asking again after a rewrite that shares most of the tree costs the changed part
    (the per-primitive guards ask it of every result; issue 28)."""
    if isinstance(node, Expr):
        return frozenset(type(n) for n in walk(node))
    hit = _KINDS.get(id(node))
    if hit is not None and hit[0] is node:
        return hit[1]
    if isinstance(node, tuple):
        out: frozenset = frozenset().union(*(kinds(s) for s in node
                                             if isinstance(s, Node)))
    else:
        parts = [{type(node)}]
        for c in children(node):
            parts.append(kinds(c))
        if isinstance(node, Call) and getattr(node.proc, "body", None) is not None:
            parts.append(kinds(node.proc.body))
        out = frozenset().union(*parts)
    if len(_KINDS) > 200_000:
        _KINDS.clear()
    _KINDS[id(node)] = (node, out)
    return out


class Transformer:
    """Rebuilds a tree bottom-up where something changed, sharing the rest.

    Override ``visit_<ClassName>(node)``; call ``self.generic(node)`` to recurse
    into children.  A statement visitor may return a tuple of statements (or
    ``()`` to delete): blocks are flattened.
    """

    def visit(self, node):
        m = getattr(self, "visit_" + type(node).__name__, None)
        return m(node) if m is not None else self.generic(node)

    def visit_block(self, stmts: tuple) -> tuple:
        out: list = []
        changed = False
        for s in stmts:
            r = self.visit(s)
            if isinstance(r, tuple):
                out.extend(r)
                changed = True
            else:
                out.append(r)
                changed = changed or r is not s
        return tuple(out) if changed else stmts

    def generic(self, node):
        updates = {}
        for name in _child_fields(type(node)):
            v = getattr(node, name)
            if isinstance(v, Node):
                nv = self.visit(v)
            elif isinstance(v, tuple) and v and isinstance(v[0], Stmt):
                nv = self.visit_block(v)
            elif isinstance(v, tuple) and any(isinstance(x, Node) for x in v):
                nv = tuple(self.visit(x) if isinstance(x, Node) else x for x in v)
                if all(a is b for a, b in zip(nv, v)):
                    nv = v
            else:
                continue
            if nv is not v:
                updates[name] = nv
        return replace(node, **updates) if updates else node


class ExprMap(Transformer):
    """Applies ``fn`` to every expression bottom-up (``fn`` returns a new
    expression or the same one)."""

    def __init__(self, fn: Callable[[Expr], Expr]):
        self.fn = fn

    def visit(self, node):
        node = super().visit(node)
        if isinstance(node, Expr):
            return self.fn(node)
        return node


def substitute(node, env: dict[str, Expr]):
    """Replace control variables (``Var``) by expressions.  ``env`` maps names."""
    if not env:
        return node

    def fn(e: Expr) -> Expr:
        if isinstance(e, Var) and e.name in env:
            return env[e.name]
        return e

    return ExprMap(fn).visit(node) if not isinstance(node, tuple) else ExprMap(fn).visit_block(node)


class _Renamer(Transformer):
    def __init__(self, env: dict[str, str]):
        self.env = env

    def _n(self, name: str) -> str:
        return self.env.get(name, name)

    def visit_Var(self, e):
        return replace(e, name=self._n(e.name)) if e.name in self.env else e

    def visit_Read(self, e):
        e = self.generic(e)
        return replace(e, name=self._n(e.name)) if e.name in self.env else e

    visit_WindowArg = visit_Read

    def _named_stmt(self, s):
        s = self.generic(s)
        return replace(s, name=self._n(s.name)) if s.name in self.env else s

    visit_Assign = visit_Reduce = visit_Alloc = visit_Arrive = visit_Wait = _named_stmt
    visit_TmaLoad = _named_stmt

    def visit_AsyncCopy(self, s):
        s = self.generic(s)
        bar = None if s.bar is None else self._n(s.bar)
        return replace(s, dst=self._n(s.dst), src=self._n(s.src), bar=bar)

    def visit_Atomic(self, s):
        s = self._named_stmt(s)
        return replace(s, result=self._n(s.result)) if s.result in self.env else s

    def visit_For(self, s: For):
        s = self.generic(s)
        return replace(s, iter=self._n(s.iter)) if s.iter in self.env else s


def rename(node, env: dict[str, str]):
    """Rename variables, arrays and loop iterators everywhere in ``node``."""
    r = _Renamer(env)
    return r.visit_block(node) if isinstance(node, tuple) else r.visit(node)


def free_vars(node) -> set[str]:
    """Names of ``Var`` nodes and read/written arrays used in ``node``."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, Var):
            out.add(n.name)
        elif isinstance(n, (Read, WindowArg, Assign, Reduce, Atomic, Arrive, Wait, TmaLoad)):
            out.add(n.name)
            if isinstance(n, Atomic) and n.result is not None:
                out.add(n.result)
        elif isinstance(n, AsyncCopy):
            out.update((n.dst, n.src))
            if n.bar is not None:
                out.add(n.bar)
    return out


def bound_names(node) -> set[str]:
    """Every name a proc or block binds: loop iterators and allocations."""
    out: set[str] = set()
    for n in walk(node):
        if isinstance(n, For):
            out.add(n.iter)
        elif isinstance(n, Alloc):
            out.add(n.name)
    return out


def fresh_name(base: str, taken: set[str]) -> str:
    """``base`` if free, else ``base_1``, ``base_2``, ..."""
    if base not in taken:
        return base
    k = 1
    while f"{base}_{k}" in taken:
        k += 1
    return f"{base}_{k}"


def block_stmts(body: tuple) -> Iterator[Stmt]:
    """The statements of the block ``body`` and of the blocks nested in it (loop
    bodies, both branches of an ``if``), in program order; neither expressions nor
    called procs are entered (:func:`walk` enters both)."""
    stack = list(reversed(body))
    while stack:
        s = stack.pop()
        yield s
        if isinstance(s, For):
            stack.extend(reversed(s.body))
        elif isinstance(s, If):
            stack.extend(reversed(s.body + s.orelse))


def stmts_of(node) -> Iterator[Stmt]:
    for n in walk(node):
        if isinstance(n, Stmt):
            yield n


def calls_in(node) -> Iterator[Call]:
    for n in walk(node):
        if isinstance(n, Call):
            yield n


__all__ = ["children", "walk", "Transformer", "ExprMap", "substitute", "rename",
           "free_vars", "bound_names", "fresh_name", "block_stmts", "stmts_of", "calls_in",
           "If", "For"]
