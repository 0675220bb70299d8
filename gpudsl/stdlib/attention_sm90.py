"""Half-precision attention prefill for sm_90a (H100/H200), FlashAttention-3 style
(issue 37): ``softmax(scale * q k^T) v`` for f16/bf16 ``q [H, M, D]``, ``k, v [H, N,
D]``, with the signature, prefix and causal rule of :func:`.attention.attention_rows`
(its meaning), ``D`` 64 or 128.

**The kernel** (:func:`attention_sm90_kernel`, written directly: no primitive derives
an online softmax; see docs/decisions.md): one block per (head, ``64 wgs`` query rows),
``wgs`` consumer warpgroups (threads ``0 .. 128 wgs``, warpgroup ``w`` owning rows
``64 w .. 64 w + 63``) and one producer thread (``128 wgs``):

- the producer loads the block's Q rows once by TMA (``D / 64`` boxes of 64 columns
  into a 128-byte swizzled tile, completing on ``qbar``), then for each tile of 64 keys
  waits for a free slot of a ``stages``-deep ring (``empty``), and loads the K and V
  tiles (``D / 64`` swizzled boxes each) into it, completing on ``full[jt % stages]``;
  rows past ``n`` land as zeros (TMA clipping);
- the consumers wait for the slot, compute ``S = Q K^T`` by ``4 D / 64`` chained
  ``wgmma`` (m64n64k16; both operands K-major, from the swizzled tiles) into ``s``,
  the wgmma accumulator fragment (element ``i`` of lane ``l``: row ``16 (l // 32) +
  l % 32 // 4 + 8 (i // 2 % 2)``, key ``8 (i // 4) + 2 (l % 4) + i % 2``); then the
  online softmax on the fragment: the row maximum over the lane's 16 values and its
  quad (``shfl_xor`` 1, 2), ``alpha = exp(m_old - m_new)``, ``p = exp(s - m_new)``
  rounded to the half type into ``p_s`` (the wgmma A layout: a 128-byte swizzled
  ``[64, 64]`` tile per warpgroup), the lane's share of the row sum, ``o *= alpha``; a
  barrier of the warpgroup, then ``O += P V`` by 4 chained ``wgmma`` (m64nDk16) whose
  B operand is the V tile as it landed, ``[key, e]``: wgmma's MN-major B; the slot
  handed back, and a second barrier of the warpgroup before the next tile's writes of
  ``p_s``.  (``v_major="k"``: the kernel before the MN-major B, which copies the V
  tile transposed into ``vt[e, key]`` while ``S`` runs, hands the slot back after
  ``S``, and whose barriers span the warpgroups sharing ``vt``);
- at the end each quad adds its row sums (two ``shfl_xor``) and writes ``o / l``
  rounded once, rows below ``m``.

Scores are masked only in tiles some row of the block does not fully attend (the
causal diagonal, the prefix's end: a block-uniform ``if``); with ``causal`` the key
loop stops after the last tile the block's last row can attend (``j <= i + n - m``
holds for every admitted prefix, so the bound needs no run-time value), and the grid
runs the query blocks last to first (``ib = (m + 64 wgs - 1) // (64 wgs) - 1 - ibr``):
the blocks with the most key tiles start first, as FlashAttention-2 orders them.  No
assertion on the sizes: every ``hh``, ``m``, ``n`` is proved.

**Precision**: that of :func:`.attention_mma.attention_mma_tolerance` (products of
halves exact in f32, summed in f32; ``P`` rounded to the half type for the second
product, the row sums from the f32 ``P``).
"""
from __future__ import annotations

import re

from ..proc import Proc
from .attention import NEG, SPLIT_MAX_ROWS, _bad_prefix, _valid, sig
from .derivation_cache import derivation

HEAD_DIMS = (64, 128)
DTYPES = ("f16", "bf16")
BN = 64  # keys per tile: one m64n64 wgmma per k16 step of S
TARGET = "sm_90a"
#: how the second product reads V: "mn", the TMA-loaded tile itself (wgmma's MN-major
#: B); "k", a transposed copy (``vt``) as K-major B, the kernel before that operand
V_MAJOR = "mn"


def _indent(text: str, n: int) -> str:
    pad = "    " * n
    return "".join(pad + line + "\n" for line in text.strip("\n").split("\n"))


def _row(bm: int, rm: str = "rm") -> str:
    """The query row of lane ``t``'s accumulator row ``rm``."""
    return f"{bm} * ib + 64 * (t // 128) + 16 * (t % 128 // 32) + t % 32 // 4 + 8 * {rm}"


def _key(nt: str = "nt", rn: str = "rn") -> str:
    """The key of lane ``t``'s S accumulator ``4 nt + 2 rm + rn`` in tile ``jt``."""
    return f"{BN} * jt + 8 * {nt} + 2 * (t % 4) + {rn}"


