"""Matmul schedules: the readable algorithm turned into fast kernels with
``gpudsl.schedule`` primitives only.

* ``schedule_matmul`` — the big-tile kernel (the siboehm progression up to
  float4): a ``bm x bn`` block tile of C per thread block, ``bk``-deep tiles of A
  and B staged in SHARED memory with float4 copies and barriers, a ``tm x tn``
  register tile of C per thread (the accumulator), the A column and B row of
  each k step cached in registers (B with float4), float4 stores of C.  It serves
  the divisibility class ``m % bm == 0``, ``k % bn == 0``, ``n % bk == 0`` (an
  algorithm variant with those asserts, so ``check()`` proves it symbolically).
* ``schedule_matmul_cut`` — any shape of at least one tile: ``cut_loop`` gives
  the big-tile kernel the largest multiple of the tiles and two guarded edge
  kernels the rest (the ``n % bk`` tail of the reduction stays in the tiled kernel).
* ``schedule_matmul_guarded`` — smaller shapes: one block per row of C, a guarded
  thread per column (tails work, 1-element dimensions work).
* ``schedule_vecmat`` — ``[n] @ [n, k]``: threads over ``k`` (coalesced rows of
  B), a plain loop over ``n``.
* ``schedule_matmul_guarded_tiles`` — any shape of at least
  one tile in ONE kernel: the big-tile design with the edges guarded inside it.
* ``matmul_kernel(a_shape, b_shape)`` picks the variant and schedule
  (``matmul_variant``).

The readable algorithms and the schedule steps the big-tile kernels share live in
:mod:`.matmul_parts`; the one-kernel variant in :mod:`.matmul_tiles`.

Names in the algorithm: ``c[i, j] += a[i, p] * b[p, j]`` with ``i < m``,
``j < k``, ``p < n``.
"""
from __future__ import annotations

from dataclasses import replace
from functools import lru_cache

from ..ir.printer import print_expr
from ..ir.types import BLOCKS, REGISTER, THREADS
from ..proc import Proc
from ..schedule import (cut_loop, divide_loop, parallelize_loop, rename, simplify,
                        stage_mem)
from .common import tiles_and_edges
from .matmul_parts import (Tiles, _copy_threads, _has_loop, _thread_loops,
                           _transposed_a_copy, _vectorize_store, _warp_loops, async_pipeline,
                           cache_k_step, double_buffer, matmul_algorithm, parallelize_tiles,
                           shared_tiles, stage_acc, tail_outside, tile_shape, unroll_k_step,
                           vecmat_algorithm)
from .matmul_tiles import guarded_tiles_kernel, schedule_matmul_guarded_tiles  # noqa: F401
from .shapes import NodeError, require
from .derivation_cache import derivation

DEFAULTS = dict(bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, wm=0, wn=0, stages=0,
                async_stages=0, min_blocks=2)
# wm, wn: the warp tile of the big-tile kernel (0, 0: none; see schedule_matmul's
# warp_tile).  Off by default: the performance report's figures are the same either way
# (docs/decisions.md, issue 15 wave 3).  stages: 2, double-buffered tiles with one
# barrier per k step (schedule_matmul's stages), or 1, the single-stage kernel kept for
# comparison; 0: the variant's default, 2 except for the batched kernel, which spills
# 16 B with two stages (docs/decisions.md, issue 23).  async_stages: 2 to 4, the tiles
# copied by async copies into a circular buffer of that depth (schedule_matmul's
# async_stages, with stages=1); 0: off (the default until a GPU has timed it).
# min_blocks: the resident blocks per SM the big-tile kernel asks ptxas for
# (__launch_bounds__; schedule_matmul's blocks_per_sm): 2 caps 256 threads at 128
# registers; 1 lets 128x128x16 with two stages keep its next tile in registers
# (147, no spill, against 76 B of spills at 2; docs/performance.md)



# ---------------------------------------------------------------- the big-tile kernel


