"""``attention(q, k, v, causal, prefix, scale)``: ``softmax(scale * q k^T) v`` per head
over the first ``prefix`` keys of a KV cache (issue 27; f32, or f16/bf16 tensors read
widened to f32 with the output rounded once: ``dt``, :func:`attention_tolerance`).
``q`` is ``[H, M, D]``, ``k`` and ``v`` are ``[H, N, D]``; ``L = prefix`` keys are used
(``1 <= L <= N``).
With ``causal``, query row ``i`` attends the keys ``j <= i + (L - M)`` (the rows are the
last ``M`` positions of the ``L``: prefill with ``M == L`` is the lower triangle, decode
with ``M == 1`` attends all ``L`` keys), which needs ``M <= L``.  ``prefix`` is read from
a one-element int64 tensor at run time; outside those bounds the kernel writes a fault
flag (one thread) that the host turns into an error, as ``sliced_softmax`` does.

Here: the readable algorithm (plain loops: the scores, their maximum, the exponentials,
their sum, the weighted values; it defines the meaning), the float64 numpy reference, and
the fused kernel (:func:`attention_kernel`): one block per (head, ``rows`` query rows),
``rows x D`` threads, keys in tiles of :data:`TILE` staged in SHARED once for the block, an online softmax (a running
maximum and sum; the accumulator rescaled by ``exp(m_old - m_new)`` per tile) whose tile
maximum and sum are SHARED tree reductions (per row, as :func:`.reduce.tree`).  As with the
other reductions the kernel is its own proc, not derived by primitives: the online
softmax reassociates the sums (see :mod:`.reduce`), so check() proves it race-free,
barrier-uniform and in bounds and the tests compare it with the reference."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..proc import Proc
from .common import make_proc
from .halves import halve_text, unit_roundoff
from .derivation_cache import derivation

TILE = 32  # keys per tile: one warp's lanes in the score phase
NEG = "-3.0e38"  # below every score: the masked keys' score, the running maximum's seed
TILED_HEAD_DIMS = (32, 64, 96, 128)  # D threads per row, D / 32 groups of the dot products
HEAD_DIMS = (32, 48, 64, 96, 128)  # the split-key kernel's (attention_split) take 48 too
SPLIT_MAX_ROWS = 4  # query rows up to which the split-key kernel runs (decode)

_SIG = ("(hh: size, m: size, n: size, {d}q: f32[hh, m, {D}], k: f32[hh, n, {D}], "
        "v: f32[hh, n, {D}], prefix: i64[1], scale: f32, out: f32[hh, m, {D}], "
        "err: i32[1]):\n")


def sig(d: str, D, softcap: bool = False, alibi: bool = False) -> str:
    """:data:`_SIG` with the run-time ``cap: f32`` after ``scale`` when ``softcap``, then
    the ALiBi slopes ``slopes: f32[hh]`` (one a query head) when ``alibi``."""
    text = _SIG.format(d=d, D=D)
    extra = ("cap: f32, " if softcap else "") + ("slopes: f32[hh], " if alibi else "")
    return text.replace("scale: f32, ", "scale: f32, " + extra)


def options_suffix(window: int = 0, softcap: bool = False, alibi: bool = False) -> str:
    """The kernel name's mark of the options."""
    return ((f"_win{window}" if window else "") + ("_softcap" if softcap else "")
            + ("_alibi" if alibi else ""))


def biased(score: str, alibi: bool, slope: str, pos: str, j: str) -> str:
    """The score with the ALiBi bias (``alibi``): ``score - slope * |pos - j|``, ``pos``
    the query row's position and ``j`` the key's (FlashAttention's ``alibi_slopes``: after
    the softcap; with ``causal`` ``pos - j >= 0`` for every attended key)."""
    return f"{score} - {slope} * f32(abs({pos} - ({j})))" if alibi else score


def check_options(causal: bool, window: int = 0, softcap: bool = False) -> None:
    """A sliding window needs ``causal`` (it is ``(p - window, p]`` of the row's position
    ``p``) and is at least 1 (0: none)."""
    if window and not causal:
        raise ValueError("a sliding window needs causal=True")
    if window < 0:
        raise ValueError(f"the window {window} is negative")


