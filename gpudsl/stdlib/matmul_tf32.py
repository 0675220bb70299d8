"""The TF32 tensor-core matmul: the readable algorithm scheduled onto
``mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32`` through ``@instr``.

**The instruction.**  :data:`mma_m16n8k8_tf32` is an ``@instr`` whose body is one
lane's share of the warp-wide ``m16n8k8`` product, written per thread so that the
interpreter and ``check()`` see ordinary per-thread accesses::

    for rh in seq(0, 2):            # fragment rows  g and g + 8
        for rl in seq(0, 2):        # fragment cols  2t and 2t + 1
            for kk in seq(0, 8):
                acc[rh, rl] += a[8 * rh, kk] * b[kk, rl]

where lane ``l = 4 g + t`` passes ``acc`` (its four accumulators, REGISTER),
``a`` = the A tile (SHARED) from row ``g`` and ``b`` = the B tile (SHARED) from
column ``2 t``.  That is exactly the PTX ISA's C/D fragment layout for m16n8k8
(``c0, c1`` at row ``g``, columns ``2t, 2t+1``; ``c2, c3`` at row ``g + 8``).

The template loads the lane's A fragment (``a0..a3``: rows ``g, g+8``, columns
``t, t+4`` — inside the lane's own window) and B fragment (``b0, b1``: rows ``t,
t+4``, column ``g`` — inside the window of the lane ``4g' + t'`` with ``t' = g/2``
of the same warp), rounds them with ``cvt.rna.tf32.f32`` and issues ``mma.sync``
on sm_80 and newer.  Elsewhere (the emulator, older GPUs) it runs the body per
thread with the inputs rounded to TF32 the same way, so the emulator shows the
precision a GPU gives (docs/decisions.md, issue 15, TF32).

**Its precondition**, which the instr's body cannot state: the call is issued
by whole warps, converged, and lane ``l`` of the hardware passes the windows of
``g = l >> 2``, ``t = l & 3``.  The schedule below ensures it by construction:
threads ``(t, g, w)`` map to ``(x, y, z)`` with block ``(4, 8, W)``, so the
linear thread id is ``t + 4 g + 32 w`` and no guard surrounds the call
(:func:`mma_precondition_holds` re-checks the shape of a scheduled proc).
SHARED reads of other lanes' windows are safe where the body's are: the tiles
are written only in the copy phase, between barriers (``check()`` proves it).

**The schedule** (:func:`schedule_matmul_tf32`): a ``bm x bn`` block tile of C;
``W = bm // wm`` warps, each a ``wm x bn`` warp tile of ``wm/16 x bn/8`` mma tiles,
whose accumulators stay in registers; ``bk``-deep tiles of A and B staged in
SHARED with float4 copies by all threads, padded (A rows by 4 floats, B rows by
8) so that fragment loads are free of bank conflicts; barriers around the
copies.  It serves ``m % bm == 0``, ``k % bn == 0``, ``n % bk == 0`` (asserted:
``check()`` proves it symbolically); :func:`matmul_tf32_kernel` refuses other
shapes with a ``NodeError`` (use the fp32 ``matmul`` there).

**Tolerance.**  Each product rounds both inputs to TF32 (10 explicit mantissa
bits, relative error at most ``2**-11`` each), then accumulates in fp32.  For
``c = a @ b`` with inner size ``n``: ``|c - ref| <= (2 * 2**-11 + n * 2**-24) *
(|a| @ |b|)`` elementwise (plus the fp32 sum's own ``n * 2**-24``); tests use
:func:`tf32_tolerance`.
"""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..ir.types import BLOCKS, REGISTER, SHARED, THREADS
from ..language import f32, seq  # noqa: F401  (names of the @instr body)
from ..proc import Proc, instr
from ..schedule import (divide_loop, expand_dim, fission, insert_sync, lift_alloc, pad_dim,
                        parallelize_loop, reorder_loops, replace, set_unroll, simplify,
                        stage_mem, vectorize)
from .matmul_parts import matmul_algorithm
from .shapes import NodeError, require

DEFAULTS = dict(bm=128, bn=64, bk=32, wm=32)

