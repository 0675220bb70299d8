"""The sm_90a TF32 GEMM (H100/H200): ``c = a @ bt^T`` of f32 arrays, each product's
operands read as TF32 (:func:`matmul_nt_tf32_algorithm`), derived by primitives as
:mod:`gpudsl.stdlib.matmul_sm90` derives the half-precision one, with the tf32 wgmma
(``wgmma.mma_async.m64nNk8.f32.tf32.tf32``) at its heart.

**The readable algorithm** states the rounding the tensor cores make:
``c[i, j] = sum_p tf32(a[i, p]) * tf32(bt[j, p])`` summed in f32, ``tf32(x)`` being ``x``
with its low 13 mantissa bits cleared (the builtin; ``gpudsl.ir.wgmma_meaning.
tf32_truncate``).  TN only: the tf32 wgmma reads both operands K-major (the hardware has
no transposed tf32 form), so ``bt`` is ``N x K``, as a PyTorch ``Linear`` weight.

**The derivation** (:func:`schedule_matmul_sm90_tf32`) reuses
:mod:`~gpudsl.stdlib.matmul_sm90`'s steps: the wgmma fragment (``_fragment``), the
accumulators in registers and the k loop in tiles of ``bk`` (``_accumulators_and_k``),
the edges (``_unguard``); then the tiles of A and B staged in SHARED with rows of ``bk``
f32 in the hardware's swizzled layout (``set_swizzle``: 128 bytes for ``bk = 32``), the
ring (``warp_specialize``), TMA boxes (``make_tma``), and each k16 step of the shared
derivation cut in two k8 steps (``divide_loop``, ``reorder_loops``) that ``make_wgmma``
turns into chained tf32 wgmmas on ``[rows, 8]`` windows of the swizzled tiles.

Sizes: ``m % (64 wgs) == 0``, ``n % bn == 0``, ``k % bk == 0``; with ``clip=True`` every
``m`` and ``n % 4 == 0`` (``k % bk == 0``), the epilogue through SHARED slabs of 32
columns and TMA stores that the hardware clips at the edges (``_epilogue``); with
``clip=True, tma_store=False`` every ``n``, the epilogue's stores guarded.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir.types import SHARED, THREADS
from ..proc import Proc
from ..schedule import (divide_loop, insert_sync, lift_alloc, make_tma, make_wgmma,
                        parallelize_loop, reorder_loops, set_swizzle, simplify, stage_mem,
                        warp_specialize)
from .common import make_proc
from .matmul_sm90 import _accumulators_and_k, _epilogue, _fragment, _unguard
from .shapes import NodeError, require

DEFAULTS = dict(bn=128, wgs=1, bk=32, stages=4)
WIDE = dict(bn=256, wgs=2, bk=32, stages=4)     # 128 x 256, as the halves' wide tile
F32_BYTES = 4


def matmul_nt_tf32_algorithm(divisible: tuple | None = None) -> Proc:
    """``c[m, n] = a[m, k] @ bt[n, k]^T`` of f32, each operand read as tf32, the products
    summed in f32; ``divisible = (dm, dn, dk)`` adds ``m % dm == 0 and ...``."""
    line, tag = "", ""
    if divisible is not None:
        dm, dn, dk = divisible
        line = f"    assert m % {dm} == 0 and n % {dn} == 0 and k % {dk} == 0\n"
        tag = f"_{dm}x{dn}x{dk}"
    text = (f"def matmul_nt_tf32{tag}(m: size, n: size, k: size, a: f32[m, k], "
            "bt: f32[n, k], c: f32[m, n]):\n" + line +
            "    for i in seq(0, m):\n"
            "        for j in seq(0, n):\n"
            "            s: f32 @ REGISTER\n"
            "            s = 0.0\n"
            "            for p in seq(0, k):\n"
            "                s += tf32(a[i, p]) * tf32(bt[j, p])\n"
            "            c[i, j] = s\n")
    return make_proc(f"matmul_nt_tf32{tag}", text)


def _tiles_tf32(p, bm: int, bn: int, bk: int, clip: bool):
    """The A and B tiles of a k step in SHARED, rows of ``bk`` f32 (``4 bk`` bytes)
    swizzled: one box per operand; their copies as one-thread loops (``X_o``)."""
    compute = p.find_loop("t #1")
    for buf, src, rows, blk in (("As", "a", bm, "bi"), ("Bs", "bt", bn, "bj")):
        p = stage_mem(p, p.forward(compute),
                      f"{src}[{rows} * {blk}:{rows} * {blk} + {rows}, {bk} * po:{bk} * po + {bk}]",
                      buf, SHARED, zeros=clip)
        p = set_swizzle(p, buf, F32_BYTES * bk)
        p = divide_loop(p, f"{buf}_in0", rows, [f"{buf}_o", f"{buf}_r"], tail="perfect")
        p = parallelize_loop(p, f"{buf}_o", THREADS)
        p = lift_alloc(p, buf)
    p = insert_sync(p, p.find_loop("po").body().before())
    return insert_sync(p, p.forward(compute).before())


def _k8_steps(p):
    """Each k16 step of the shared derivation as two k8 steps, outside the fragment:
    ``kq { f { pk } }`` -> ``kq { k2 { f { k8 } } }`` (the tf32 wgmma's K is 8)."""
    p = divide_loop(p, "pk", 8, ["k2", "k8"], tail="perfect")
    return reorder_loops(p, "f #1")


def schedule_matmul_sm90_tf32(p: Proc, *, bn: int = 128, wgs: int = 1, bk: int = 32,
                              stages: int = 4, clip: bool = False,
                              tma_store: bool = True) -> Proc:
    """The sm_90a schedule of ``matmul_nt_tf32_algorithm((64 wgs, bn, bk))`` (or
    ``(1, 4, bk)`` with ``clip``): ``wgs`` consumer warpgroups of ``64 x bn``, ``bk``
    columns of k per ring slot (32: 128-byte swizzled rows; 16: 64-byte), ``stages``
    slots, a producer thread (module docs).  ``clip`` with ``tma_store`` (the default):
    the epilogue through SHARED slabs of 32 columns and clipped TMA stores (``c``'s rows
    16 bytes apart: ``n % 4 == 0``); ``tma_store=False``: ``(1, 1, bk)``, guarded
    stores."""
    require(wgs in (1, 2), f"wgs={wgs}: one or two consumer warpgroups")
    require(bn % 16 == 0 and 16 <= bn <= 256, f"bn={bn}: a multiple of 16 up to 256")
    require(bk in (16, 32), f"bk={bk}: 16 or 32 (a swizzled row of 64 or 128 bytes)")
    require(2 <= stages <= 8, f"stages={stages}: 2 to 8")
    bm = 64 * wgs
    p = _fragment(p, bm, bn, wgs, clip)
    p = _accumulators_and_k(p, bn, wgs, bk, clip)
    p = _tiles_tf32(p, bm, bn, bk, clip)
    if clip:
        p = _unguard(p)
        if tma_store:
            p = _epilogue(p, bm, bn, swizzled=wgs == 1, eb=F32_BYTES)
    producer = 128 * wgs
    p = warp_specialize(p, "po", producers=(producer, producer + 1),
                        consumers=(0, producer), stages=stages, ring=True)
    p = make_tma(p, "As_o")
    p = make_tma(p, "Bs_o")
    p = _k8_steps(p)
    p = make_wgmma(p, "t #1")
    return simplify(p)


@lru_cache(maxsize=None)
def sm90_tf32_kernel(bn: int = 128, wgs: int = 1, bk: int = 32, stages: int = 4,
                     clip: bool = False, tma_store: bool = True) -> Proc:
    """The derived sm_90a TF32 GEMM for the tile (cached); ``clip``: every m and n
    (with ``tma_store``, the clipped epilogue's TMA stores, ``n % 4 == 0``)."""
    edge = (1, 4 if tma_store else 1, bk)      # a tensor map's rows are 16 bytes apart
    algo = matmul_nt_tf32_algorithm(edge if clip else (64 * wgs, bn, bk))
    return schedule_matmul_sm90_tf32(algo, bn=bn, wgs=wgs, bk=bk, stages=stages, clip=clip,
                                     tma_store=tma_store)


def sm90_tf32_space(smem_bytes: int = 227 * 1024) -> list[dict]:
    """The autotuning space: tiles and stages whose ring fits ``smem_bytes``."""
    out = []
    for wgs in (1, 2):
        for bn in (64, 128, 256):
            for stages in (2, 3, 4, 6):
                if stages * (64 * wgs + bn) * 32 * F32_BYTES <= smem_bytes:
                    out.append(dict(bn=bn, wgs=wgs, bk=32, stages=stages))
    return out


def plan_matmul_sm90_tf32(shape_a: tuple, shape_bt: tuple, **opts) -> tuple[Proc, dict]:
    """The derived kernel for ``a[m, k] @ bt[n, k]^T`` of f32 and its size arguments:
    ``opts`` (a tile of :func:`sm90_tf32_space`), else the 128 x 256 tile where it
    divides the shape, else 64 x 128, else a clipped kernel whose ``bk`` (32 or 16)
    divides ``k``; a ``k`` neither divides is refused."""
    require(len(shape_a) == 2 and len(shape_bt) == 2 and shape_a[1] == shape_bt[1],
            f"a[m, k] @ bt[n, k]^T: shapes {shape_a} and {shape_bt} do not match")
    (m, k), n = shape_a, shape_bt[0]
    opts = dict(opts)
    clip = opts.pop("clip", None)
    tiles = [dict(DEFAULTS, **opts)] if opts else [dict(WIDE), dict(DEFAULTS)]
    binds = dict(m=m, n=n, k=k)
    if not clip:
        for t in tiles:
            if m % (64 * t["wgs"]) == 0 and n % t["bn"] == 0 and k % t["bk"] == 0:
                return sm90_tf32_kernel(**t), binds
    ks = [tiles[0]["bk"]] if opts.get("bk") else [32, 16]
    tile = dict(tiles[0])
    if n % 4:     # c's rows not 16 bytes apart: no tensor map, the epilogue's stores guarded
        tile["tma_store"] = False
    for bk in ks:
        if k % bk == 0:
            return sm90_tf32_kernel(**dict(tile, bk=bk), clip=True), binds
    raise NodeError(f"the sm_90a TF32 GEMM needs k a multiple of {' or '.join(map(str, ks))} "
                    f"(its k tiles are not clipped); not {m}x{n}x{k}", None,
                    "use gpudsl.stdlib.matmul_tf32 (mma.sync), whose kernels take every shape")


def matmul_tf32_sm90(a, bt, **opts):
    """``a @ bt^T`` of float32 arrays (numpy or torch, ``a[m, k]``, ``bt[n, k]``), each
    operand read as tf32, by the derived sm_90a kernel (:func:`plan_matmul_sm90_tf32`),
    run where ``gpudsl.ops`` runs (the GPU needs sm_90a; the emulator anywhere);
    ``gpudsl bench``'s row ``matmul_tf32_sm90`` times it."""
    import numpy as np

    from .op_arguments import contig, empty, run_where_ops_run

    sa, sb = tuple(int(d) for d in a.shape), tuple(int(d) for d in bt.shape)
    p, binds = plan_matmul_sm90_tf32(sa, sb, **opts)
    a, bt = contig(a), contig(bt)
    c = empty(a, (sa[0], sb[0]), np.float32)
    run_where_ops_run(p, a=a, bt=bt, c=c, **binds)
    return c


__all__ = ["matmul_nt_tf32_algorithm", "schedule_matmul_sm90_tf32", "sm90_tf32_kernel",
           "sm90_tf32_space", "plan_matmul_sm90_tf32", "matmul_tf32_sm90", "DEFAULTS", "WIDE"]
