"""What the synchronization statements of docs/language.md (synchronization) are, in one place: the block
barrier ``sync()``, the ranged barrier ``sync(lo, hi)`` and the split barrier's
``arrive`` / ``wait`` (on a ``barrier @ SHARED`` allocation)."""
from __future__ import annotations

from .nodes import Arrive, Call, Stmt, Sync, Wait
from .visitor import kinds, walk

SYNC_STMTS = (Sync, Arrive, Wait)


def is_sync(s) -> bool:
    """Any synchronization statement (block, ranged or split barrier)."""
    return isinstance(s, SYNC_STMTS)


def is_partial_sync(s) -> bool:
    """A synchronization that orders only some threads: ``sync(lo, hi)``,
    ``arrive`` or ``wait``."""
    return isinstance(s, (Arrive, Wait)) or (isinstance(s, Sync) and s.ranged)


def sync_range(s: Stmt) -> tuple[int, int] | None:
    """``(lo, hi)`` of a ranged barrier, arrive or wait; None for ``sync()``."""
    if isinstance(s, Sync) and not s.ranged:
        return None
    return s.lo.val, s.hi.val


def uses_partial_sync(pdef, seen=None) -> bool:
    """Does ``pdef`` (or a callee) hold a ranged ``sync``, an ``arrive`` or a ``wait``?"""
    found = kinds(pdef.body)
    if Arrive in found or Wait in found:
        return True
    if Sync not in found:
        return False
    seen = set() if seen is None else seen
    if id(pdef) in seen:
        return False
    seen.add(id(pdef))
    for n in walk(pdef.body):
        if is_partial_sync(n):
            return True
        if isinstance(n, Call) and uses_partial_sync(n.proc, seen):
            return True
    return False


__all__ = ["SYNC_STMTS", "is_sync", "is_partial_sync", "sync_range", "uses_partial_sync"]
