"""Grouped-query decode on tensor cores (issue 37): the function of
:func:`.attention_paged.paged_rows` (its meaning; ``gqa_reference`` in float64) for
f16/bf16 tensors, the ``G`` query heads of a KV head computed together by
``mma.m16n8k16`` (the instructions of :mod:`.attention_mma`).

Shapes and arguments are :mod:`.attention_paged`'s (``q [B, Hkv, G, M, D]``, contiguous
``k, v [B, Hkv, N, D]`` or paged ``[pages, P, Hkv, D]`` through ``table``, ``lens``),
``D`` 64 or 128, any ``G`` (the planner takes it for ``G >= 4``).

**The kernel** (:func:`gqa_mma_kernel`), split-KV as :mod:`.attention_paged`:

1. blocks ``(b, kh, sb)``, 4 warps: the chunk ``[64 sb, 64 sb + 64)`` of sequence
   ``b``'s keys for KV head ``kh`` is copied ONCE into SHARED (16-byte vector copies,
   through the clamped block table when paged, zeros past the length), one barrier;
   then warp ``w`` takes the keys ``16 w .. 16 w + 15`` of the chunk and, for each
   query position ``i``, the query heads of the group in tiles of 16 (the mma's M
   rows): lane ``l = 4 g + t`` holds rows ``g, g + 8`` (heads ``16 a + g + 8 rm``;
   rows past ``G`` read head ``G - 1`` again, and their results, never written, touch
   no other row).  ``S = Q K^T`` (the warp's 16 keys: two n8 pieces) is ``D / 16``
   :data:`.attention_mma.MMA_QK` calls, each on a 16-wide piece of Q loaded just
   before by 32-bit copies (few registers live); then scaled (and soft-capped),
   masked, its row maximum over the quad by two ``shfl_xor``, ``P = exp(S - max)`` in
   place (0 where not attended), the row sum over the quad, and ``O = P V`` by ``D /
   16`` :data:`.attention_mma.MMA_PV` calls whose A operand is ``P`` in registers.
   Each warp writes its partial ``(m, l, O)`` (slot ``4 sb + w``; ``O`` by 64-bit
   stores).  A chunk no row attends is skipped by a block-uniform ``if`` (past the
   length, before the first row's window).
2. the combine of :mod:`.attention_paged`: one block per ``(b, kh, i)``, ``D`` threads,
   the partials of the 16-key parts holding an attended key merged.

**Options**: ``window`` (static, with ``causal``): row ``i`` (position ``p = i + L_b -
M``) attends the keys ``p - window < j <= p``; ``softcap`` (a run-time ``f32``
argument ``cap``): the scores become ``cap * tanh(s / cap)`` before the softmax;
``alibi`` (the run-time ``slopes: f32[hk, g]``): then ``slopes[kh, gg] * |p - j|``
subtracted.

**Precision**: :func:`.attention_mma.attention_mma_tolerance`'s: products of halves
are exact in f32, ``P`` is rounded to the half type for the second product."""
from __future__ import annotations

import numpy as np

from ..proc import Proc
from ..schedule import vectorize
from .attention import attention_tolerance, biased, capped, check_options, options_suffix
from .attention_mma import MMA_QK, _indent, proc_of, register_mma_preconditions_hold
from .attention_paged import (NEG, PAGE_SIZES, _cap, _row, attended, combine_text, sig_text,
                              gqa_reference, plan_gqa, some_attended)
from .halves import unit_roundoff
from .derivation_cache import derivation

HEAD_DIMS = (64, 128)
CH = 64  # keys staged per block: 4 warps of 16
WARPS = 4
KW = CH // WARPS  # keys per warp: two n8 pieces of S, one k16 step of P V

_G = "l % 32 // 4"
_T = "l % 4"


def kernel_name(d: int, causal: bool, page: int, dt: str, idx: str = "i32",
                window: int = 0, softcap: bool = False, alibi: bool = False) -> str:
    return (f"attention_gqa_mma_d{d}" + ("_causal" if causal else "") +
            (f"_paged{page}" if page else "") + options_suffix(window, softcap, alibi) +
            f"_{dt}" +
            ("" if idx == "i32" else f"_{idx}"))


def _copy(page: int, d: int) -> str:
    """Lane ``l``'s share of the chunk: 8 consecutive entries of a key row of K and of
    V (``xk``, ``xv``: vectorized to one 16-byte copy), zeros past the length."""
    cpr = d // 8
    rpi = WARPS * 32 // cpr
    row = f"{rpi} * it + l // {cpr}"
    key = f"{CH} * sb + {row}"
    col = f"8 * (l % {cpr})"
    fault = (f"    if l % {cpr} == 0 and (table[b, ({key}) // {page}] < 0 or "
             f"table[b, ({key}) // {page}] >= pages):\n        atomic_max(err[0], 2)\n"
             if page else "")
    body = "".join(
        f"    for {x} in seq(0, 8):\n        {a}s[{row}, {col} + {x}] = "
        f"{a}[{_row(page, key, f'{col} + {x}')}]\n" for a, x in (("k", "xk"), ("v", "xv")))
    zero = "".join(f"    for {x} in seq(0, 8):\n        {a}s[{row}, {col} + {x}] = 0.0\n"
                   for a, x in (("k", "xz"), ("v", "xw")))
    return (f"for it in seq(0, {CH // rpi}):\n"
            f"  if {key} < lens[b] and {key} < {_cap(page)}:\n"
            + _indent(fault + body, 1) + "  else:\n" + _indent(zero, 1))


