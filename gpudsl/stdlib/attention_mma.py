"""Half-precision attention prefill on tensor cores, FlashAttention-2 style (issue 37):
``softmax(scale * q k^T) v`` for f16/bf16 ``q [H, M, D]``, ``k, v [H, N, D]``, the
signature, prefix and causal rule of :func:`.attention.attention_rows` (its meaning),
``D`` 64 or 128, sm_80 and newer.

**The kernel** (:func:`attention_mma_kernel`): one block per (head, 64 query rows), 4
warps, warp ``w`` owning rows ``16 w .. 16 w + 15`` of the block's.  Lane ``l = 4 g + t``
holds, as in ``mma.m16n8k16``'s fragments, rows ``g`` and ``g + 8`` of its warp and
columns ``2 t, 2 t + 1`` (and ``2 t + 8, 2 t + 9``) of each 8- or 16-wide piece:

- ``qf``: its Q fragments, loaded once from memory into registers (zeros past ``m``);
- ``s``: the f32 accumulators of ``S = Q K^T`` for a tile of 64 keys (8 pieces of 8);
- ``o``: the f32 accumulators of ``O`` (``D / 8`` pieces), ``mr``, ``lr``: the running
  maximum of its two rows and its share of their sums.

Per tile of 64 keys, K and V rows go to SHARED by 16-byte ``async_copy`` (rows past
``n`` zero-filled), FlashAttention-2's order: the wait for ``K_j`` and a barrier, the
copy of ``V_j`` started, ``S = Q K_j^T`` by :data:`MMA_QK` (``D / 16 x 8`` mma), the
online softmax on the accumulators (the row maximum over the lane's 16 values and its
quad by two ``shfl_xor``; ``alpha = exp(m_old - m_new)``; ``p = exp(s - m_new)`` in
place; ``o *= alpha``), the wait for ``V_j`` and a barrier, the copy of ``K_{j+1}``
started, then ``O += P V_j`` by :data:`MMA_PV` (``4 x D / 8`` mma) whose A operand is
``P`` itself: the S accumulators of two n8 tiles are exactly the A fragment of one k16
step, rounded to the half type in registers (no SHARED round trip).  Two barriers a
tile.  Scores are masked (``select``) only in tiles some row of the block does not
fully attend (the causal diagonal, the prefix's end); tiles no row attends are skipped
(block-uniform ``if``).  At the end the quad adds its row sums (two ``shfl_xor``) and
writes ``o / l`` rounded once, rows below ``m``.

**The instructions.**  Each is one lane's share of two warp-wide ``m16n8k16`` with the
A operand in registers (two 16 x 8 pieces ``j`` of the result): the lane passes its
accumulators ``acc[j, rm, rn]``, its own fragment ``a[h, rm, rn]`` = A[g + 8 rm, 8 h +
2 t + rn] and its row group ``g``; the body (the meaning, run by the interpreter and
proved by ``check()``) gathers row ``g + 8 rm``'s 16 values from the lanes of its quad
with ``shfl`` (value ``kk`` is in lane ``4 g + kk % 8 // 2``, entry ``[kk // 8, rm, kk %
2]``), so the body is exactly the hardware's product; the GPU template packs the lane's
own values into the four A registers, loads B with one ``ldmatrix.x4`` and issues two
``mma.sync``.  :data:`MMA_QK` takes B as rows ``2 t .. 2 t + 9`` of a 16-key piece of
the K tile (``[n, k]``, plain ``ldmatrix``), :data:`MMA_PV` as columns ``2 t .. 2 t + 9``
of 16 rows of the V tile (``[k, n]``, ``ldmatrix.trans``) and rounds its f32 A values to
the half type first.  Their precondition (whole converged warps, lane ``l`` passing
``g = l % 32 // 4`` and its own registers, B windows at ``2 t`` past a 16-byte aligned
origin the same for the warp) holds by construction here and is re-checked by
:func:`register_mma_preconditions_hold`.

**Precision** (:func:`attention_mma_tolerance`): products of halves are exact in f32
and summed in f32; the one difference from the meaning is ``P`` rounded to the half
type for the second product (as FlashAttention's), the row sums taken from the f32
``P``: an output entry errs by at most ``u * sum_j p_j |v_j|`` (``u`` the half type's
unit roundoff, ``p`` the normalized weights) beyond :func:`.attention.attention_tolerance`.
"""
from __future__ import annotations