def schedule_matmul(p: Proc, *, bm: int = 128, bn: int = 128, bk: int = 8, tm: int = 8,
                    tn: int = 8, vec: int = 4, cache_regs: bool = True,
                    vec_registers: bool = True, blocks_per_sm: int = 2,
                    strided_cols: bool = True, a_transposed: bool = True,
                    warp_tile: tuple | None = None, stages: int = 1,
                    async_stages: int = 0) -> Proc:
    """2-D block tiling + thread tiling + float4, from ``matmul_algorithm(batched,
    (bm, bn, bk))``.  Threads per block: ``(bm // tm) x (bn // tn)``.

    ``vec_registers``: also use float4 between registers and shared/global memory
    (the B row into registers, the C tile out), when ``vec > 1``.

    ``strided_cols``: a thread's ``tn`` columns are ``tn // vec`` groups of ``vec``
    adjacent columns, ``bn * vec // tn`` apart (the threads of a warp read adjacent
    float4 of the B row: no bank conflict; a warp stores whole rows of C: minimum
    sectors).  ``a_transposed``: the A tile lives in shared memory transposed,
    ``[bk][bm + pad]`` (each thread's ``tm`` values of a k step are adjacent: float4
    reads, broadcast in a warp; the pad spreads the transposing stores over all
    banks).  Both tile copies spread over every thread of the block, a warp reading
    whole rows of the tiles (minimum sectors).

    ``warp_tile=(wm, wn)``: warp tiling (siboehm's kernel 10): each warp of the block
    owns a ``wm x wn`` tile of C, its 32 threads' ``tm x tn`` register tiles arranged
    ``(wm // tm) x (wn // tn)`` inside it (so ``(wm // tm) * (wn // tn) == 32``).  The
    thread loops become ``ti`` (the warp, ``(bm // wm) x (bn // wn)`` of them) and
    ``tj`` (the lane): a warp's reads of a k step touch ``wm`` values of the A tile
    and ``wn`` of the B tile instead of ``2 tm`` and ``bn``.

    ``stages=2``: double buffering (``matmul_parts.double_buffer``): two SHARED
    buffers of each tile, the next tile's copy in the current step, one barrier per
    k step.

    ``async_stages=k`` (2 to 4, with ``stages=1``): the tiles copied by async copies
    (``cp.async`` on sm_80+) into a ``k``-deep circular buffer
    (``matmul_parts.async_pipeline``: ``make_async``, ``pipeline_loop``): ``k - 1`` tiles
    in flight while one is computed on; the A tile is copied one element at a time
    (4-byte copies, transposed in flight)."""
    t = tile_shape(p, bm, bn, bk, tm, tn, vec, strided_cols)
    p, t = _block_and_thread_tiles(p, t, warp_tile)  # 1.
    p = _accumulator(p, t, warp_tile is not None)  # 2. and 3.
    # 4. A and B tiles in SHARED, copied by all the block's threads (float4 reads)
    p, a_vec = shared_tiles(p, t, _a_tile_copy(t, a_transposed, async_stages > 0), vec)

    # 5. the A column and the B row of each k step in registers
    if cache_regs:
        arow = t.arow
        awin = (f"As[pi, {arow}:{arow} + {tm}]" if a_transposed
                else f"As[{arow}:{arow} + {tm}, pi]")
        p = cache_k_step(p, t, awin, vec if vec_registers else 1, a_vec)

    # a reduction tail that cut_loop left (schedule_matmul_cut), moved outside the
    # register tile loops
    p = tail_outside(p, t.nl - 2, t.nl - 2)
    p = unroll_k_step(p, t.batched, blocks_per_sm)

    # 6. float4 stores of the register tile
    if vec_registers and vec > 1:
        p = _vectorize_store(p, vec, t.zi)
    return simplify(_stages(p, stages, async_stages, a_transposed))  # 7.


