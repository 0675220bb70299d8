"""The sm_90a half-precision GEMM of ``ops.matmul``: ``c = a @ b`` with ``b`` row-major
(K x N), derived by primitives from the readable
:func:`~gpudsl.stdlib.matmul_f16.matmul_half_algorithm` as
:mod:`gpudsl.stdlib.matmul_sm90` derives the TN GEMM, except for B: its tile is staged
as it lies in memory, ``k`` rows of ``bn`` columns, cut into blocks of ``E = min(bn, 64)``
columns (``divide_dim``, ``rearrange_dim``: ``Bs[bn / E, bk, E]``), each row of a block
``2 E`` bytes in the hardware's swizzled layout (``set_swizzle``); a TMA box per block
loads it (``make_tma``), and the wgmma reads it MN-major (``b_major="mn"``, the PTX ISA's
transposed B: ``make_wgmma`` recognizes the product nest reading ``Bs[n // E, k, n % E]``).

2-D or batched (``[nb, m, n] @ [nb, n, k]``, blocks over the batch too).  Sizes: ``m`` any and ``k`` (the columns) a multiple of 8 with ``clip=True`` (the rows of
a TMA box are 16 bytes apart; edges clipped as in :mod:`~gpudsl.stdlib.matmul_sm90`),
the reduction ``n`` a multiple of ``bk``; without
``clip``, ``m % (64 wgs) == 0`` and ``k % bn == 0`` too.  ``plan_matmul_sm90_nn`` picks
the tile; :func:`gpudsl.stdlib.matmul_sm80.plan_matmul_half_for` uses it on sm_90a.
"""
from __future__ import annotations

import inspect

import numpy as np

from ..ir.types import SHARED, THREADS
from ..proc import Proc
from ..schedule import (divide_dim, divide_loop, insert_sync, lift_alloc, make_tma,
                        make_wgmma, parallelize_loop, pipeline_wgmma, rearrange_dim,
                        set_swizzle, simplify, stage_mem, warp_specialize)
from .matmul_f16 import matmul_half_algorithm
from .matmul_sm90 import (DEFAULTS, WIDE, _accumulators_and_k, _epilogue, _fragment, _unguard,
                          batch_index)
from .raster import RASTER, with_raster
from .shapes import NodeError, require
from .derivation_cache import derivation


def _tile_a(p, compute, bm: int, bk: int, clip: bool, zi: str = ""):
    p = stage_mem(p, p.forward(compute),
                  f"a[{zi}{bm} * bi:{bm} * bi + {bm}, {bk} * po:{bk} * po + {bk}]",
                  "As", SHARED, zeros=clip)
    return set_swizzle(p, "As", 2 * bk)


def _tile_b(p, compute, bn: int, bk: int, clip: bool, zi: str = ""):
    """B's tile as it lies (``bk`` rows of ``bn`` columns), in blocks of ``E`` columns
    whose ``2 E``-byte rows are swizzled: ``Bs[bn / E, bk, E]``, a box per block."""
    e = min(bn, 64)
    p = stage_mem(p, p.forward(compute),
                  f"b[{zi}{bk} * po:{bk} * po + {bk}, {bn} * bj:{bn} * bj + {bn}]",
                  "Bs", SHARED, zeros=clip)
    p = divide_dim(p, "Bs", 1, e)
    p = rearrange_dim(p, "Bs", [1, 0, 2])
    p = set_swizzle(p, "Bs", 2 * e)
    return divide_loop(p, "Bs_in1", e, ["Bs_c", "Bs_j"], tail="perfect")


def _tiles_nn(p, bm: int, bn: int, bk: int, clip: bool, zi: str = ""):
    compute = p.find_loop("t #1")
    p = _tile_a(p, compute, bm, bk, clip, zi)
    p = _tile_b(p, compute, bn, bk, clip, zi)
    for buf, rows in (("As", bm), ("Bs", bk)):
        p = divide_loop(p, f"{buf}_in0", rows, [f"{buf}_o", f"{buf}_r"], tail="perfect")
        p = parallelize_loop(p, f"{buf}_o", THREADS)
        p = lift_alloc(p, buf)
    p = insert_sync(p, p.find_loop("po").body().before())
    return insert_sync(p, p.forward(compute).before())


