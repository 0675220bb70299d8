"""Cursors: stable names for loops, statements, allocations, blocks and gaps.

An *address* is a tuple ``(i0, f0, i1, f1, ..., ik)``: statement ``ik`` of the
block in field ``f{k-1}`` (``"body"`` or ``"orelse"``) of statement
``i{k-1}`` ... of the proc's body.  A *block address* is the odd-length prefix
ending in a field name; the proc's body is the block ``()``.

A ``Cursor`` is ``(proc, kind, addr, hi)`` with ``kind`` one of

- ``"stmt"``: the statement at ``addr`` (a loop, an allocation, anything);
- ``"block"``: statements ``addr[-1] .. hi-1`` of the block ``addr[:-1]``;
- ``"gap"``: the place before statement ``addr[-1]`` of block ``addr[:-1]``;
- ``"expr"``: the expression at path ``hi`` (field names / tuple indices)
  inside the statement at ``addr``.

Every primitive returns a proc whose ``_origin`` is ``(old_proc, fwd)``, where
``fwd`` maps a statement address of the old proc to one of the new proc (or
raises ``InvalidCursor``).  ``new.forward(c)`` replays those maps from
``c``'s proc to ``new``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..errors import SchedulingError
from ..ir.addresses import (Addr, ancestors, block_of, iter_stmts, replace_block, splice,
                            stmt_at)
from ..ir.nodes import Alloc, Expr, For, If, Node


class InvalidCursor(Exception):
    """A cursor's target no longer exists in the forwarded proc."""


# ------------------------------------------------------------------ forwarding


def fwd_identity(addr: Addr) -> Addr:
    return addr


def fwd_splice(at: Addr, n_new: int, inner: Callable[[Addr], Addr] | None = None,
               n_old: int = 1):
    """Forwarding for "the ``n_old`` statements from ``at`` became ``n_new``
    statements".

    ``inner(rest)`` maps the part of an address from ``at``'s index on (``(j,)``
    for the j-th replaced statement, ``(j, "body", ...)`` below it) to a full
    new address; without it, such cursors become invalid.
    """
    baddr, i = at[:-1], at[-1]
    L = len(baddr)

    def f(addr: Addr) -> Addr:
        if len(addr) <= L or addr[:L] != baddr:
            return addr
        j = addr[L]
        if j < i:
            return addr
        if j >= i + n_old:
            return baddr + (j + n_new - n_old,) + addr[L + 1:]
        if inner is None:
            raise InvalidCursor("the statement was removed")
        r = inner((j - i,) + addr[L + 1:])
        if r is None:
            raise InvalidCursor("the statement was removed")
        return r

    return f


@dataclass(frozen=True)
class Moved:
    """Edit: the node at ``old`` (relative to the replaced statements: ``(j,)`` is the
    j-th, ``(j, "body", ...)`` below it) and everything under it now lives at ``new``
    (an absolute address; ``old``'s suffixes follow)."""

    old: tuple
    new: Addr

    def apply(self, r: tuple):
        n = len(self.old)
        return (n, self.new + r[n:]) if r[:n] == self.old else None


@dataclass(frozen=True)
class MovedRange:
    """Edit: statements ``lo`` to ``hi`` (exclusive; None: to the end) of the old block
    ``old_block`` (relative, as for :class:`Moved`; ``()`` is the replaced statements
    themselves) now start at index ``start`` of the block ``new_block`` (absolute)."""

    old_block: tuple
    lo: int
    hi: int | None
    new_block: Addr
    start: int

    def apply(self, r: tuple):
        n = len(self.old_block)
        if len(r) <= n or r[:n] != self.old_block or not isinstance(r[n], int):
            return None
        j = r[n]
        if j < self.lo or (self.hi is not None and j >= self.hi):
            return None
        return n + 1, self.new_block + (self.start + j - self.lo,) + r[n + 1:]


@dataclass(frozen=True)
class Into:
    """Edit: the node at ``old`` and everything under it became part of the statement
    at ``new``: their cursors point at ``new`` itself."""

    old: tuple
    new: Addr

    def apply(self, r: tuple):
        n = len(self.old)
        return (n, self.new) if r[:n] == self.old else None


