"""Which grouped-block-order hints (``set_block_order``, :mod:`.block_order`) survive a
primitive: a hint names a pair of loops, so it stays only where its loop still has the
same BLOCKS loop as its only statement.  Run on every primitive's result by
:func:`gpudsl.schedule.primitive.primitive`."""
from __future__ import annotations

from ..ir.nodes import For, If, ProcDef
from ..ir.types import BLOCKS
from ..ir.visitor import block_stmts


def grouped_pairs(ir: ProcDef) -> set:
    """``(outer, inner)`` loop names of every grouped pair in ``ir``."""
    return {(s.iter, s.body[0].iter) for s in block_stmts(ir.body)
            if isinstance(s, For) and s.group and _pair_holds(s)}


def _pair_holds(s: For) -> bool:
    return len(s.body) == 1 and isinstance(s.body[0], For) and s.body[0].mapping == BLOCKS \
        and s.mapping == BLOCKS and not s.body[0].group


def _dropped(body: tuple, keep: set) -> tuple:
    """``body`` with the hints not in ``keep`` (or whose pair broke) removed."""
    out, changed = [], False
    for s in body:
        n = s
        if isinstance(s, For):
            b = _dropped(s.body, keep)
            if b is not s.body:
                n = n.with_(body=b)
            if n.group and not (_pair_holds(n) and (n.iter, n.body[0].iter) in keep):
                n = n.with_(group=0)
        elif isinstance(s, If):
            b, e = _dropped(s.body, keep), _dropped(s.orelse, keep)
            if b is not s.body or e is not s.orelse:
                n = s.with_(body=b, orelse=e)
        out.append(n)
        changed |= n is not s
    return tuple(out) if changed else body


def kept_block_orders(old: ProcDef, new: ProcDef) -> ProcDef:
    """``new`` without the grouped-order hints whose pair of loops is not a pair of
    ``old`` still directly nested (``new`` itself where every hint holds)."""
    if not any(isinstance(s, For) and s.group for s in block_stmts(new.body)):
        return new
    body = _dropped(new.body, grouped_pairs(old))
    return new if body is new.body else new.with_(body=body)


__all__ = ["kept_block_orders", "grouped_pairs"]
