"""The sm_80 half-precision GEMM (A100-class GPUs, and any target without wgmma): ``c =
a @ b`` for f16 or bf16, f32 accumulation, derived from the readable
:func:`~gpudsl.stdlib.matmul_f16.matmul_half_algorithm` by primitives.

**The design** (CUTLASS's sm_80 multistage GEMM): a ``bm x bn`` block tile (128 x 256
by default, or 128 x 128) computed by ``(bm / wm) (bn / wn)`` warps (eight, or four),
each a ``wm x wn`` = 64 x 64 warp tile of ``4 x 8`` mma tiles whose 128 f32
accumulators a lane keeps in registers; ``bk = 32``-deep tiles of A and B copied by
16-byte ``cp.async`` into a ``stages``-deep ring in SHARED memory (2 to 4 stages:
``make_async``, then ``pipeline_loop``), one barrier per k tile.

**The warp instruction** (:func:`warp_mma`): one ``@instr`` is a warp's whole k16 step
of its warp tile, written per lane as the loops it replaces (``replace`` unifies them),
``acc[mi, ni, rm, rn] += f32(a[16 mi + 8 rm, kk]) * f32(b[kk, 8 ni + rn])``.  Its code
loads each fragment once: ``wm / 16`` ``ldmatrix.x4`` of A and ``wn / 16``
``ldmatrix.x4.trans`` of B (two n8 tiles each), then ``(wm / 16) (wn / 8)``
``mma.sync.m16n8k16`` (a 64 x 64 tile: 8 LDSM for 32 HMMA; today's per-mma ``@instr``
loads both fragments at every mma, which ptxas shares on sm_90 but not on sm_80: 128
LDSM for 64 HMMA).  The emulator runs the body.  Its precondition (whole converged
warps, lane ``4 g + t``; 16-byte aligned rows) is the per-mma instr's,
:func:`sm80_preconditions_hold` re-checks it.

**Conflict-free tiles.**  The tiles are padded (``pad_dim``), not swizzled: an ``@instr``
window of a swizzled tile is refused (docs/hopper.md), and the padding gives the same
result for ldmatrix: the A tile's rows are ``bk + 8 = 40`` halves apart (80 bytes: the
eight row addresses of an ldmatrix phase fall on eight distinct 16-byte bank groups),
the B tile's ``bn + 8`` (528 or 272 bytes, 16 modulo 128: likewise).  The copies: each
warp copies 32 consecutive 16-byte chunks of a tile (row-major), so a warp reads 512
contiguous bytes of B (whole sectors) and writes them to one row of the B tile.

**The epilogue**: each lane's accumulators rounded to the half type once and stored
in pairs (``vectorize``: one 32-bit store of two adjacent halves).

It serves ``m % bm == 0``, ``k % bn == 0``, ``n % bk == 0`` (asserted in the
algorithm; ``check()`` proves the kernel for all such sizes), 2-D or batched
(``[b, m, n] @ [b, n, k]``, blocks over the batch too); :func:`plan_matmul_sm80`
gives other shapes a fallback (a 128 x 128 tile, else today's kernels).  :func:`sm80_space` is its autotuning space
(tile, stages), pruned by the target's shared memory; :func:`plan_matmul_half_for`
picks it on targets without wgmma.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir.types import BLOCKS, SHARED, THREADS  # noqa: F401
from ..proc import Proc
from ..schedule import (divide_loop, insert_sync, merge_loops, pad_dim, parallelize_loop,
                        replace, set_unroll, simplify, vectorize)
from .matmul_f16 import matmul_half_algorithm
from .matmul_parts import _has_loop, _permute_nest
from .matmul_tf32 import fragments_and_tiles, map_warp_lanes
from .raster import RASTER, RASTERS, with_raster
from .shapes import NodeError, require
from .derivation_cache import derivation

DEFAULTS = dict(bm=128, bn=256, bk=32, wm=64, wn=64, stages=3)
CHUNK = 8  # halves per 16-byte copy

# One warp's k16 step of its wm x wn warp tile: MI x NI mma tiles, their fragments
# loaded once (MI ldmatrix.x4 of A, NI / 2 ldmatrix.x4.trans of B: two n8 tiles each)
# and shared by the MI * NI mma.sync.  Lane l = 4 g + t: its A rows g + 16 mi + 8 rm,
# its B columns 2 t + 8 ni + rn.
_WARP_TEMPLATE = r"""{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned gpudsl_l_;
  asm("mov.u32 %0, %%laneid;" : "=r"(gpudsl_l_));
  const int gpudsl_t_ = (int)(gpudsl_l_ & 3u), gpudsl_g_ = (int)(gpudsl_l_ >> 2);
  const int gpudsl_r_ = (int)(gpudsl_l_ & 7u) + 8 * (int)((gpudsl_l_ >> 3) & 1u);
  const auto* gpudsl_a_ = &{a} + (gpudsl_r_ - gpudsl_g_) * {a_stride_0} + 8 * (int)(gpudsl_l_ >> 4);
  const auto* gpudsl_b_ = &{b} - 2 * gpudsl_t_ + gpudsl_r_ * {b_stride_0} + 8 * (int)(gpudsl_l_ >> 4);
  unsigned gpudsl_x_[@MI@][4], gpudsl_y_[@NI@][2];
#pragma unroll
  for (int gpudsl_i_ = 0; gpudsl_i_ < @MI@; ++gpudsl_i_)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(gpudsl_x_[gpudsl_i_][0]), "=r"(gpudsl_x_[gpudsl_i_][1]),
                   "=r"(gpudsl_x_[gpudsl_i_][2]), "=r"(gpudsl_x_[gpudsl_i_][3])
                 : "r"((unsigned)__cvta_generic_to_shared(gpudsl_a_ + 16 * gpudsl_i_ * {a_stride_0})));