def capped(score: str, softcap: bool) -> str:
    """The score soft-capped (``cap * tanh(s / cap)``, ``cap`` the run-time argument)."""
    return f"cap * tanh({score} / cap)" if softcap else score


def _bad_prefix(causal: bool) -> str:
    """The condition of the fault flag: a prefix outside ``[1, n]`` (or below ``m``
    with ``causal``: a row would attend no key)."""
    low = "m" if causal else "1"
    return f"prefix[0] < {low} or prefix[0] > n"


def _valid(j: str, causal: bool, i: str = "i", window: int = 0) -> str:
    """Key ``j`` is attended by query row ``i`` (with ``window``: above the row's
    position ``i + prefix - m`` less the window)."""
    c = f"{j} < prefix[0]"
    c += f" and {j} <= {i} + prefix[0] - m" if causal else ""
    return c + (f" and {j} > {i} + prefix[0] - m - {window}" if window else "")


def some_valid(first: str, width: int, causal: bool, last_row: str, first_row: str,
               window: int = 0) -> str:
    """Some key of ``first .. first + width - 1`` is attended by some row of
    ``first_row .. last_row``."""
    c = _valid(first, causal, last_row)
    return c + (f" and {first} + {width - 1} > {first_row} + prefix[0] - m - {window}"
                if window else "")


def _dt_suffix(dt: str) -> str:
    return "" if dt == "f32" else f"_{dt}"


def halve(text: str, dt: str) -> str:
    """The f32 attention ``text`` on ``dt`` tensors (``q, k, v, out``): each read of
    ``q``, ``k``, ``v`` widened to f32, all arithmetic (scores, the online softmax, the
    weighted sums) in f32, the output rounded to ``dt`` once."""
    return halve_text(text, dt, ("q", "k", "v"), ("out",))


def attention_tolerance(dt: str = "f32") -> tuple[float, float]:
    """``(atol, rtol)`` of the kernels against :func:`attention_reference` (float64 on
    the same inputs), inputs of about unit scale: ``2e-5`` and ``1e-4`` for the f32
    computation, plus one rounding of the f32 result to ``dt`` (``|x - dt(x)| <= u |x|``,
    ``u`` = :func:`.halves.unit_roundoff`, and below the smallest normal an absolute
    ``u`` times it, far under ``atol``)."""
    u = 0.0 if dt == "f32" else unit_roundoff(dt)
    return 2e-5 * (1 + u), 1e-4 + u * (1 + 1e-4)