import numpy as np

from ..ir.types import REGISTER, SHARED
from ..language import bf16, f16, f32, index, seq, shfl  # noqa: F401  (@instr bodies)
from ..proc import Proc, instr
from .attention import (NEG, SPLIT_MAX_ROWS, _bad_prefix, _valid, attention_reference,
                        attention_tolerance, biased, capped, check_options, options_suffix,
                        plan_attention, sig, some_valid)
from .halves import unit_roundoff
from .derivation_cache import derivation

HEAD_DIMS = (64, 128)
BM = 64  # query rows per block: 4 warps of 16
BN = 64  # keys per tile: 8 n8 tiles of S, 4 k16 steps of P V
WARPS = 4

_HALF = {"f16": ("__halves2half2", "__floats2half2_rn", "__float2half"),
         "bf16": ("__halves2bfloat162", "__floats2bfloat162_rn", "__float2bfloat16")}

# the A operand: register q = (h, rm) = (q >> 1, q & 1), its halves the lane's
# a[h, rm, 0] (low) and a[h, rm, 1]
_A_OF = "(&{a})[(gpudsl_q_ >> 1) * {a_stride_0} + (gpudsl_q_ & 1) * {a_stride_1}"
_PACK = {
    "halves": ("    const auto gpudsl_h_ = @PAIR@(" + _A_OF + "], " + _A_OF +
               " + {a_stride_2}]);\n"),
    "floats": ("    const auto gpudsl_h_ = @FLOATS@(" + _A_OF + "], " + _A_OF +
               " + {a_stride_2}]);\n"),
}

_TEMPLATE = r"""{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  unsigned gpudsl_l_;
  asm("mov.u32 %0, %%laneid;" : "=r"(gpudsl_l_));
  const int gpudsl_t_ = (int)(gpudsl_l_ & 3u);
  const auto* gpudsl_b_ = @BADDR@;
  unsigned gpudsl_y_[4], gpudsl_x_[4];
  asm volatile("ldmatrix.sync.aligned.m8n8.x4@TRANS@.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(gpudsl_y_[0]), "=r"(gpudsl_y_[1]), "=r"(gpudsl_y_[2]), "=r"(gpudsl_y_[3])
               : "r"((unsigned)__cvta_generic_to_shared(gpudsl_b_)));
#pragma unroll
  for (int gpudsl_q_ = 0; gpudsl_q_ < 4; ++gpudsl_q_) {
@PACK@    gpudsl_x_[gpudsl_q_] = *reinterpret_cast<const unsigned*>(&gpudsl_h_);
  }
#pragma unroll
  for (int gpudsl_j_ = 0; gpudsl_j_ < 2; ++gpudsl_j_) {
    float* gpudsl_c_ = &{acc} + gpudsl_j_ * {acc_stride_0};
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.@T@.@T@.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};"
                 : "+f"(gpudsl_c_[0]), "+f"(gpudsl_c_[1]),
                   "+f"(gpudsl_c_[{acc_stride_1}]), "+f"(gpudsl_c_[{acc_stride_1} + 1])
                 : "r"(gpudsl_x_[0]), "r"(gpudsl_x_[1]), "r"(gpudsl_x_[2]), "r"(gpudsl_x_[3]),
                   "r"(gpudsl_y_[2 * gpudsl_j_]), "r"(gpudsl_y_[2 * gpudsl_j_ + 1]));
  }
#else
  for (int j = 0; j < 2; ++j)
    for (int rm = 0; rm < 2; ++rm)
      for (int rn = 0; rn < 2; ++rn)
        for (int kk = 0; kk < 16; ++kk) {
          float gpudsl_v_ = @AVAL@;
          gpudsl_v_ = __shfl_sync(0xffffffffu, gpudsl_v_, 4 * ({g}) + kk % 8 / 2);
          (&{acc})[j * {acc_stride_0} + rm * {acc_stride_1} + rn] +=
              gpudsl_v_ * (float)(&{b})[@BIDX@];
        }
#endif
}"""

