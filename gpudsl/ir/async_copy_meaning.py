"""What the asynchronous copies (docs/async_copies.md) are, in one place: ``async_copy(dst, src)``,
``async_commit()`` and ``async_wait(n)`` (:class:`AsyncCopy`, :class:`AsyncCommit`,
:class:`AsyncWait` in :mod:`gpudsl.ir.nodes`).

Meaning (per thread): each thread has a sequence of *groups*.  ``async_copy`` adds
its copy to the thread's open group; ``async_commit`` closes the open group (it gets
the next number: the number of commits the thread ran before it); ``async_wait(n)``
completes every committed group but the ``n`` most recent, and the copies of a
completed group land there.  A copy of the open group is completed by no wait (commit
first).  At block level, a commit or wait is run by every thread of the block.

Between a copy and the wait that completes it the destination is unreadable, and the
source and destination must not be written; every copy lands before its block ends (the interpreter stops there; check()
proves that no thread does so, other threads reading only after a barrier that
follows the wait).

:func:`elements` lists the element pairs of one copy, which is how the effect
collector, check() and the interpreter see its accesses: ``n`` reads of ``src`` and
``n`` writes of ``dst``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .nodes import (AsyncCommit, AsyncCopy, AsyncWait, Assign, BinOp, Const, Read,
                    Stmt)
from .types import INDEX
from .visitor import kinds

ASYNC_STMTS = (AsyncCopy, AsyncCommit, AsyncWait)
COPY_BYTES = (4, 8, 16)


def is_async(s) -> bool:
    return isinstance(s, ASYNC_STMTS)


def uses_async(pdef, seen=None) -> bool:
    """Does ``pdef`` (or a callee) hold an async copy, commit or wait?"""
    return any(k in ASYNC_STMTS for k in kinds(pdef.body))


def shifted(idx: tuple, k: int) -> tuple:
    """``idx`` with ``k`` added to its last index."""
    if k == 0 or not idx:
        return tuple(idx)
    last = idx[-1]
    if isinstance(last, Const) and isinstance(last.val, int):
        return tuple(idx[:-1]) + (Const(last.val + k, last.ty, last.loc),)
    return tuple(idx[:-1]) + (BinOp("+", last, Const(k, INDEX), last.ty if last.ty.is_integer
                                    else INDEX),)


@dataclass(frozen=True)
class CopyElement(Assign):
    """One element of an async copy, ``dst[i] = src[j]``, as the effect walk sees it:
    an :class:`Assign` that remembers its copy (``copy``) and its element (``k``)."""

    copy: Optional[AsyncCopy] = field(default=None, compare=False, repr=False)
    k: int = field(default=0, compare=False)


def elements(s: AsyncCopy, ty) -> tuple:
    """The copy's element assignments ``dst[..., j + k] = src[..., l + k]``
    (``ty``: the element type)."""
    return tuple(CopyElement(s.dst, shifted(s.dst_idx, k),
                             Read(s.src, shifted(s.src_idx, k), ty, s.loc), s.loc, s, k)
                 for k in range(s.n))


def _affine(e):
    """``e`` as {term: coefficient} (term None: the constant), else None."""
    if isinstance(e, Const) and type(e.val) is int:
        return {None: e.val}
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = _affine(e.lhs), _affine(e.rhs)
        if a is None or b is None:
            return None
        sign = 1 if e.op == "+" else -1
        out = dict(a)
        for k, v in b.items():
            out[k] = out.get(k, 0) + sign * v
        return out
    if isinstance(e, BinOp) and e.op == "*":
        a, b = _affine(e.lhs), _affine(e.rhs)
        if a is not None and b is not None and set(b) == {None}:
            return {k: v * b[None] for k, v in a.items()}
        if a is not None and b is not None and set(a) == {None}:
            return {k: v * a[None] for k, v in b.items()}
    return {e: 1}


def const_extent(lo, hi):
    """The constant length of ``lo:hi``, else None."""
    a, b = _affine(lo), _affine(hi)
    if a is None or b is None:
        return None
    diff = {k: b.get(k, 0) - a.get(k, 0) for k in set(a) | set(b)}
    if any(v for k, v in diff.items() if k is not None):
        return None
    return diff.get(None, 0)


def copy_of(stmt) -> Optional[AsyncCopy]:
    """The async copy of a group (no ``bar=``) an access's statement belongs to, else None."""
    c = stmt.copy if isinstance(stmt, CopyElement) else None
    return c if c is not None and c.bar is None else None


def bar_copy_of(stmt) -> Optional[AsyncCopy]:
    """The async copy completing on a barrier (``bar=``) an access's statement belongs to."""
    c = stmt.copy if isinstance(stmt, CopyElement) else None
    return c if c is not None and c.bar is not None else None


@dataclass(frozen=True)
class Family:
    """A family of asynchronous operations with groups of their own, as check() and the
    interpreter treat them alike: the async copies (:data:`COPIES`) and the warpgroup MMAs
    (``gpudsl.ir.wgmma_meaning.WGMMAS``).  ``op_of`` gives the operation an access's statement
    belongs to (None for other statements); ``width(op)`` the elements one access record
    of it covers along the last index; ``dst`` / ``src`` name its two sides (the side it
    writes: untouchable in flight; the side it reads: unwritable in flight)."""

    name: str
    commit: type
    wait: type
    commit_text: str
    wait_text: str
    op_of: object
    width: object
    dst: str
    src: str


def stmt_text(s: Stmt) -> str:
    """An async statement as gpudsl source."""
    from .printer import print_stmt

    return print_stmt(s)[0]


COPIES = Family("async copy", AsyncCommit, AsyncWait, "async_commit", "async_wait", copy_of,
                 lambda op: op.n, "destination", "source")

__all__ = ["Family", "COPIES", "ASYNC_STMTS", "COPY_BYTES", "CopyElement", "is_async", "uses_async", "shifted",
           "elements", "copy_of", "bar_copy_of", "stmt_text", "const_extent"]
