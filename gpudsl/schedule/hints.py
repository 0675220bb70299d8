"""Compiler hints: primitives that change how code generation emits a loop, never
what the proc means (``set_unroll``, ``set_blocks_per_sm``)."""
from __future__ import annotations

from ..ir.nodes import For
from ..ir.types import BLOCKS
from .cursors import ancestors
from .edits import update
from .primitive import BOOL, LOOP, NONNEG_INT, fail, primitive


@primitive("set_unroll", loop=LOOP, unroll=BOOL)
def set_unroll(p, loop, unroll: bool = True):
    """Ask code generation to unroll a loop (``#pragma unroll``) or stop asking.

    The loop prints as ``seq(lo, hi, unroll=True)``; unlike ``unroll_loop``
    the IR keeps one body.

    Legality: none needed, the meaning does not change (a hint); only seq loops
    take it.

    Example: ``set_unroll(p, "ji")``
    """
    s: For = loop.node()
    if s.kind != "seq" and unroll:
        raise fail(f"loop {s.iter} is a par loop; only seq loops unroll", s.loc)
    return _with_loop_fields(p, loop, unroll=unroll)


@primitive("set_blocks_per_sm", loop=LOOP, blocks=NONNEG_INT)
def set_blocks_per_sm(p, loop, blocks: int):
    """Ask for ``blocks`` resident blocks per multiprocessor for the kernel of the
    outermost BLOCKS loop ``loop``; 0 removes the hint.

    Code generation emits ``__launch_bounds__(threads, blocks)``: ptxas then keeps
    registers per thread within ``65536 / (threads * blocks)``.

    Legality: none needed, the meaning does not change (a hint); ``loop`` must be
    the outermost BLOCKS loop of a kernel.  Later primitives keep the hint there:
    one that moves another loop outermost (``reorder_loops``, ``parallelize_loop``)
    moves the hint onto it; ``fuse`` keeps the first loop's hint, else the second's.

    Example: ``set_blocks_per_sm(p, "bi", 4)``
    """
    c = loop
    s: For = c.node()
    if s.mapping != BLOCKS or any(isinstance(a, For) and a.mapping == BLOCKS
                                  for a in ancestors(p.ir, c.addr)):
        raise fail(f"loop {s.iter} is not the outermost BLOCKS loop of a kernel", s.loc)
    return _with_loop_fields(p, c, blocks_per_sm=blocks)


def _with_loop_fields(p, c, **fields):
    """The loop at cursor ``c`` with ``fields`` changed, nothing else (hints only)."""
    return update(p.ir, c.addr, [c.node().with_(**fields)])


__all__ = ["set_unroll", "set_blocks_per_sm"]