_A_FALLBACK = "(&{a})[(kk / 8) * {a_stride_0} + rm * {a_stride_1} + (kk % 2) * {a_stride_2}]"


def _template(dt: str, kind: str) -> str:
    """The CUDA C of :data:`MMA_QK` (``kind`` "qk": A halves, B ``[n, k]``) or
    :data:`MMA_PV` ("pv": A f32 rounded to ``dt``, B ``[k, n]``): one ``ldmatrix.x4``
    (two n8 pieces of B) and two ``mma.sync``."""
    pair, floats, one = _HALF[dt]
    if kind == "qk":  # matrix i = lanes 8i..8i+7: keys (l & 7) + 8 (l >> 4), d 8 ((l >> 3) & 1)
        baddr = ("&{b} + ((int)(gpudsl_l_ & 7u) + 8 * (int)(gpudsl_l_ >> 4) - 2 * gpudsl_t_)"
                 " * {b_stride_0} + 8 * (int)((gpudsl_l_ >> 3) & 1u)")
        pack, trans, aval, bidx = _PACK["halves"], "", f"(float){_A_FALLBACK}", \
            "(8 * j + rn) * {b_stride_0} + kk"
    else:  # matrix i: keys (l & 15), columns 8 (l >> 4) of the 16 x 16 piece
        baddr = ("&{b} - 2 * gpudsl_t_ + (int)(gpudsl_l_ & 15u) * {b_stride_0} "
                 "+ 8 * (int)(gpudsl_l_ >> 4)")
        pack, trans, aval, bidx = _PACK["floats"], ".trans", \
            f"(float){one}({_A_FALLBACK})", "kk * {b_stride_0} + 8 * j + rn"
    return (_TEMPLATE.replace("@BADDR@", baddr).replace("@TRANS@", trans)
            .replace("@PACK@", pack).replace("@PAIR@", pair)
            .replace("@FLOATS@", floats).replace("@AVAL@", aval).replace("@BIDX@", bidx)
            .replace("@T@", dt))