#pragma unroll
  for (int gpudsl_j_ = 0; gpudsl_j_ < @NI@; gpudsl_j_ += 2)
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
                 : "=r"(gpudsl_y_[gpudsl_j_][0]), "=r"(gpudsl_y_[gpudsl_j_][1]),
                   "=r"(gpudsl_y_[gpudsl_j_ + 1][0]), "=r"(gpudsl_y_[gpudsl_j_ + 1][1])
                 : "r"((unsigned)__cvta_generic_to_shared(gpudsl_b_ + 8 * gpudsl_j_)));
#pragma unroll
  for (int gpudsl_i_ = 0; gpudsl_i_ < @MI@; ++gpudsl_i_)
#pragma unroll
    for (int gpudsl_j_ = 0; gpudsl_j_ < @NI@; ++gpudsl_j_) {
      float* gpudsl_c_ = &{acc} + gpudsl_i_ * {acc_stride_0} + gpudsl_j_ * {acc_stride_1};
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.@T@.@T@.f32 "
                   "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                   : "+f"(gpudsl_c_[0]), "+f"(gpudsl_c_[{acc_stride_3}]),
                     "+f"(gpudsl_c_[{acc_stride_2}]), "+f"(gpudsl_c_[{acc_stride_2} + {acc_stride_3}])
                   : "r"(gpudsl_x_[gpudsl_i_][0]), "r"(gpudsl_x_[gpudsl_i_][1]),
                     "r"(gpudsl_x_[gpudsl_i_][2]), "r"(gpudsl_x_[gpudsl_i_][3]),
                     "r"(gpudsl_y_[gpudsl_j_][0]), "r"(gpudsl_y_[gpudsl_j_][1]));
    }
