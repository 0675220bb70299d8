"""The TF32 tensor-core matmul: the readable algorithm scheduled onto
``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` through two ``@instr``.

**Rounding once, while staging.**  :data:`store_tf32_x4` is the copy of four f32
values from registers into SHARED memory (one 128-bit store) that rounds each to TF32
on the way (``cvt.rn.tf32.f32``, one ``F2FP`` instruction on sm_90; the same
rounding, to nearest with ties to even, in integer arithmetic on sm_80 and in the
emulator).  Its body is the plain copy (the interpreter and ``check()`` see the exact
values; the TF32 rounding is the GPU's precision, as before, docs/decisions.md,
issue 24).  The tiles of A and B are rounded once per element this way, not once per
fragment load.

**The instruction.**  :data:`mma_tf32_nt` is one lane's share of a warp-wide
``m16n8k8`` product, written per thread::

    for rm in seq(0, 2):            # the lane's rows   m0 + 2t, m0 + 2t + 1
        for rn in seq(0, 2):        # the lane's cols   n0 + 2g, n0 + 2g + 1
            for kk in seq(0, 8):
                acc[rm, rn] += a[rm, kk] * b[kk, rn]

where lane ``l = 4 g + t`` passes ``acc`` (its four accumulators, REGISTER), ``a`` =
two rows of the A tile (SHARED, row-major as in memory) from row ``2 t`` and ``b`` =
two columns of the B tile (SHARED, row-major) from column ``2 g``.  The template
computes the transposed product ``C^T = B^T A^T`` of the hardware's shape: its
``M = 16`` runs over 16 columns of C (the mma's row ``g`` is column ``2g``, row ``g +
8`` column ``2g + 1``), its ``N = 8`` over 8 rows of C, and its k slots ``t`` and ``t +
4`` are the k values ``2t`` and ``2t + 1`` (any bijection of the 8 k values serves
both operands alike).  So every fragment register pair is contiguous in the tiles as
copied from global memory, with no transposition: the mma's A operand ``{a0, a1}``,
``{a2, a3}`` is ``B[2t, n0 + 2g : + 2]``, ``B[2t + 1, ...]`` (two 64-bit loads), its B
operand ``{b0, b1}`` is ``A[m0 + g, 2t : 2t + 2]`` (one 64-bit load, inside the window
of lane ``4 g' + t'`` with ``2 t' <= g``), and its accumulators are the lane's own
``C[m0 + 2t + rm, n0 + 2g + rn]``: a 2-wide epilogue.  The inputs are used as TF32 (the
hardware reads the upper 19 bits); the emulator's fallback truncates them the same
way, so the emulator gives the GPU's result whether or not a caller rounded.

**Its precondition**, which the instr's body cannot state: the call is issued by whole
warps, converged, and lane ``l`` passes the windows of ``g = l >> 2``, ``t = l & 3``;
and the windows are aligned for the vector loads.  The schedule ensures it by
construction: threads ``(t, g, w)`` map to ``(x, y, z)`` with block ``(4, 8, W)``, so
the linear thread id is ``t + 4 g + 32 w``, no guard surrounds the call, and every
window starts at an even element of an even-pitched tile (128-bit stores: a multiple
of 4).  :func:`tf32_preconditions_hold` re-checks both of a scheduled proc (the
alignment with the prover's residues).  SHARED reads of other lanes' windows are safe
where the body's are: the tiles are written only in the copy phase, between barriers
(``check()`` proves it).

**The schedule** (:func:`schedule_matmul_tf32`): a ``bm x bn`` block tile of C; four
warps as a ``(bm / wm) x (bn / wn)`` grid, each a ``wm x wn`` warp tile of ``wm / 8 x
wn / 16`` mma tiles whose accumulators stay in registers; ``bk``-deep tiles of A and B
staged in SHARED by all threads (128-bit global loads, rounding, 128-bit stores),
padded so that the copies' stores and the fragments' 64-bit loads are free of bank
conflicts (A rows pitched ``24`` or ``40`` floats: 8 lanes storing, 16 lanes loading
hit distinct banks; B rows ``bn + 4``); barriers around the copies; with
``double_buffer`` two buffers per tile and one barrier per k step
(``matmul_parts.double_buffer``: the next tile's global loads are issued before the
current tile's mma).  It serves ``m % bm == 0``, ``k % bn == 0``, ``n % bk == 0``
(asserted: ``check()`` proves it symbolically); :func:`matmul_tf32_kernel` refuses
other shapes with a ``NodeError`` (use the fp32 ``matmul`` there).

**Tolerance.**  Each product rounds both inputs to TF32 (10 explicit mantissa bits,
relative error at most ``2**-11`` each), then accumulates in fp32.  For ``c = a @ b``
with inner size ``n``: ``|c - ref| <= (2 * 2**-11 + n * 2**-24) * (|a| @ |b|)``
elementwise (plus the fp32 sum's own ``n * 2**-24``); tests use
:func:`tf32_tolerance`.
"""
from __future__ import annotations

