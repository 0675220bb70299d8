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


def copy_of(stmt) -> Optional[AsyncCopy]:
    """The async copy an access's statement belongs to, else None."""
    return stmt.copy if isinstance(stmt, CopyElement) else None


def stmt_text(s: Stmt) -> str:
    """An async statement as gpudsl source."""
    from .printer import print_stmt

    return print_stmt(s)[0]


__all__ = ["ASYNC_STMTS", "COPY_BYTES", "CopyElement", "is_async", "uses_async", "shifted",
           "elements", "copy_of", "stmt_text"]
