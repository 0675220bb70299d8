"""``attention(q, k, v, causal, prefix, scale)``: ``softmax(scale * q k^T) v`` per head
over the first ``prefix`` keys of a KV cache (issue 27, f32).  ``q`` is ``[H, M, D]``,
``k`` and ``v`` are ``[H, N, D]``; ``L = prefix`` keys are used (``1 <= L <= N``).
With ``causal``, query row ``i`` attends the keys ``j <= i + (L - M)`` (the rows are the
last ``M`` positions of the ``L``: prefill with ``M == L`` is the lower triangle, decode
with ``M == 1`` attends all ``L`` keys), which needs ``M <= L``.  ``prefix`` is read from
a one-element int64 tensor at run time; outside those bounds the kernel writes a fault
flag (one thread) that the host turns into an error, as ``sliced_softmax`` does.

Here: the readable algorithm (plain loops: the scores, their maximum, the exponentials,
their sum, the weighted values; it defines the meaning), the float64 numpy reference, and
the fused kernel (:func:`attention_kernel`): one block per (head, query row), ``D``
threads, keys in tiles of :data:`TILE` staged in SHARED, an online softmax (a running
maximum and sum; the accumulator rescaled by ``exp(m_old - m_new)`` per tile) whose tile
maximum and sum are SHARED tree reductions (:mod:`gpudsl.stdlib.reduce`).  As with the
other reductions the kernel is its own proc, not derived by primitives: the online
softmax reassociates the sums (see :mod:`.reduce`), so check() proves it race-free,
barrier-uniform and in bounds and the tests compare it with the reference."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..proc import Proc
from .common import make_proc
from .reduce import tree

TILE = 32  # keys per tile: one warp's lanes in the score phase
NEG = "-3.0e38"  # below every score: the masked keys' score, the running maximum's seed
HEAD_DIMS = (32, 64, 96, 128)  # D threads per block, D / 32 groups of the dot products

_SIG = ("(hh: size, m: size, n: size, {d}q: f32[hh, m, {D}], k: f32[hh, n, {D}], "
        "v: f32[hh, n, {D}], prefix: i64[1], scale: f32, out: f32[hh, m, {D}], "
        "err: i32[1]):\n")


def _bad_prefix(causal: bool) -> str:
    """The condition of the fault flag: a prefix outside ``[1, n]`` (or below ``m``
    with ``causal``: a row would attend no key)."""
    low = "m" if causal else "1"
    return f"prefix[0] < {low} or prefix[0] > n"


def _valid(j: str, causal: bool) -> str:
    """Key ``j`` is attended by query row ``i``."""
    c = f"{j} < prefix[0]"
    return c + (f" and {j} <= i + prefix[0] - m" if causal else "")


@lru_cache(maxsize=None)
def attention_rows(causal: bool = False) -> Proc:
    """The algorithm: for each head and query row, the scores of the attended keys
    (``scale * q . k``), their maximum, ``exp(score - max)`` and its sum, then each
    output entry the weighted sum of the values divided by the sum.  Scores of keys
    not attended are never read."""
    name = "attention_rows" + ("_causal" if causal else "")
    ok = _valid("j", causal)
    text = (
        f"def {name}" + _SIG.format(d="d: size, ", D="d") +
        f"    if {_bad_prefix(causal)}:\n"
        "        err[0] = 1\n"
        "    for h in seq(0, hh):\n"
        "        for i in seq(0, m):\n"
        "            sc: f32[n]\n"
        "            mx: f32\n"
        f"            mx = {NEG}\n"
        "            for j in seq(0, n):\n"
        f"                if {ok}:\n"
        "                    dot: f32\n"
        "                    dot = 0.0\n"
        "                    for e in seq(0, d):\n"
        "                        dot += q[h, i, e] * k[h, j, e]\n"
        "                    sc[j] = scale * dot\n"
        "                    mx = max(mx, sc[j])\n"
        "            total: f32\n"
        "            total = 0.0\n"
        "            for j in seq(0, n):\n"
        f"                if {ok}:\n"
        "                    sc[j] = exp(sc[j] - mx)\n"
        "                    total += sc[j]\n"
        "            for e in seq(0, d):\n"
        "                o: f32\n"
        "                o = 0.0\n"
        "                for j in seq(0, n):\n"
        f"                    if {ok}:\n"
        "                        o += sc[j] * v[h, j, e]\n"
        "                out[h, i, e] = o / total\n")
    return make_proc("attention", text)


def attention_reference(q, k, v, causal: bool = False, prefix: int | None = None,
                        scale: float | None = None) -> np.ndarray:
    """The meaning in float64 numpy (float32 result): ``q [H, M, D]``, ``k, v [H, N, D]``."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    m, n, d = q.shape[1], k.shape[1], q.shape[2]
    L = n if prefix is None else int(np.asarray(prefix).reshape(-1)[0])
    scale = 1.0 / np.sqrt(d) if scale is None else float(scale)
    s = scale * np.einsum("hid,hjd->hij", q, k[:, :L])
    if causal:
        i, j = np.arange(m)[:, None], np.arange(L)[None, :]
        s = np.where(j <= i + (L - m), s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hij,hjd->hid", p, v[:, :L]).astype(np.float32)


@lru_cache(maxsize=None)
def attention_kernel(d: int = 64, causal: bool = False) -> Proc:
    """One block per (head ``h``, query row ``i``) with ``d`` threads; thread ``t`` owns
    output entry ``t``.  Per tile of :data:`TILE` keys starting at ``j0 = 32 jt``:

    1. all threads copy the K and V tiles (coalesced: thread ``t`` reads entry ``t`` of
       each key) into SHARED, K's rows padded to ``d + 1`` so that the score phase's
       lanes (one key each) read distinct banks; keys past ``n`` are zeros;
    2. thread ``t`` adds the products of key ``t % 32`` over the 32 entries of group
       ``t // 32`` into ``part_dot[t // 32, t % 32]``;
    3. threads ``t < 32`` add the groups: the score of key ``j0 + t`` (``-3e38`` when not
       attended), kept in ``p`` and put in the tree, whose maximum is the tile's;
    4. the running maximum: each thread's ``mr[t]`` becomes ``max(mr[t], part[0])`` and
       ``alpha[t] = exp(old - new)``; then the barrier before ``part`` is reused (the
       racy twin in the tests lacks it);
    5. ``p[t] = exp(score - max)`` (0 when not attended) into the tree, whose sum is the
       tile's; ``l = l * alpha + sum`` and ``acc = acc * alpha + sum_r p[r] v[r, t]``.

    Tiles whose first key is not attended (past the prefix, or above the causal
    diagonal) are skipped by a block-uniform ``if``.  The output is ``acc / l``.  Thread
    0 of block (0, 0) reports a bad prefix (see :func:`_bad_prefix`)."""
    if d not in HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {HEAD_DIMS}")
    T, G = TILE, d // TILE
    name = f"attention_d{d}" + ("_causal" if causal else "")
    ok = _valid(f"{T} * jt + t", causal)
    first = _valid(f"{T} * jt", causal)
    text = (
        f"def {name}" + _SIG.format(d="", D=d) +
        "    for h in par(0, hh) @ BLOCKS:\n"
        "        for i in par(0, m) @ BLOCKS:\n"
        f"            qs: f32[{d}] @ SHARED\n"
        f"            ks: f32[{T}, {d + 1}] @ SHARED\n"
        f"            vs: f32[{T}, {d}] @ SHARED\n"
        f"            part_dot: f32[{G}, {T}] @ SHARED\n"
        f"            part: f32[{T}] @ SHARED\n"
        f"            p: f32[{T}] @ SHARED\n"
        f"            mr: f32[{d}] @ REGISTER\n"
        f"            lr: f32[{d}] @ REGISTER\n"
        f"            acc: f32[{d}] @ REGISTER\n"
        f"            alpha: f32[{d}] @ REGISTER\n"
        f"            for t in par(0, {d}) @ THREADS:\n"
        f"                if h == 0 and i == 0 and t == 0 and ({_bad_prefix(causal)}):\n"
        "                    err[0] = 1\n"
        "                qs[t] = scale * q[h, i, t]\n"
        f"                mr[t] = {NEG}\n"
        "                lr[t] = 0.0\n"
        "                acc[t] = 0.0\n"
        f"            for jt in seq(0, (n + {T - 1}) // {T}):\n"
        f"                if {first}:\n"
        "                    sync()\n"
        f"                    for t in par(0, {d}) @ THREADS:\n"
        f"                        for r in seq(0, {T}):\n"
        f"                            if {T} * jt + r < n:\n"
        f"                                ks[r, t] = k[h, {T} * jt + r, t]\n"
        f"                                vs[r, t] = v[h, {T} * jt + r, t]\n"
        "                            else:\n"
        "                                ks[r, t] = 0.0\n"
        "                                vs[r, t] = 0.0\n"
        "                    sync()\n"
        f"                    for t in par(0, {d}) @ THREADS:\n"
        "                        dot: f32\n"
        "                        dot = 0.0\n"
        f"                        for e in seq(0, {T}):\n"
        f"                            dot += qs[{T} * (t // {T}) + e] * ks[t % {T}, {T} * (t // {T}) + e]\n"
        f"                        part_dot[t // {T}, t % {T}] = dot\n"
        "                    sync()\n"
        f"                    for t in par(0, {T}) @ THREADS:\n"
        "                        s: f32\n"
        "                        s = 0.0\n"
        f"                        for g in seq(0, {G}):\n"
        "                            s += part_dot[g, t]\n"
        f"                        s = select({ok}, s, {NEG})\n"
        "                        p[t] = s\n"
        "                        part[t] = s\n"
        "                    sync()\n"
        + tree(T, "max", 5) +
        f"                    for t in par(0, {d}) @ THREADS:\n"
        "                        mnew: f32\n"
        "                        mnew = max(mr[t], part[0])\n"
        "                        alpha[t] = exp(mr[t] - mnew)\n"
        "                        mr[t] = mnew\n"
        "                    sync()\n"
        f"                    for t in par(0, {T}) @ THREADS:\n"
        f"                        p[t] = select({ok}, exp(p[t] - mr[t]), 0.0)\n"
        "                        part[t] = p[t]\n"
        "                    sync()\n"
        + tree(T, "+", 5) +
        f"                    for t in par(0, {d}) @ THREADS:\n"
        "                        lr[t] = lr[t] * alpha[t] + part[0]\n"
        "                        o: f32\n"
        "                        o = acc[t] * alpha[t]\n"
        f"                        for r in seq(0, {T}):\n"
        "                            o += p[r] * vs[r, t]\n"
        "                        acc[t] = o\n"
        f"            for t in par(0, {d}) @ THREADS:\n"
        "                out[h, i, t] = acc[t] / lr[t]\n")
    return make_proc("attention", text)


__all__ = ["attention_rows", "attention_reference", "attention_kernel", "TILE", "HEAD_DIMS"]