#else
  for (int mi = 0; mi < @MI@; ++mi)
    for (int ni = 0; ni < @NI@; ++ni)
      for (int rm = 0; rm < 2; ++rm)
        for (int rn = 0; rn < 2; ++rn)
          for (int kk = 0; kk < 16; ++kk)
            (&{acc})[mi * {acc_stride_0} + ni * {acc_stride_1} + rm * {acc_stride_2} + rn * {acc_stride_3}] +=
                (float)(&{a})[(16 * mi + 8 * rm) * {a_stride_0} + kk] *
                (float)(&{b})[kk * {b_stride_0} + 8 * ni + rn];
#endif
}"""


@lru_cache(maxsize=None)
def warp_mma(dt: str, mi: int, ni: int) -> Proc:
    """The ``@instr`` of one warp's k16 step of an ``16 mi x 8 ni`` warp tile in ``dt``
    (``ni`` even), written per lane (``acc``: its ``mi x ni`` fragments; ``a``: the A
    tile's rows from ``g``; ``b``: the B tile's columns from ``2 t``)::

        for mi, ni, rm, rn, kk:
            acc[mi, ni, rm, rn] += f32(a[16 mi + 8 rm, kk]) * f32(b[kk, 8 ni + rn])
    """
    from ..proc import proc_from_source

    require(dt in ("f16", "bf16") and mi >= 1 and ni >= 2 and ni % 2 == 0,
            f"warp_mma({dt!r}, {mi}, {ni}): f16/bf16, ni even")
    template = (_WARP_TEMPLATE.replace("@MI@", str(mi)).replace("@NI@", str(ni))
                .replace("@T@", dt))
    text = (f"@instr({template!r})\n"
            f"def mma_{dt}_warp{mi}x{ni}(acc: [f32][{mi}, {ni}, 2, 2] @ REGISTER, "
            f"a: [{dt}][{16 * mi - 7}, 16] @ SHARED, b: [{dt}][16, {8 * ni - 6}] @ SHARED):\n"
            f"    for mi in seq(0, {mi}):\n"
            f"        for ni in seq(0, {ni}):\n"
            "            for rm in seq(0, 2):\n"
            "                for rn in seq(0, 2):\n"
            "                    for kk in seq(0, 16):\n"
            "                        acc[mi, ni, rm, rn] += "
            "f32(a[16 * mi + 8 * rm, kk]) * f32(b[kk, 8 * ni + rn])\n")
    return proc_from_source(text, file=f"<gpudsl.stdlib.mma_{dt}_warp{mi}x{ni}>")


def stage_bytes(bm: int, bn: int, bk: int) -> int:
    """SHARED bytes of one stage: the padded A and B tiles."""
    return 2 * (bm * (bk + 8) + bk * (bn + 8))


def schedule_matmul_sm80(p: Proc, dt: str, *, bm: int = 128, bn: int = 256, bk: int = 32,
                         wm: int = 64, wn: int = 64, stages: int = 3,
                         raster: int = RASTER) -> Proc:
    """The sm_80 schedule of ``matmul_half_algorithm(dt, (bm, bn, bk))`` (module docs).
    Threads per block: ``32 * (bm // wm) * (bn // wn)``, as ``(4, 8, warps)``;
    ``raster``: the block order of the tiles (:mod:`.raster`; 0: row order)."""
    warps = (bm // wm) * (bn // wn)
    threads = 32 * warps
    require(bm % wm == 0 and bn % wn == 0 and wm % 16 == 0 and wn % 8 == 0 and
            warps in (4, 8, 16), f"sm80 tiles bm={bm} bn={bn} wm={wm} wn={wn}: need 4, 8 "
            "or 16 warps of wm % 16 == 0, wn % 8 == 0")
    require(bk % 16 == 0 and (bm * bk // CHUNK) % threads == 0 and
            (bk * bn // CHUNK) % threads == 0,
            f"the tile copies need bk % 16 == 0 and whole 16-byte chunks for every thread "
            f"(bm={bm}, bn={bn}, bk={bk}, {threads} threads)")
    require(2 <= stages <= 8, f"stages={stages}: 2 to 8")
    zi = "z, " if _has_loop(p, "z") else ""
    if zi:
        p = parallelize_loop(p, "z", BLOCKS)

    # 1. i = bm bi + wm wi + 16 mi + 8 rm + g ;  j = bn bj + wn wj + 8 ni + 2 t + rn
    p = map_warp_lanes(p, bm, bn, wm, wn, (16, 8, ("rm", "g")), (8, 2, ("t", "rn")))
    # 2. the f32 accumulators in registers; 3. the k loop in bk tiles, 16-steps;
    # 4. the A and B tiles in SHARED, padded, copied 16 bytes a thread by every thread
    p, compute = fragments_and_tiles(p, "s", (wn // 8, wm // 16), bm, bn, bk, 16,
                                     warps=warps, zi=zi)
    p = _copy_a_rows(p, bm, bk, warps) if bm % (8 * warps) == 0 and bk % 32 == 0 else \
        _copy_chunks(p, "As", bk, warps)
    p = _copy_chunks(p, "Bs", bn, warps)
    p = pad_dim(p, "As", 1, bk + 8)
    p = pad_dim(p, "Bs", 1, bn + 8)
    p = insert_sync(p, p.find_loop("po").body().before())
    p = insert_sync(p, p.forward(compute).before())
    # 5. the tensor-core instruction, unrolled mma tiles
    p = replace(p, p.find_loop("mi #1"), warp_mma(dt, wm // 16, wn // 8))
    p = set_unroll(p, "ks")
    # 6. the epilogue: pairs of halves
    p = _paired_epilogue(p, bm, bn, wm, wn, bn // wn, zi)
    # 7. the copies async, a `stages`-deep ring, one barrier per k tile (last: every
    #    rewrite of a proc with async copies re-proves their obligations)
    p = _pipeline(p, stages)
    return with_raster(simplify(p), raster)


def _copy_chunks(p, tile: str, cols: int, warps: int):
    """The copy of ``tile`` (``cols`` halves a row) as 16-byte chunks, row-major over
    every thread: chunk ``f = 32 * warps * s + 32 z + 4 y + x`` is row ``f // (cols /
    8)``, chunk ``f % (cols / 8)``; the thread loops outermost (as ``make_async`` takes
    them), the chunk loop ``s`` inside, unrolled."""
    r, c_ = f"{tile}_in0", f"{tile}_in1"
    q = tile[0].lower() + "c"
    p = divide_loop(p, c_, CHUNK, [q + "q", q + "v"], tail="perfect")
    p = vectorize(p, q + "v", CHUNK)
    p = merge_loops(p, r, q + "f")
    p = divide_loop(p, q + "f", 32 * warps, [q + "s", q + "t"], tail="perfect")
    p = divide_loop(p, q + "t", 32, [q + "z", q + "l"], tail="perfect")
    p = divide_loop(p, q + "l", 4, [q + "y", q + "x"], tail="perfect")
    p = _permute_nest(p, [q + "s", q + "z", q + "y", q + "x"],
                      [q + "z", q + "y", q + "x", q + "s"])
    for lp in (q + "z", q + "y", q + "x"):
        p = parallelize_loop(p, lp, THREADS)
    return set_unroll(p, q + "s")


def _copy_a_rows(p, bm: int, bk: int, warps: int):
    """The A tile's copy with each phase of 8 lanes on 8 rows: lane ``x + 4 y`` of warp
    ``z`` copies row ``8 (warps * s + z) + 4 (y % 2) + x``, chunk ``4 s' + y // 2``.
    The 8 destinations of a phase are then 16-byte slots of 8 rows ``bk + 8`` halves
    apart, as an ldmatrix phase reads them: conflict-free (4 chunks of 2 rows, the row
    order, conflict 2-way at pitch 40).  A warp still reads 8 rows x 64 bytes."""
    p = divide_loop(p, "As_in1", CHUNK, ["aq", "av"], tail="perfect")
    p = vectorize(p, "av", CHUNK)
    seqs = ["acs", "acq"]
    p = divide_loop(p, "aq", 4, ["acq", "aq4"], tail="perfect")
    p = divide_loop(p, "As_in0", 8, ["ar", "r8"], tail="perfect")
    p = divide_loop(p, "r8", 4, ["ry", "acx"], tail="perfect")
    p = divide_loop(p, "ar", warps, ["acs", "acz"], tail="perfect")
    p = _permute_nest(p, ["acs", "acz", "ry", "acx", "acq", "aq4"],
                      ["acz", "aq4", "ry", "acx", "acs", "acq"])
    p = merge_loops(p, "aq4", "acy")
    for lp in ("acz", "acy", "acx"):
        p = parallelize_loop(p, lp, THREADS)
    for lp in seqs:
        p = set_unroll(p, lp)
    return p


def _pipeline(p, stages: int):
    from ..ir.nodes import Sync
    from ..schedule import lift_alloc, make_async, pipeline_loop
    from ..schedule.cursors import Cursor

    for b in ("As", "Bs"):
        p = lift_alloc(p, b)
    body = p.find_loop("po").node().body
    syncs = [i for i, s in enumerate(body) if isinstance(s, Sync)]
    a = p.find_loop("po").addr + ("body", 1)
    p = make_async(p, Cursor(p, "block", a, syncs[1]))
    return pipeline_loop(p, "po", stages=stages)


def _paired_epilogue(p, bm, bn, wm, wn, nwn, zi):
    """Each lane's two adjacent results ``c[row, col:col + 2]`` rounded into a register
    pair ``ch`` (``stage_mem``), stored by one 32-bit store (``vectorize``)."""
    from ..ir.types import REGISTER
    from ..schedule import stage_mem
    from ..schedule.cursors import find

    row = f"{bm} * bi + {wm} * (w // {nwn}) + 16 * mi + 8 * rm + g"
    col = f"{bn} * bj + {wn} * (w % {nwn}) + 8 * ni + 2 * t"
    p = stage_mem(p, p.find_loop("rn #1"), f"c[{zi}{row}, {col}:{col} + 2]", "ch", REGISTER)
    return vectorize(p, find(p, "c[_] = ch[_]").parent(), 2)


def sm80_kernel(dt: str, bm=128, bn=256, bk=32, wm=64, wn=64, stages=3,
                batched: bool = False, raster: int = RASTER) -> Proc:
    """The scheduled kernel (cached whatever the arguments' form), named
    ``[b]matmul_{dt}_sm80_{bm}x{bn}x{bk}_s{stages}``; ``raster``: the block order
    (:mod:`.raster`)."""
    return _sm80_kernel(dt, int(bm), int(bn), int(bk), int(wm), int(wn), int(stages),
                        bool(batched), int(raster))


@derivation
def _sm80_kernel(dt, bm, bn, bk, wm, wn, stages, batched, raster=0) -> Proc:
    from ..schedule import rename

    if raster:   # the same derivation (cached), then the hint
        return with_raster(_sm80_kernel(dt, bm, bn, bk, wm, wn, stages, batched, 0), raster)
    p = schedule_matmul_sm80(matmul_half_algorithm(dt, (bm, bn, bk), batched), dt, bm=bm,
                             bn=bn, bk=bk, wm=wm, wn=wn, stages=stages, raster=0)
    return rename(p, f"{'b' if batched else ''}matmul_{dt}_sm80_{bm}x{bn}x{bk}_s{stages}")


# ---------------------------------------------------------------- preconditions


def sm80_preconditions_hold(p: Proc, dt: str, wm: int = 64, wn: int = 64) -> bool:
    """The warp instruction's preconditions in a scheduled proc: the lane mapping
    (threads ``w``, ``g`` 0..8, ``t`` 0..4 directly around every call, no guard) and
    the 16-byte alignment of the ldmatrix rows
    (:func:`~gpudsl.stdlib.matmul_f16.half_preconditions_hold`)."""
    from .matmul_f16 import half_preconditions_hold

    return half_preconditions_hold(p, dt, warp_mma(dt, wm // 16, wn // 8))


# ---------------------------------------------------------------- choosing


def fits(target, bm: int, bn: int, bk: int, wm: int, wn: int, stages: int) -> bool:
    """The configuration's ring fits ``target``'s shared memory per block and its
    threads a block (at most 256: a 64 x 64 warp tile holds ~220 registers a lane)."""
    from ..targets import target as get_target

    t = get_target(target)
    warps = (bm // wm) * (bn // wn)
    return (stages * stage_bytes(bm, bn, bk) <= t.max_shared_bytes and warps * 32 <= 256
            and bm % wm == 0 and bn % wn == 0)


def sm80_space(tiles=((128, 256), (256, 128), (128, 128)), warp=((64, 64), (64, 32)),
               bk=(32, 64), stages=(2, 3, 4), target: str = "sm_80", raster=RASTERS):
    """The sm_80 kernel's parameters as an autotuning space: block tile, warp tile,
    k depth, ring depth and block order (:mod:`.raster`), pruned to what fits ``target``
    (:func:`fits`)."""
    from ..autotune.space import Space

    return Space(tile=[list(t) for t in tiles], warp=[list(w) for w in warp], bk=list(bk),
                 stages=list(stages), raster=list(raster),
                 where=lambda c: fits(target, *c.tile, c.bk, *c.warp, c.stages))


def config_options(c) -> dict:
    """A configuration of :func:`sm80_space` as :func:`sm80_kernel`'s keywords."""
    return dict(bm=c["tile"][0], bn=c["tile"][1], bk=c["bk"], wm=c["warp"][0],
                wn=c["warp"][1], stages=c["stages"], raster=dict(c).get("raster", RASTER))


class Sm80Build:
    """A configuration of :func:`sm80_space` -> the kernel (picklable)."""

    task = "matmul_sm80"

    def __init__(self, dt: str = "f16", batched: bool = False):
        self.dt, self.batched = dt, batched

    def __call__(self, config):
        return sm80_kernel(self.dt, batched=self.batched, **config_options(config))

    def __repr__(self):
        return f"Sm80Build({self.dt!r}, batched={self.batched})"


def arch_of(target=None) -> str:
    """The architecture a run on ``target`` compiles for: the device's for ``"cuda"``
    (``"sm_90a"`` on an H100), what the emulator proves for (sm_90a) for ``None`` and
    ``"emulator"``, else ``target`` itself (``"sm_80"``)."""
    from ..targets import EMULATED_TARGET, target as get_target

    if target == "cuda":
        from ..runtime.driver import device_arch

        return device_arch()
    if target in (None, "emulator"):
        return EMULATED_TARGET
    return get_target(target).name


def tuned_sm80_options(a_shape, b_shape, dt: str, target: str) -> dict:
    """The tuning store's winner for these shapes where ``target`` is a run target
    (``"cuda"``, ``"emulator"``), as :func:`sm80_kernel`'s keywords, or ``{}`` (the
    defaults; always for an architecture name).  Never tunes."""
    from ..autotune.db import lookup_winner
    from ..autotune.env import env_key

    if target not in ("cuda", "emulator"):
        return {}

    ty = {"f16": "float16", "bf16": "bfloat16"}[dt]
    out = tuple(a_shape[:-1]) + (b_shape[-1],)
    shapes = {"a": (tuple(a_shape), ty), "b": (tuple(b_shape), ty), "c": (out, ty)}
    try:
        w = lookup_winner(Sm80Build.task, shapes, env_key(target))
    except Exception:  # an unreadable store never stops a matmul: the defaults
        w = None
    if not w or not all(k in w for k in ("tile", "warp", "bk", "stages")):
        return {}
    return config_options(w)


def _dims(a_shape, b_shape, dt):
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    require(len(a_shape) == len(b_shape) and len(a_shape) in (2, 3) and
            a_shape[:-2] == b_shape[:-2],
            f"the {dt} matmul takes [m, n] @ [n, k] or [b, m, n] @ [b, n, k]; got "
            f"{a_shape} and {b_shape}")
    require(a_shape[-1] == b_shape[-2],
            f"inner dimensions differ: a {a_shape} and b {b_shape}")
    binds = dict(m=a_shape[-2], n=a_shape[-1], k=b_shape[-1])
    if len(a_shape) == 3:
        binds["nb"] = a_shape[0]
    return binds


def matmul_sm80_kernel(a_shape, b_shape, dt: str, **opts):
    """(proc, bindings) of the sm_80 kernel for ``a @ b`` (``[m, n] @ [n, k]`` or
    batched ``[b, m, n] @ [b, n, k]``, ``m % bm == 0``, ``n % bk == 0``, ``k % bn ==
    0``); ``NodeError`` otherwise."""
    o = dict(DEFAULTS, **opts)
    binds = _dims(a_shape, b_shape, dt)
    m, n, k = binds["m"], binds["n"], binds["k"]
    require(m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0,
            f"the sm_80 {dt} matmul needs m % {o['bm']} == 0, n % {o['bk']} == 0 and "
            f"k % {o['bn']} == 0; got m={m}, n={n}, k={k}",
            "pad the operands; plan_matmul_sm80 gives other shapes a fallback kernel")
    return sm80_kernel(dt, o["bm"], o["bn"], o["bk"], o["wm"], o["wn"], o["stages"],
                       "nb" in binds), binds


@lru_cache(maxsize=None)
def batched_simple_kernel(dt: str, threads: int = 128) -> Proc:
    """Any batched shape: one thread per element of C (blocks over the batch, the rows
    and groups of ``threads`` columns), the products summed in f32 in order."""
    from ..schedule import rename

    p = matmul_half_algorithm(dt, None, True)
    p = divide_loop(p, "j", threads, ["bj", "tj"], tail="guard")
    for lp in ("z", "i", "bj"):
        p = parallelize_loop(p, lp, BLOCKS)
    p = parallelize_loop(p, "tj", THREADS)
    return rename(simplify(p), f"bmatmul_{dt}_simple")


def plan_matmul_sm80(a_shape, b_shape, dt: str, target: str = "sm_80", **opts):
    """(proc, bindings): the sm_80 kernel (``opts`` over the store's winner where
    ``target`` is a run target, over :data:`DEFAULTS`) where its tiles divide the shape
    and its ring fits the target (:func:`arch_of`); else the fallbacks: a smaller
    sm_80 tile (128 x 128), then today's
    :func:`~gpudsl.stdlib.matmul_f16.plan_matmul_half` (2-D) or
    :func:`batched_simple_kernel`."""
    o = dict(tuned_sm80_options(a_shape, b_shape, dt, target), **opts)
    arch = arch_of(target)
    for tries in (o, dict(o, bm=128, bn=128, wm=64, wn=64)):
        if fits(arch, tries.get("bm", 128), tries.get("bn", 256), tries.get("bk", 32),
                tries.get("wm", 64), tries.get("wn", 64), tries.get("stages", 3)):
            try:
                return matmul_sm80_kernel(a_shape, b_shape, dt, **tries)
            except NodeError:
                pass
    binds = _dims(a_shape, b_shape, dt)
    if "nb" in binds:
        return batched_simple_kernel(dt), binds
    from .matmul_f16 import plan_matmul_half

    return plan_matmul_half(a_shape, b_shape, dt)


def uses_sm80(target) -> bool:
    """Whether ``target`` gets the sm_80 kernel: it has cp.async and the m16n8k16
    tensor cores but no wgmma (sm_80, sm_86, sm_89; sm_90 without its ``a``
    features)."""
    from ..targets import CP_ASYNC, MMA_F16, WGMMA, target as get_target

    t = get_target(target)
    return t.has(CP_ASYNC) and t.has(MMA_F16) and not t.has(WGMMA)


def plan_matmul_half_for(a_shape, b_shape, dt: str, target=None):
    """(proc, bindings) of the half matmul ``ops.matmul`` and graphs run on ``target``
    (``"cuda"``, ``"emulator"`` or an architecture, :func:`arch_of`):
    on an sm_90a GPU (``"cuda"``), the wgmma kernel
    (:func:`~gpudsl.stdlib.matmul_sm90_nn.plan_on_device`, 2-D or batched) where it
    serves the shape and passed its first run on the device; else
    :func:`plan_matmul_sm80` where the architecture has no wgmma (:func:`uses_sm80`) or
    for batched shapes; else today's :func:`~gpudsl.stdlib.matmul_f16.plan_matmul_half`."""
    if target == "cuda" and _has_wgmma(arch_of(target)):
        from .matmul_sm90_nn import plan_on_device

        plan = plan_on_device(tuple(a_shape), tuple(b_shape), dt)
        if plan is not None:
            return plan
    if uses_sm80(arch_of(target)) or len(a_shape) == 3:
        return plan_matmul_sm80(a_shape, b_shape, dt, target)
    from .matmul_f16 import plan_matmul_half

    return plan_matmul_half(a_shape, b_shape, dt)


def plan_matmul_half_nt_for(a_shape, bt_shape, dt: str, target=None):
    """(proc, bindings) of ``a @ bt^T`` (``bt[n, k]`` contiguous: ``ops.matmul(a, w.T)``)
    on an sm_90a GPU (``"cuda"``): the derived TN wgmma kernel where it serves the shape
    and passed its first run on the device
    (:func:`~gpudsl.stdlib.matmul_sm90.plan_on_device`); else None (the caller makes
    ``b`` contiguous and takes :func:`plan_matmul_half_for`)."""
    if target != "cuda" or len(a_shape) != 2 or not _has_wgmma(arch_of(target)):
        return None
    from .matmul_sm90 import plan_on_device

    return plan_on_device(tuple(a_shape), tuple(bt_shape), dt)


def _has_wgmma(arch: str) -> bool:
    from ..targets import WGMMA, target as get_target

    return get_target(arch).has(WGMMA)


def matmul_sm80(a, b, **opts):
    """``a @ b`` of float16 or bfloat16 arrays (numpy or torch, 2-D or batched) by
    :func:`plan_matmul_sm80` for sm_80 (``opts``: its tile and stages), run where
    ``gpudsl.ops`` runs: the sm_80 kernel on whatever device is there (``gpudsl bench``'s
    rows ``matmul_f16_sm80``, ``matmul_bf16_sm80`` time it on an H100 too)."""
    from .halves import NUMPY, common_dtype
    from .op_arguments import contig, empty, run_where_ops_run

    dt = common_dtype("matmul", a=a, b=b)
    require(dt in ("f16", "bf16"), f"matmul_sm80 takes float16 or bfloat16 arrays, not {dt}")
    sa, sb = tuple(int(d) for d in a.shape), tuple(int(d) for d in b.shape)
    p, binds = plan_matmul_sm80(sa, sb, dt, "sm_80", **opts)
    a, b = contig(a), contig(b)
    c = empty(a, sa[:-1] + sb[-1:], NUMPY[dt])
    run_where_ops_run(p, a=a, b=b, c=c, **binds)
    return c


__all__ = ["matmul_sm80", "schedule_matmul_sm80", "sm80_kernel", "stage_bytes", "DEFAULTS", "NodeError",
           "warp_mma", "sm80_preconditions_hold", "fits", "sm80_space", "Sm80Build",
           "config_options", "tuned_sm80_options", "matmul_sm80_kernel",
           "batched_simple_kernel", "plan_matmul_sm80", "uses_sm80", "plan_matmul_half_for",
           "plan_matmul_half_nt_for",
           "arch_of"]
