"""The edits primitives make, each returning the new IR with its cursor forwarding.

A primitive never splices statements and writes the forwarding beside the splice:
it calls one of these edits (as Exo's internal cursors do with ``_replace``,
``_delete``, ``_wrap``, ``_move``, ``_insert``), which makes the change and returns
:class:`Rewrite` (the new IR, and the function from addresses of the old proc to
addresses of the new one, :mod:`gpudsl.schedule.cursors`).  Edits chain with
:meth:`Rewrite.then`, whose forwarding is the composition.

- :func:`same_shape` / :func:`with_proc` / :func:`update`: statements rewritten in
  place (headers, expressions, memories, the proc's name or preconditions); no
  statement moves, so every cursor stays where it is (the shape is checked).
- :func:`insert`, :func:`delete`: statements added at a gap, or removed.
- :func:`wrap`, :func:`unwrap`: statements become the body of a new statement; a
  statement is replaced by (a copy of) one of its blocks.
- :func:`move`: statements moved to a gap elsewhere in the proc.
- :func:`split`, :func:`join`: a loop's body split over two copies of it; a
  statement's body appended to another's.
- :func:`replace`: any other restructuring; the cursors into what it replaced follow
  the parts it names in ``keep`` (:class:`Moved`, :class:`MovedRange`, :class:`Into`,
  checked against both procs), or become invalid.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from ..ir.addresses import Addr, block_of, replace_block, stmt_at
from ..ir.nodes import For, If, ProcDef
from .cursors import (Into, Moved, MovedRange, compose, fwd_edits, fwd_identity, fwd_insert,
                      fwd_splice)


@dataclass(frozen=True)
class Rewrite:
    """What a primitive's body returns: the new IR and the forwarding function from
    addresses in the old proc to addresses in the new one (made by an edit below)."""

    ir: object
    forward: Callable

    def then(self, edit, *args, **kwargs) -> "Rewrite":
        """``edit(self.ir, *args, **kwargs)`` after this one (addresses in ``args`` are
        addresses of ``self.ir``); ``edit`` may also be a Rewrite made from ``self.ir``."""
        nxt = edit if isinstance(edit, Rewrite) else edit(self.ir, *args, **kwargs)
        return Rewrite(nxt.ir, compose(self.forward, nxt.forward))


# ------------------------------------------------------------------ shape


def _shape(s):
    """The places a statement's cursors can name: its blocks' lengths, recursively."""
    if isinstance(s, (For, If)):
        return (tuple(_shape(x) for x in s.body),
                tuple(_shape(x) for x in getattr(s, "orelse", ())))
    return ()


def _same(old: tuple, new: tuple, what: str) -> None:
    if len(old) != len(new) or any(_shape(a) != _shape(b) for a, b in zip(old, new)):
        raise AssertionError(f"an in-place edit changed the statements' shape ({what})")


def same_shape(old: ProcDef, new: ProcDef) -> Rewrite:
    """``new``: ``old`` with statements rewritten in place, none added, removed or
    moved (every address names the same statement in both)."""
    if new.body is not old.body:
        _same(old.body, new.body, "the proc's body")
    return Rewrite(new, fwd_identity)


def unchanged(pdef: ProcDef) -> Rewrite:
    """No edit (where a chain of edits starts, or a primitive finds nothing to do)."""
    return Rewrite(pdef, fwd_identity)


def with_proc(pdef: ProcDef, **fields) -> Rewrite:
    """The proc with other fields than its body (its name, its preconditions)."""
    if "body" in fields:
        raise AssertionError("with_proc keeps the body; use update or same_shape")
    return Rewrite(pdef.with_(**fields), fwd_identity)


def update(pdef: ProcDef, at: Addr, stmts) -> Rewrite:
    """The ``len(stmts)`` statements from ``at`` rewritten in place as ``stmts`` (the
    same statements, blocks of the same lengths: a loop's hint, an allocation's
    memory, an if taking a loop's place over the same body)."""
    stmts = tuple(stmts)
    baddr, i = at[:-1], at[-1]
    blk = block_of(pdef, baddr)
    _same(blk[i:i + len(stmts)], stmts, "update")
    return Rewrite(replace_block(pdef, baddr, blk[:i] + stmts + blk[i + len(stmts):]),
                   fwd_identity)


# ------------------------------------------------------------------ add / remove


def insert(pdef: ProcDef, gap: Addr, stmts) -> Rewrite:
    """``stmts`` inserted at the gap before ``gap`` (``gap[-1]`` may be the block's
    length: at its end)."""
    stmts = tuple(stmts)
    baddr, i = gap[:-1], gap[-1]
    blk = block_of(pdef, baddr)
    return Rewrite(replace_block(pdef, baddr, blk[:i] + stmts + blk[i:]),
                   fwd_insert(gap, len(stmts)))


def delete(pdef: ProcDef, at: Addr, n: int = 1) -> Rewrite:
    """The ``n`` statements from ``at`` removed (their cursors become invalid)."""
    baddr, i = at[:-1], at[-1]
    blk = block_of(pdef, baddr)
    return Rewrite(replace_block(pdef, baddr, blk[:i] + blk[i + n:]),
                   fwd_splice(at, 0, None, n_old=n))


def _spliced(pdef, at, stmts, n_old):
    baddr, i = at[:-1], at[-1]
    blk = block_of(pdef, baddr)
    return replace_block(pdef, baddr, blk[:i] + tuple(stmts) + blk[i + n_old:])


def replace(pdef: ProcDef, at: Addr, stmts, n_old: int = 1, keep=()) -> Rewrite:
    """The ``n_old`` statements from ``at`` replaced by ``stmts``.  A cursor into
    them follows the most specific part of ``keep`` that covers it (addresses
    relative to the replaced statements: ``(j,)`` is the j-th; see
    :class:`~gpudsl.schedule.cursors.Moved`), else it becomes invalid.  Each part is
    checked: what it moves exists in the old statements and where it goes exists in
    the new proc."""
    stmts = tuple(stmts)
    old = block_of(pdef, at[:-1])[at[-1]:at[-1] + n_old]
    ir = _spliced(pdef, at, stmts, n_old)
    for part in keep:
        _check_part(part, old, ir)
    return Rewrite(ir, fwd_edits(at, len(stmts), keep, n_old=n_old))


def _node_at(stmts: tuple, rel: tuple):
    """The statement or block at the relative address ``rel`` of ``stmts``."""
    node = stmts
    for step in rel:
        node = node[step] if isinstance(step, int) else getattr(node, step)
    return node


def _check_part(part, old: tuple, ir: ProcDef) -> None:
    try:
        if isinstance(part, MovedRange):
            src = _node_at(old, part.old_block)
            dst = block_of(ir, part.new_block)
            hi = len(src) if part.hi is None else part.hi
            ok = part.start + max(0, hi - part.lo) <= len(dst)
        else:
            src = _node_at(old, part.old)
            new = part.new
            dst = block_of(ir, new) if new and isinstance(new[-1], str) else stmt_at(ir, new)
            # a statement goes to a statement, a block to a block; into: a statement
            ok = (isinstance(part, Moved) and isinstance(src, tuple) == isinstance(dst, tuple)
                  or isinstance(part, Into) and not isinstance(dst, tuple))
    except (IndexError, AttributeError, TypeError):
        ok = False
    if not ok:
        raise AssertionError(f"the edit's forwarding part {part} names nothing there")


# ------------------------------------------------------------------ nest / un-nest


def wrap(pdef: ProcDef, at: Addr, n: int, stmt) -> Rewrite:
    """The ``n`` statements from ``at`` replaced by ``stmt``, whose body holds them
    (rewritten in place): their cursors follow into its body."""
    _same(block_of(pdef, at[:-1])[at[-1]:at[-1] + n], tuple(stmt.body), "wrap")
    return replace(pdef, at, [stmt], n_old=n,
                   keep=[MovedRange((), 0, None, at + ("body",), 0)])


def unwrap(pdef: ProcDef, at: Addr, field: str = "body", stmts=None) -> Rewrite:
    """The statement at ``at`` replaced by its block ``field`` (or by ``stmts``, which
    begin with a copy of that block: the unrolled copies of a loop's body); the
    cursors into the block follow its first copy, the statement's own become invalid."""
    block = getattr(stmt_at(pdef, at), field)
    stmts = block if stmts is None else tuple(stmts)
    hi = None if len(stmts) >= len(block) else len(stmts)  # no copy: nothing to follow
    return replace(pdef, at, stmts, keep=[MovedRange((0, field), 0, hi, at[:-1], at[-1])])


# ------------------------------------------------------------------ move


def move(pdef: ProcDef, at: Addr, gap: Addr, n: int = 1) -> Rewrite:
    """The ``n`` statements from ``at`` moved to the gap before ``gap`` (an address of
    ``pdef``, outside them); their cursors follow them."""
    L = len(at) - 1
    src_b, i = at[:-1], at[-1]
    if len(gap) > L and gap[:L] == src_b and (
            i <= gap[L] < i + n if len(gap) > L + 1 else i < gap[L] < i + n):
        raise AssertionError("a move into the statements it moves")
    stmts = block_of(pdef, src_b)[i:i + n]
    cut = delete(pdef, at, n)
    g = _shifted(gap, src_b, i + n, -n)  # the gap once they are gone
    put = insert(cut.ir, g, stmts)

    def forward(addr: Addr) -> Addr:
        if len(addr) > L and addr[:L] == src_b and i <= addr[L] < i + n:
            return g[:-1] + (g[-1] + addr[L] - i,) + addr[L + 1:]
        return put.forward(cut.forward(addr))

    return Rewrite(put.ir, forward)


def _shifted(addr: Addr, baddr: Addr, start: int, by: int) -> Addr:
    """``addr`` with its index in the block ``baddr`` moved by ``by`` where it is at
    least ``start``."""
    L = len(baddr)
    if len(addr) > L and addr[:L] == baddr and addr[L] >= start:
        return addr[:L] + (addr[L] + by,) + addr[L + 1:]
    return addr


# ------------------------------------------------------------------ split / join


def split(pdef: ProcDef, at: Addr, k: int, halves) -> Rewrite:
    """The loop (or if) at ``at`` replaced by two copies, ``halves``: the first runs
    its body's statements before ``k``, the second the rest (rewritten in place).
    The statement's cursor follows the first; its statements follow their half."""
    first, second = halves
    body = stmt_at(pdef, at).body
    _same(body[:k], tuple(first.body), "split")
    _same(body[k:], tuple(second.body), "split")
    sib = at[:-1] + (at[-1] + 1,)
    return replace(pdef, at, halves, keep=[
        Moved((0,), at), MovedRange((0, "body"), 0, k, at + ("body",), 0),
        MovedRange((0, "body"), k, None, sib + ("body",), 0)])


def join(pdef: ProcDef, at: Addr, other: Addr, stmt) -> Rewrite:
    """The statement at ``at`` replaced by ``stmt``, whose body is its body followed
    by the body of the statement at ``other`` (later in the same block), which is
    removed: the cursors of ``other`` and its statements follow into ``stmt``."""
    n1 = len(stmt_at(pdef, at).body)
    _same(stmt_at(pdef, at).body + stmt_at(pdef, other).body, tuple(stmt.body), "join")
    ir = _spliced(pdef, at, [stmt], 1)
    return replace(ir, other, [], keep=[
        Moved((0,), at), MovedRange((0, "body"), 0, None, at + ("body",), n1)])


__all__ = ["Rewrite", "unchanged", "same_shape", "with_proc", "update", "insert", "delete", "replace",
           "wrap", "unwrap", "move", "split", "join", "Moved", "MovedRange", "Into"]