def schedule_matmul_sm90_nn(p: Proc, *, bn: int = 128, wgs: int = 1, bk: int = 64,
                            stages: int = 4, clip: bool = False,
                            raster: int = RASTER) -> Proc:
    """The sm_90a schedule of ``matmul_half_algorithm(dt, (64 wgs, bn, bk))`` (or
    ``(1, 8, bk)`` with ``clip``): ``wgs`` consumer warpgroups of ``64 x bn``, ``bk``
    rows of B per ring slot, ``stages`` slots, a producer thread (module docs);
    ``raster``: the block order of the tiles (:mod:`.raster`; 0: row order)."""
    require(wgs in (1, 2), f"wgs={wgs}: one or two consumer warpgroups")
    require(bn in (16, 32) or (bn % 64 == 0 and bn <= 256),
            f"bn={bn}: 16, 32 or a multiple of 64 up to 256 (B's rows are swizzled blocks)")
    require(bk in (16, 32, 64), f"bk={bk}: 16, 32 or 64 (A's rows are swizzled)")
    require(2 <= stages <= 8, f"stages={stages}: 2 to 8")
    bm = 64 * wgs
    zi = batch_index(p)     # batched: blocks over the batch too (_fragment)
    p = _fragment(p, bm, bn, wgs, clip)
    p = _accumulators_and_k(p, bn, wgs, bk, clip)
    p = _tiles_nn(p, bm, bn, bk, clip, zi)
    if clip:       # clipped: TMA stores the hardware clips (the columns a multiple of 8:
        p = _unguard(p)   # c's rows 16 bytes apart)
    # the epilogue through SHARED and TMA stores, as the TN kernel's; batched too
    p = _epilogue(p, bm, bn, swizzled=wgs == 1, lead=zi)
    producer = 128 * wgs
    p = warp_specialize(p, "po", producers=(producer, producer + 1),
                        consumers=(0, producer), stages=stages, ring=True)
    p = make_tma(p, "As_o")
    p = make_tma(p, "Bs_o")
    p = make_wgmma(p, "t #1")
    p = pipeline_wgmma(p, "po")     # one wgmma group in flight, as the TN kernel
    return with_raster(simplify(p), raster)


def sm90_nn_kernel(dt: str, bn: int = 128, wgs: int = 1, bk: int = 64, stages: int = 4,
                   clip: bool = False, batched: bool = False, raster: int = RASTER) -> Proc:
    """The derived sm_90a ``a @ b`` for ``dt`` and the tile (cached); ``batched``:
    ``[nb, m, n] @ [nb, n, k]``, blocks over the batch too; ``raster``: the block order
    (:mod:`.raster`)."""
    return _kernel(dt, bn, wgs, bk, stages, bool(clip), bool(batched), int(raster))


@derivation
def _kernel(dt, bn, wgs, bk, stages, clip, batched, raster=0) -> Proc:
    if raster:   # the same derivation (cached), then the hint
        return with_raster(_kernel(dt, bn, wgs, bk, stages, clip, batched, 0), raster)
    algo = matmul_half_algorithm(dt, (1, 8, bk) if clip else (64 * wgs, bn, bk), batched)
    return schedule_matmul_sm90_nn(algo, bn=bn, wgs=wgs, bk=bk, stages=stages, clip=clip,
                                   raster=0)


def choose_sm90_nn(shape_a: tuple, shape_b: tuple, dt: str, **opts) -> tuple[dict, bool]:
    """``(tile, clip)`` for ``a[m, n] @ b[n, k]``: ``opts``, else the 128 x 256 tile where
    it divides the shape, else 64 x 128, else a clipped kernel whose ``bk`` (64, 32 or 16)
    divides the reduction ``n`` (``k`` a multiple of 8); refused otherwise
    (:func:`gpudsl.stdlib.sm90_plans.choose_tile`)."""
    from .sm90_plans import choose_tile, operand_shapes, refused

    require(dt in ("f16", "bf16"), f"the sm_90a GEMM multiplies f16 or bf16, not {dt}")
    dims = operand_shapes(shape_a, shape_b, False, "the sm_90a GEMM")
    opts = {x: v for x, v in opts.items() if x != "swizzle"}
    nn_defaults, nn_wide = ({x: v for x, v in t.items() if x != "swizzle"}
                            for t in (DEFAULTS, WIDE))
    ks = (opts["bk"],) if opts.get("bk") else (64, 32, 16)
    got = choose_tile(dims, nn_defaults, (nn_wide,), opts, ks, lambda cols: cols % 8 == 0)
    if got is None:
        raise refused("the sm_90a GEMM", ks, dims, "gpudsl.ops.matmul takes every shape",
                      " and the columns a multiple of 8")
    return got


def plan_matmul_sm90_nn(shape_a: tuple, shape_b: tuple, dt: str, **opts) -> tuple[Proc, dict]:
    """The derived kernel for ``a[m, n] @ b[n, k]`` (or ``[nb, m, n] @ [nb, n, k]``,
    :func:`choose_sm90_nn`) and its size arguments."""
    tile, clip = choose_sm90_nn(shape_a, shape_b, dt, **opts)
    return sm90_nn_kernel(dt, **tile, clip=clip, batched=len(shape_a) == 3), \
        _binds(shape_a, shape_b)