def _frag(nt: str = "nt", rm: str = "rm", rn: str = "rn") -> str:
    return f"4 * {nt} + 2 * {rm} + {rn}"


def _softmax(d: int, bm: int, causal: bool, masked: bool, dt: str) -> str:
    """The online softmax on lane ``t``'s S fragment (module docs); ``P`` rounded to
    ``dt`` into its warpgroup's ``p_s`` tile."""
    i = _frag()
    ok = _valid(_key(), causal, _row(bm))
    sc, pe = f"scale * s[t, {i}]", f"exp(s[t, {i}] - mnew)"
    if masked:
        sc, pe = f"select({ok}, {sc}, {NEG})", f"select({ok}, {pe}, 0.0)"
    prow = "16 * (t % 128 // 32) + t % 32 // 4 + 8 * rm"
    return f"""
for rm in seq(0, 2, unroll=True):
    mx: f32
    mx = {NEG}
    for nt in seq(0, {BN // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            s[t, {i}] = {sc}
            mx = max(mx, s[t, {i}])
    mx = max(mx, shfl_xor(mx, 1))
    mx = max(mx, shfl_xor(mx, 2))
    mnew: f32
    mnew = max(mr[t, rm], mx)
    alpha: f32
    alpha = exp(mr[t, rm] - mnew)
    mr[t, rm] = mnew
    ls: f32
    ls = 0.0
    for nt in seq(0, {BN // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            pv: f32
            pv = {pe}
            ls += pv
            p_s[t // 128, {prow}, 8 * nt + 2 * (t % 4) + rn] = {dt}(pv)
    lr[t, rm] = lr[t, rm] * alpha + ls
    for dn in seq(0, {d // 8}, unroll=True):
        for rn in seq(0, 2, unroll=True):
            o[t, {_frag("dn")}] = o[t, {_frag("dn")}] * alpha"""


def _transpose_v(d: int, nthreads: int) -> str:
    """The consumers' copy of the V tile in slot ``jt % stages`` into ``vt`` transposed:
    ``vt[e, key] = v_s[slot, key, e]``."""
    per = BN * d // nthreads
    return f"""
for r in seq(0, {per}):
    vt[({nthreads} * r + t) % {d}, ({nthreads} * r + t) // {d}] = v_s[jt % stages_, ({nthreads} * r + t) // {d}, ({nthreads} * r + t) % {d}]"""