def _head(rm: str = "rm") -> str:
    return f"16 * a + {_G} + 8 * {rm}"


def _group(d: int, causal: bool, dt: str, window: int, softcap: bool,
           alibi: bool = False) -> str:
    """One warp's work for the group's heads ``16 a .. 16 a + 15`` (module docs)."""
    key = f"{CH} * sb + {KW} * (l // 32) + 8 * nt + 2 * ({_T}) + rn"
    ok = attended(key, causal, "i", window)
    sc = biased(capped("scale * s[l, nt, rm, rn]", softcap), alibi,
                f"slopes[kh, min({_head()}, g - 1)]", "i + lens[b] - m", key)
    slot = f"{WARPS} * sb + l // 32"
    return f"""
for nt in seq(0, 2, unroll=True):
    for rm in seq(0, 2, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[l, nt, rm, rn] = 0.0
for dn in seq(0, {d // 8}, unroll=True):
    for rm in seq(0, 2, unroll=True):
        for rn in seq(0, 2, unroll=True):
            o[l, dn, rm, rn] = 0.0
for c in seq(0, {d // 16}, unroll=True):
    for hq in seq(0, 2, unroll=True):
        for rm in seq(0, 2, unroll=True):
            for rq in seq(0, 2):
                qf[l, hq, rm, rq] = q[b, kh, min({_head()}, g - 1), i, 16 * c + 8 * hq + 2 * ({_T}) + rq]
    mma_qk_{dt}(s[l, 0:2, 0:2, 0:2], qf[l, 0:2, 0:2, 0:2],
                ks[{KW} * (l // 32) + 2 * ({_T}):{KW} * (l // 32) + 2 * ({_T}) + 10, 16 * c:16 * c + 16], {_G})
for rm in seq(0, 2, unroll=True):
    mx: f32
    mx = {NEG}
    for nt in seq(0, 2, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[l, nt, rm, rn] = select({ok}, {sc}, {NEG})
            mx = max(mx, s[l, nt, rm, rn])
    mx = max(mx, shfl_xor(mx, 1))
    mx = max(mx, shfl_xor(mx, 2))
    ls: f32
    ls = 0.0
    for nt in seq(0, 2, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[l, nt, rm, rn] = select({ok}, exp(s[l, nt, rm, rn] - mx), 0.0)
            ls += s[l, nt, rm, rn]
    ls = ls + shfl_xor(ls, 1)
    ls = ls + shfl_xor(ls, 2)
    if {_T} == 0 and {_head()} < g:
        pm[b, kh, {_head()}, i, {slot}] = mx
        pl[b, kh, {_head()}, i, {slot}] = ls
for dp in seq(0, {d // 16}, unroll=True):
    mma_pv_{dt}(o[l, 2 * dp:2 * dp + 2, 0:2, 0:2], s[l, 0:2, 0:2, 0:2],
                vs[{KW} * (l // 32):{KW} * (l // 32) + 16, 16 * dp + 2 * ({_T}):16 * dp + 2 * ({_T}) + 10], {_G})
for rm in seq(0, 2, unroll=True):
    if {_head()} < g:
        for dn in seq(0, {d // 8}, unroll=True):
            for rw in seq(0, 2):
                po[b, kh, {_head()}, i, {slot}, 8 * dn + 2 * ({_T}) + rw] = o[l, dn, rm, rw]"""


