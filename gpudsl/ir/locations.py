"""Where a proc's statements are, as a hashable key.

Procs compare equal regardless of source locations, so caches keyed by a proc alone
(check()'s reports, compile()'s verdicts) would hand one proc's diagnostics, with
another's locations, to an equal proc defined elsewhere (another notebook cell, another
primitive call).  Adding :func:`location_key` to such a key keeps reports located where
the proc at hand came from.
"""
from __future__ import annotations

from .nodes import ProcDef
from .visitor import block_stmts


def _loc(loc):
    if loc is None:
        return None
    return (loc.file, loc.line, loc.col, getattr(loc, "made_by", None))


def location_key(p: ProcDef) -> tuple:
    return (_loc(p.loc),) + tuple(_loc(s.loc) for s in block_stmts(p.body))


__all__ = ["location_key"]