def fwd_edits(at: Addr, n_new: int, edits, n_old: int = 1):
    """Forwarding derived from the edits a primitive made when it replaced the
    ``n_old`` statements from ``at`` by ``n_new``: an address inside them follows the
    most specific edit that covers it (:class:`Moved`, :class:`MovedRange`,
    :class:`Into`); one no edit covers was removed."""
    edits = tuple(edits)

    def inner(r: Addr):
        best = None
        for e in edits:
            hit = e.apply(r)
            if hit is not None and (best is None or hit[0] > best[0]):
                best = hit
        return None if best is None else best[1]

    return fwd_splice(at, n_new, inner, n_old=n_old)


def fwd_insert(gap_addr: Addr, n_new: int):
    """Forwarding for ``n_new`` statements inserted at a gap (before ``gap_addr``)."""
    baddr, i = gap_addr[:-1], gap_addr[-1]
    L = len(baddr)

    def f(addr: Addr) -> Addr:
        if len(addr) <= L or addr[:L] != baddr or addr[L] < i:
            return addr
        return baddr + (addr[L] + n_new,) + addr[L + 1:]

    return f


def compose(*fs):
    def f(addr):
        for g in fs:
            addr = g(addr)
        return addr

    return f


# ------------------------------------------------------------------ cursors


@dataclass(frozen=True, eq=False)
class Cursor:
    proc: object  # gpudsl.Proc
    kind: str  # "stmt" | "block" | "gap" | "expr"
    addr: Addr
    hi: object = None  # block: end index; expr: path inside the statement

    # -- what it points at
    def node(self):
        pdef = self.proc.ir
        if self.kind == "stmt":
            return stmt_at(pdef, self.addr)
        if self.kind == "block":
            return block_of(pdef, self.addr[:-1])[self.addr[-1]:self.hi]
        if self.kind == "expr":
            return expr_at(stmt_at(pdef, self.addr), self.hi)
        return None

    def stmts(self) -> tuple:
        if self.kind == "stmt":
            return (self.node(),)
        if self.kind == "block":
            return self.node()
        raise TypeError("a gap holds no statements")

    @property
    def loc(self):
        n = self.node() if self.kind != "gap" else None
        if isinstance(n, tuple):
            n = n[0] if n else None
        if n is None and self.kind == "gap":
            blk = block_of(self.proc.ir, self.addr[:-1])
            i = self.addr[-1]
            n = blk[i] if i < len(blk) else (blk[i - 1] if blk else None)
        return getattr(n, "loc", None)

    def is_loop(self) -> bool:
        return self.kind == "stmt" and isinstance(self.node(), For)

    # -- navigation
    def parent(self) -> "Cursor":
        a = self.addr
        if self.kind == "expr":
            return Cursor(self.proc, "stmt", a)
        if len(a) < 2:
            raise InvalidCursor("the proc's body has no parent statement")
        return Cursor(self.proc, "stmt", a[:-2])

    def body(self) -> "Cursor":
        s = self.node()
        if not isinstance(s, (For, If)):
            raise InvalidCursor("only loops and ifs have a body")
        return Cursor(self.proc, "block", self.addr + ("body", 0), len(s.body))

    def orelse(self) -> "Cursor":
        s = self.node()
        if not isinstance(s, If):
            raise InvalidCursor("only ifs have an else block")
        return Cursor(self.proc, "block", self.addr + ("orelse", 0), len(s.orelse))

    def before(self) -> "Cursor":
        if self.kind == "gap":
            return self
        return Cursor(self.proc, "gap", self.addr)

    def after(self) -> "Cursor":
        if self.kind == "gap":
            return self
        end = self.hi if self.kind == "block" else self.addr[-1] + 1
        return Cursor(self.proc, "gap", self.addr[:-1] + (end,))

    def next(self) -> "Cursor":
        end = self.hi if self.kind == "block" else self.addr[-1] + 1
        if end >= len(block_of(self.proc.ir, self.addr[:-1])):
            raise InvalidCursor("no statement after this one")
        return Cursor(self.proc, "stmt", self.addr[:-1] + (end,))

    def prev(self) -> "Cursor":
        if self.addr[-1] == 0:
            raise InvalidCursor("no statement before this one")
        return Cursor(self.proc, "stmt", self.addr[:-1] + (self.addr[-1] - 1,))

    def expand(self, before: int = 0, after: int = 0) -> "Cursor":
        """A block cursor growing this statement/block by statements around it."""
        lo = self.addr[-1] - before
        hi = (self.hi if self.kind == "block" else self.addr[-1] + 1) + after
        n = len(block_of(self.proc.ir, self.addr[:-1]))
        if lo < 0 or hi > n:
            raise InvalidCursor("the block does not have that many statements")
        return Cursor(self.proc, "block", self.addr[:-1] + (lo,), hi)

    def as_block(self) -> "Cursor":
        if self.kind == "block":
            return self
        return Cursor(self.proc, "block", self.addr, self.addr[-1] + 1)

    def __repr__(self):
        n = self.node()
        from ..ir.printer import print_expr, print_stmt

        if self.kind == "stmt":
            text = print_stmt(n)[0].strip()
        elif self.kind == "expr":
            text = print_expr(n)
        elif self.kind == "block":
            text = "; ".join(print_stmt(s)[0].strip() for s in n)
        else:
            text = "gap"
        return f"<Cursor {self.kind} {self.addr} {text!r}>"

    def __eq__(self, other):
        return (isinstance(other, Cursor) and other.proc is self.proc and
                other.kind == self.kind and other.addr == self.addr and other.hi == self.hi)

    def __hash__(self):
        return hash((id(self.proc), self.kind, self.addr, str(self.hi)))