def _block_and_thread_tiles(p: Proc, t: Tiles, warp_tile: tuple | None):
    """1. block tiles and thread tiles (or warp tiles): loops bi bj ti tj ri [rjg] rj,
    the block loops over blocks, ti and tj over threads.  Returns the proc and the
    tiles (a warp tile changes the threads and where a thread's tile lies)."""
    if warp_tile is not None:
        p, ty, tx, arow, bcol = _warp_loops(p, t.bm, t.bn, t.tm, t.tn, t.ncol, t.wcol,
                                            warp_tile)
        t = replace(t, ty=ty, tx=tx, arow=arow, bcol=bcol, gstep=warp_tile[1] // t.ncol)
    else:
        p = _thread_loops(p, t.bm, t.bn, t.tm, t.tn, t.ncol, t.wcol, t.strided)
    return parallelize_tiles(p, t.batched), t


def _accumulator(p: Proc, t: Tiles, warp: bool) -> Proc:
    """2. the accumulator: one register per output, expanded to the thread tile and
    the block's threads, allocated at block level; 3. the k loop in bk steps, split
    from the initialisation and the write-back, moved outside the thread loops, the k
    step outside the register tile."""
    cwin = t.c_window()
    if warp:  # the merged loops' index as written (stage_mem then
        st = p.find("c[_] = 0.0")  # sees the zeroing overwrite the whole window)
        cwin = "c[" + ", ".join(print_expr(e) for e in st.node().idx) + "]"
    return stage_acc(p, t, p.find_loop("rj").body(), cwin)


def _a_tile_copy(t: Tiles, a_transposed: bool, scalar: bool):
    """4. how the A tile is copied into SHARED (``shared_tiles``' ``copy_a``):
    transposed and padded (``scalar``: one element a copy, for async copies), or
    as it is, float4 copies over the threads."""
    def copy_a(p):
        if a_transposed:
            return _transposed_a_copy(p, t.bm, t.bk, t.ty, t.tx, t.vec, t.tm, t.zi,
                                      scalar=scalar)
        return _copy_threads(p, "As_in0", "As_in1", t.bm, t.bk, t.ty, t.tx, t.vec), 1
    return copy_a


def _stages(p: Proc, stages: int, async_stages: int, a_transposed: bool) -> Proc:
    """7. two buffers per tile, one barrier per k step (``stages=2``), or a circular
    buffer of async copies (``async_stages``), or neither (``stages=1``)."""
    if async_stages:
        if stages != 1 or _has_loop(p, "p") or not a_transposed:
            raise ValueError("async_stages needs stages=1, a transposed A tile and no "
                             "reduction tail")
        return async_pipeline(p, async_stages, "po")
    if stages == 2 and not _has_loop(p, "p"):
        return double_buffer(p, "po")
    if stages != 1:
        raise ValueError(f"stages={stages}: the big-tile kernel has 1 or 2 stages"
                         + (" (2 only without a reduction tail)" if stages == 2 else ""))
    return p


# ---------------------------------------------------------------- any shape: cut loops


def schedule_matmul_cut(p: Proc, *, bm: int = 128, bn: int = 128, bk: int = 8, tm: int = 8,
                        tn: int = 8, vec: int = 4, threads: int = 128) -> Proc:
    """Any shape, from ``matmul_algorithm(batched)`` (with ``vec > 1``:
    ``matmul_algorithm(batched, (1, vec, vec))``, whose asserts make the float4
    copies provably aligned).  ``cut_loop`` splits C into three parts, each its own
    kernel:

    * rows ``[0, bm*(m//bm))`` x columns ``[0, bn*(k//bn))``: the big-tile kernel of
      :func:`schedule_matmul` over ``p < bk*(n//bk)``, followed in the same kernel
      by the remaining ``n % bk`` steps read straight from global memory;
    * the same rows x the last ``k % bn`` columns, and the last ``m % bm`` rows x
      all columns: one block per row, ``threads`` columns per block (guarded).

    An empty part launches nothing, so shapes smaller than a tile work too."""
    batched = _has_loop(p, "z")

    def tiled(p):
        # the reduction of the first part: [0, n0) tiled, [n0, n) after it
        p = cut_loop(p, "p", f"{bk} * (n // {bk})")
        return schedule_matmul(p, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vec=vec)

    def edges(p):
        # in program order (the first loop still named i is the next one)
        p = _schedule_edge(p, "_e0", threads, batched)
        return _schedule_edge(p, "_e1", threads, batched)

    return tiles_and_edges(p, "i", bm, "j", bn, batched, tiled, edges)


def _schedule_edge(p: Proc, sfx: str, threads: int, batched: bool) -> Proc:
    """The loop nest of the first loop still named ``j`` (in ``[z,] i``): one block per
    row of C and ``threads`` columns per block with a guarded tail; the output in a
    register while it is summed."""
    bj, tj = "bj" + sfx, "tj" + sfx
    q = divide_loop(p, p.find_loop("j"), threads, [bj, tj], tail="guard")
    if batched:
        q = parallelize_loop(q, q.find_loop(bj).parent().parent(), BLOCKS)
    q = parallelize_loop(q, q.find_loop(bj).parent(), BLOCKS)
    q = parallelize_loop(q, bj, BLOCKS)
    q = parallelize_loop(q, tj, THREADS)
    st = q.find("c[_] = 0.0")
    win = "c[" + ", ".join(print_expr(e) for e in st.node().idx) + "]"
    return stage_mem(q, st.parent().body(), win, "acc" + sfx, REGISTER)


# ---------------------------------------------------------------- fallbacks


def schedule_matmul_guarded(p: Proc, *, threads: int = 128) -> Proc:
    """Any shape: one block per row of C and ``threads`` columns (guarded tail),
    one output per thread; reads of ``b`` are coalesced, ``a`` is broadcast.
    (A guard between the row and column loops would block ``reorder_loops``, so
    rows are not tiled.)"""
    batched = _has_loop(p, "z")
    p = divide_loop(p, "j", threads, ["bj", "tj"], tail="guard")
    if batched:
        p = parallelize_loop(p, "z", BLOCKS)
    p = parallelize_loop(p, "i", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "tj", THREADS)
    zi = "z, " if batched else ""
    p = stage_mem(p, p.find("c[_] = 0.0").parent().body(), f"c[{zi}i, {threads} * bj + tj]",
                  "acc", REGISTER)
    return simplify(p)


def schedule_vecmat(p: Proc, *, threads: int = 256) -> Proc:
    """``[n] @ [n, k]``: one output column per thread, coalesced rows of b."""
    p = divide_loop(p, "j", threads, ["bj", "tj"], tail="guard")
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "tj", THREADS)
    p = stage_mem(p, p.find("c[_] = 0.0").parent().body(), f"c[{threads} * bj + tj]",
                  "acc", REGISTER)
    return simplify(p)


