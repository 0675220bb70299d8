"""The half-precision tensor-core matmul: ``c = a @ b`` for f16 or bf16 ``a``, ``b``
and ``c``, products accumulated in f32, scheduled onto
``mma.sync.aligned.m16n8k16.row.col.f32.{f16,bf16}`` through one ``@instr`` per
input type, its fragments loaded from SHARED with ``ldmatrix``.

**The algorithm** (:func:`matmul_half_algorithm`): per element of C an f32 register
``s`` starts at 0, adds ``f32(a[i, p]) * f32(b[p, j])`` over p and is stored rounded
to the half type once.  A product of two halves is exact in f32 (11 + 11 significant
bits), so the only roundings are the f32 sums and the final one.

**The instruction.**  :data:`mma_f16` (:data:`mma_bf16`) is one lane's share of a
warp-wide ``m16n8k16`` product, written per thread::

    for rm in seq(0, 2):            # the lane's rows   m0 + g, m0 + g + 8
        for rn in seq(0, 2):        # the lane's cols   n0 + 2t, n0 + 2t + 1
            for kk in seq(0, 16):
                acc[rm, rn] += f32(a[8 * rm, kk]) * f32(b[kk, rn])

where lane ``l = 4 g + t`` passes ``acc`` (its four accumulators, REGISTER), ``a`` =
the 9 rows of the A tile (SHARED, row-major) from row ``g`` (it reads rows 0 and 8 of
the window) and ``b`` = two columns of the B tile (SHARED, row-major) from column
``2t``.  These are exactly the hardware's fragments: accumulators ``c0, c1`` are row
``g``, columns ``2t, 2t + 1`` of the 16 x 8 tile, ``c2, c3`` row ``g + 8``.  The
template finds the mma tile's origin from the lane's windows (``&a - g * pitch``,
``&b - 2 t``) and loads the A fragment with one ``ldmatrix.x4`` (the four 8 x 8
quarters; lane ``l`` gives the address of row ``(l & 7) + 8 ((l >> 3) & 1)``,
column ``8 (l >> 4)``) and the B fragment with one ``ldmatrix.x2.trans`` (B is
row-major, the mma wants k pairs: the transposing load gives them; lane ``l < 16``
gives the address of k row ``l``).  Without a GPU (the emulator) the template runs
the body as written.

**Its precondition**, which the body cannot state: the call is issued by whole
warps, converged, lane ``l`` passing the windows of ``g = l >> 2``, ``t = l & 3``
(threads ``(t, g, w)`` are ``(x, y, z)`` of a ``(4, 8, W)`` block and no guard
surrounds the call), and the ldmatrix rows are 16-byte aligned (tile pitches and
window columns multiples of 8 halves).  :func:`half_preconditions_hold` re-checks
both of a scheduled proc.

**The schedule** (:func:`schedule_matmul_half`): a ``bm x bn`` block tile, four warps
each a ``wm x wn`` warp tile of ``wm / 16 x wn / 8`` mma tiles whose accumulators stay
in registers; ``bk``-deep tiles of A and B staged in SHARED by all 128 threads with
128-bit copies (8 halves), padded so that each 8-row ldmatrix phase touches 32
distinct banks (pitches ``bk + 8`` and ``bn + 8``: an odd multiple of 16 bytes);
barriers around the copies.  It serves ``m % bm == 0``, ``k % bn == 0``, ``n % bk
== 0`` (asserted; ``check()`` proves it symbolically).

**Error bound** (:func:`half_tolerance`): the f32 sums of ``n`` exact products in any
order and grouping (the tensor cores' internal order differs from the body's) err by
at most ``n * 2**-23 * (|a| @ |b|)`` (each partial sum one rounding or truncation of
at most ``2**-23`` relative to the magnitudes summed), and the final rounding to the
half type by ``u |c|`` (``u`` = ``2**-11`` for f16, ``2**-8`` for bf16, normal range)
— against the float64 product of the (exactly representable) half inputs.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..ir.types import BLOCKS, REGISTER, SHARED, THREADS
from ..language import bf16, f16, f32, seq  # noqa: F401  (names of the @instr bodies)
from ..proc import Proc, instr
from ..schedule import (divide_loop, insert_sync, pad_dim, parallelize_loop,
                        replace, set_unroll, simplify, vectorize)
from .common import make_proc
from .matmul_parts import _permute_nest
from .matmul_tf32 import _calls, _const, fragments_and_tiles, map_warp_lanes, tile_divisible
from .shapes import NodeError, require
from .derivation_cache import derivation

DEFAULTS = dict(bm=64, bn=128, bk=32, wm=32, wn=64)  # sm_80: 96 registers, sm_90: 126

_MMA_TEMPLATE = r"""{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned gpudsl_l_;
  asm("mov.u32 %0, %%laneid;" : "=r"(gpudsl_l_));
  const int gpudsl_t_ = (int)(gpudsl_l_ & 3u), gpudsl_g_ = (int)(gpudsl_l_ >> 2);
  const auto* gpudsl_a_ = &{a} - gpudsl_g_ * {a_stride_0}
      + ((int)(gpudsl_l_ & 7u) + 8 * (int)((gpudsl_l_ >> 3) & 1u)) * {a_stride_0}
      + 8 * (int)(gpudsl_l_ >> 4);
  const auto* gpudsl_b_ = &{b} - 2 * gpudsl_t_ + (int)(gpudsl_l_ & 15u) * {b_stride_0};
  unsigned gpudsl_x_[4], gpudsl_y_[2];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(gpudsl_x_[0]), "=r"(gpudsl_x_[1]), "=r"(gpudsl_x_[2]), "=r"(gpudsl_x_[3])
               : "r"((unsigned)__cvta_generic_to_shared(gpudsl_a_)));
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];"
               : "=r"(gpudsl_y_[0]), "=r"(gpudsl_y_[1])
               : "r"((unsigned)__cvta_generic_to_shared(gpudsl_b_)));
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.@T@.@T@.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"((&{acc})[0]), "+f"((&{acc})[1]),
                 "+f"((&{acc})[{acc_stride_0}]), "+f"((&{acc})[{acc_stride_0} + 1])
               : "r"(gpudsl_x_[0]), "r"(gpudsl_x_[1]), "r"(gpudsl_x_[2]), "r"(gpudsl_x_[3]),
                 "r"(gpudsl_y_[0]), "r"(gpudsl_y_[1]));