def expr_at(node: Node, path: tuple):
    for step in path:
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return node


# ------------------------------------------------------------------ finding


def _names(p, cls) -> list[str]:
    """The loops' (``For``) or allocations' (``Alloc``) names of ``p`` in program order,
    as patterns name them (``"i #2"`` for the second loop over ``i``)."""
    from ..ir.visitor import block_stmts

    out, seen = [], {}
    for s in block_stmts(p.ir.body):
        if isinstance(s, cls):
            name = s.iter if isinstance(s, For) else s.name
            seen[name] = seen.get(name, 0) + 1
            out.append(name if seen[name] == 1 else f"{name} #{seen[name]}")
    return out


def _err(what: str, pattern, p) -> SchedulingError:
    from ..ir.nodes import Alloc, For

    hint = "print the proc to see its loops and statements"
    cls = {"loop": For, "allocation": Alloc}.get(what)
    if cls is not None:
        names = _names(p, cls)
        hint = (f"the {what}s of {p.name}: {', '.join(names)}" if names
                else f"{p.name} has no {what}")
    return SchedulingError("find", f"no {what} matches {pattern!r} in proc {p.name}",
                           p.ir.loc, hint)


def _find_stmts(p, pattern, many: bool, match, what: str):
    found = match(p.ir, pattern)
    if not found:
        raise _err(what, pattern, p)
    cs = [Cursor(p, "stmt", a) for a in found]
    return cs if many else cs[0]


def find_loop(p, pattern, many: bool = False):
    from .patterns import match_loops

    return _find_stmts(p, pattern, many, match_loops, "loop")


def find_alloc(p, pattern, many: bool = False):
    from .patterns import match_allocs

    return _find_stmts(p, pattern, many, match_allocs, "allocation")


def find(p, pattern, many: bool = False):
    from .patterns import match_pattern

    found = match_pattern(p.ir, pattern)
    if not found:
        raise _err("statement or expression", pattern, p)
    cs = [Cursor(p, "expr", a, path) if path is not None else Cursor(p, "stmt", a)
          for a, path in found]
    return cs if many else cs[0]


def body(p) -> Cursor:
    return Cursor(p, "block", (0,), len(p.ir.body))


def forward(p, c: Cursor) -> Cursor:
    """``c`` (a cursor into ``p`` or an earlier proc of its chain) moved to ``p``."""
    if c.proc is p:
        return c
    chain = []
    q = p
    while q is not None and q is not c.proc:
        if q._origin is None:
            q = None
            break
        chain.append(q._origin[1])
        q = q._origin[0]
    if q is None:
        if c.proc == p:  # an equal proc (e.g. rebuilt identically): same addresses
            return Cursor(p, c.kind, c.addr, c.hi)
        raise SchedulingError("forward", "this cursor belongs to a proc that is not an "
                              "ancestor of this one", None,
                              "find the cursor again in the new proc")
    chain.reverse()
    try:
        return _forward_through(p, c, chain)
    except InvalidCursor as exc:
        raise SchedulingError("forward", f"the cursor's target no longer exists: {exc}",
                              c.loc, "find it again in the new proc") from None


