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
``m`` and ``n % 4 == 0`` (``k % bk == 0``).  The epilogue goes through SHARED slabs of
32 columns (128-byte f32 rows) and TMA stores (``_epilogue``; clipped: boxes the
hardware clips at the edges); ``tma_store=False``: each thread stores its fragment
(clipped: every ``n``, the stores guarded).  ``batched=True``: ``[nb, m, k] @ [nb, n,
k]^T``, blocks over the batch too (the slabs' boxes at the block's matrix ``z``).  The
tile choice is :mod:`~gpudsl.stdlib.sm90_plans`'s.

**What ``ops.matmul(a, b, precision="tf32")`` runs on an sm_90a GPU**
(:func:`launch_on_device`): ``b`` (K x N, row-major) transposed by the permute kernel
into a scratch array, then this kernel, once its first run there equalled numpy
(:func:`plan_on_device`); docs/decisions.md weighs the transpose's cost.  ``b = w.T``
of a contiguous ``w`` (a ``Linear`` weight) is read as it lies: this kernel with ``bt =
w``, no transpose (:func:`plan_nt_for`).
"""
from __future__ import annotations

from ..ir.types import SHARED, THREADS
from ..proc import Proc
from ..schedule import (divide_loop, insert_sync, lift_alloc, make_tma, make_wgmma,
                        parallelize_loop, reorder_loops, set_swizzle, simplify, stage_mem,
                        warp_specialize)
from .common import make_proc
from .matmul_sm90 import _accumulators_and_k, _epilogue, _fragment, _unguard, batch_index, nt_text
from .shapes import NodeError, require
from .raster import COLUMNS, with_column_groups
from .derivation_cache import derivation
from .sm90_plans import planned_once

DEFAULTS = dict(bn=128, wgs=1, bk=32, stages=4)
WIDE = dict(bn=256, wgs=2, bk=32, stages=4)     # 128 x 256, as the halves' wide tile
F32_BYTES = 4


def matmul_nt_tf32_algorithm(divisible: tuple | None = None, batched: bool = False) -> Proc:
    """``c[m, n] = a[m, k] @ bt[n, k]^T`` of f32, each operand read as tf32, the products
    summed in f32; ``divisible = (dm, dn, dk)`` adds ``m % dm == 0 and ...``;
    ``batched``: over a leading batch axis ``z`` of ``nb``."""
    line, tag = "", ""
    if divisible is not None:
        dm, dn, dk = divisible
        line = f"    assert m % {dm} == 0 and n % {dn} == 0 and k % {dk} == 0\n"
        tag = f"_{dm}x{dn}x{dk}"
    name = f"{'b' if batched else ''}matmul_nt_tf32{tag}"
    return make_proc(name, nt_text(name, "f32", line, "tf32(a[{z}i, p]) * tf32(bt[{z}j, p])",
                                   "s", batched))


def _tiles_tf32(p, bm: int, bn: int, bk: int, clip: bool):
    """The A and B tiles of a k step in SHARED, rows of ``bk`` f32 (``4 bk`` bytes)
    swizzled: one box per operand; their copies as one-thread loops (``X_o``)."""
    compute, zi = p.find_loop("t #1"), batch_index(p)
    for buf, src, rows, blk in (("As", "a", bm, "bi"), ("Bs", "bt", bn, "bj")):
        p = stage_mem(p, p.forward(compute),
                      f"{src}[{zi}{rows} * {blk}:{rows} * {blk} + {rows}, {bk} * po:{bk} * po + {bk}]",
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
    slots, a producer thread (module docs).  ``tma_store`` (the default): the epilogue
    through SHARED slabs of 32 columns and TMA stores (clipped: boxes the hardware clips,
    ``c``'s rows 16 bytes apart: ``n % 4 == 0``); ``tma_store=False``: each thread
    stores its fragment (clipped: ``(1, 1, bk)``, guarded stores)."""
    require(wgs in (1, 2), f"wgs={wgs}: one or two consumer warpgroups")
    require(bn % 16 == 0 and 16 <= bn <= 256, f"bn={bn}: a multiple of 16 up to 256")
    require(bk in (16, 32), f"bk={bk}: 16 or 32 (a swizzled row of 64 or 128 bytes)")
    require(2 <= stages <= 8, f"stages={stages}: 2 to 8")
    bm, zi = 64 * wgs, batch_index(p)
    p = _fragment(p, bm, bn, wgs, clip)
    p = _accumulators_and_k(p, bn, wgs, bk, clip)
    p = _tiles_tf32(p, bm, bn, bk, clip)
    if clip:
        p = _unguard(p)
    if tma_store:     # slabs of 32 f32 columns; batched: boxes at the block's matrix z
        p = _epilogue(p, bm, bn, swizzled=wgs == 1, eb=F32_BYTES, lead=zi)
    producer = 128 * wgs
    p = warp_specialize(p, "po", producers=(producer, producer + 1),
                        consumers=(0, producer), stages=stages, ring=True)
    p = make_tma(p, "As_o")
    p = make_tma(p, "Bs_o")
    p = _k8_steps(p)
    p = make_wgmma(p, "t #1")
    return simplify(p)


