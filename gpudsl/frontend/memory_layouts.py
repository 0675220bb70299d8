"""Memories with a layout: ``s: f16[64, 64] @ SHARED(swizzle=128)`` (docs/hopper.md), a
SHARED tile stored swizzled (:mod:`gpudsl.ir.swizzle_meaning`).  The layout changes addresses,
never meaning.

A memory is a name (``SHARED``) or, for memories that swizzle, a call of it with the one
keyword ``swizzle=`` (32, 64 or 128 bytes).  A tile whose constant rows are not a
multiple of the swizzle width is refused here; rows sized by parameters are proved by
check() for every size.
"""
from __future__ import annotations

import ast

from ..ir.nodes import Const
from ..ir.swizzle_meaning import WIDTHS, row_bytes_ok


def parse_memory(parser, node):
    """``(memory, swizzle)`` of an allocation's ``@ ...`` annotation."""
    if not isinstance(node, ast.Call):
        return parser.memory(node), 0
    mem = parser.memory(node.func)
    if not mem.swizzles:
        raise parser.err(node, f"{mem.name} memory has no layouts: only SHARED tiles are "
                         "swizzled", f"write `@ {mem.name}`, or allocate the tile in SHARED")
    if node.args or len(node.keywords) != 1 or node.keywords[0].arg != "swizzle":
        raise parser.err(node, f"{mem.name}(...) takes one keyword, the swizzle width in "
                         "bytes", f"e.g. @ {mem.name}(swizzle=128)")
    v = node.keywords[0].value
    if not (isinstance(v, ast.Constant) and type(v.value) is int and v.value in WIDTHS):
        raise parser.err(v, "the swizzle width is 32, 64 or 128 bytes",
                         "128 for tiles whose rows are 128 bytes (f16[.., 64], f32[.., 32])")
    return mem, v.value


def check_swizzle(parser, s: ast.AnnAssign, alloc) -> None:
    """A swizzled tile is an array whose rows are a multiple of the width (when constant)."""
    w = alloc.swizzle
    if not alloc.shape:
        raise parser.err(s, f"'{alloc.name}' is a scalar: only arrays have a swizzled layout",
                         f"e.g. {alloc.name}: {alloc.ty.name}[64, 64] @ SHARED(swizzle={w})")
    last = alloc.shape[-1]
    if isinstance(last, Const) and not row_bytes_ok(alloc.ty, (last.val,), w):
        eb = max(1, alloc.ty.bits // 8)
        raise parser.err(s.annotation, f"a row of '{alloc.name}' is {last.val * eb} bytes, not a "
                         f"multiple of the {w}-byte swizzle: the swizzle permutes 16-byte "
                         f"chunks inside {w}-byte segments of a row",
                         f"make the last dimension a multiple of {w // eb} {alloc.ty.name} "
                         "elements, or use a narrower swizzle")


__all__ = ["parse_memory", "check_swizzle"]