import numpy as np

from ..ir.types import BLOCKS, REGISTER, SHARED, THREADS
from ..ir.wgmma_meaning import tf32_truncate_c
from ..language import f32, seq  # noqa: F401  (names of the @instr bodies)
from ..proc import Proc, instr
from ..schedule import (divide_loop, expand_dim, fission, insert_sync, lift_alloc,
                        merge_loops, pad_dim, parallelize_loop, reorder_loops, replace,
                        set_unroll, simplify, stage_mem, vectorize)
from .matmul_parts import (_permute_nest, _vectorize_copy, double_buffer, matmul_algorithm,
                           stage_tiles)
from .shapes import NodeError, require
from .derivation_cache import derivation

DEFAULTS = dict(bm=128, bn=128, bk=16, wm=64, wn=64, double_buffer=True, async_stages=0)

# the GPU path: cvt.rn.tf32.f32 (sm_90: one F2FP) or the same rounding in integer
# arithmetic (sm_80, the emulator: to nearest, ties to even; NaN stays NaN), then
# one 128-bit store
_ROUND_TEMPLATE = r"""{
  unsigned gpudsl_r_[4];
  #pragma unroll
  for (int gpudsl_i_ = 0; gpudsl_i_ < 4; ++gpudsl_i_) {
    const float gpudsl_x_ = (&{src})[gpudsl_i_ * {src_stride_0}];
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
    asm("cvt.rn.tf32.f32 %0, %1;" : "=r"(gpudsl_r_[gpudsl_i_]) : "f"(gpudsl_x_));
#else
    unsigned u;
#if defined(__CUDA_ARCH__)
    u = __float_as_uint(gpudsl_x_);
#else
    __builtin_memcpy(&u, &gpudsl_x_, 4);
#endif
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0xfffu + ((u >> 13) & 1u)) & 0xffffe000u;
    else if (u & 0x007fffffu) u = 0x7fffe000u;
    gpudsl_r_[gpudsl_i_] = u;
#endif
  }
#if defined(__CUDA_ARCH__)
  *reinterpret_cast<uint4*>(&{dst}) = make_uint4(gpudsl_r_[0], gpudsl_r_[1], gpudsl_r_[2], gpudsl_r_[3]);
#else
  __builtin_memcpy(&{dst}, gpudsl_r_, 16);
#endif
}"""




@instr(_ROUND_TEMPLATE)
def store_tf32_x4(dst: [f32][4] @ SHARED, src: [f32][4] @ REGISTER):
    for i in seq(0, 4):
        dst[i] = src[i]