#else
  for (int rm = 0; rm < 2; ++rm)
    for (int rn = 0; rn < 2; ++rn)
      for (int kk = 0; kk < 16; ++kk)
        (&{acc})[rm * {acc_stride_0} + rn] +=
            (float)(&{a})[8 * rm * {a_stride_0} + kk] * (float)(&{b})[kk * {b_stride_0} + rn];
#endif
}"""


@instr(_MMA_TEMPLATE.replace("@T@", "f16"))
def mma_f16(acc: [f32][2, 2] @ REGISTER, a: [f16][9, 16] @ SHARED,
            b: [f16][16, 2] @ SHARED):
    for rm in seq(0, 2):
        for rn in seq(0, 2):
            for kk in seq(0, 16):
                acc[rm, rn] += f32(a[8 * rm, kk]) * f32(b[kk, rn])


@instr(_MMA_TEMPLATE.replace("@T@", "bf16"))
def mma_bf16(acc: [f32][2, 2] @ REGISTER, a: [bf16][9, 16] @ SHARED,
             b: [bf16][16, 2] @ SHARED):
    for rm in seq(0, 2):
        for rn in seq(0, 2):
            for kk in seq(0, 16):
                acc[rm, rn] += f32(a[8 * rm, kk]) * f32(b[kk, rn])


MMA = {"f16": mma_f16, "bf16": mma_bf16}


@lru_cache(maxsize=None)
def matmul_half_algorithm(dt: str, divisible: tuple | None = None,
                          batched: bool = False) -> Proc:
    """``c[m, k] = a[m, n] @ b[n, k]`` in ``dt`` (f16 or bf16), accumulated in f32 and
    rounded once; ``divisible = (dm, dk, dn)`` adds ``m % dm == 0 and ...``;
    ``batched``: over a leading batch axis ``z`` of ``nb`` (``c[z] = a[z] @ b[z]``)."""
    assert_line, tag = "", ""
    if divisible is not None:
        dm, dk, dn = divisible
        assert_line = f"    assert m % {dm} == 0 and k % {dk} == 0 and n % {dn} == 0\n"
        tag = f"_{dm}x{dk}x{dn}"
    name = f"{'b' if batched else ''}matmul_{dt}{tag}"
    nb, zi, pad = ("nb: size, ", "z, ", "    ") if batched else ("", "", "")
    lead = "nb, " if batched else ""
    text = (f"def {name}({nb}m: size, n: size, k: size, a: {dt}[{lead}m, n], "
            f"b: {dt}[{lead}n, k], c: {dt}[{lead}m, k]):\n" + assert_line +
            ("    for z in seq(0, nb):\n" if batched else "") +
            f"{pad}    for i in seq(0, m):\n"
            f"{pad}        for j in seq(0, k):\n"
            f"{pad}            s: f32 @ REGISTER\n"
            f"{pad}            s = 0.0\n"
            f"{pad}            for p in seq(0, n):\n"
            f"{pad}                s += f32(a[{zi}i, p]) * f32(b[{zi}p, j])\n"
            f"{pad}            c[{zi}i, j] = {dt}(s)\n")
    return make_proc(name, text)


def schedule_matmul_half(p: Proc, dt: str, *, bm: int = 64, bn: int = 128, bk: int = 32,
                         wm: int = 32, wn: int = 64) -> Proc:
    """The tensor-core schedule of ``matmul_half_algorithm(dt, (bm, bn, bk))`` (module
    docs).  Threads per block: 128, as ``(4, 8, 4)``."""
    nwm, nwn = bm // wm, bn // wn
    require(bm % wm == 0 and bn % wn == 0 and nwm * nwn == 4 and wm % 16 == 0 and
            wn % 8 == 0, f"half tiles bm={bm} bn={bn} wm={wm} wn={wn}: need four warps "
            "((bm // wm) * (bn // wn) == 4), wm % 16 == 0, wn % 8 == 0")
    require(bk == 32 and bm % 32 == 0 and bn % 64 == 0,
            f"the tile copies need bk == 32, bm % 32 == 0 and bn % 64 == 0 (bm={bm}, "
            f"bn={bn}, bk={bk})")

    # 1. i = bm bi + wm wi + 16 mi + 8 rm + g ;  j = bn bj + wn wj + 8 ni + 2 t + rn
    p = map_warp_lanes(p, bm, bn, wm, wn, (16, 8, ("rm", "g")), (8, 2, ("t", "rn")))

    # 2. the f32 accumulators: each lane's fragments of its warp tile, in registers
    # 3. the k loop: bk tiles outside the threads, 16-steps outside the mma tiles;
    # 4. A and B tiles in SHARED, as in memory (padded for ldmatrix; then copied by all threads with 128-bit accesses, between barriers)
    p, compute = fragments_and_tiles(p, "s", (wn // 8, wm // 16), bm, bn, bk, 16)
    p = _copy_a(p, bm, bk)
    p = _copy_b(p, bk, bn)
    p = pad_dim(p, "As", 1, bk + 8)
    p = pad_dim(p, "Bs", 1, bn + 8)
    p = insert_sync(p, p.find_loop("po").body().before())
    p = insert_sync(p, p.forward(compute).before())

    # 5. the tensor-core instruction, unrolled mma tiles
    p = replace(p, p.find_loop("rm #1"), MMA[dt])
    for lp in ("ks", "mi #1", "ni #1"):
        p = set_unroll(p, lp)
    return simplify(p)


def _copy_a(p, bm, bk):
    """``As[As_in0, As_in1] = a[...]`` as 128-bit copies: row ``32 s + 8 z + y``, 8-half
    column group ``x`` (bk == 32: 4 groups); a warp copies 8 rows x 64 B."""
    p = divide_loop(p, "As_in1", 8, ["aq", "av"], tail="perfect")
    p = vectorize(p, "av", 8)
    p = divide_loop(p, "As_in0", 32, ["as_", "a32"], tail="perfect")
    p = divide_loop(p, "a32", 8, ["az", "ay"], tail="perfect")
    for lp in ("az", "ay", "aq"):
        p = parallelize_loop(p, lp, THREADS)
    return set_unroll(p, "as_")


def _copy_b(p, bk, bn):
    """``Bs[Bs_in0, Bs_in1] = b[...]`` as 128-bit copies: k row ``8 s + y``, 8-half column
    group ``4 (z + 4 s') + x``; a warp copies 8 rows x 64 B."""
    p = divide_loop(p, "Bs_in1", 8, ["bq", "bv"], tail="perfect")
    p = vectorize(p, "bv", 8)
    p = divide_loop(p, "bq", 16, ["bs2", "bq16"], tail="perfect")
    p = divide_loop(p, "bq16", 4, ["bz", "bx"], tail="perfect")
    p = divide_loop(p, "Bs_in0", 8, ["bs", "by"], tail="perfect")
    p = _permute_nest(p, ["bs", "by", "bs2", "bz", "bx"], ["bs", "bs2", "bz", "by", "bx"])
    for lp in ("bz", "by", "bx"):
        p = parallelize_loop(p, lp, THREADS)
    for lp in ("bs", "bs2"):
        p = set_unroll(p, lp)
    return p


# ---------------------------------------------------------------- preconditions


def half_preconditions_hold(p: Proc, dt: str, ins: Proc | None = None) -> bool:
    """The lane precondition of the mma call (every call directly in thread loops
    ``w`` (z), ``g`` (y, 0..8), ``t`` (x, 0..4), under no ``if`` between them) and the
    16-byte alignment of the ldmatrix rows (pitches multiples of 8 halves; the A
    window's column and the B window's column less ``2t`` multiples of 8).  ``ins``:
    the instr whose calls are checked (default ``MMA[dt]``; the sm_80 kernel's
    ``matmul_sm80.warp_mma`` has the same parameters ``a`` and ``b``)."""
    from ..ir.nodes import For, Interval, Point
    from ..ir.procdef import as_procdef
    from ..schedule.legality import divisible
    from ..schedule.patterns import scope_at

    ins = MMA[dt] if ins is None else ins
    ir = as_procdef(p) or p
    calls = _calls(p, ins)
    if not calls:
        return False
    names = [prm.name for prm in ins._ir.params]
    for addr, call, chain in calls:
        threads = [f for f in chain if isinstance(f, For) and f.mapping == THREADS]
        k = next(i for i, f in enumerate(chain) if isinstance(f, For) and f.mapping == THREADS)
        if not (all(isinstance(f, For) for f in chain[k:]) and
                [f.iter for f in threads] == ["w", "g", "t"] and
                [_const(f.lo) for f in threads[1:]] == [0, 0] and
                [_const(f.hi) for f in threads[1:]] == [8, 4]):
            return False
        env = scope_at(ir, addr)
        for prm in ("a", "b"):
            arg = call.args[names.index(prm)]
            shape = env[arg.name][2]
            if _const(shape[-1]) is None or _const(shape[-1]) % 8:
                return False
            last = arg.idx[-1]
            col = last.pt if isinstance(last, Point) else last.lo
            if prm == "b":  # the window starts at column 2t of the mma tile
                col = _without_2t(col)
            if col is None or not isinstance(last, Interval) or \
                    not divisible(ir, addr, col, 8):
                return False
    return True


def _without_2t(col):
    """``col`` at ``t = 0`` when ``col`` is that plus ``2 t`` (structurally, after
    normalizing), else None."""
    from ..ir.nodes import BinOp, Const
    from ..ir.types import INDEX
    from ..ir.visitor import substitute
    from ..schedule.simplify import normalize

    at = [normalize(substitute(col, {"t": Const(v)})) for v in (0, 1, 3)]
    step = [normalize(BinOp("+", at[0], Const(v), INDEX)) for v in (2, 6)]
    return at[0] if step == at[1:] else None


# ---------------------------------------------------------------- choosing


@derivation
def half_kernel(dt: str, bm=64, bn=128, bk=32, wm=32, wn=64) -> Proc:
    from ..schedule import rename

    p = schedule_matmul_half(matmul_half_algorithm(dt, (bm, bn, bk)), dt, bm=bm, bn=bn,
                             bk=bk, wm=wm, wn=wn)
    return rename(p, f"matmul_{dt}_{bm}x{bn}x{bk}")


@lru_cache(maxsize=None)
def half_simple_kernel(dt: str, threads: int = 128) -> Proc:
    """Any shape: one thread per element of C (a row of blocks per row of C), the
    products summed in f32 in order: the kernel for shapes the tensor-core tiles do
    not divide (decode's m = 1 among them)."""
    from ..schedule import rename

    p = matmul_half_algorithm(dt)
    p = divide_loop(p, "j", threads, ["bj", "tj"], tail="guard")
    p = parallelize_loop(p, "i", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "tj", THREADS)
    return rename(simplify(p), f"matmul_{dt}_simple")


def plan_matmul_half(a_shape, b_shape, dt: str):
    """(proc, bindings): the tensor-core kernel where the tiles divide the shape,
    else :func:`half_simple_kernel`."""
    try:
        return matmul_half_kernel(a_shape, b_shape, dt)
    except NodeError:
        require(len(a_shape) == 2 and len(b_shape) == 2 and a_shape[1] == b_shape[0],
                f"the {dt} matmul takes [m, n] @ [n, k]; got {tuple(a_shape)} and "
                f"{tuple(b_shape)}")
        return half_simple_kernel(dt), dict(m=int(a_shape[0]), n=int(a_shape[1]),
                                            k=int(b_shape[1]))


def half_matmul_refusal(a_shape, b_shape) -> str | None:
    """Why the matmul node on these operand shapes has no f16/bf16 kernel (None when
    it has one): the half matmul takes ``[m, n]`` or ``[n]`` times ``[n, k]``.  The
    matmul's declaration in the node table (``half_rule``) reads it."""
    if len(b_shape) != 2 or len(a_shape) not in (1, 2):
        return (f"float16/bfloat16 matmul takes [m, n] or [n] @ [n, k], not "
                f"{list(a_shape)} @ {list(b_shape)} (batched half matmuls run only "
                "inside the fused attention)")
    return None


def matmul_half_kernel(a_shape, b_shape, dt: str, **opts):
    """(proc, bindings) of the tensor-core kernel for ``a @ b`` (2-D ``dt`` arrays,
    ``m % bm == 0``, ``n % bk == 0``, ``k % bn == 0``); ``NodeError`` otherwise."""
    o = dict(DEFAULTS, **opts)
    m, n, k = tile_divisible(dt, a_shape, b_shape, o,
                             "pad the operands, or convert them to float32")
    return half_kernel(dt, o["bm"], o["bn"], o["bk"], o["wm"], o["wn"]), dict(m=m, n=n, k=k)


def half_tolerance(a: np.ndarray, b: np.ndarray, dt: str) -> np.ndarray:
    """The elementwise bound on ``|result - a @ b in float64|`` (module docs):
    ``n * 2**-23 * (|a| @ |b|) + u * |a @ b|`` plus the half type's smallest
    subnormal."""
    from .halves import unit_roundoff

    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    n = a.shape[-1]
    mag = np.abs(a64) @ np.abs(b64)
    u = unit_roundoff(dt)
    tiny = 2.0 ** -24 if dt == "f16" else 2.0 ** -133
    return n * 2.0 ** -23 * mag + u * (np.abs(a64 @ b64) + n * 2.0 ** -23 * mag) + tiny


__all__ = ["half_matmul_refusal", "mma_f16", "mma_bf16", "MMA", "matmul_half_algorithm",
           "schedule_matmul_half",
           "half_preconditions_hold", "half_kernel", "matmul_half_kernel", "half_simple_kernel",
           "plan_matmul_half", "half_tolerance",
           "NodeError", "DEFAULTS"]
