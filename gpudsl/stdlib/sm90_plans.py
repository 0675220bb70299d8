"""The tile choice of the derived sm_90a GEMMs, one home for the three of them
(:mod:`~gpudsl.stdlib.matmul_sm90`: TN f16/bf16, :mod:`~gpudsl.stdlib.matmul_sm90_nn`:
``a @ b`` with MN-major B, :mod:`~gpudsl.stdlib.matmul_sm90_tf32`: TN TF32).

Each kernel computes ``rows x cols`` outputs summing over ``red``: a block tile of
``bm`` rows (``64 wgs``, or ``128 wgs``: two m64 tiles per warpgroup) and ``bn``
columns, ``bk`` of the reduction per ring slot.  The plan is the same for all three:
the tile the caller names (``opts``), else the first of the wide tiles (``wide``: 128 x
256, then 256 x 128 for the TN GEMM) that divides the shape, else 64 x 128
(``defaults``); where none divides
the rows and columns, a clipped kernel (edges guarded) whose ``bk`` divides the
reduction (the k tiles are never clipped); else refused.  2-D or batched (a leading
``nb``: blocks over the batch too).
"""
from __future__ import annotations

import functools

from .shapes import NodeError, require


def operand_shapes(shape_a: tuple, shape_b: tuple, nt: bool, what: str) -> tuple:
    """``(rows, cols, red, nb)`` of ``a[(nb,) rows, red] @ bt[(nb,) cols, red]^T``
    (``nt``) or ``a[(nb,) rows, red] @ b[(nb,) red, cols]``; ``nb`` is None when 2-D."""
    shape_a, shape_b = tuple(int(d) for d in shape_a), tuple(int(d) for d in shape_b)
    form = "a[m, k] @ bt[n, k]^T" if nt else "a[m, n] @ b[n, k]"
    inner = shape_b[-1] if nt else shape_b[-2] if len(shape_b) >= 2 else None
    require(len(shape_a) == len(shape_b) in (2, 3) and shape_a[:-2] == shape_b[:-2] and
            shape_a[-1] == inner,
            f"{what}: {form} (or batched alike): shapes {shape_a} and {shape_b} do not match")
    rows, red = shape_a[-2:]
    cols = shape_b[-2] if nt else shape_b[-1]
    return rows, cols, red, (shape_a[0] if len(shape_a) == 3 else None)


def binds_of(dims: tuple, names=("m", "n", "k")) -> dict:
    """The kernel's size arguments: ``names`` for ``(rows, cols, red)``, ``nb`` if batched."""
    rows, cols, red, nb = dims
    out = dict(zip(names, (rows, cols, red)))
    return out if nb is None else dict(out, nb=nb)


def tile_rows(tile: dict) -> int:
    """The rows of a block tile: ``bm``, else ``64 wgs`` (one m64 tile per warpgroup)."""
    return tile.get("bm") or 64 * tile.get("wgs", 1)


def choose_tile(dims: tuple, defaults: dict, wide: tuple, opts: dict, ks: tuple,
                cols_ok=lambda cols: True) -> tuple[dict, bool] | None:
    """``(tile, clip)`` for ``dims`` (:func:`operand_shapes`): ``opts`` over ``defaults``
    (``opts["clip"]``: force a clipped kernel), else the first tile of ``wide`` that
    divides, else ``defaults``; else ``tiles[0]`` clipped with the
    first ``bk`` of ``ks`` (or the one ``opts`` names) dividing the reduction, where
    ``cols_ok(cols)`` (a clipped kernel's column constraint); None when nothing serves."""
    rows, cols, red, _ = dims
    opts = dict(opts)
    clip = opts.pop("clip", None)
    tiles = [dict(defaults, **opts)] if opts else [*map(dict, wide), dict(defaults)]
    if not clip:
        for t in tiles:
            if rows % tile_rows(t) == 0 and cols % t["bn"] == 0 and red % t["bk"] == 0:
                return t, False
    for bk in ([tiles[0]["bk"]] if opts.get("bk") else ks):
        if red % bk == 0 and cols_ok(cols):
            return dict(tiles[0], bk=bk), True
    return None


def refused(what: str, ks, dims: tuple, hint: str, extra: str = "") -> NodeError:
    """The error of a shape no kernel of ``what`` serves."""
    rows, cols, red, nb = dims
    lead = f"{nb} x " if nb is not None else ""
    return NodeError(f"{what} needs the reduction a multiple of {' or '.join(map(str, ks))} "
                     f"(its k tiles are not clipped){extra}; not {lead}{rows}x{cols}x{red} "
                     "(rows x columns x reduction)", None, hint)


def small_case_shape(tile: dict, clip: bool, col_edge: int = 1) -> tuple:
    """A small ``(rows, cols, red)`` the kernel of ``tile`` serves: two block tiles of
    rows, two of columns (plus an edge of 5 rows and ``col_edge`` columns when ``clip``),
    three k tiles; sums of small integers there are exact."""
    return (2 * tile_rows(tile) + 5 * clip, 2 * tile["bn"] + col_edge * clip, 3 * tile["bk"])


def planned_once(plan):
    """``plan(shape_a, shape_b, ..., **opts) -> (proc, bindings)`` remembered per call
    (shapes, dtype and options), the bindings copied out each time: a direct entry point
    (``matmul_nt_sm90``, ``matmul_tf32_sm90``) then chooses its tile once per shape, not
    on every call (about 40 us of Python).  A refusal is not remembered (it is raised
    each time), nor is a call with an option that cannot be hashed."""
    memo: dict = {}

    @functools.wraps(plan)
    def remembered(*args, **opts):
        try:
            key = (args, tuple(sorted(opts.items())))
            hit = memo.get(key)
        except TypeError:   # an unhashable option: planned each time
            return plan(*args, **opts)
        if hit is None:
            hit = memo[key] = plan(*args, **opts)
        return hit[0], dict(hit[1])

    remembered.cache_clear = memo.clear
    return remembered


__all__ = ["operand_shapes", "binds_of", "tile_rows", "choose_tile", "refused",
           "small_case_shape", "planned_once"]