# the GPU path: three 64-bit fragment loads and one warp-wide mma.sync (sm_80+); the
# fallback: the body per lane, inputs read as TF32 (the low 13 bits dropped, as the
# tensor cores do; a NaN stays a NaN: gpudsl.ir.wgmma_meaning.tf32_truncate)
_MMA_TEMPLATE = r"""{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned gpudsl_l_;
  asm("mov.u32 %0, %%laneid;" : "=r"(gpudsl_l_));
  const int gpudsl_t_ = (int)(gpudsl_l_ & 3u), gpudsl_g_ = (int)(gpudsl_l_ >> 2);
  const float* gpudsl_a_ = &{a} + (gpudsl_g_ - 2 * gpudsl_t_) * {a_stride_0};
  const float* gpudsl_b_ = &{b};
  const float2 gpudsl_x01_ = *reinterpret_cast<const float2*>(gpudsl_b_ + 2 * gpudsl_t_ * {b_stride_0});
  const float2 gpudsl_x23_ = *reinterpret_cast<const float2*>(gpudsl_b_ + (2 * gpudsl_t_ + 1) * {b_stride_0});
  const float2 gpudsl_y01_ = *reinterpret_cast<const float2*>(gpudsl_a_ + 2 * gpudsl_t_);
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"((&{acc})[0]), "+f"((&{acc})[{acc_stride_0}]),
                 "+f"((&{acc})[1]), "+f"((&{acc})[{acc_stride_0} + 1])
               : "r"(__float_as_uint(gpudsl_x01_.x)), "r"(__float_as_uint(gpudsl_x01_.y)),
                 "r"(__float_as_uint(gpudsl_x23_.x)), "r"(__float_as_uint(gpudsl_x23_.y)),
                 "r"(__float_as_uint(gpudsl_y01_.x)), "r"(__float_as_uint(gpudsl_y01_.y)));
#else
  auto gpudsl_tf32_ = [](float x) -> float {
    unsigned u;
    __builtin_memcpy(&u, &x, 4);
    u = GPUDSL_TF32_BITS;
    __builtin_memcpy(&x, &u, 4);
    return x;
  };
  for (int rm = 0; rm < 2; ++rm)
    for (int rn = 0; rn < 2; ++rn)
      for (int kk = 0; kk < 8; ++kk)
        (&{acc})[rm * {acc_stride_0} + rn] +=
            gpudsl_tf32_((&{a})[rm * {a_stride_0} + kk]) *
            gpudsl_tf32_((&{b})[kk * {b_stride_0} + rn]);
#endif
}""".replace("GPUDSL_TF32_BITS", tf32_truncate_c("u"))




@instr(_MMA_TEMPLATE)
def mma_tf32_nt(acc: [f32][2, 2] @ REGISTER, a: [f32][2, 8] @ SHARED,
                b: [f32][8, 2] @ SHARED):
    for rm in seq(0, 2):
        for rn in seq(0, 2):
            for kk in seq(0, 8):
                acc[rm, rn] += a[rm, kk] * b[kk, rn]


# ---------------------------------------------------------------- the schedule


def a_pitch(bk: int) -> int:
    """The row pitch of the A tile: at least ``bk``, 8 or 24 modulo 32 (the 16 lanes of
    a 64-bit fragment load, rows ``g`` and columns ``2t``, hit distinct banks)."""
    return next(p for p in range(bk, bk + 32) if p % 32 in (8, 24))


def map_warp_lanes(p, bm: int, bn: int, wm: int, wn: int, rows: tuple, cols: tuple):
    """The loop nest both tensor-core matmuls start from: ``i`` cut into the block
    ``bi``, the warp ``wi``, the mma tile ``mi`` and the lanes' two row pieces, ``j``
    likewise (``rows`` / ``cols``: ``(tile, split, (outer, inner))``, e.g.
    ``(8, 2, ("t", "rm"))`` for ``8 mi + 2 t + rm``); the four warps merged into ``w``,
    the blocks and the lanes ``(w, g, t)`` mapped (z, y, x: linear thread id
    ``t + 4 g + 32 w``)."""
    for var, tile, warp, (frag, split, lanes), b, w in (
            ("i", bm, wm, rows, "bi", "wi"), ("j", bn, wn, cols, "bj", "wj")):
        inner, mid, rest = var * 2, f"{var}m", f"{var}{frag}"
        p = divide_loop(p, var, tile, [b, inner], tail="perfect")
        p = divide_loop(p, inner, warp, [w, mid], tail="perfect")
        p = divide_loop(p, mid, frag, ["mi" if var == "i" else "ni", rest], tail="perfect")
        p = divide_loop(p, rest, split, list(lanes), tail="perfect")
    p = _permute_nest(p, ["bi", "wi", "mi", *rows[2], "bj", "wj", "ni", *cols[2]],
                      ["bi", "bj", "wi", "wj", "g", "t", "mi", "ni", "rm", "rn"])
    p = merge_loops(p, "wi", "w")  # the warp: wi = w // nwn, wj = w % nwn
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    for lp in ("w", "g", "t"):
        p = parallelize_loop(p, lp, THREADS)
    return p


