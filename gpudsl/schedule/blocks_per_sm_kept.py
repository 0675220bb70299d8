"""Where the ``blocks_per_sm`` hint (``set_blocks_per_sm``) stands after a primitive.

The hint is a launch-bounds fact of a kernel, and code generation reads it on the
kernel's outermost BLOCKS loop only (``__launch_bounds__(threads, blocks_per_sm)``).
A primitive that moves loops (``reorder_loops`` of two BLOCKS loops,
``parallelize_loop`` of a loop around a kernel...) can leave it on an inner loop,
where nothing would read it.  After every primitive (run by
:func:`gpudsl.schedule.primitive.primitive`) each kernel's hint moves to its
outermost BLOCKS loop: that loop keeps its own hint if it has one, else takes the
first hint found inside it (program order); the hints inside are cleared.  A hint on
a loop that is in no kernel and is no BLOCKS loop names no kernel and is dropped."""
from __future__ import annotations

from ..ir.nodes import For, If, ProcDef
from ..ir.types import BLOCKS
from ..ir.visitor import block_stmts


def _misplaced(body: tuple, in_kernel: bool = False) -> bool:
    """Whether a hint stands anywhere but on a kernel's outermost BLOCKS loop."""
    for s in body:
        if isinstance(s, For):
            outer = s.mapping == BLOCKS and not in_kernel
            if s.blocks_per_sm and not outer:
                return True
            if _misplaced(s.body, in_kernel or s.mapping == BLOCKS):
                return True
        elif isinstance(s, If) and (_misplaced(s.body, in_kernel)
                                    or _misplaced(s.orelse, in_kernel)):
            return True
    return False


def _cleared(body: tuple) -> tuple:
    """``body`` with every ``blocks_per_sm`` hint removed."""
    out, changed = [], False
    for s in body:
        n = s
        if isinstance(s, For):
            b = _cleared(s.body)
            if b is not s.body or s.blocks_per_sm:
                n = s.with_(body=b, blocks_per_sm=0)
        elif isinstance(s, If):
            b, e = _cleared(s.body), _cleared(s.orelse)
            if b is not s.body or e is not s.orelse:
                n = s.with_(body=b, orelse=e)
        out.append(n)
        changed |= n is not s
    return tuple(out) if changed else body


def _first_hint(body: tuple) -> int:
    return next((s.blocks_per_sm for s in block_stmts(body)
                 if isinstance(s, For) and s.blocks_per_sm), 0)


def _placed(body: tuple) -> tuple:
    """``body`` (outside any kernel) with each kernel's hint on its outermost loop."""
    out, changed = [], False
    for s in body:
        n = s
        if isinstance(s, For) and s.mapping == BLOCKS:
            hint = s.blocks_per_sm or _first_hint(s.body)
            b = _cleared(s.body)
            if b is not s.body or hint != s.blocks_per_sm:
                n = s.with_(body=b, blocks_per_sm=hint)
        elif isinstance(s, For):
            b = _placed(s.body)
            if b is not s.body or s.blocks_per_sm:
                n = s.with_(body=b, blocks_per_sm=0)
        elif isinstance(s, If):
            b, e = _placed(s.body), _placed(s.orelse)
            if b is not s.body or e is not s.orelse:
                n = s.with_(body=b, orelse=e)
        out.append(n)
        changed |= n is not s
    return tuple(out) if changed else body


def kept_blocks_per_sm(new: ProcDef) -> ProcDef:
    """``new`` with every kernel's ``blocks_per_sm`` hint on its outermost BLOCKS
    loop (``new`` itself where every hint already stands there)."""
    if not _misplaced(new.body):
        return new
    return new.with_(body=_placed(new.body))


__all__ = ["kept_blocks_per_sm"]