def kernel_text(d: int = 128, causal: bool = False, page: int = 0, dt: str = "f16",
                idx: str = "i32", window: int = 0, softcap: bool = False,
                alibi: bool = False) -> str:
    """The source of :func:`gqa_mma_kernel`."""
    if d not in HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {HEAD_DIMS}")
    if dt not in MMA_QK:
        raise ValueError(f"the tensor-core decode takes f16 or bf16, not {dt}")
    if page and page not in PAGE_SIZES:
        raise ValueError(f"page size {page} is not one of {PAGE_SIZES}")
    check_options(causal, window, softcap)
    cap = _cap(page)
    ns = f"({cap} + {CH - 1}) // {CH}"
    nparts = f"{WARPS} * {ns}"
    low = "m" if causal else "1"
    # some row attends a key of the chunk: the first row's window is the lowest
    live = some_attended(f"{CH} * sb", CH, False, "0", window)
    sig = sig_text(d, page, dt, idx, softcap, alibi)
    for a in ("q", "out"):
        sig = sig.replace(f"{a}: f32[", f"{a}: {dt}[")
    fault = (f"if kh == 0 and sb == 0 and l == 0 and "
             f"(lens[b] < {low} or lens[b] > {cap}):\n    atomic_max(err[0], 1)")
    threads = f"for l in par(0, {WARPS * 32}) @ THREADS:"
    return (
        f"def {kernel_name(d, causal, page, dt, idx, window, softcap, alibi)}" + sig +
        f"    pm: f32[bt, hk, g, m, {nparts}]\n"
        f"    pl: f32[bt, hk, g, m, {nparts}]\n"
        f"    po: f32[bt, hk, g, m, {nparts}, {d}]\n"
        "    for b in par(0, bt) @ BLOCKS:\n"
        "        for kh in par(0, hk) @ BLOCKS:\n"
        f"            for sb in par(0, {ns}) @ BLOCKS:\n"
        f"                ks: {dt}[{CH}, {d + 8}] @ SHARED\n"
        f"                vs: {dt}[{CH}, {d + 8}] @ SHARED\n"
        f"                qf: {dt}[{WARPS * 32}, 2, 2, 2] @ REGISTER\n"
        f"                s: f32[{WARPS * 32}, 2, 2, 2] @ REGISTER\n"
        f"                o: f32[{WARPS * 32}, {d // 8}, 2, 2] @ REGISTER\n"
        + _indent(threads, 4) + _indent(fault, 5) +
        f"                if {live}:\n"
        + _indent(threads, 5) + _indent(_copy(page, d), 6) +
        "                    sync()\n"
        + _indent(threads, 5) +
        _indent("for a in seq(0, (g + 15) // 16):\n    for i in seq(0, m):", 6) +
        _indent(_group(d, causal, dt, window, softcap, alibi), 8) +
        _indent(combine_text(d, nparts, some_attended(f"{KW} * p", KW, causal, "i", window),
                             None if dt == "f32" else lambda e: f"{dt}({e})"), 1))


@derivation
def gqa_mma_kernel(d: int = 128, causal: bool = False, page: int = 0, dt: str = "f16",
                   idx: str = "i32", window: int = 0, softcap: bool = False,
                   alibi: bool = False) -> Proc:
    """The tensor-core grouped-query decode proc (module docs): the chunk copies made
    16-byte vector copies (``vectorize``)."""
    p = proc_of(kernel_text(d, causal, page, dt, idx, window, softcap, alibi))
    for loop in ("xk", "xv"):
        p = vectorize(p, loop, 8)
    p = vectorize(p, "rq", 2)
    p = vectorize(p, "rw", 2)  # (the partials: 64-bit stores)
    assert register_mma_preconditions_hold(p), p.name
    return p


def takes(d: int, group: int, dt: str) -> bool:
    """Whether the planner runs this kernel (on CUDA): halves, ``D`` 64 or 128, at
    least 4 query heads per KV head (fewer leave most of the mma's 16 rows empty)."""
    return dt in MMA_QK and d in HEAD_DIMS and group >= 4


def plan_grouped(d: int, causal: bool, group: int, m: int, page: int = 0, dt: str = "f32",
                 idx: str = "i32", window: int = 0, softcap: bool = False,
                 target: str | None = None, alibi: bool = False) -> Proc:
    """The grouped / paged attention proc for these shapes on ``target``: on ``"cuda"`` a
    half-precision decode (``m == 1``) with ``group >= 4`` and ``D`` 64 or 128 runs on
    tensor cores (:func:`gqa_mma_kernel`); everything else (and every shape on the
    emulator) :func:`.attention_paged.plan_gqa`'s choice."""
    if target == "cuda" and m == 1 and takes(d, group, dt):
        return gqa_mma_kernel(d, bool(causal), page, dt, idx, window, bool(softcap),
                              bool(alibi))
    return plan_gqa(d, causal, group, m, page, dt, idx, window, softcap, alibi)


def gqa_mma_tolerance(q, k, v, lens, causal=False, table=None, scale=None, window=None,
                      softcap=None, dt: str = "f16", alibi=None) -> np.ndarray:
    """The elementwise bound on ``|kernel - gqa_reference|``: as
    :func:`.attention_mma.attention_mma_tolerance` (``P`` rounded to ``dt`` for the
    second product) per sequence, ``n`` its capacity."""
    atol, rtol = attention_tolerance(dt)
    args = (lens, causal, table, scale, window, softcap, alibi)
    ref = gqa_reference(q, k, v, *args).astype(np.float64)
    mag = gqa_reference(q, k, np.abs(np.asarray(v, np.float64)), *args).astype(np.float64)
    n = int(np.max(lens))
    return atol + rtol * np.abs(ref) + (unit_roundoff(dt) + n * 2.0 ** -23) * mag


__all__ = ["gqa_mma_kernel", "gqa_mma_tolerance", "plan_grouped", "kernel_text",
           "combine_text", "kernel_name", "takes", "HEAD_DIMS", "CH"]