def fragments_and_tiles(p, acc: str, frags: tuple, bm: int, bn: int, bk: int,
                        kstep: int, warps: int = 4, zi: str = ""):
    """The steps both tensor-core matmuls share after mapping the warp tile: the
    accumulator ``acc`` expanded over each lane's fragments (``frags``: the extents of
    ni and mi) and lifted to the block; the k loop cut into ``bk`` tiles outside the
    threads and ``kstep`` steps outside the mma tiles; the A and B tiles staged in
    SHARED as ``As`` / ``Bs``.  ``warps``: the warps of the block (the extent of
    ``w``); ``zi``: the batch index prefix of the tiles' windows (``"z, "``).  Returns
    the proc and the cursor of the compute nest (the warp loop) the tiles were staged
    around."""
    for lp, n in (("rn", 2), ("rm", 2), ("ni", frags[0]), ("mi", frags[1]), ("t", 4),
                  ("g", 8), ("w", warps)):
        p = expand_dim(p, acc, n, lp)
    p = lift_alloc(p, acc, n_lifts=7)
    p = divide_loop(p, "p", bk, ["po", "pi"], tail="perfect")
    p = fission(p, p.find(f"{acc}[_] = 0.0").after(), n_lifts=7)
    p = fission(p, p.find_loop("po").after(), n_lifts=7)
    for lp in ("rn #1", "rm #1", "ni #1", "mi #1", "t #1", "g #1", "w #1"):
        p = reorder_loops(p, lp)
    p = divide_loop(p, "pi", kstep, ["ks", "kk"], tail="perfect")
    for lp in ("rn #1", "rm #1", "ni #1", "mi #1"):
        p = reorder_loops(p, lp)
    return stage_tiles(p, bm, bn, bk, zi, nest="w #1")