def kernel_text(d: int = 128, causal: bool = False, dt: str = "f16", wgs: int = 1,
                stages: int = 2, v_major: str | None = None) -> str:
    """The text of :func:`attention_sm90_kernel`."""
    v_major = V_MAJOR if v_major is None else v_major
    if v_major not in ("k", "mn"):
        raise ValueError(f"v_major={v_major!r}: 'k' (V transposed by the consumers) or 'mn'")
    if d not in HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {HEAD_DIMS}")
    if dt not in DTYPES:
        raise ValueError(f"the sm_90a attention takes f16 or bf16, not {dt}")
    if wgs not in (1, 2) or not 1 <= stages <= 8:
        raise ValueError(f"wgs={wgs} (1 or 2) or stages={stages} (1 to 8) out of range")
    bm, nth, dc = 64 * wgs, 128 * wgs, d // 64
    mn = v_major == "mn"
    name = f"attention_sm90_d{d}" + ("_causal" if causal else "") + f"_w{wgs}s{stages}" + \
        ("" if mn else "_vt") + f"_{dt}"
    text = sig("", d)
    for a in ("q", "k", "v", "out"):
        text = text.replace(f"{a}: f32[", f"{a}: {dt}[")
    ntiles = f"({bm} * ib + {bm - 1} + n - m) // {BN} + 1" if causal else f"(n + {BN - 1}) // {BN}"
    first = f"{bm} * ib"
    full = _valid(f"{BN} * jt + {BN - 1}", causal, first)
    slot = "jt % stages_"
    setup = f"""
if h == 0 and ib == 0 and t == 0 and ({_bad_prefix(causal)}):
    err[0] = 1
for rm in seq(0, 2, unroll=True):
    mr[t, rm] = {NEG}
    lr[t, rm] = 0.0
for f in seq(0, {d // 2}, unroll=True):
    o[t, f] = 0.0"""
    loads = f"""
for c in seq(0, {dc}, unroll=True):
    tma_load(k_s[{slot}, c, 0:{BN}, 0:64], k[h, {BN} * jt:{BN} * jt + {BN}, 64 * c:64 * c + 64], bar=full[{slot}])
""" + (f"""for c in seq(0, {dc}, unroll=True):
    tma_load(v_s[{slot}, c, 0:{BN}, 0:64], v[h, {BN} * jt:{BN} * jt + {BN}, 64 * c:64 * c + 64], bar=full[{slot}])"""
             if mn else f"""tma_load(v_s[{slot}, 0:{BN}, 0:{d}], v[h, {BN} * jt:{BN} * jt + {BN}, 0:{d}], bar=full[{slot}])""")
    scores = f"""
for f in seq(0, {BN // 2}, unroll=True):
    s[t, f] = 0.0
for c in seq(0, {dc}, unroll=True):
    for kk in seq(0, 4, unroll=True):
        wgmma(s[t, 0:{BN // 2}], q_s[c, 64 * (t // 128):64 * (t // 128) + 64, 16 * kk:16 * kk + 16], k_s[{slot}, c, 0:{BN}, 16 * kk:16 * kk + 16])
wgmma_commit()""" + ("" if mn else _transpose_v(d, nth)) + "\nwgmma_wait(0)"
    soft = (f"if {full}:\n" + _indent(_softmax(d, bm, causal, False, dt), 1) + "else:\n" +
            _indent(_softmax(d, bm, causal, True, dt), 1))
    vwin = (f"v_s[{slot}, 0:{dc}, 16 * kk:16 * kk + 16, 0:64], b_major=\"mn\"" if mn else
            f"vt[0:{d}, 16 * kk:16 * kk + 16]")
    products = f"""
for kk in seq(0, 4, unroll=True):
    wgmma(o[t, 0:{d // 2}], p_s[t // 128, 0:64, 16 * kk:16 * kk + 16], {vwin})
wgmma_commit()
wgmma_wait(0)"""
    final = f"""
for rm in seq(0, 2, unroll=True):
    tot: f32
    tot = lr[t, rm] + shfl_xor(lr[t, rm], 1)
    tot = tot + shfl_xor(tot, 2)
    if {_row(bm)} < m:
        for dn in seq(0, {d // 8}, unroll=True):
            for rn in seq(0, 2, unroll=True):
                out[h, {_row(bm)}, 8 * dn + 2 * (t % 4) + rn] = {dt}(o[t, {_frag("dn")}] / tot)"""

    # mn: the slot holds V until P V has landed; the consumer barriers are each
    # warpgroup's own (its P tile is all they order); k: vt is shared by the warpgroups
    release = f"                arrive(empty[{slot}], 0, {nth})\n"
    syncs = "".join(f"                sync({128 * w}, {128 * w + 128})\n" for w in range(wgs)) \
        if mn else f"                sync(0, {nth})\n"

    def threads(body: str, lo: int, hi: int, ind: int) -> str:
        return _indent(f"for t in par({lo}, {hi}) @ THREADS:", ind) + _indent(body, ind + 1)

    st = stages
    text = (
        f"def {name}" + text.replace("err: i32[1]):", f"err: i32[1]):") +
        "    for h in par(0, hh) @ BLOCKS:\n"
        f"        for ib in par(0, (m + {bm - 1}) // {bm}) @ BLOCKS:\n"
        f"            q_s: {dt}[{dc}, {bm}, 64] @ SHARED(swizzle=128)\n"
        f"            k_s: {dt}[{st}, {dc}, {BN}, 64] @ SHARED(swizzle=128)\n"
        + (f"            v_s: {dt}[{st}, {dc}, {BN}, 64] @ SHARED(swizzle=128)\n" if mn else
           f"            v_s: {dt}[{st}, {BN}, {d}] @ SHARED\n"
           f"            vt: {dt}[{d}, {BN}] @ SHARED(swizzle=128)\n") +
        f"            p_s: {dt}[{wgs}, 64, {BN}] @ SHARED(swizzle=128)\n"
        f"            s: f32[{nth}, {BN // 2}] @ REGISTER\n"
        f"            o: f32[{nth}, {d // 2}] @ REGISTER\n"
        f"            mr: f32[{nth}, 2] @ REGISTER\n"
        f"            lr: f32[{nth}, 2] @ REGISTER\n"
        "            qbar: barrier @ SHARED\n"
        f"            full: barrier[{st}] @ SHARED\n"
        f"            empty: barrier[{st}] @ SHARED\n"
        + threads(setup, 0, nth, 3) +
        f"            for j in seq(0, {st}):\n"
        f"                arrive(empty[j], 0, {nth})\n"
        + threads(f"""
for c in seq(0, {dc}, unroll=True):
    tma_load(q_s[c, 0:{bm}, 0:64], q[h, {bm} * ib:{bm} * ib + {bm}, 64 * c:64 * c + 64], bar=qbar)""",
                  nth, nth + 1, 3) +
        f"            arrive(qbar, {nth}, {nth + 1})\n"
        f"            wait(qbar, 0, {nth})\n"
        f"            for jt in seq(0, {ntiles}):\n"
        f"                wait(empty[{slot}], {nth}, {nth + 1})\n"
        + threads(loads, nth, nth + 1, 4) +
        f"                arrive(full[{slot}], {nth}, {nth + 1})\n"
        f"                wait(full[{slot}], 0, {nth})\n"
        + threads(scores, 0, nth, 4) +
        ("" if mn else release)
        + threads(soft, 0, nth, 4) + syncs
        + threads(products, 0, nth, 4) + (release if mn else "") + syncs
        + threads(final, 0, nth, 3)).replace("stages_", str(st))
    if causal:  # the blocks with the most key tiles first (the grid runs ibr upwards)
        text = text.replace("for ib in par", "for ibr in par")
        text = re.sub(r"\bib\b", f"((m + {bm - 1}) // {bm} - 1 - ibr)", text)
    return text