@lru_cache(maxsize=None)
def attention_rows(causal: bool = False, dt: str = "f32", window: int = 0,
                   softcap: bool = False, alibi: bool = False) -> Proc:
    """The algorithm: for each head and query row, the scores of the attended keys
    (``scale * q . k``), their maximum, ``exp(score - max)`` and its sum, then each
    output entry the weighted sum of the values divided by the sum.  Scores of keys
    not attended are never read.  ``dt`` f16/bf16: q, k, v read widened to f32, the
    output rounded once.  ``window`` (with ``causal``): row ``i`` attends only the keys
    above its position less ``window``; ``softcap``: each score becomes ``cap *
    tanh(score / cap)`` (``cap`` a run-time argument); ``alibi``: then ``slopes[h] * |p -
    j|`` subtracted, ``p = i + prefix - m`` the row's position (:func:`biased`)."""
    check_options(causal, window, softcap)
    name = "attention_rows" + ("_causal" if causal else "") + \
        options_suffix(window, softcap, alibi) + _dt_suffix(dt)
    ok = _valid("j", causal, "i", window)
    score = biased(capped("scale * dot", softcap), alibi, "slopes[h]", "i + prefix[0] - m", "j")
    text = (
        f"def {name}" + sig("d: size, ", "d", softcap, alibi) +
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
        f"                    sc[j] = {score}\n"
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
    return make_proc("attention", halve(text, dt))


def attention_reference(q, k, v, causal: bool = False, prefix: int | None = None,
                        scale: float | None = None, window: int | None = None,
                        softcap: float | None = None, alibi=None) -> np.ndarray:
    """The meaning in float64 numpy (float32 result): ``q [H, M, D]``, ``k, v [Hkv, N,
    D]`` with ``Hkv`` dividing ``H`` (grouped-query heads: query head ``h`` against KV
    head ``h // (H / Hkv)``; ``Hkv == H`` is plain multi-head attention).  ``window``
    (with ``causal``): row ``i`` at position ``p = i + L - M`` attends the keys ``p -
    window < j <= p``; ``softcap``: the scores ``c * tanh(s / c)`` before the softmax;
    ``alibi`` (slopes ``[H]``, one a query head): then ``slopes[h] * |p - j|`` subtracted
    (FlashAttention's ``alibi_slopes``)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    if k.shape[0] != q.shape[0]:
        if q.shape[0] % k.shape[0]:
            raise ValueError(f"{q.shape[0]} query heads are not a multiple of the "
                             f"{k.shape[0]} key/value heads")
        g = q.shape[0] // k.shape[0]
        k, v = np.repeat(k, g, 0), np.repeat(v, g, 0)
    m, n, d = q.shape[1], k.shape[1], q.shape[2]
    L = n if prefix is None else int(np.asarray(prefix).reshape(-1)[0])
    scale = 1.0 / np.sqrt(d) if scale is None else float(scale)
    s = scale * np.einsum("hid,hjd->hij", q, k[:, :L])
    if softcap:
        s = softcap * np.tanh(s / softcap)
    i, j = np.arange(m)[:, None], np.arange(L)[None, :]
    if alibi is not None:
        slopes = np.asarray(alibi, np.float64).reshape(-1, 1, 1)
        s = s - slopes * np.abs(i + (L - m) - j)
    if causal:
        s = np.where(j <= i + (L - m), s, -np.inf)
    if window:
        s = np.where(j > i + (L - m) - window, s, -np.inf)
    s = s - s.max(-1, keepdims=True)
    p = np.exp(s)
    p /= p.sum(-1, keepdims=True)
    return np.einsum("hij,hjd->hid", p, v[:, :L]).astype(np.float32)


ROW_CHOICES = (1, 2, 4, 8, 16, 32)  # query rows per block: each divides the tile
MAX_THREADS = 1024  # rows * d at most
PLAN_THREADS = 512  # rows * d at most in plan_attention's choice


def _threads(rows: int, ext: str, body: str, indent: int) -> str:
    """A thread nest: rows ``r`` (threadIdx.y) times ``t < ext`` (threadIdx.x)."""
    pad = "    " * indent
    inner = "".join(f"{pad}        {line}\n" for line in body.strip("\n").split("\n"))
    return (f"{pad}for r in par(0, {rows}) @ THREADS:\n"
            f"{pad}    for t in par(0, {ext}) @ THREADS:\n" + inner)


def _row_tree(rows: int, combine: str, indent: int) -> str:
    """:func:`.reduce.tree` over ``part[r, 0:32]`` for each row ``r`` at once."""
    pad = "    " * indent
    h = f"({TILE // 2} >> s)"
    rhs = (f"part[r, t] + part[r, t + {h}]" if combine == "+" else
           f"max(part[r, t], part[r, t + {h}])")
    return (f"{pad}for s in seq(0, {(TILE // 2).bit_length()}):\n"
            + _threads(rows, str(TILE // 2), f"if t < {h}:\n    part[r, t] = {rhs}",
                       indent + 1) +
            f"{pad}    sync()\n")


@derivation
def attention_kernel(d: int = 64, causal: bool = False, rows: int = 1,
                     dt: str = "f32", window: int = 0, softcap: bool = False,
                     alibi: bool = False) -> Proc:
    """One block per (head ``h``, ``rows`` query rows ``i = rows * ib + r``), ``rows``
    times ``d`` threads; thread ``(r, t)`` owns output entry ``t`` of its row.  Per tile
    of :data:`TILE` keys starting at ``j0 = 32 jt``:

    1. all threads copy the K and V tiles (coalesced: thread ``t`` reads entry ``t`` of a
       key) into SHARED, once for the block's rows, K's rows padded to ``d + 1`` so that
       the score phase's lanes (one key each) read distinct banks; keys past ``n`` are
       zeros;
    2. thread ``(r, t)`` adds the products of its row's ``q`` and key ``t % 32`` over the
       32 entries of group ``t // 32`` into ``part_dot[r, t // 32, t % 32]``;
    3. threads ``t < 32`` add the groups: the score of key ``j0 + t`` for row ``r``
       (``-3e38`` when not attended), kept in ``p`` and put in the row's tree, whose
       maximum is the tile's;
    4. the running maximum: each thread's ``mr`` becomes ``max(mr, part[r, 0])`` and
       ``alpha = exp(old - new)``; then the barrier before ``part`` is reused (the racy
       twin in the tests lacks it);
    5. ``p = exp(score - max)`` (0 when not attended) into the tree, whose sum is the
       tile's; ``l = l * alpha + sum`` and ``acc = acc * alpha + sum_k p[r, k] v[k, t]``.

    Tiles whose first key no row of the block attends (past the prefix, or above the
    causal diagonal of the block's last row) are skipped by a block-uniform ``if``.  The
    output is ``acc / l`` for the rows below ``m``.  Thread 0 of block (0, 0) reports a
    bad prefix (see :func:`_bad_prefix`).  ``dt`` f16/bf16: ``q``, ``k`` and ``v`` are
    widened to f32 as they are read (the SHARED tiles hold f32), the output entry
    rounded once.  ``window`` and ``softcap`` as :func:`attention_rows`: a tile no row
    of the block attends (before the first row's window) is skipped as well; ``alibi``
    as :func:`attention_rows` (the bias added where the score is made, step 3)."""
    check_options(causal, window, softcap)
    if d not in TILED_HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {TILED_HEAD_DIMS}")
    if rows not in ROW_CHOICES or rows * d > MAX_THREADS:
        raise ValueError(f"rows per block must be one of {ROW_CHOICES} with rows * d <= "
                         f"{MAX_THREADS}, not {rows} (d = {d})")
    T, G, R = TILE, d // TILE, rows
    name = (f"attention_d{d}" + ("_causal" if causal else "") + (f"_r{R}" if R > 1 else "")
            + options_suffix(window, softcap, alibi) + _dt_suffix(dt))
    row = f"{R} * ib + r"
    score = biased(capped("sc", softcap), alibi, "slopes[h]", f"{row} + prefix[0] - m",
                   f"{T} * jt + t")
    ok = _valid(f"{T} * jt + t", causal, row, window)
    first = some_valid(f"{T} * jt", T, causal, f"{R} * ib + {R - 1}", f"{R} * ib", window)
    text = (
        f"def {name}" + sig("", d, softcap, alibi) +
        "    for h in par(0, hh) @ BLOCKS:\n"
        f"        for ib in par(0, (m + {R - 1}) // {R}) @ BLOCKS:\n"
        f"            qs: f32[{R}, {d}] @ SHARED\n"
        f"            ks: f32[{T}, {d + 1}] @ SHARED\n"
        f"            vs: f32[{T}, {d}] @ SHARED\n"
        f"            part_dot: f32[{R}, {G}, {T}] @ SHARED\n"
        f"            stat: f32[{R}, 2] @ SHARED\n"
        f"            p: f32[{R}, {T}] @ SHARED\n"
        f"            mr: f32[{R}, {d}] @ REGISTER\n"
        f"            lr: f32[{R}, {d}] @ REGISTER\n"
        f"            acc: f32[{R}, {d}] @ REGISTER\n"
        + _threads(R, str(d), f"""
if h == 0 and ib == 0 and r == 0 and t == 0 and ({_bad_prefix(causal)}):
    err[0] = 1
if {row} < m:
    qs[r, t] = scale * q[h, {row}, t]
else:
    qs[r, t] = 0.0
mr[r, t] = {NEG}
lr[r, t] = 0.0
acc[r, t] = 0.0""", 3) +
        f"            for jt in seq(0, (n + {T - 1}) // {T}):\n"
        f"                if {first}:\n"
        "                    sync()\n"
        + _threads(R, str(d), f"""
for kk in seq(0, {T // R}):
    if {T} * jt + {R} * kk + r < n:
        ks[{R} * kk + r, t] = k[h, {T} * jt + {R} * kk + r, t]
        vs[{R} * kk + r, t] = v[h, {T} * jt + {R} * kk + r, t]
    else:
        ks[{R} * kk + r, t] = 0.0
        vs[{R} * kk + r, t] = 0.0""", 5) +
        "                    sync()\n"
        + _threads(R, str(d), f"""
dot: f32
dot = 0.0
for e in seq(0, {T}):
    dot += qs[r, {T} * (t // {T}) + e] * ks[t % {T}, {T} * (t // {T}) + e]
part_dot[r, t // {T}, t % {T}] = dot""", 5) +
        "                    sync()\n"
        + _threads(R, str(T), f"""
sc: f32
sc = 0.0
for g in seq(0, {G}):
    sc += part_dot[r, g, t]
sc = select({ok}, {score}, {NEG})
mnew: f32
mnew = max(mr[r, t], warp_max(sc))
pe: f32
pe = select({ok}, exp(sc - mnew), 0.0)
p[r, t] = pe
tsum: f32
tsum = warp_sum(pe)
if t == 0:
    stat[r, 0] = exp(mr[r, t] - mnew)
    stat[r, 1] = tsum
mr[r, t] = mnew""", 5) +
        "                    sync()\n"
        + _threads(R, str(d), f"""
lr[r, t] = lr[r, t] * stat[r, 0] + stat[r, 1]
o: f32
o = acc[r, t] * stat[r, 0]
for kk in seq(0, {T}):
    o += p[r, kk] * vs[kk, t]
acc[r, t] = o""", 5)
        + _threads(R, str(d), f"""
if {row} < m:
    out[h, {row}, t] = acc[r, t] / lr[r, t]""", 3))
    return make_proc("attention", halve(text, dt))


def plan_attention(m: int, d: int, causal: bool = False, heads: int | None = None,
                   keys: int | None = None, layout: str = "hnd", dt: str = "f32",
                   window: int = 0, softcap: bool = False, alibi: bool = False) -> Proc:
    """The kernel for ``heads`` x ``m`` query rows of ``d`` entries against ``keys`` keys.

    Decode shapes (``m <= SPLIT_MAX_ROWS``), head dimensions the tiled kernel does not
    take, and the ``"nhd"`` layout: the split-key kernel
    (:mod:`.attention_split`, :func:`.attention_split.plan_split`: one block per row
    up to 256 keys, else the keys per warp chosen from the shape to fill the SMs; 32
    when the shape is not given).  Else
    the tiled kernel with the power of two covering ``m`` rows per block up to
    ``MAX_THREADS / d`` threads (K and V tiles are read once per block, shared by its
    rows).  ``dt``: the tensors' precision (f32, f16, bf16).  With ``window`` or
    ``softcap`` or ``alibi`` the tiled kernel (any ``m``; the split-key kernel takes
    none of them), a ``ValueError`` where it cannot run (:func:`takes_options`)."""
    from .attention_split import plan_split

    if window or softcap or alibi:
        if not takes_options(d, layout):
            raise ValueError(f"window=, softcap= and alibi_slopes= need a head dimension of "
                             f"{TILED_HEAD_DIMS} and the [H, N, D] layout")
    elif m <= SPLIT_MAX_ROWS or d not in TILED_HEAD_DIMS or layout != "hnd":
        return plan_split(d, causal, heads, m, keys, layout, dt=dt)
    rows = 1
    while rows < m and rows * 2 in ROW_CHOICES and rows * 2 * d <= PLAN_THREADS:
        rows *= 2
    return attention_kernel(d, causal, rows, dt, window, bool(softcap), bool(alibi))


def takes_options(d: int, layout: str = "hnd") -> bool:
    """Whether :func:`attention_kernel` runs ``window=`` / ``softcap=`` for this head
    dimension and layout."""
    return d in TILED_HEAD_DIMS and layout == "hnd"


__all__ = ["attention_rows", "attention_reference", "attention_tolerance", "halve",
           "attention_kernel", "plan_attention", "takes_options", "sig", "some_valid",
           "check_options", "capped", "biased", "options_suffix", "TILE",
           "HEAD_DIMS", "TILED_HEAD_DIMS", "ROW_CHOICES", "SPLIT_MAX_ROWS"]