# the GPU path: one warp-wide mma.sync (sm_80+); the fallback: the body, inputs
# rounded to TF32 like cvt.rna (round to nearest, ties away, 10 mantissa bits)
_TEMPLATE = r"""{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned gpudsl_l_;
  asm volatile("mov.u32 %0, %%laneid;" : "=r"(gpudsl_l_));
  const int gpudsl_t_ = (int)(gpudsl_l_ & 3u), gpudsl_g_ = (int)(gpudsl_l_ >> 2);
  const float* gpudsl_a_ = &{a};
  const float* gpudsl_b_ = &{b} + (gpudsl_g_ - 2 * gpudsl_t_);
  unsigned gpudsl_a0_, gpudsl_a1_, gpudsl_a2_, gpudsl_a3_, gpudsl_b0_, gpudsl_b1_;
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(gpudsl_a0_) : "f"(gpudsl_a_[gpudsl_t_]));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(gpudsl_a1_) : "f"(gpudsl_a_[8 * {a_stride_0} + gpudsl_t_]));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(gpudsl_a2_) : "f"(gpudsl_a_[gpudsl_t_ + 4]));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(gpudsl_a3_) : "f"(gpudsl_a_[8 * {a_stride_0} + gpudsl_t_ + 4]));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(gpudsl_b0_) : "f"(gpudsl_b_[gpudsl_t_ * {b_stride_0}]));
  asm("cvt.rna.tf32.f32 %0, %1;" : "=r"(gpudsl_b1_) : "f"(gpudsl_b_[(gpudsl_t_ + 4) * {b_stride_0}]));
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 "
               "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
               : "+f"((&{acc})[0]), "+f"((&{acc})[1]),
                 "+f"((&{acc})[{acc_stride_0}]), "+f"((&{acc})[{acc_stride_0} + 1])
               : "r"(gpudsl_a0_), "r"(gpudsl_a1_), "r"(gpudsl_a2_), "r"(gpudsl_a3_),
                 "r"(gpudsl_b0_), "r"(gpudsl_b1_));
#else
  auto gpudsl_tf32_ = [](float x) -> float {
    unsigned u;
    __builtin_memcpy(&u, &x, 4);
    if ((u & 0x7f800000u) != 0x7f800000u) u = (u + 0x1000u) & 0xffffe000u;
    __builtin_memcpy(&x, &u, 4);
    return x;
  };
  #pragma unroll
  for (int rh = 0; rh < 2; ++rh)
    #pragma unroll
    for (int rl = 0; rl < 2; ++rl)
      #pragma unroll
      for (int kk = 0; kk < 8; ++kk)
        (&{acc})[rh * {acc_stride_0} + rl] +=
            gpudsl_tf32_((&{a})[8 * rh * {a_stride_0} + kk]) *
            gpudsl_tf32_((&{b})[kk * {b_stride_0} + rl]);
#endif
}"""


@instr(_TEMPLATE)
def mma_m16n8k8_tf32(acc: [f32][2, 2] @ REGISTER, a: [f32][9, 8] @ SHARED,
                     b: [f32][8, 2] @ SHARED):
    for rh in seq(0, 2):
        for rl in seq(0, 2):
            for kk in seq(0, 8):
                acc[rh, rl] += a[8 * rh, kk] * b[kk, rl]


# ---------------------------------------------------------------- the schedule


