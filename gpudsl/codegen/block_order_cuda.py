"""The grouped block order (``par(lo, hi, group=G) @ BLOCKS`` around a BLOCKS loop, set by
``set_block_order``): the pair of loops shares ``blockIdx.x``, walked in groups of ``G``
rows of tiles, column by column (Triton's ``GROUP_SIZE_M`` order).

With ``M`` rows (the outer loop's iterations), ``N`` columns and ``pid = blockIdx.x`` in
``[0, M N)``::

    G     = min(G, M)                   // one group when M < G (G N would wrap)
    span  = G * N                       // the blocks of one full group (<= M N)
    first = pid / span * G              // the group's first row
    rows  = min(M - first, G)           // the last group is shorter when G does not divide M
    outer = lo_o + first + pid % span % rows
    inner = lo_i + pid % span / rows

A bijection of ``[0, M N)`` onto the rows x columns: group ``g`` holds the pids
``[g span, g span + rows N)`` (only the last group is short, and it ends at ``M N``),
and inside it ``q -> (q % rows, q / rows)`` is the column-major order of a ``rows x N``
rectangle.  tests/schedule/test_block_order.py checks every tile is run once on the
emulator for all small ``M``, ``N`` and ``G``.  Where ``M`` is a constant multiple of
``G`` once sizes are fixed, ``rows`` is ``G`` (divisions by a constant).

The proc's meaning is unchanged (``par`` iterations are order-free); the pair always
takes ``x`` (below ``2**31`` blocks), a third BLOCKS loop (a batch) the next dimension.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nests import block_units as ir_block_units
from ..ir.nodes import BinOp, Const, For
from ..ir.types import INDEX
from .cexpr import cname
from .host_plan import NotConstant, evaluate

X_LIMIT = 2 ** 31 - 1


def block_units(chain: list[For]) -> list[tuple[For, ...]]:
    """The nest's loops as units of one block dimension each, outer first: a grouped
    pair ``(outer, inner)`` (moved innermost: it takes ``x``) or a single loop
    (:func:`gpudsl.ir.nests.block_units`, the grid check() tests); two grouped loops
    in a row are refused."""
    for b, c in zip(chain, chain[1:]):
        if b.group and c.group:
            raise CompileError(f"the BLOCKS loops {b.iter} and {c.iter} are "
                               "both grouped: a block index groups two loops", b.loc)
    return ir_block_units(chain)


def extent(b: For):
    """The loop's iteration count as an expression."""
    if isinstance(b.lo, Const) and b.lo.val == 0:
        return b.hi
    return BinOp("-", b.hi, b.lo, INDEX)


def emit_grouped(kw, o: For, i: For) -> None:
    """The pair's loop variables from ``blockIdx.x`` (module docs)."""
    w, t, g = kw.w, kw.index_ctype, o.group
    m, n = extent(o), extent(i)
    total = _constant(kw, BinOp("*", m, n, INDEX))
    if total is not None and total > X_LIMIT:
        raise CompileError(f"the grouped BLOCKS loops {o.iter} and {i.iter} have {total} "
                           f"blocks; blockIdx.x takes at most {X_LIMIT}", o.loc,
                           "use larger tiles, or leave the block order alone")
    mc = _constant(kw, m)
    if mc is not None and 0 < mc < g:    # one group of all rows (G N cannot wrap)
        g = mc
    p = f"gpudsl_{cname(o.iter)}"
    u = "unsigned" if t == "int" else "unsigned long long"   # all >= 0: unsigned divisions
    w.line(f"// grouped block order: {g} rows of {o.iter} at a time, walked along {i.iter}",
           o.loc)
    w.line(f"const {u} {p}_pid = blockIdx.x;")
    if mc is not None:                   # G <= M: the span G N <= M N cannot wrap
        gs = f"{g}u"
    else:                                # G > M would wrap G N: one group of M rows
        gs = f"{p}_g"
        w.line(f"const {u} {gs} = ({u})({kw.expr(m)}) < {g}u ? ({u})({kw.expr(m)}) : {g}u;")
    w.line(f"const {u} {p}_span = {gs} * ({u})({kw.expr(n)});")
    w.line(f"const {u} {p}_first = {p}_pid / {p}_span * {gs};")
    w.line(f"const {u} {p}_in = {p}_pid % {p}_span;")
    if mc is not None and mc % g == 0:   # every group is full: divisions by a constant
        rows = gs
    else:
        rows = f"{p}_rows"
        w.line(f"const {u} {p}_left = ({u})({kw.expr(m)}) - {p}_first;")
        w.line(f"const {u} {rows} = {p}_left < {gs} ? {p}_left : {gs};")
    for b, val in ((o, f"{p}_first + {p}_in % {rows}"), (i, f"{p}_in / {rows}")):
        val = f"({t})({val})"
        if not (isinstance(b.lo, Const) and b.lo.val == 0):
            val = f"{kw.expr(b.lo, 12)} + {val}"
        w.line(f"const {t} {cname(b.iter)} = {val};", b.loc)
        kw.var_nonneg[b.iter] = kw.nonneg(b.lo)


def grid_extent(unit: tuple[For, ...]):
    """The blocks a unit launches in its dimension."""
    if len(unit) == 1:
        return extent(unit[0])
    return BinOp("*", extent(unit[0]), extent(unit[1]), INDEX)


def _constant(kw, e) -> int | None:
    try:
        return int(evaluate(e, kw.m.bindings))
    except NotConstant:
        return None


__all__ = ["block_units", "emit_grouped", "grid_extent", "extent"]
