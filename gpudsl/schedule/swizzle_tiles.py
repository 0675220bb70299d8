"""``set_swizzle``: a SHARED tile stored in the hardware's swizzled layout (docs/hopper.md,
"Swizzled shared tiles").

A swizzle places elements, it never changes what an access means: every access names
the same element of the tile, which lives elsewhere inside its 8-row pattern.  So the
rewrite only marks the allocation; what can go wrong is where the tile is used: its
rows must be a multiple of the swizzle (check()'s layout obligation), no window of it
may reach an ``@instr`` template (which addresses windows by their first element and
strides), and TMA boxes and wgmma operands then take the swizzled forms.  The result is
checked by the Hopper guard every primitive runs, with this one change allowed.
"""
from __future__ import annotations

from ..ir.nodes import Alloc
from ..ir.swizzle_meaning import WIDTHS
from .edits import update
from .primitive import ALLOC, NONNEG_INT, fail, primitive


@primitive("set_swizzle", alloc=ALLOC, width=NONNEG_INT)
def set_swizzle(p, alloc, width: int):
    """Store a SHARED tile in the swizzled layout of ``width`` bytes (32, 64 or 128; 0:
    none), as ``@ SHARED(swizzle=width)`` declares it.

    Legality: the layout of a tile is not part of the meaning (every access names the same
    element); the allocation is a SHARED array whose rows are a multiple of ``width``
    bytes; the result passes check()'s layout rules and passes no window of the tile to an
    ``@instr`` template (the Hopper guard of every primitive).

    Example: ``set_swizzle(p, "As", 128)``
    """
    c = alloc
    s: Alloc = c.node()
    if width not in (0, *WIDTHS):
        raise fail(f"width={width}: a swizzle is 32, 64 or 128 bytes (0: none)", s.loc)
    if width and (not s.mem.swizzles or not s.shape):
        raise fail(f"'{s.name}' is not a SHARED array: only SHARED tiles are swizzled", s.loc)
    return update(p.ir, c.addr, [s.with_(swizzle=width)])


__all__ = ["set_swizzle"]