def _forward_through(p, c: Cursor, chain) -> Cursor:
    kind, addr, hi = c.kind, c.addr, c.hi
    if kind in ("stmt", "expr"):
        for f in chain:
            addr = f(addr)
        return Cursor(p, kind, addr, hi)
    if kind == "block":
        first = addr
        last = addr[:-1] + (hi - 1,)
        for f in chain:
            first, last = f(first), f(last)
        if first[:-1] != last[:-1]:
            raise InvalidCursor("the block was split apart")
        return Cursor(p, "block", first, last[-1] + 1)
    # gap: follow the statement after it, else the one before it
    q = c.proc
    blk = block_of(q.ir, addr[:-1])
    i = addr[-1]
    if i < len(blk):
        a = addr
        for f in chain:
            a = f(a)
        return Cursor(p, "gap", a)
    a = addr[:-1] + (i - 1,)
    for f in chain:
        a = f(a)
    return Cursor(p, "gap", a[:-1] + (a[-1] + 1,))


# ------------------------------------------------------------------ resolving arguments


def _find_stmt_or_loop(p, x: str, want: str) -> Cursor:
    from .patterns import _LOOP_RE, match_loops

    if want in ("stmt", "block") and _LOOP_RE.match(x) and match_loops(p.ir, x):
        return find_loop(p, x)
    return find(p, x)


# how a pattern string is looked up, by the kind of cursor a primitive wants
_FINDERS = {"loop": lambda p, x, want: find_loop(p, x),
            "alloc": lambda p, x, want: find_alloc(p, x)}


def _as_loop(c):
    return c if c.is_loop() else f"expected a loop, got {c!r}"


def _as_alloc(c):
    ok = c.kind == "stmt" and isinstance(c.node(), Alloc)
    return c if ok else f"expected an allocation, got {c!r}"


def _as_block(c):
    if c.kind == "stmt":
        return c.as_block()
    return c if c.kind == "block" else f"expected statements, got {c!r}"


def _as_stmt(c):
    if c.kind == "stmt":
        return c
    if c.kind == "block" and c.hi - c.addr[-1] == 1:
        return Cursor(c.proc, "stmt", c.addr)
    return f"expected one statement, got {c!r}"


def _as_gap(c):
    return c if c.kind == "gap" else ("expected a gap between statements (cursor.before() "
                                      "or cursor.after())")


def _as_expr(c):
    return c if c.kind == "expr" else f"expected an expression, got {c!r}"


# what a found cursor must be (or become) for each kind: the cursor, or why not
_SHAPES = {"loop": _as_loop, "alloc": _as_alloc, "block": _as_block, "stmt": _as_stmt,
           "gap": _as_gap, "expr": _as_expr}


def resolve(p, x, prim: str, want: str = "stmt") -> Cursor:
    """A primitive's argument (string or cursor) as a cursor into ``p``.

    ``want``: "loop", "alloc", "stmt", "block", "gap", "expr" (the keys of ``_SHAPES``).
    Errors name ``prim``.
    """
    if isinstance(x, Cursor):
        c = forward(p, x) if x.proc is not p else x
    elif isinstance(x, str):
        try:
            c = _FINDERS.get(want, _find_stmt_or_loop)(p, x, want)
        except SchedulingError as exc:
            raise SchedulingError(prim, exc.reason, p.ir.loc, exc.hint) from None
    else:
        raise SchedulingError(prim, f"expected a cursor or a pattern string, got {x!r}",
                              p.ir.loc)
    try:
        c.node()
    except (IndexError, AttributeError, TypeError):
        raise SchedulingError(prim, "the cursor points at nothing in this proc",
                              p.ir.loc) from None
    shaped = _SHAPES[want](c)
    if isinstance(shaped, str):
        raise SchedulingError(prim, shaped, c.loc)
    return shaped


__all__ = ["Cursor", "InvalidCursor", "find_loop", "find_alloc", "find", "forward", "body",
           "resolve", "stmt_at", "block_of", "splice", "replace_block",
           "iter_stmts", "ancestors", "fwd_splice", "fwd_edits", "Moved", "MovedRange", "Into",
           "fwd_insert", "fwd_identity", "compose",
           "expr_at", "Expr"]