def _binds(shape_a, shape_b) -> dict:
    from .sm90_plans import binds_of, operand_shapes

    return binds_of(operand_shapes(shape_a, shape_b, False, "the sm_90a GEMM"),
                    ("m", "k", "n"))


def small_shape(tile: dict, clip: bool) -> tuple:
    """A small ``(m, n, k)`` the kernel of ``tile`` serves: two block tiles (plus an
    edge when ``clip``), three k tiles; sums of small integers there are exact."""
    from .sm90_plans import small_case_shape

    m, k, n = small_case_shape(tile, clip, 8)
    return (m, n, k)


def plan_on_device(shape_a: tuple, shape_b: tuple, dt: str):
    """``(proc, bindings)`` of the derived kernel for this shape on the current sm_90a
    GPU (the tuning store's tile for it, :mod:`~gpudsl.stdlib.half_tuning`, else the
    defaults), or None: none serves the shape, or its first run there, on a small exact case,
    did not equal numpy (:func:`gpudsl.stdlib.first_run.checked_on_device`: a warning
    says so once, and the caller keeps its other kernels)."""
    from .first_run import checked_on_device

    try:
        tile, clip = choose_sm90_nn(shape_a, shape_b, dt,
                                    **tuned_sm90_nn_options(shape_a, shape_b, dt))
    except NodeError:   # a tuned tile that does not serve the shape: the defaults'
        try:
            tile, clip = choose_sm90_nn(shape_a, shape_b, dt)
        except NodeError:
            return None
    batched = len(shape_a) == 3
    p = sm90_nn_kernel(dt, **tile, clip=clip, batched=batched)
    m, n, k = small_shape(tile, clip)
    if not checked_on_device(p, lambda: _case(dt, m, n, k, 2 if batched else 0)):
        return None
    return p, _binds(shape_a, shape_b)


# ------------------------------------------------------------ the tuning store's tile
# (``gpudsl tune matmul --dtype float16`` writes it: gpudsl/stdlib/half_tuning.py)

SM90_NN_TASK = "matmul_sm90_nn"


def nn_keywords() -> set:
    """The tile parameters :func:`sm90_nn_kernel` takes (what a tuned winner holds)."""
    return set(inspect.signature(sm90_nn_kernel).parameters) - {"dt", "clip", "batched"}


def tuning_shapes(a_shape, b_shape, dt: str) -> dict:
    """The tuning store's key of the shapes: ``{name: (shape, numpy dtype name)}``."""
    ty = {"f16": "float16", "bf16": "bfloat16"}[dt]
    out = tuple(a_shape[:-1]) + (b_shape[-1],)
    return {"a": (tuple(a_shape), ty), "b": (tuple(b_shape), ty), "c": (out, ty)}


def tuned_sm90_nn_options(a_shape, b_shape, dt: str) -> dict:
    """The tuning store's winner for these shapes on this GPU, as
    :func:`choose_sm90_nn`'s keywords, or ``{}`` (the defaults: no winner, an unreadable
    store, a winner of other parameters).  Read once per store version; never tunes."""
    from ..autotune.db import lookup_winner
    from ..autotune.env import env_key
    from .node_registry import tuned

    def look():
        try:
            return lookup_winner(SM90_NN_TASK, tuning_shapes(a_shape, b_shape, dt),
                                 env_key("cuda"))
        except Exception:  # an unreadable store never stops a matmul: the defaults
            return None

    w = tuned(("sm90_nn", tuple(a_shape), tuple(b_shape), dt), look)
    if not w or not set(w) <= nn_keywords():
        return {}
    return dict(w)


def _case(dt: str, m: int, n: int, k: int, nb: int = 0):
    import ml_dtypes

    rng = np.random.default_rng(17)
    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    lead = (nb,) if nb else ()
    a = rng.integers(-3, 4, lead + (m, n)).astype(npdt)
    b = rng.integers(-3, 4, lead + (n, k)).astype(npdt)
    want = (a.astype(np.float32) @ b.astype(np.float32)).astype(npdt)
    return dict(a=a, b=b, c=np.zeros(lead + (m, k), npdt)), {"c": want}


__all__ = ["schedule_matmul_sm90_nn", "sm90_nn_kernel", "plan_matmul_sm90_nn", "choose_sm90_nn",
           "small_shape", "plan_on_device", "tuned_sm90_nn_options", "nn_keywords",
           "tuning_shapes", "SM90_NN_TASK"]