# ---------------------------------------------------------------- choosing


def _big_ok(m, n, k, o) -> bool:
    return m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0


@derivation
def big_kernel(batched: bool, bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, wm=0, wn=0,
               stages=0, async_stages=0, min_blocks=2) -> Proc:
    default = 1 if batched else 2
    tag = "" if min_blocks == 2 else f"_b{min_blocks}"
    if async_stages:
        p = schedule_matmul(matmul_algorithm(batched, (bm, bn, bk)), bm=bm, bn=bn, bk=bk,
                            tm=tm, tn=tn, vec=vec, warp_tile=(wm, wn) if wm else None,
                            stages=1, async_stages=async_stages, blocks_per_sm=min_blocks)
        return rename(p, f"{p.name}_a{async_stages}{tag}")
    if stages == 0:
        stages = default
    p = schedule_matmul(matmul_algorithm(batched, (bm, bn, bk)), bm=bm, bn=bn, bk=bk,
                        tm=tm, tn=tn, vec=vec, warp_tile=(wm, wn) if wm else None,
                        stages=stages, blocks_per_sm=min_blocks)
    name = p.name + (f"_s{stages}" if stages != default else "") + tag
    return rename(p, name) if name != p.name else p


@derivation
def cut_kernel(batched: bool, vec: int, bm=128, bn=128, bk=8, tm=8, tn=8) -> Proc:
    alg = matmul_algorithm(batched, (1, vec, vec) if vec > 1 else None)
    p = schedule_matmul_cut(alg, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vec=vec)
    return rename(p, f"{'b' if batched else ''}matmul_cut{'_v%d' % vec if vec > 1 else ''}")


@lru_cache(maxsize=None)
def guarded_kernel(batched: bool) -> Proc:
    return schedule_matmul_guarded(matmul_algorithm(batched))


@lru_cache(maxsize=None)
def vecmat_kernel() -> Proc:
    return schedule_vecmat(vecmat_algorithm())


