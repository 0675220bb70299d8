"""The sm_90a half-precision GEMM of ``ops.matmul``: ``c = a @ b`` with ``b`` row-major
(K x N), derived by primitives from the readable
:func:`~gpudsl.stdlib.matmul_f16.matmul_half_algorithm` as
:mod:`gpudsl.stdlib.matmul_sm90` derives the TN GEMM, except for B: its tile is staged
as it lies in memory, ``k`` rows of ``bn`` columns, cut into blocks of ``E = min(bn, 64)``
columns (``divide_dim``, ``rearrange_dim``: ``Bs[bn / E, bk, E]``), each row of a block
``2 E`` bytes in the hardware's swizzled layout (``set_swizzle``); a TMA box per block
loads it (``make_tma``), and the wgmma reads it MN-major (``b_major="mn"``, the PTX ISA's
transposed B: ``make_wgmma`` recognizes the product nest reading ``Bs[n // E, k, n % E]``).

Sizes: ``m`` any and ``k`` (the columns) a multiple of 8 with ``clip=True`` (the rows of
a TMA box are 16 bytes apart; edges clipped as in :mod:`~gpudsl.stdlib.matmul_sm90`),
the reduction ``n`` a multiple of ``bk``; without
``clip``, ``m % (64 wgs) == 0`` and ``k % bn == 0`` too.  ``plan_matmul_sm90_nn`` picks
the tile; :func:`gpudsl.stdlib.matmul_sm80.plan_matmul_half_for` uses it on sm_90a.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir.types import SHARED, THREADS
from ..proc import Proc
from ..schedule import (divide_dim, divide_loop, insert_sync, lift_alloc, make_tma,
                        make_wgmma, parallelize_loop, rearrange_dim, set_swizzle, simplify,
                        stage_mem, warp_specialize)
from .matmul_f16 import matmul_half_algorithm
from .matmul_sm90 import DEFAULTS, WIDE, _accumulators_and_k, _fragment, _unguard
from .shapes import NodeError, require


def _tile_a(p, compute, bm: int, bk: int, clip: bool):
    p = stage_mem(p, p.forward(compute), f"a[{bm} * bi:{bm} * bi + {bm}, {bk} * po:{bk} * po + {bk}]",
                  "As", SHARED, zeros=clip)
    return set_swizzle(p, "As", 2 * bk)


def _tile_b(p, compute, bn: int, bk: int, clip: bool):
    """B's tile as it lies (``bk`` rows of ``bn`` columns), in blocks of ``E`` columns
    whose ``2 E``-byte rows are swizzled: ``Bs[bn / E, bk, E]``, a box per block."""
    e = min(bn, 64)
    p = stage_mem(p, p.forward(compute), f"b[{bk} * po:{bk} * po + {bk}, {bn} * bj:{bn} * bj + {bn}]",
                  "Bs", SHARED, zeros=clip)
    p = divide_dim(p, "Bs", 1, e)
    p = rearrange_dim(p, "Bs", [1, 0, 2])
    p = set_swizzle(p, "Bs", 2 * e)
    return divide_loop(p, "Bs_in1", e, ["Bs_c", "Bs_j"], tail="perfect")


def _tiles_nn(p, bm: int, bn: int, bk: int, clip: bool):
    compute = p.find_loop("t #1")
    p = _tile_a(p, compute, bm, bk, clip)
    p = _tile_b(p, compute, bn, bk, clip)
    for buf, rows in (("As", bm), ("Bs", bk)):
        p = divide_loop(p, f"{buf}_in0", rows, [f"{buf}_o", f"{buf}_r"], tail="perfect")
        p = parallelize_loop(p, f"{buf}_o", THREADS)
        p = lift_alloc(p, buf)
    p = insert_sync(p, p.find_loop("po").body().before())
    return insert_sync(p, p.forward(compute).before())


def schedule_matmul_sm90_nn(p: Proc, *, bn: int = 128, wgs: int = 1, bk: int = 64,
                            stages: int = 4, clip: bool = False) -> Proc:
    """The sm_90a schedule of ``matmul_half_algorithm(dt, (64 wgs, bn, bk))`` (or
    ``(1, 8, bk)`` with ``clip``): ``wgs`` consumer warpgroups of ``64 x bn``, ``bk``
    rows of B per ring slot, ``stages`` slots, a producer thread (module docs)."""
    require(wgs in (1, 2), f"wgs={wgs}: one or two consumer warpgroups")
    require(bn in (16, 32) or (bn % 64 == 0 and bn <= 256),
            f"bn={bn}: 16, 32 or a multiple of 64 up to 256 (B's rows are swizzled blocks)")
    require(bk in (16, 32, 64), f"bk={bk}: 16, 32 or 64 (A's rows are swizzled)")
    require(2 <= stages <= 8, f"stages={stages}: 2 to 8")
    bm = 64 * wgs
    p = _fragment(p, bm, bn, wgs, clip)
    p = _accumulators_and_k(p, bn, wgs, bk, clip)
    p = _tiles_nn(p, bm, bn, bk, clip)
    if clip:
        p = _unguard(p)
    producer = 128 * wgs
    p = warp_specialize(p, "po", producers=(producer, producer + 1),
                        consumers=(0, producer), stages=stages, ring=True)
    p = make_tma(p, "As_o")
    p = make_tma(p, "Bs_o")
    p = make_wgmma(p, "t #1")
    return simplify(p)


@lru_cache(maxsize=None)
def sm90_nn_kernel(dt: str, bn: int = 128, wgs: int = 1, bk: int = 64, stages: int = 4,
                   clip: bool = False) -> Proc:
    """The derived sm_90a ``a @ b`` for ``dt`` and the tile (cached)."""
    algo = matmul_half_algorithm(dt, (1, 8, bk) if clip else (64 * wgs, bn, bk))
    return schedule_matmul_sm90_nn(algo, bn=bn, wgs=wgs, bk=bk, stages=stages, clip=clip)


def plan_matmul_sm90_nn(shape_a: tuple, shape_b: tuple, dt: str, **opts) -> tuple[Proc, dict]:
    """The derived kernel for ``a[m, n] @ b[n, k]`` and its size arguments: ``opts``,
    else the 128 x 256 tile where it divides the shape, else 64 x 128, else a clipped
    kernel whose ``bk`` (64, 32 or 16) divides the reduction ``n``; refused otherwise."""
    require(dt in ("f16", "bf16"), f"the sm_90a GEMM multiplies f16 or bf16, not {dt}")
    require(len(shape_a) == 2 and len(shape_b) == 2 and shape_a[1] == shape_b[0],
            f"a[m, n] @ b[n, k]: shapes {shape_a} and {shape_b} do not match")
    (m, n), k = shape_a, shape_b[1]
    opts = {x: v for x, v in opts.items() if x != "swizzle"}
    clip = opts.pop("clip", None)
    tiles = [dict(DEFAULTS, **opts)] if opts else [dict(WIDE), dict(DEFAULTS)]
    tiles = [{x: v for x, v in t.items() if x != "swizzle"} for t in tiles]
    binds = dict(m=m, n=n, k=k)
    if not clip:
        for t in tiles:
            if m % (64 * t["wgs"]) == 0 and k % t["bn"] == 0 and n % t["bk"] == 0:
                return sm90_nn_kernel(dt, **t), binds
    ks = [tiles[0]["bk"]] if opts.get("bk") else [64, 32, 16]
    for bk in ks:
        if n % bk == 0 and k % 8 == 0:
            return sm90_nn_kernel(dt, **dict(tiles[0], bk=bk), clip=True), binds
    raise NodeError(f"the sm_90a GEMM needs the reduction a multiple of "
                    f"{' or '.join(map(str, ks))} and the columns of 8; not {m}x{n} @ "
                    f"{n}x{k}", None,
                    "gpudsl.ops.matmul takes every shape")


__all__ = ["schedule_matmul_sm90_nn", "sm90_nn_kernel", "plan_matmul_sm90_nn"]