def sm90_tf32_kernel(bn: int = 128, wgs: int = 1, bk: int = 32, stages: int = 4,
                     clip: bool = False, batched: bool = False,
                     tma_store: bool = True, columns: int = 0) -> Proc:
    """The derived sm_90a TF32 GEMM for the tile (cached); ``clip``: every m and n
    (with ``tma_store``, ``n % 4 == 0``); ``tma_store``: the epilogue through SHARED and
    TMA stores, else direct stores; ``batched``: ``[nb, m, k] @ [nb, n, k]^T``, blocks
    over the batch too; ``columns=G``: the tiles in column groups of ``G`` set by the
    grid's shape (:func:`gpudsl.stdlib.raster.with_column_groups`; ``G`` must divide
    the columns of tiles), else row order."""
    if columns:
        require(not batched and not clip,
                "column groups order the tiles of one unclipped matrix (batched, clip: no)")
        return _columns(bn, wgs, bk, stages, bool(tma_store), int(columns))
    return _kernel(bn, wgs, bk, stages, bool(clip), bool(batched), bool(tma_store))


@derivation
def _columns(bn, wgs, bk, stages, tma_store, columns) -> Proc:
    return with_column_groups(_kernel(bn, wgs, bk, stages, False, False, tma_store), columns)


@derivation
def _kernel(bn, wgs, bk, stages, clip, batched, tma_store) -> Proc:
    edge = (1, 4 if tma_store else 1, bk)      # a tensor map's rows are 16 bytes apart
    algo = matmul_nt_tf32_algorithm(edge if clip else (64 * wgs, bn, bk), batched)
    return schedule_matmul_sm90_tf32(algo, bn=bn, wgs=wgs, bk=bk, stages=stages, clip=clip,
                                     tma_store=tma_store)


def sm90_tf32_space(smem_bytes: int = 227 * 1024) -> list[dict]:
    """The autotuning space: tiles and stages whose ring and epilogue slab (``64 wgs``
    rows of 32 f32) fit ``smem_bytes``."""
    out = []
    for wgs in (1, 2):
        for bn in (64, 128, 256):
            for stages in (2, 3, 4, 6):
                slab = 64 * wgs * 32 * F32_BYTES
                if stages * (64 * wgs + bn) * 32 * F32_BYTES + slab <= smem_bytes:
                    out.append(dict(bn=bn, wgs=wgs, bk=32, stages=stages))
    return out