def schedule_matmul_tf32(p: Proc, *, bm: int = 128, bn: int = 128, bk: int = 16,
                         wm: int = 64, wn: int = 64, double_buffer: bool = True,
                         async_stages: int = 0) -> Proc:
    """The tensor-core schedule of ``matmul_algorithm(False, (bm, bn, bk))`` (see the
    module docs).  Threads per block: 128, as ``(4, 8, 4)``.  ``async_stages=k`` (2 to
    4, without ``double_buffer``): the tiles copied by 16-byte async copies into a
    ``k``-deep circular buffer (``matmul_parts.async_pipeline``: ``make_async``,
    ``pipeline_loop``), unrounded (the tensor cores truncate to TF32)."""
    from ..stdlib import matmul_parts

    nwm, nwn = bm // wm, bn // wn
    require(bm % wm == 0 and bn % wn == 0 and nwm * nwn == 4 and wm % 8 == 0 and
            wn % 16 == 0, f"tf32 tiles bm={bm} bn={bn} wm={wm} wn={wn}: need four warps "
            "((bm // wm) * (bn // wn) == 4), wm % 8 == 0, wn % 16 == 0")
    require(not async_stages or (2 <= async_stages <= 4 and not double_buffer),
            f"async_stages={async_stages}: 2 to 4, without double_buffer")
    require(bm % 32 == 0 and bn % 32 == 0 and (bk == 16 or bk % 32 == 0),
            f"the tile copies need bm and bn multiples of 32 and bk 16 or a multiple of 32 "
            f"(bm={bm}, bn={bn}, bk={bk})")

    # 1. i = bm bi + wm wi + 8 mi + 2 t + rm ;  j = bn bj + wn wj + 16 ni + 2 g + rn
    p = map_warp_lanes(p, bm, bn, wm, wn, (8, 2, ("t", "rm")), (16, 2, ("g", "rn")))

    # 2. the accumulators: each lane's fragments of its warp tile, in registers
    row = f"{bm} * bi + {wm} * (w // {nwn}) + 8 * mi + 2 * t + rm"
    col = f"{bn} * bj + {wn} * (w % {nwn}) + 16 * ni + 2 * g + rn"
    p = stage_mem(p, p.find_loop("rn").body(), f"c[{row}, {col}]", "acc", REGISTER)
    # 3. the k loop: bk tiles outside the threads, 8-steps outside the mma tiles;
    # 4. A and B tiles in SHARED, as in memory (padded: conflict-free copies and fragment loads; then copied by all threads and rounded to TF32, between barriers)
    p, compute = fragments_and_tiles(p, "acc", (wn // 16, wm // 8), bm, bn, bk, 8)
    p = _copy_a(p, bm, bk, rounded=not async_stages)
    p = _copy_b(p, bk, bn, rounded=not async_stages)
    p = pad_dim(p, "As", 1, a_pitch(bk))
    p = pad_dim(p, "Bs", 1, bn + 4)
    p = insert_sync(p, p.find_loop("po").body().before())
    p = insert_sync(p, p.forward(compute).before())

    # 5. the tensor-core instruction, unrolled mma tiles, the 2-wide epilogue
    p = replace(p, p.find_loop("rm #1"), mma_tf32_nt)
    for lp in ("ks", "mi #1", "ni #1"):
        p = set_unroll(p, lp)
    p = vectorize(p, "rn #1", 2)
    if double_buffer:
        p = matmul_parts.double_buffer(p)
    if async_stages:
        p = matmul_parts.async_pipeline(p, async_stages, "po")
    return simplify(p)


def _rounded_copy(p, c_, cq, src, name):
    """The row copy (columns ``c_``) through a float4 of registers ``name`` (one 128-bit
    load of ``src``) and a rounding 128-bit store: ``c_`` -> ``cq`` (quads)."""
    p = divide_loop(p, c_, 4, [cq, cq + "v"], tail="perfect")
    p = stage_mem(p, p.find_loop(cq + "v"), src, name, REGISTER)
    p = _vectorize_copy(p, name, 4)
    return replace(p, p.find_loop(cq + "v"), store_tf32_x4)


def _direct_copy(p, c_, cq):
    """The row copy (columns ``c_``) as 128-bit copies from global to shared memory
    (``vectorize``), with no rounding: what ``make_async`` turns into 16-byte async
    copies (the tensor cores then read the inputs' upper 19 bits: TF32 by truncation)."""
    p = divide_loop(p, c_, 4, [cq, cq + "v"], tail="perfect")
    return vectorize(p, cq + "v", 4)


def _order(seqs, threads, inner: bool):
    """A copy nest's order: its seq loops outside its thread loops, or inside them
    (``inner``: the thread loops at block level, as ``make_async`` takes them)."""
    return list(threads) + list(seqs) if inner else list(seqs) + list(threads)


def _copy_a(p, bm, bk, rounded: bool = True):
    """``As[As_in0, As_in1] = a[...]``: lanes x take 4 consecutive k-quads, lanes y rows 2
    apart (the 8 lanes of a 128-bit store phase: distinct banks at pitch 24 or 40);
    the z warps and seq loops the rest.  A warp reads 8 rows x 64 B: the minimum
    sectors.  ``rounded``: through registers and a rounding store; else a direct
    128-bit copy, its seq loops inside the thread loops."""
    if rounded:
        p = _rounded_copy(p, "As_in1", "akq",
                          f"a[{bm} * bi + As_in0, {bk} * po + 4 * akq:{bk} * po + 4 * akq + 4]",
                          "ta")
    else:
        p = _direct_copy(p, "As_in1", "akq")
    p = divide_loop(p, "akq", 4, ["aks", "akx"], tail="perfect")
    p = divide_loop(p, "As_in0", 32, ["ams", "am32"], tail="perfect")
    p = divide_loop(p, "am32", 16, ["amzh", "am16"], tail="perfect")
    p = divide_loop(p, "am16", 2, ["amy", "amzl"], tail="perfect")
    p = _permute_nest(p, ["ams", "amzh", "amy", "amzl", "aks", "akx"],
                      _order(["ams", "aks"], ["amzh", "amzl", "amy", "akx"], not rounded))
    p = merge_loops(p, "amzh", "amz")  # row = 32 s + 16 (z // 2) + 2 y + z % 2
    for lp in ("amz", "amy", "akx"):
        p = parallelize_loop(p, lp, THREADS)
    for lp in ("ams", "aks"):
        p = set_unroll(p, lp)
    return p


def _copy_b(p, bk, bn, rounded: bool = True):
    """``Bs[Bs_in0, Bs_in1] = b[...]``: lanes x take 4 consecutive n-quads, lanes y rows 4
    apart (distinct banks at pitch bn + 4); a warp reads 8 rows x 64 B."""
    if rounded:
        p = _rounded_copy(p, "Bs_in1", "bnq",
                          f"b[{bk} * po + Bs_in0, {bn} * bj + 4 * bnq:{bn} * bj + 4 * bnq + 4]",
                          "tb")
    else:
        p = _direct_copy(p, "Bs_in1", "bnq")
    if bk % 32 == 0:  # k = 32 s + 4 y + z ;  n-quad = 4 s' + x
        p = divide_loop(p, "bnq", 4, ["bns", "bnx"], tail="perfect")
        p = divide_loop(p, "Bs_in0", 32, ["bks", "bk32"], tail="perfect")
        p = divide_loop(p, "bk32", 4, ["bky", "bkz"], tail="perfect")
        p = _permute_nest(p, ["bks", "bky", "bkz", "bns", "bnx"],
                          _order(["bks", "bns"], ["bkz", "bky", "bnx"], not rounded))
        y, seqs = "bky", ("bks", "bns")
    else:  # bk == 16: k = 4 (y % 4) + z ;  n-quad = 8 s + 4 (y // 4) + x
        p = divide_loop(p, "bnq", 8, ["bns", "bn8"], tail="perfect")
        p = divide_loop(p, "bn8", 4, ["bnyh", "bnx"], tail="perfect")
        p = divide_loop(p, "Bs_in0", 4, ["bky", "bkz"], tail="perfect")
        p = _permute_nest(p, ["bky", "bkz", "bns", "bnyh", "bnx"],
                          _order(["bns"], ["bkz", "bnyh", "bky", "bnx"], not rounded))
        p = merge_loops(p, "bnyh", "bky4")
        y, seqs = "bky4", ("bns",)
    for lp in ("bkz", y, "bnx"):
        p = parallelize_loop(p, lp, THREADS)
    for lp in seqs:
        p = set_unroll(p, lp)
    return p


# ---------------------------------------------------------------- preconditions


def mma_precondition_holds(p: Proc) -> bool:
    """The lane precondition of :data:`mma_tf32_nt` in a proc built by
    :func:`schedule_matmul_tf32`: every call sits directly in thread loops ``t`` (x,
    0..4) inside ``g`` (y, 0..8) inside ``w`` (z), under no ``if``, so lane ``t + 4 g``
    of each warp passes the windows of ``g`` and ``t`` (an ``if`` outside the thread
    loops, such as the one ``double_buffer`` leaves around its last step, is taken by
    the whole block alike)."""
    from ..ir.nodes import For

    calls = _calls(p, mma_tf32_nt)
    ok = []
    for _addr, _call, chain in calls:
        inner = next((chain[k:] for k, f in enumerate(chain)
                      if isinstance(f, For) and f.mapping == THREADS), [])
        threads = [f for f in chain if isinstance(f, For) and f.mapping == THREADS]
        ok.append(all(isinstance(f, For) for f in inner) and len(threads) == 3
                  and [f.iter for f in threads] == ["w", "g", "t"]
                  and [_const(f.lo) for f in threads[1:]] == [0, 0]
                  and [_const(f.hi) for f in threads[1:]] == [8, 4])
    return bool(ok) and all(ok)


def alignment_holds(p: Proc) -> bool:
    """The vector accesses of the templates are aligned: each window of a
    :data:`store_tf32_x4` destination starts at a multiple of 4 elements, each window
    of a :data:`mma_tf32_nt` tile at a multiple of 2, and the tiles' row pitches are
    even (their 64-bit loads step whole rows from the window's start), proved by the
    residues of the row-major offsets (``legality.divisible``)."""
    from ..ir.nodes import BinOp, Interval, Point
    from ..ir.procdef import as_procdef
    from ..ir.types import INDEX
    from ..schedule.legality import divisible
    from ..schedule.patterns import scope_at

    ir = as_procdef(p) or p
    checks = [(store_tf32_x4, ("dst",), 4), (mma_tf32_nt, ("a", "b"), 2)]
    found = False
    for ins, params, width in checks:
        names = [prm.name for prm in ins._ir.params]
        for addr, call, _chain in _calls(p, ins):
            found = True
            env = scope_at(ir, addr)
            for prm in params:
                arg = call.args[names.index(prm)]
                shape = env[arg.name][2]
                if width == 2 and (_const(shape[-1]) is None or _const(shape[-1]) % 2):
                    return False
                origin = [x.pt if isinstance(x, Point) else x.lo for x in arg.idx]
                if not isinstance(arg.idx[-1], Interval) or not origin:
                    return False
                flat = origin[0]
                for e, ext in zip(origin[1:], shape[1:]):
                    flat = BinOp("+", BinOp("*", flat, ext, INDEX), e, INDEX)
                if not divisible(ir, addr, flat, width):
                    return False
    return found


def tf32_preconditions_hold(p: Proc) -> bool:
    """Both preconditions the instrs' bodies cannot state (module docs)."""
    return mma_precondition_holds(p) and alignment_holds(p)


def _calls(p, ins):
    """(address, call, enclosing statements) of every call of ``ins`` in ``p``."""
    from ..ir.addresses import iter_stmts
    from ..ir.nodes import Call
    from ..ir.procdef import as_procdef

    ir = as_procdef(p) or p
    out = []
    for addr, s in iter_stmts(ir):
        if isinstance(s, Call) and s.proc.instr == ins._ir.instr:
            chain, blk = [], ir.body
            for k in range(0, len(addr) - 1, 2):
                st = blk[addr[k]]
                chain.append(st)
                blk = getattr(st, addr[k + 1])
            out.append((addr, s, chain))
    return out


def _const(e):
    return getattr(e, "val", None)


# ---------------------------------------------------------------- choosing


@derivation
def tf32_kernel(bm=128, bn=128, bk=16, wm=64, wn=64, double_buffer=True,
                async_stages=0) -> Proc:
    """The scheduled kernel (cached); ``async_stages=k`` (2 to 4): the async-copy
    pipeline, ``k`` stages deep (``double_buffer`` is then ignored)."""
    from ..schedule import rename

    db = double_buffer and not async_stages
    p = schedule_matmul_tf32(matmul_algorithm(False, (bm, bn, bk)), bm=bm, bn=bn, bk=bk,
                             wm=wm, wn=wn, double_buffer=db, async_stages=async_stages)
    return rename(p, f"matmul_tf32_{bm}x{bn}x{bk}" + ("_db" if db else "") +
                  (f"_a{async_stages}" if async_stages else ""))


def tf32_space(bm=(128, 64), bn=(128, 64), bk=(16, 32), double_buffer=(True, False),
               async_stages=(0, 2, 3, 4)):
    """The TF32 schedule's parameters as an autotuning space: four warps of 64 x 64
    or 64 x 32 tiles (``wm``/``wn`` follow the block tile), a register double buffer
    or one stage, or an async-copy circular buffer 2 to 4 deep (``async_stages``,
    without ``double_buffer``)."""
    from ..autotune.space import Space

    return Space(bm=list(bm), bn=list(bn), bk=list(bk), double_buffer=list(double_buffer),
                 async_stages=list(async_stages),
                 where=lambda c: not (c.get("async_stages", 0) and c.double_buffer)
                 and (c.bm, c.bn) != (64, 64))


class Tf32Build:
    """A configuration of :func:`tf32_space` -> the TF32 kernel (picklable)."""

    task = "matmul_tf32"

    def __call__(self, config):
        c = dict(config)
        wm, wn = (64, 64) if (c["bm"], c["bn"]) == (128, 128) else \
            (64, 32) if c["bm"] == 128 else (32, 64)
        return tf32_kernel(c["bm"], c["bn"], c["bk"], wm, wn, c["double_buffer"],
                           c.get("async_stages", 0))

    def __repr__(self):
        return "Tf32Build()"


def tile_divisible(what: str, a_shape, b_shape, o: dict, hint: str) -> tuple:
    """``(m, n, k)`` of a 2-D tensor-core matmul ``a @ b`` whose tiles (``o``: ``bm``,
    ``bk``, ``bn``) divide its shape; ``NodeError`` otherwise (``what``: the kernel's
    name in the message, ``hint``: what to do instead)."""
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    require(len(a_shape) == 2 and len(b_shape) == 2,
            f"the {what} matmul takes [m, n] @ [n, k]; got {a_shape} and {b_shape}")
    require(a_shape[1] == b_shape[0], f"inner dimensions differ: a {a_shape} and b {b_shape}")
    m, n, k = a_shape[0], a_shape[1], b_shape[1]
    require(m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0,
            f"the {what} tensor-core matmul needs m % {o['bm']} == 0, n % {o['bk']} == 0 and "
            f"k % {o['bn']} == 0; got m={m}, n={n}, k={k}", hint)
    return m, n, k


def matmul_tf32_kernel(a_shape, b_shape, **opts):
    """(proc, bindings) of the TF32 tensor-core kernel for ``a @ b`` (2-D float32,
    ``m % bm == 0``, ``n % bk == 0``, ``k % bn == 0``); ``NodeError`` otherwise."""
    o = dict(DEFAULTS, **opts)
    m, n, k = tile_divisible("tf32", a_shape, b_shape, o,
                             "use precision='fp32' (the default) for other shapes")
    return tf32_kernel(o["bm"], o["bn"], o["bk"], o["wm"], o["wn"], o["double_buffer"],
                       o["async_stages"]), dict(m=m, n=n, k=k)


def tf32_tolerance(a: np.ndarray, b: np.ndarray, truncated: bool = False) -> np.ndarray:
    """The elementwise bound on ``|tf32 result - fp32 a @ b|`` (module docs):
    ``(2 * 2**-11 + 2 * n * 2**-24) * (|a| @ |b|)`` plus a tiny absolute term;
    ``truncated`` (the async pipeline, whose tiles are not rounded: the tensor cores
    drop the low 13 bits): ``2**-10`` per input instead of ``2**-11``."""
    n = a.shape[-1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    u = 2.0 ** -10 if truncated else 2.0 ** -11
    return (2 * u + 2 * n * 2.0 ** -24) * mag + 1e-30


__all__ = ["mma_tf32_nt", "store_tf32_x4", "schedule_matmul_tf32", "matmul_tf32_kernel",
           "tf32_kernel", "tf32_tolerance", "mma_precondition_holds", "alignment_holds",
           "tf32_preconditions_hold", "a_pitch", "NodeError", "DEFAULTS", "tf32_space",
           "Tf32Build"]