def schedule_matmul_tf32(p: Proc, *, bm: int = 128, bn: int = 64, bk: int = 32,
                         wm: int = 32) -> Proc:
    """The tensor-core schedule of ``matmul_algorithm(False, (bm, bn, bk))`` (see the
    module docs).  Threads per block: ``32 * (bm // wm)`` as ``(4, 8, bm // wm)``."""
    require(bm % wm == 0 and wm % 16 == 0 and bn % 8 == 0 and bk % 16 == 0,
            f"tf32 tiles bm={bm} bn={bn} bk={bk} wm={wm}: need bm % wm == 0, wm % 16 == 0, "
            "bn % 8 == 0, bk % 16 == 0")
    nw = bm // wm
    require(bm % (8 * nw) == 0 and bk % (8 * nw) == 0 and bk % 16 == 0 and bn % 16 == 0,
            "the tile copies need bm and bk multiples of 8 * warps, bk and bn of 16")

    # 1. i = bm*bi + wm*w + 16*mi + 8*rh + g ;  j = bn*bj + 8*ni + 2*t + rl
    p = divide_loop(p, "i", bm, ["bi", "ii"], tail="perfect")
    p = divide_loop(p, "ii", wm, ["w", "im"], tail="perfect")
    p = divide_loop(p, "im", 16, ["mi", "i16"], tail="perfect")
    p = divide_loop(p, "i16", 8, ["rh", "g"], tail="perfect")
    p = divide_loop(p, "j", bn, ["bj", "jj"], tail="perfect")
    p = divide_loop(p, "jj", 8, ["ni", "j8"], tail="perfect")
    p = divide_loop(p, "j8", 2, ["t", "rl"], tail="perfect")
    # bi w mi rh g bj ni t rl  →  bi bj w g t mi ni rh rl
    for lp in ("g", "rh", "mi", "w"):  # bj up to bi
        p = reorder_loops(p, lp)
    for lp in ("rh", "mi"):  # g up to w
        p = reorder_loops(p, lp)
    for lp in ("ni", "rh", "mi"):  # t up to g
        p = reorder_loops(p, lp)
    p = reorder_loops(p, "rh")  # ni above rh
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    for lp in ("w", "g", "t"):  # z, y, x: linear thread id t + 4 g + 32 w
        p = parallelize_loop(p, lp, THREADS)

    # 2. the accumulators: each lane's fragments of its warp tile, in registers
    row = f"{bm} * bi + {wm} * w + 16 * mi + 8 * rh + g"
    col = f"{bn} * bj + 8 * ni + 2 * t + rl"
    p = stage_mem(p, p.find_loop("rl").body(), f"c[{row}, {col}]", "acc", REGISTER)
    for lp, n in (("rl", 2), ("rh", 2), ("ni", bn // 8), ("mi", wm // 16), ("t", 4),
                  ("g", 8), ("w", nw)):
        p = expand_dim(p, "acc", n, lp)
    p = lift_alloc(p, "acc", n_lifts=7)

    # 3. the k loop: bk tiles outside the threads, 8-steps outside the mma tiles
    p = divide_loop(p, "p", bk, ["po", "pi"], tail="perfect")
    p = fission(p, p.find("acc[_] = 0.0").after(), n_lifts=7)
    p = fission(p, p.find_loop("po").after(), n_lifts=7)
    for lp in ("rl #1", "rh #1", "ni #1", "mi #1", "t #1", "g #1", "w #1"):
        p = reorder_loops(p, lp)
    p = divide_loop(p, "pi", 8, ["ks", "kk"], tail="perfect")
    for lp in ("rl #1", "rh #1", "ni #1", "mi #1"):
        p = reorder_loops(p, lp)

    # 4. A and B tiles in SHARED (padded: fragment loads without bank conflicts),
    #    copied with float4 by all threads, between barriers
    compute = p.find_loop("w #1")
    p = stage_mem(p, compute, f"a[{bm} * bi:{bm} * bi + {bm}, {bk} * po:{bk} * po + {bk}]",
                  "As", SHARED)
    p = stage_mem(p, p.forward(compute),
                  f"b[{bk} * po:{bk} * po + {bk}, {bn} * bj:{bn} * bj + {bn}]", "Bs", SHARED)
    p = _copy_threads(p, "i0", "i1", bm, bk, nw)
    p = _copy_threads(p, "i0_1", "i1_1", bk, bn, nw)
    p = pad_dim(p, "As", 1, bk + 4)
    p = pad_dim(p, "Bs", 1, bn + 8)
    p = insert_sync(p, p.find_loop("po").body().before())
    p = insert_sync(p, p.forward(compute).before())

    # 5. the tensor-core instruction, and unrolled mma tiles
    p = replace(p, p.find_loop("rh #1"), mma_m16n8k8_tf32)
    for lp in ("ks", "mi #1", "ni #1"):
        p = set_unroll(p, lp)
    return simplify(p)


def _copy_threads(p, r, c_, rows, cols, nw):
    """A ``rows x cols`` tile copy (loops ``r``, ``c_``) onto the ``(4, 8, nw)``
    threads with float4: columns → [seq, x, float4], rows → [seq, z, y]."""
    p = divide_loop(p, c_, 4, [c_ + "o", c_ + "v"], tail="perfect")
    p = vectorize(p, c_ + "v", 4)
    p = divide_loop(p, c_ + "o", 4, [c_ + "s", c_ + "x"], tail="perfect")
    p = divide_loop(p, r, 8 * nw, [r + "s", r + "zy"], tail="perfect")
    p = divide_loop(p, r + "zy", 8, [r + "z", r + "y"], tail="perfect")
    p = reorder_loops(p, r + "y")  # rs rz cs ry cx
    p = reorder_loops(p, r + "z")  # rs cs rz ry cx
    for lp in (r + "z", r + "y", c_ + "x"):
        p = parallelize_loop(p, lp, THREADS)
    return p


def mma_precondition_holds(p: Proc) -> bool:
    """The structural precondition of :data:`mma_m16n8k8_tf32` (module docs) in a
    proc built by :func:`schedule_matmul_tf32`: every call sits directly in thread
    loops ``t`` (x, 0..4) inside ``g`` (y, 0..8) inside ``w`` (z), under no ``if``,
    so lane ``t + 4 g`` of each warp passes the windows of ``g`` and ``t``."""
    from ..ir.nodes import Call, For, If
    from ..ir.procdef import as_procdef

    ir = as_procdef(p) or p
    found = []

    def walk(stmts, chain):
        for s in stmts:
            if isinstance(s, Call) and s.proc.instr == mma_m16n8k8_tf32._ir.instr:
                threads = [f for f in chain if isinstance(f, For) and f.mapping == THREADS]
                ok = (not any(isinstance(f, If) for f in chain) and len(threads) == 3
                      and [f.iter for f in threads] == ["w", "g", "t"]
                      and [_const(f.lo) for f in threads[1:]] == [0, 0]
                      and [_const(f.hi) for f in threads[1:]] == [8, 4])
                found.append(ok)
            for blk in (getattr(s, "body", None), getattr(s, "orelse", None)):
                if blk:
                    walk(blk, chain + [s])

    walk(ir.body, [])
    return bool(found) and all(found)


def _const(e):
    return getattr(e, "val", None)


# ---------------------------------------------------------------- choosing


@lru_cache(maxsize=None)
def tf32_kernel(bm=128, bn=64, bk=32, wm=32) -> Proc:
    from ..schedule import rename

    p = schedule_matmul_tf32(matmul_algorithm(False, (bm, bn, bk)), bm=bm, bn=bn, bk=bk,
                             wm=wm)
    return rename(p, f"matmul_tf32_{bm}x{bn}x{bk}")


def matmul_tf32_kernel(a_shape, b_shape, **opts):
    """(proc, bindings) of the TF32 tensor-core kernel for ``a @ b`` (2-D float32,
    ``m % bm == 0``, ``n % bk == 0``, ``k % bn == 0``); ``NodeError`` otherwise."""
    o = dict(DEFAULTS, **opts)
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    require(len(a_shape) == 2 and len(b_shape) == 2,
            f"the tf32 matmul takes [m, n] @ [n, k]; got {a_shape} and {b_shape}")
    require(a_shape[1] == b_shape[0], f"inner dimensions differ: a {a_shape} and b {b_shape}")
    m, n, k = a_shape[0], a_shape[1], b_shape[1]
    require(m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0,
            f"the tf32 tensor-core matmul needs m % {o['bm']} == 0, n % {o['bk']} == 0 and "
            f"k % {o['bn']} == 0; got m={m}, n={n}, k={k}",
            "use precision='fp32' (the default) for other shapes")
    return tf32_kernel(o["bm"], o["bn"], o["bk"], o["wm"]), dict(m=m, n=n, k=k)


def tf32_tolerance(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """The elementwise bound on ``|tf32 result - fp32 a @ b|`` (module docs):
    ``(2 * 2**-11 + 2 * n * 2**-24) * (|a| @ |b|)`` plus a tiny absolute term."""
    n = a.shape[-1]
    mag = np.abs(a.astype(np.float64)) @ np.abs(b.astype(np.float64))
    return (2 * 2.0 ** -11 + 2 * n * 2.0 ** -24) * mag + 1e-30


__all__ = ["mma_m16n8k8_tf32", "schedule_matmul_tf32", "matmul_tf32_kernel", "tf32_kernel",
           "tf32_tolerance", "mma_precondition_holds", "NodeError",
           "DEFAULTS"]