def choose_sm90_tf32(shape_a: tuple, shape_bt: tuple, **opts) -> tuple[dict, bool, tuple]:
    """``(tile, clip, dims)`` for ``a[m, k] @ bt[n, k]^T`` of f32 (or batched): ``opts``
    (a tile of :func:`sm90_tf32_space`), else the 128 x 256 tile where it divides the
    shape, else 64 x 128, else a clipped kernel whose ``bk`` (32 or 16) divides ``k``
    (:func:`gpudsl.stdlib.sm90_plans.choose_tile`); a ``k`` neither divides is refused."""
    from .sm90_plans import choose_tile, operand_shapes, refused

    dims = operand_shapes(shape_a, shape_bt, True, "the sm_90a TF32 GEMM")
    ks = (opts["bk"],) if opts.get("bk") else (32, 16)
    got = choose_tile(dims, DEFAULTS, (WIDE,), opts, ks)
    if got is None:
        raise refused("the sm_90a TF32 GEMM", ks, dims, "use gpudsl.stdlib.matmul_tf32 "
                      "(mma.sync), whose kernels take every shape")
    tile, clip = got
    if clip and dims[1] % 4:   # c's rows not 16 bytes apart: no tensor map, guarded stores
        tile = dict(tile, tma_store=False)
    if not clip and dims[3] is None and "columns" not in tile and \
            (dims[1] // tile["bn"]) % COLUMNS == 0:   # the grid orders the tiles in groups
        tile = dict(tile, columns=COLUMNS)
    return tile, clip, dims


@planned_once
def plan_matmul_sm90_tf32(shape_a: tuple, shape_bt: tuple, **opts) -> tuple[Proc, dict]:
    """The derived kernel for ``a[m, k] @ bt[n, k]^T`` of f32 (or ``[nb, m, k] @ [nb, n,
    k]^T``, :func:`choose_sm90_tf32`) and its size arguments."""
    from .sm90_plans import binds_of

    tile, clip, dims = choose_sm90_tf32(shape_a, shape_bt, **opts)
    return sm90_tf32_kernel(**tile, clip=clip, batched=dims[3] is not None), binds_of(dims)


def matmul_tf32_sm90(a, bt, **opts):
    """``a @ bt^T`` of float32 arrays (numpy or torch, ``a[m, k]``, ``bt[n, k]``, or
    batched ``[nb, m, k]``, ``[nb, n, k]``), each
    operand read as tf32, by the derived sm_90a kernel (:func:`plan_matmul_sm90_tf32`),
    run where ``gpudsl.ops`` runs (the GPU needs sm_90a; the emulator anywhere);
    ``gpudsl bench``'s row ``matmul_tf32_sm90`` times it."""
    import numpy as np

    from .op_arguments import contig, empty, run_where_ops_run

    sa, sb = tuple(int(d) for d in a.shape), tuple(int(d) for d in bt.shape)
    p, binds = plan_matmul_sm90_tf32(sa, sb, **opts)
    a, bt = contig(a), contig(bt)
    c = empty(a, sa[:-1] + sb[-2:-1], np.float32)
    run_where_ops_run(p, a=a, bt=bt, c=c, **binds)
    return c


def plan_on_device(shape_a: tuple, shape_bt: tuple):
    """``(proc, bindings)`` of the derived TN kernel for this shape on the current sm_90a
    GPU, or None: none serves the shape, or its first run there, on a small exact case,
    did not equal numpy (:func:`gpudsl.stdlib.first_run.checked_on_device`)."""
    from .first_run import checked_on_device
    from .sm90_plans import binds_of, small_case_shape

    try:
        tile, clip, dims = choose_sm90_tf32(shape_a, shape_bt)
    except NodeError:
        return None
    nb = 0 if dims[3] is None else 2
    p = sm90_tf32_kernel(**tile, clip=clip, batched=bool(nb))
    m, n, k = small_case_shape(tile, clip, 4)   # n % 4 == 0: the TMA-store epilogue's
    if not checked_on_device(p, lambda: _case(m, n, k, nb)):
        return None
    return p, binds_of(dims)


def _case(m: int, n: int, k: int, nb: int = 0):
    """Small integers with bits below tf32's mantissa (dropped or rounded away by the
    tensor cores: the product is the integers', exact in f32)."""
    import numpy as np

    rng = np.random.default_rng(19)
    lead = (nb,) if nb else ()
    ai = rng.integers(-3, 4, lead + (m, k)).astype(np.float32)
    bi = rng.integers(-3, 4, lead + (n, k)).astype(np.float32)
    want = ai @ np.swapaxes(bi, -1, -2)
    a, bt = ai * np.float32(1 + 2.0 ** -13), bi * np.float32(1 + 2.0 ** -12)
    return dict(a=a, bt=bt, c=np.zeros(lead + (m, n), np.float32)), {"c": want}


def plan_nt_for(shape_a: tuple, shape_bt: tuple, backend: str):
    """``(proc, bindings)`` of ``a[m, k] @ bt[n, k]^T`` (``bt`` contiguous:
    ``ops.matmul(a, w.T, precision="tf32")``) on an sm_90a GPU (``backend == "cuda"``):
    the derived TN TF32 kernel where it serves the shape and passed its first run there
    (:func:`plan_on_device`); else None (the caller takes the node table's launch)."""
    from .matmul_sm80 import _has_wgmma, arch_of

    if backend != "cuda" or len(shape_a) != 2 or not _has_wgmma(arch_of(backend)):
        return None
    return plan_on_device(tuple(shape_a), tuple(shape_bt))


def launch_on_device(sa: tuple, sb: tuple, backend: str, permute):
    """The node table's launch of ``a @ b`` (float32, ``precision="tf32"``; ``[m, n] @
    [n, k]``, ``[n] @ [n, k]`` or ``[nb, m, n] @ [nb, n, k]``) on an sm_90a GPU
    (``backend == "cuda"``): ``b`` transposed by the permute kernel into a scratch
    ``bt`` (the tf32 wgmma reads B K-major only: docs/decisions.md), then the TN kernel
    (:func:`plan_on_device`); None where the device has no wgmma or no kernel serves.
    ``permute``: the node table's launch of the permute node, ``(shapes, attrs,
    backend) -> Launch``."""
    from .matmul_sm80 import _has_wgmma, arch_of
    from .node_registry import Launch

    a2 = (1,) + tuple(sa) if len(sa) == 1 else tuple(sa)
    sb = tuple(sb)
    if backend != "cuda" or len(a2) != len(sb) or not _has_wgmma(arch_of(backend)):
        return None
    bt_shape = sb[:-2] + (sb[-1], sb[-2])
    plan = plan_on_device(a2, bt_shape)
    if plan is None:
        return None
    p, binds = plan
    t = permute((sb,), {"perm": (1, 0) if len(sb) == 2 else (0, 2, 1)}, backend)
    moved = {"in": lambda s: ("in", 1, s[2]), "out": lambda s: ("scratch", "bt", s[1])}
    transpose = Launch(t.proc, tuple((x, moved[s[0]](s)) for x, s in t.args))
    out = a2[:-1] + sb[-1:]
    return Launch(p, (("a", ("in", 0, a2)), ("bt", ("scratch", "bt", None)), ("c", ("out", out)))
                  + tuple((x, ("value", v)) for x, v in binds.items()),
                  tuple(sa[:-1]) + sb[-1:], before=(transpose,), scratch=(("bt", bt_shape),))


__all__ = ["matmul_nt_tf32_algorithm", "schedule_matmul_sm90_tf32", "sm90_tf32_kernel",
           "sm90_tf32_space", "choose_sm90_tf32", "plan_matmul_sm90_tf32", "matmul_tf32_sm90",
           "plan_on_device", "plan_nt_for", "launch_on_device", "DEFAULTS", "WIDE"]