@instr(_template("f16", "qk"))
def mma_qk_f16(acc: [f32][2, 2, 2] @ REGISTER, a: [f16][2, 2, 2] @ REGISTER,
               b: [f16][10, 16] @ SHARED, g: index):
    for j in seq(0, 2):
        for rm in seq(0, 2):
            for rn in seq(0, 2):
                for kk in seq(0, 16):
                    acc[j, rm, rn] += shfl(f32(a[kk // 8, rm, kk % 2]), 4 * g + kk % 8 // 2) \
                        * f32(b[8 * j + rn, kk])


@instr(_template("bf16", "qk"))
def mma_qk_bf16(acc: [f32][2, 2, 2] @ REGISTER, a: [bf16][2, 2, 2] @ REGISTER,
                b: [bf16][10, 16] @ SHARED, g: index):
    for j in seq(0, 2):
        for rm in seq(0, 2):
            for rn in seq(0, 2):
                for kk in seq(0, 16):
                    acc[j, rm, rn] += shfl(f32(a[kk // 8, rm, kk % 2]), 4 * g + kk % 8 // 2) \
                        * f32(b[8 * j + rn, kk])


@instr(_template("f16", "pv"))
def mma_pv_f16(acc: [f32][2, 2, 2] @ REGISTER, a: [f32][2, 2, 2] @ REGISTER,
               b: [f16][16, 10] @ SHARED, g: index):
    for j in seq(0, 2):
        for rm in seq(0, 2):
            for rn in seq(0, 2):
                for kk in seq(0, 16):
                    acc[j, rm, rn] += shfl(f32(f16(a[kk // 8, rm, kk % 2])),
                                           4 * g + kk % 8 // 2) * f32(b[kk, 8 * j + rn])


@instr(_template("bf16", "pv"))
def mma_pv_bf16(acc: [f32][2, 2, 2] @ REGISTER, a: [f32][2, 2, 2] @ REGISTER,
                b: [bf16][16, 10] @ SHARED, g: index):
    for j in seq(0, 2):
        for rm in seq(0, 2):
            for rn in seq(0, 2):
                for kk in seq(0, 16):
                    acc[j, rm, rn] += shfl(f32(bf16(a[kk // 8, rm, kk % 2])),
                                           4 * g + kk % 8 // 2) * f32(b[kk, 8 * j + rn])


MMA_QK = {"f16": mma_qk_f16, "bf16": mma_qk_bf16}
MMA_PV = {"f16": mma_pv_f16, "bf16": mma_pv_bf16}


# ---------------------------------------------------------------- the kernel

_LANE_G = "l % 32 // 4"
_LANE_T = "l % 4"


def _row(rm: str = "rm") -> str:
    """The query row of lane ``l``'s accumulator row ``rm``."""
    return f"{BM} * ib + 16 * (l // 32) + {_LANE_G} + 8 * {rm}"


def _key(nt: str = "nt", rn: str = "rn", tile: str = "jt") -> str:
    """The key of lane ``l``'s S accumulator ``(nt, rn)`` in tile ``tile``."""
    return f"{BN} * {tile} + 8 * {nt} + 2 * ({_LANE_T}) + {rn}"


def _indent(text: str, n: int) -> str:
    pad = "    " * n
    return "".join(pad + line + "\n" for line in text.strip("\n").split("\n"))


def _copy_tile(src: str, dst: str, d: int, tile: str) -> str:
    """Thread ``l``'s share of tile ``tile``'s 64 rows of ``src`` into ``dst``: 16-byte
    async copies (``D / 8`` a row), rows past ``n`` zero-filled."""
    cpr = d // 8
    rpi = WARPS * 32 // cpr
    row = f"{rpi} * it + l // {cpr}"
    tile = f"({tile})" if " " in tile else tile
    col = f"8 * (l % {cpr})"
    return f"""
for it in seq(0, {BN // rpi}, unroll=True):
    if {BN} * {tile} + {row} < n:
        async_copy({dst}[{row}, {col}:{col} + 8], {src}[h, {BN} * {tile} + {row}, {col}:{col} + 8])
    else:
        for e in seq(0, 8, unroll=True):
            {dst}[{row}, {col} + e] = 0.0"""


def _softmax(d: int, causal: bool, masked: bool, window: int = 0,
             softcap: bool = False, alibi: bool = False) -> str:
    """The online softmax on lane ``l``'s S accumulators (its rows ``rm``): scaled
    scores (masked: ``-3e38`` where not attended), the row maximum over the quad,
    ``alpha``, ``p = exp(s - m)`` in place (masked: 0 where not attended), the lane's
    share of the row sum, ``o *= alpha``; ``alibi``: the bias of every score, masked
    or not (:func:`.attention.biased`)."""
    ok = _valid(_key(), causal, _row(), window)
    sc = biased(capped("scale * s[l, nt, rm, rn]", softcap), alibi, "slopes[h]",
                f"{_row()} + prefix[0] - m", _key())
    pe = "exp(s[l, nt, rm, rn] - mnew)"
    if masked:
        sc, pe = f"select({ok}, {sc}, {NEG})", f"select({ok}, {pe}, 0.0)"
    return f"""
for rm in seq(0, 2, unroll=True):
    mx: f32
    mx = {NEG}
    for nt in seq(0, {BN // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[l, nt, rm, rn] = {sc}
            mx = max(mx, s[l, nt, rm, rn])
    mx = max(mx, shfl_xor(mx, 1))
    mx = max(mx, shfl_xor(mx, 2))
    mnew: f32
    mnew = max(mr[l, rm], mx)
    alpha: f32
    alpha = exp(mr[l, rm] - mnew)
    mr[l, rm] = mnew
    ls: f32
    ls = 0.0
    for nt in seq(0, {BN // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[l, nt, rm, rn] = {pe}
            ls += s[l, nt, rm, rn]
    lr[l, rm] = lr[l, rm] * alpha + ls
    for dn in seq(0, {d // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            o[l, dn, rm, rn] = o[l, dn, rm, rn] * alpha"""


def _threads(body: str, indent: int) -> str:
    return _indent(f"for l in par(0, {WARPS * 32}) @ THREADS:", indent) + \
        _indent(body, indent + 1)


def kernel_text(d: int, causal: bool, dt: str, window: int = 0, softcap: bool = False,
                alibi: bool = False) -> str:
    """The text of :func:`attention_mma_kernel`."""
    check_options(causal, window, softcap)
    name = f"attention_mma_d{d}" + ("_causal" if causal else "") + \
        options_suffix(window, softcap, alibi) + f"_{dt}"
    text = sig("", d, softcap, alibi)
    for a in ("q", "k", "v", "out"):
        text = text.replace(f"{a}: f32[", f"{a}: {dt}[")
    first, last = f"{BM} * ib", f"{BM} * ib + {BM - 1}"
    attended = some_valid(f"{BN} * jt", BN, causal, last, first, window)
    attended_next = some_valid(f"{BN} * (jt + 1)", BN, causal, last, first, window)
    full = _valid(f"{BN} * jt + {BN - 1}", causal, first)
    if window:  # the tile's first key inside the last row's window
        full += f" and {BN} * jt > {last} + prefix[0] - m - {window}"
    t, g = _LANE_T, _LANE_G
    setup = f"""
if h == 0 and ib == 0 and l == 0 and ({_bad_prefix(causal)}):
    err[0] = 1
for c in seq(0, {d // 16}, unroll=True):
    for hq in seq(0, 2, unroll=True):
        for rm in seq(0, 2, unroll=True):
            for rn in seq(0, 2, unroll=True):
                if {_row()} < m:
                    qf[l, c, hq, rm, rn] = q[h, {_row()}, 16 * c + 8 * hq + 2 * ({t}) + rn]
                else:
                    qf[l, c, hq, rm, rn] = 0.0
for rm in seq(0, 2, unroll=True):
    mr[l, rm] = {NEG}
    lr[l, rm] = 0.0
    for dn in seq(0, {d // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            o[l, dn, rm, rn] = 0.0""" + _copy_tile("k", "ks", d, "0")
    scores = f"""
for nt in seq(0, {BN // 8}, unroll=True):
    for rm in seq(0, 2, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[l, nt, rm, rn] = 0.0
for c in seq(0, {d // 16}, unroll=True):
    for jp in seq(0, {BN // 16}, unroll=True):
        mma_qk_{dt}(s[l, 2 * jp:2 * jp + 2, 0:2, 0:2], qf[l, c, 0:2, 0:2, 0:2],
                    ks[16 * jp + 2 * ({t}):16 * jp + 2 * ({t}) + 10, 16 * c:16 * c + 16], {g})
if {full}:
""" + _indent(_softmax(d, causal, False, window, softcap, alibi), 1) + "else:\n" + \
        _indent(_softmax(d, causal, True, window, softcap, alibi), 1)
    products = f"""
for kc in seq(0, {BN // 16}, unroll=True):
    for dp in seq(0, {d // 16}, unroll=True):
        mma_pv_{dt}(o[l, 2 * dp:2 * dp + 2, 0:2, 0:2], s[l, 2 * kc:2 * kc + 2, 0:2, 0:2],
                    vs[16 * kc:16 * kc + 16, 16 * dp + 2 * ({t}):16 * dp + 2 * ({t}) + 10], {g})"""
    final = f"""
for rm in seq(0, 2, unroll=True):
    tot: f32
    tot = lr[l, rm] + shfl_xor(lr[l, rm], 1)
    tot = tot + shfl_xor(tot, 2)
    if {_row()} < m:
        for dn in seq(0, {d // 8}, unroll=True):
            for rn in seq(0, 2, unroll=True):
                out[h, {_row()}, 8 * dn + 2 * ({t}) + rn] = {dt}(o[l, dn, rm, rn] / tot)"""
    return (
        f"def {name}" + text +
        "    for h in par(0, hh) @ BLOCKS:\n"
        f"        for ib in par(0, (m + {BM - 1}) // {BM}) @ BLOCKS:\n"
        f"            ks: {dt}[{BN}, {d + 8}] @ SHARED\n"
        f"            vs: {dt}[{BN}, {d + 8}] @ SHARED\n"
        f"            qf: {dt}[{WARPS * 32}, {d // 16}, 2, 2, 2] @ REGISTER\n"
        f"            s: f32[{WARPS * 32}, {BN // 8}, 2, 2] @ REGISTER\n"
        f"            o: f32[{WARPS * 32}, {d // 8}, 2, 2] @ REGISTER\n"
        f"            mr: f32[{WARPS * 32}, 2] @ REGISTER\n"
        f"            lr: f32[{WARPS * 32}, 2] @ REGISTER\n"
        + _threads(setup, 3) +
        "            async_commit()\n"
        f"            for jt in seq(0, (n + {BN - 1}) // {BN}):\n"
        "                async_wait(0)\n"
        "                sync()\n"
        f"                if {attended}:\n"
        + _threads(_copy_tile("v", "vs", d, "jt"), 5) +
        "                async_commit()\n"
        f"                if {attended}:\n"
        + _threads(scores, 5) +
        "                async_wait(0)\n"
        "                sync()\n"
        f"                if {attended_next}:\n"
        + _threads(_copy_tile("k", "ks", d, "jt + 1"), 5) +
        "                async_commit()\n"
        f"                if {attended}:\n"
        + _threads(products, 5) +
        "            async_wait(0)\n"
        + _threads(final, 3))


@derivation
def attention_mma_kernel(d: int = 128, causal: bool = False, dt: str = "f16",
                         window: int = 0, softcap: bool = False, alibi: bool = False) -> Proc:
    """The tensor-core prefill kernel (module docs) for head dimension ``d`` (64 or
    128) on ``dt`` (f16 or bf16) tensors; ``window``, ``softcap`` and ``alibi`` as
    :func:`.attention.attention_rows` (tiles no row of the block attends skipped, the
    mask applied only where some row attends part of the tile)."""
    if d not in HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {HEAD_DIMS}")
    if dt not in MMA_QK:
        raise ValueError(f"the tensor-core attention takes f16 or bf16, not {dt}")
    p = proc_of(kernel_text(d, causal, dt, window, softcap, alibi))
    assert register_mma_preconditions_hold(p), p.name
    return p


def proc_of(text: str) -> Proc:
    """The proc ``text`` defines, with the instructions of this module in scope."""
    import gpudsl

    from ..proc import proc_from_source

    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    ns.update({f"mma_qk_{x}": MMA_QK[x] for x in MMA_QK})
    ns.update({f"mma_pv_{x}": MMA_PV[x] for x in MMA_PV})
    return proc_from_source(text, ns, file="<gpudsl.stdlib.attention_mma>")


# ---------------------------------------------------------------- preconditions


def register_mma_preconditions_hold(p: Proc) -> bool:
    """The precondition of :data:`MMA_QK` / :data:`MMA_PV` calls that their bodies
    cannot state, re-checked on a proc: every call stands in one thread loop ``l`` from
    0 of a multiple of 32 threads, under loops only (no ``if`` between: whole converged
    warps); it passes ``g = l % 32 // 4`` and the lane's own accumulators and A
    fragment (windows whose first index is ``l``); the B window starts ``2 t`` (``t = l
    % 4``) past a 16-byte aligned origin the same for all lanes of a warp (rows for
    ``MMA_QK``, columns for ``MMA_PV``), in a tile of rows of a multiple of 8 halves."""
    from ..ir.nodes import BinOp, Const, For, Point, Var
    from ..ir.types import INDEX, THREADS
    from ..ir.procdef import as_procdef
    from ..ir.visitor import substitute
    from ..schedule.legality import divisible
    from ..schedule.simplify import normalize
    from ..schedule.patterns import scope_at
    from .matmul_tf32 import _calls, _const

    ir = as_procdef(p) or p
    found = False
    for ins in (*MMA_QK.values(), *MMA_PV.values()):
        b_dim = 0 if ins in MMA_QK.values() else 1
        for addr, call, chain in _calls(p, ins):
            found = True
            k = [i for i, st in enumerate(chain)
                 if isinstance(st, For) and st.mapping == THREADS]
            if len(k) != 1 or not all(isinstance(st, For) for st in chain[k[0]:]):
                return False
            lp = chain[k[0]]
            hi = _const(lp.hi)
            if _const(lp.lo) != 0 or hi is None or hi % 32:
                return False
            acc, a, b, g = call.args

            def at(e, lane):
                return normalize(substitute(e, {lp.iter: Const(lane)}))

            if any(not (w.idx and isinstance(w.idx[0], Point) and w.idx[0].pt == Var(lp.iter))
                   for w in (acc, a)):
                return False
            env = scope_at(ir, addr)
            if _const(env[b.name][2][-1]) is None or _const(env[b.name][2][-1]) % 8:
                return False
            lo = b.idx[b_dim].lo
            for warp in range(hi // 32):
                lanes = range(32 * warp, 32 * warp + 32)
                if any(at(g, x) != Const(x % 32 // 4) for x in lanes):
                    return False
                origins = {at(BinOp("-", lo, Const(2 * (x % 4)), INDEX), x) for x in lanes}
                if len(origins) != 1:
                    return False
            col = b.idx[1].lo if b_dim == 0 else normalize(substitute(
                lo, {lp.iter: Const(0)}))
            if not divisible(ir, addr, col, 8):
                return False
    return found


def attention_mma_tolerance(q, k, v, causal: bool = False, prefix: int | None = None,
                            scale: float | None = None, dt: str = "f16",
                            window: int | None = None,
                            softcap: float | None = None, alibi=None) -> np.ndarray:
    """The elementwise bound on ``|kernel - attention_reference|`` (module docs):
    :func:`.attention.attention_tolerance`'s ``atol + rtol |ref|`` plus
    ``(u + n 2**-23) sum_j p_j |v_j|`` for ``P`` rounded to ``dt`` (``u`` its unit
    roundoff) and summed in f32 in the tensor cores' order (``p`` the float64
    normalized weights, ``n`` the keys)."""
    atol, rtol = attention_tolerance(dt)
    ref = attention_reference(q, k, v, causal, prefix, scale, window,
                              softcap, alibi).astype(np.float64)
    mag = attention_reference(q, k, np.abs(np.asarray(v, np.float64)), causal, prefix, scale,
                              window, softcap, alibi)
    n = k.shape[1] if prefix is None else int(np.asarray(prefix).reshape(-1)[0])
    return atol + rtol * np.abs(ref) + (unit_roundoff(dt) + n * 2.0 ** -23) * \
        np.asarray(mag, np.float64)


def plan_prefill(m: int, d: int, causal: bool = False, heads: int | None = None,
                 keys: int | None = None, layout: str = "hnd", dt: str = "f32",
                 target: str | None = None, window: int = 0, softcap: bool = False,
                 alibi: bool = False) -> Proc:
    """The attention kernel for these shapes on ``target``: on ``"cuda"``, f16/bf16
    prefill (more than :data:`.attention.SPLIT_MAX_ROWS` rows, ``d`` 64 or 128,
    ``[H, N, D]`` keys) runs :func:`attention_mma_kernel`; everything else (and every
    shape on the emulator) :func:`.attention.plan_attention`'s choice (``window``,
    ``softcap``, ``alibi`` passed on)."""
    if (target == "cuda" and dt in MMA_QK and d in HEAD_DIMS and m > SPLIT_MAX_ROWS
            and layout == "hnd"):
        return attention_mma_kernel(d, causal, dt, window, bool(softcap), bool(alibi))
    return plan_attention(m, d, causal, heads, keys, layout, dt=dt, window=window,
                          softcap=softcap, alibi=alibi)


__all__ = ["attention_mma_kernel", "plan_prefill", "attention_mma_tolerance", "kernel_text",
           "proc_of", "register_mma_preconditions_hold",
           "mma_qk_f16", "mma_qk_bf16", "mma_pv_f16", "mma_pv_bf16", "MMA_QK", "MMA_PV",
           "HEAD_DIMS", "BM", "BN"]
