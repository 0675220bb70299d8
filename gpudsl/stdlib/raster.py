"""The GEMMs' block order (``raster=G``): the grouped order of their tile loops ``bi`` (rows
of C tiles) and ``bj`` (columns), set by ``set_block_order`` at the end of the sm_90a
TN/NN and sm_80 schedules (docs/decisions.md, "the GEMMs' block order").

Why a group of 16 rows by default: the blocks resident at once (a wave: one block of a
big tile per multiprocessor, 132 on an H100) read the A panels of the rows and the B
panels of the columns they cover; each panel comes from DRAM about once per wave when
the wave's tiles share it in L2.  :func:`wave_bytes` counts those panels.  A wave of
``S`` tiles covering ``r`` rows and ``S / r`` columns reads ``r bm K + (S / r) bn K``
elements, least at ``r = sqrt(S bn / bm)``: 16.2 for 128 x 256 and 64 x 128 tiles on 132
SMs, 14.7 for 128 x 256 on an A100's 108.  At 8192^3, f16, 128 x 256 tiles the first
wave reads 138 MiB in row order (bj fastest: 5 rows, all 32 columns; more than the
50 MiB L2), 84 MiB with groups of 8 and 68 MiB with 16; at 4096^3 41, 44 and 34 MiB.
"""
from __future__ import annotations

import math

from ..schedule import add_assert, divide_loop, reorder_loops, set_block_order

RASTER = 16          # the default group: rows of tiles per group (0: row order)
RASTERS = (0, 8, 16)  # the autotuning choices
COLUMNS = 8          # column groups: columns of tiles per group (the grid's x)


def with_raster(p, group: int):
    """``p`` with its tile loops ``bi``/``bj`` in the grouped order (``group`` 0: as is)."""
    if not group:
        return p
    return set_block_order(p, "bi", "bj", group=group)


def with_column_groups(p, cols: int):
    """``p`` with its tile loops in column groups of ``cols`` (0: as is): ``bj`` divided
    into ``bjo`` and ``bji`` (``cols`` columns of tiles), ``bjo`` made the outermost, so
    the grid is ``(cols, rows, groups)`` and the hardware, starting blocks in x, y, z
    order, walks ``cols`` columns down every row before the next group: a wave of 132
    blocks covers 8 columns and 17 rows, the grouped order's footprint (66 MiB at
    8192^3, 68 in groups of 16 rows, 138 in row order), with the row order's code shape (the grouped
    order's index arithmetic makes ptxas serialize the 128 x 256 kernel's wgmmas,
    docs/decisions.md).  Adds the precondition that ``cols`` divides the columns of
    tiles (a guard around the block would put its barriers under an ``if``)."""
    if not cols:
        return p
    from ..ir.printer import print_expr

    hi = print_expr(p.find_loop("bj").node().hi)
    p = add_assert(p, f"({hi}) % {cols} == 0")
    p = divide_loop(p, "bj", cols, ["bjo", "bji"], tail="perfect")
    return reorder_loops(p, "bi")


def tile_order(rows: int, cols: int, group: int, columns: int = 0):
    """The ``(row, col)`` tiles in launch order: row order for ``group`` 0, else the
    grouped order code generation emits (gpudsl/codegen/block_order_cuda.py); with
    ``columns``, the column groups' grid (:func:`with_column_groups`)."""
    if columns:
        for g in range(cols // columns):
            for r in range(rows):
                for c in range(columns):
                    yield r, g * columns + c
        return
    for pid in range(rows * cols):
        if not group:
            yield divmod(pid, cols)
            continue
        first = pid // (group * cols) * group
        size = min(rows - first, group)
        q = pid % (group * cols)
        yield first + q % size, q // size


def wave_bytes(m: int, n: int, k: int, bm: int, bn: int, group: int, sms: int = 132,
               elem: int = 2, columns: int = 0) -> int:
    """Bytes of A and B panels the first wave of ``sms`` tiles reads (each once)."""
    rows, cols = math.ceil(m / bm), math.ceil(n / bn)
    wave = list(tile_order(rows, cols, group, columns))[:sms]
    r, c = len({t[0] for t in wave}), len({t[1] for t in wave})
    return (r * bm + c * bn) * k * elem


def persistent_rows(m: int, n: int, bm: int, bn: int, sms: int = 132) -> int:
    """The blocks per column of tiles of a persistent GEMM (``persist_blocks``): as many
    as fill ``sms`` multiprocessors with one block each over the ``ceil(n / bn)``
    columns (at least one, at most the rows of tiles).  A turn of the blocks then covers
    that many rows and every column: at 4096^3 with 128 x 256 tiles, 8 rows x 16
    columns (128 blocks), 40 MiB of panels; at 8192^3, 4 x 32, 136 MiB."""
    rows, cols = math.ceil(m / bm), math.ceil(n / bn)
    return max(1, min(rows, sms // cols))


__all__ = ["RASTER", "RASTERS", "COLUMNS", "with_raster", "with_column_groups", "tile_order",
           "wave_bytes", "persistent_rows"]
