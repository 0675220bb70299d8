"""The grouped block order (``set_block_order``): a hint that makes two directly nested
BLOCKS loops share one linear block index, walked in groups of rows of tiles column by
column (Triton's ``GROUP_SIZE_M`` order, CUTLASS's raster swizzle), so that the blocks
running at once share their operands' tiles in L2.

``par`` iterations are order-free, so the proc's meaning does not change: the
interpreter, check() and the race detector see the same loops.  Code generation
(:mod:`gpudsl.codegen.block_order_cuda`) emits the index mapping, a bijection by
construction (tests/schedule/test_block_order.py checks it exhaustively).

The hint names a pair of loops: it lives on the outer one and holds while the inner
one is its only statement.  :func:`.block_order_kept.kept_block_orders` runs after
every other primitive and drops a hint whose pair the rewrite broke (the loops reordered, divided,
separated by a new statement), so a hint never applies to loops it was not set on.
"""
from __future__ import annotations

from ..ir.nodes import For
from ..ir.types import BLOCKS
from ..ir.visitor import free_vars
from .cursors import ancestors
from .edits import update
from .primitive import LOOP, POSITIVE_INT, fail, primitive


@primitive("set_block_order", outer_loop=LOOP, inner_loop=LOOP, group=POSITIVE_INT)
def set_block_order(p, outer_loop, inner_loop, group: int = 8):
    """Run two directly nested BLOCKS loops in the grouped order: one linear block
    index ``pid`` over both; ``group`` consecutive iterations of ``outer_loop`` (rows
    of tiles) form a group, walked column by column (``inner_loop``), the last group
    shorter where ``group`` does not divide the rows.

    The outer loop prints as ``par(lo, hi, group=G) @ BLOCKS``.  Code generation maps
    the pair onto ``blockIdx.x`` (a third BLOCKS loop, a batch, onto ``blockIdx.y``):
    with ``M`` rows and ``N`` columns, ``first = pid / (G N) * G``, ``rows = min(M -
    first, G)``, ``outer = first + pid % (G N) % rows``, ``inner = pid % (G N) / rows``.
    Tiles of a group that run at once share A's rows and B's columns in L2.  A
    primitive that later breaks the pair (reorders the loops, cuts the inner one,
    puts a statement between them) drops the hint; calling it again on the pair
    changes ``group``.

    Legality: none needed, the meaning does not change (a hint: ``par`` iterations
    are order-free, and the index mapping is a bijection by construction); both loops
    are BLOCKS loops, the inner one the outer one's only statement with bounds free
    of the outer variable, neither already in a grouped pair.

    Example: ``set_block_order(p, "bi", "bj", group=8)``
    """
    s: For = outer_loop.node()
    t: For = inner_loop.node()
    for x in (s, t):
        if x.mapping != BLOCKS:
            raise fail(f"loop {x.iter} is not a BLOCKS loop; the block order is the "
                       "order of blocks", x.loc, "parallelize_loop(p, loop, BLOCKS) first")
    if inner_loop.addr != outer_loop.addr + ("body", 0) or len(s.body) != 1:
        raise fail(f"loop {t.iter} is not directly nested in loop {s.iter} (the only "
                   "statement of its body)", t.loc,
                   "the two loops share one block index: nothing may stand between them")
    if s.iter in free_vars((t.lo, t.hi)):
        raise fail(f"the bounds of loop {t.iter} depend on {s.iter}: the tiles are no "
                   "rectangle", t.loc)
    up = [a for a in ancestors(p.ir, outer_loop.addr) if isinstance(a, For)]
    if t.group or (up and up[-1].group and up[-1].body == (s,)):
        raise fail(f"loop {t.iter if t.group else s.iter} is already in a grouped pair "
                   "of loops", s.loc, "a block index groups two loops")
    return update(p.ir, outer_loop.addr, [s.with_(group=group)])


__all__ = ["set_block_order"]