def matmul_kernel(a_shape, b_shape, a_dtype=None, b_dtype=None, **opts):
    """(proc, bindings) for ``a @ b`` with these shapes.  The proc's parameters
    are ``a``, ``b``, ``c`` with the shapes of the operands and the result
    (``[k]`` for ``[n] @ [n, k]``).  Raises ``NodeError`` for bad shapes."""
    import numpy as np

    for nm, dt in (("a", a_dtype), ("b", b_dtype)):
        if dt is not None:
            dt_ = dt if not str(dt).startswith("torch.") else str(dt)[6:]
            require(np.dtype(dt_) == np.float32,
                    f"{nm} is {dt}; the standard library works on float32",
                    "convert with .astype(np.float32)")
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    for nm, s in (("a", a_shape), ("b", b_shape)):
        require(len(s) in (1, 2, 3), f"{nm} has {len(s)} dimension(s); matmul takes 1 to 3")
        require(all(d > 0 for d in s), f"{nm} has an empty dimension: shape {s}")
    o = dict(DEFAULTS, **opts)
    ra, rb = len(a_shape), len(b_shape)
    if ra == 1:
        require(rb == 2, f"a vector-matrix product needs b of rank 2, not {rb}")
        require(a_shape[0] == b_shape[0],
                f"inner dimensions differ: a {a_shape} and b {b_shape}")
        return vecmat_kernel(), dict(n=a_shape[0], k=b_shape[1])
    require(ra == rb, f"a has rank {ra} and b rank {rb}; matmul takes [m,n]@[n,k], "
            "[n]@[n,k] or [b,m,n]@[b,n,k]")
    if ra == 3:
        require(a_shape[0] == b_shape[0],
                f"batch dimensions differ: a {a_shape} and b {b_shape}")
    require(a_shape[-1] == b_shape[-2],
            f"inner dimensions differ: a {a_shape} and b {b_shape}")
    m, n, k = a_shape[-2], a_shape[-1], b_shape[-1]
    bind = dict(m=m, n=n, k=k)
    batched = ra == 3
    if batched:
        bind["nb"] = a_shape[0]
    if _big_ok(m, n, k, o):
        return big_kernel(batched, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"],
                          o["vec"]), bind
    variant, vec = matmul_variant(m, n, k, o)
    if variant == "tiles":  # edges in the tiled kernel: one launch (docs/decisions.md)
        return guarded_tiles_kernel(batched, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"],
                                    o["vec"]), bind
    if variant == "cut":  # a tiled part whose edges are empty: one launch
        return cut_kernel(batched, vec, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"]), bind
    return guarded_kernel(batched), bind


def matmul_variant(m: int, n: int, k: int, o: dict) -> tuple[str, int]:
    """The variant :func:`matmul_kernel` runs for ``[m, n] @ [n, k]`` with the options
    ``o`` (DEFAULTS filled in): ``("big" | "cut" | "tiles" | "guarded", vec)``.

    At least a tile: ``big`` where the tiles divide; ``cut`` where only the reduction
    has a tail (the cut's edge kernels are empty: one launch, float4 copies); else
    ``tiles``, the one-kernel guarded big tile (the cut variant would launch two or
    three kernels, its edges one block per row).  Smaller: ``guarded``."""
    if m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0:
        return "big", o["vec"]
    if m >= o["bm"] and k >= o["bn"]:
        if m % o["bm"] == 0 and k % o["bn"] == 0:
            return "cut", (o["vec"] if n % o["vec"] == 0 and k % o["vec"] == 0 else 1)
        return "tiles", o["vec"]
    return "guarded", 1


# ---------------------------------------------------------------- tuning


def matmul_space(bm=(32, 64, 128), bn=(32, 64, 128), bk=(8, 16), tm=(4, 8), tn=(4, 8, 16),
                 wm=(0, 16, 32, 64), wn=(0, 16, 32, 64), stages=(1, 2),
                 async_stages=(0, 2, 3, 4), min_blocks=(2, 1)):
    """The big-tile schedule's parameters as an autotuning space (docs/autotuning.md):
    tiles that divide, at most 1024 threads per block; a warp tile ``wm x wn`` (0 x 0:
    none) that divides the block tile and holds 32 thread tiles; 1 or 2 stages
    (double-buffered tiles), or a circular buffer of async copies 2 to 4 deep
    (``async_stages``, with 1 stage); the resident blocks per SM asked of ptxas
    (``min_blocks``, its register cap; a candidate that spills is pruned when built).
    ``tn=16`` with a 64x64 warp tile at 128x128 is the shape of cuBLAS's SIMT kernels:
    4 warps, 8x16 outputs per thread (docs/performance.md)."""
    from ..autotune.space import Space

    return Space(bm=list(bm), bn=list(bn), bk=list(bk), tm=list(tm), tn=list(tn),
                 wm=list(wm), wn=list(wn), stages=list(stages),
                 async_stages=list(async_stages), min_blocks=list(min_blocks),
                 where=lambda c: c.bm % c.tm == 0 and c.bn % c.tn == 0
                 and 32 <= (c.bm // c.tm) * (c.bn // c.tn) <= 1024 and _warp_ok(c)
                 and not (c.get("async_stages", 0) and c.get("stages", 1) != 1))


def _warp_ok(c) -> bool:
    wm, wn = c.get("wm", 0), c.get("wn", 0)
    if not wm or not wn:
        return not wm and not wn
    return (c.bm % wm == 0 and c.bn % wn == 0 and wm % c.tm == 0 and wn % c.tn == 0
            and (wm // c.tm) * (wn // c.tn) == 32)


def options_kernel(a_shape, b_shape, **opts):
    """``matmul_kernel`` with every option of :data:`DEFAULTS` applied, the warp tile
    ``wm``/``wn`` included: when the picker chose the big-tile kernel, that kernel
    warp-tiled.  What ``MatmulBuild`` builds and ``ops.matmul`` runs for a tuned
    winner (one kernel for one configuration)."""
    wm, wn, stages = opts.pop("wm", 0), opts.pop("wn", 0), opts.pop("stages", 0)
    asy, mb = opts.pop("async_stages", 0), opts.pop("min_blocks", 2)
    p, bind = matmul_kernel(a_shape, b_shape, **opts)
    if (wm and wn) or stages or asy or mb != 2:
        o = dict(DEFAULTS, **opts)
        args = (len(a_shape) == 3, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"], o["vec"])
        if p is big_kernel(*args):  # the picker's call (lru_cache: the same object)
            # (the same call as elsewhere: lru_cache keys on how it is called)
            more = {} if mb == 2 else {"min_blocks": mb}
            if asy:
                p = big_kernel(*args, wm, wn, 1, asy, **more)
            else:
                p = big_kernel(*args, wm, wn, *((stages,) if stages else ()), **more)
    return p, bind


class MatmulBuild:
    """The schedule function ``gpudsl tune matmul`` tunes: a configuration of
    :func:`matmul_space` → the kernel ``gpudsl.ops.matmul`` runs for these shapes with
    those parameters (picklable, so candidates can be built in other processes)."""

    task = "matmul"

    def __init__(self, a_shape, b_shape):
        self.a_shape, self.b_shape = tuple(a_shape), tuple(b_shape)

    def __call__(self, config):
        return options_kernel(self.a_shape, self.b_shape, **dict(config))[0]

    def __repr__(self):
        return f"MatmulBuild({self.a_shape}, {self.b_shape})"


# the options of 4 warps of 64x64 and 8x16 outputs per thread at 128x128x16: the shape of
# cuBLAS's SIMT SGEMM (``gpudsl bench``'s row matmul_w64; docs/performance.md)
W64 = dict(bm=128, bn=128, bk=16, tm=8, tn=16, wm=64, wn=64)


def matmul_with(a, b, **opts):
    """``a @ b`` of float32 arrays (numpy or torch, 2-D or batched) by the kernel
    :func:`options_kernel` builds with ``opts`` (any option of :data:`DEFAULTS`, e.g.
    ``bk=16, min_blocks=1``), run where ``gpudsl.ops`` runs (``gpudsl bench``'s variant
    rows time the big-tile kernel's options beside the default)."""
    import numpy as np

    from .op_arguments import contig, empty, run_where_ops_run

    sa, sb = tuple(int(d) for d in a.shape), tuple(int(d) for d in b.shape)
    p, binds = options_kernel(sa, sb, **opts)
    a, b = contig(a), contig(b)
    c = empty(a, sa[:-1] + sb[-1:], np.float32)
    run_where_ops_run(p, a=a, b=b, c=c, **binds)
    return c


def tuned_options(a_shape, b_shape, target: str) -> dict:
    """The tuning database's winner for these shapes on ``target``'s device, or ``{}``
    (the defaults).  Never tunes."""
    from ..autotune.db import lookup_winner
    from ..autotune.env import env_key

    out = tuple(a_shape[:-1]) + (b_shape[-1],)
    shapes = {"a": (tuple(a_shape), "float32"), "b": (tuple(b_shape), "float32"),
              "c": (out, "float32")}
    try:
        w = lookup_winner(MatmulBuild.task, shapes, env_key(target))
    except Exception:  # an unreadable database never stops a matmul: the defaults
        w = None
    return {k: v for k, v in (w or {}).items() if k in DEFAULTS}


__all__ = ["matmul_space", "MatmulBuild", "options_kernel", "matmul_with", "W64", "tuned_options", "schedule_matmul",
           "schedule_matmul_cut", "schedule_matmul_guarded",
           "schedule_matmul_guarded_tiles",
           "schedule_vecmat", "matmul_algorithm", "vecmat_algorithm", "matmul_kernel", "NodeError",
           "matmul_variant",
           "DEFAULTS"]