@derivation
def attention_sm90_kernel(d: int = 128, causal: bool = False, dt: str = "f16", wgs: int = 1,
                          stages: int = 2, v_major: str | None = None) -> Proc:
    """The sm_90a prefill kernel (module docs) for head dimension ``d`` (64 or 128) on
    ``dt`` (f16 or bf16) tensors, ``wgs`` consumer warpgroups (64 query rows each) and
    a ``stages``-deep ring of K/V tiles; ``v_major`` (default :data:`V_MAJOR`): ``"mn"``
    reads the V tile as TMA lands it (wgmma's MN-major B), ``"k"`` copies it transposed
    first (``vt``: the K-major B)."""
    import gpudsl
    from ..proc import proc_from_source

    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    return proc_from_source(kernel_text(d, causal, dt, wgs, stages, v_major), ns,
                            file="<gpudsl.stdlib.attention_sm90>")


#: the tile ``plan_prefill`` runs per head dimension, the one without spills on sm_90a
#: (a block of ``128 wgs + 1`` threads gets 255 registers with one consumer warpgroup,
#: 168 with two; the non-causal kernel spilled 12 bytes with two warpgroups for D 64
#: with V transposed, for D 128 with V MN-major): two warpgroups give 128 query rows a
#: block, as FlashAttention-3's forward
PLANS = {"k": {64: dict(wgs=1, stages=3), 128: dict(wgs=2, stages=2)},
         "mn": {64: dict(wgs=2, stages=2), 128: dict(wgs=1, stages=2)}}
PLAN = PLANS[V_MAJOR]


def takes(m: int, d: int, dt: str, layout: str = "hnd", window: int = 0,
          softcap: bool = False, alibi: bool = False) -> bool:
    """Whether the kernel serves this call: a prefill (more than
    :data:`.attention.SPLIT_MAX_ROWS` query rows) on f16/bf16 ``[H, N, D]`` tensors with
    ``D`` 64 or 128, no sliding window, soft cap or ALiBi."""
    return (dt in DTYPES and d in HEAD_DIMS and m > SPLIT_MAX_ROWS and layout == "hnd"
            and not window and not softcap and not alibi)


def arch_of(target: str | None) -> str | None:
    """The architecture a ``target`` names: ``"cuda"`` is the GPU's own
    (``gpudsl.runtime.driver.device_arch``: ``"sm_90a"`` on an H100/H200, the default
    target without a GPU); an ``sm_XY`` name is itself; anything else (the emulator,
    None) is None."""
    if target == "cuda":
        from ..runtime.driver import device_arch

        return device_arch()
    return target if isinstance(target, str) and target.startswith("sm_") else None


def plan_prefill(m: int, d: int, causal: bool = False, heads: int | None = None,
                 keys: int | None = None, layout: str = "hnd", dt: str = "f32",
                 target: str | None = None, window: int = 0, softcap: bool = False,
                 alibi: bool = False) -> Proc:
    """The attention kernel for these shapes on ``target`` (``"cuda"``, an architecture
    name such as ``"sm_90a"``, ``"emulator"`` or None): where the architecture is
    ``sm_90a`` and :func:`takes` holds, :func:`attention_sm90_kernel` (with
    :data:`PLAN`'s tile for ``d``); else :func:`.attention_mma.plan_prefill`'s choice, the
    architecture names counting as ``"cuda"`` (mma.sync on tensor cores)."""
    from .attention_mma import plan_prefill as plan_sm80

    arch = arch_of(target)
    if arch == TARGET and takes(m, d, dt, layout, window, softcap, alibi):
        return attention_sm90_kernel(d, bool(causal), dt, **PLAN[d])
    return plan_sm80(m, d, causal, heads, keys, layout, dt, "cuda" if arch else target,
                     window, softcap, alibi)


__all__ = ["attention_sm90_kernel", "kernel_text", "plan_prefill", "takes", "arch_of",
           "HEAD_DIMS", "DTYPES", "BN", "TARGET", "PLAN", "PLANS",
           "V_MAJOR"]
