"""Grouped-query attention over a contiguous or paged KV cache with a length per
sequence (issue 37): decode and prefill, causal or not, f32 or f16/bf16.

Shapes (``G = H / Hkv`` query heads share one key/value head; head ``h`` reads KV
head ``h // G``, as PyTorch's ``enable_gqa`` and vLLM): the queries are
``q [B, Hkv, G, M, D]`` (a free view of ``[B, H, M, D]``) and the output the same;
the keys and values are either

- contiguous, ``k, v [B, Hkv, N, D]`` (``page = 0``), or
- paged (``page = P``, one of :data:`PAGE_SIZES`), ``k, v [pages, P, Hkv, D]``: key
  ``j`` of sequence ``b`` is row ``j % P`` of page ``table[b, j // P]``
  (``table: i32[B, max_pages]``, as vLLM's block table);

``lens: i32[B]`` is the length ``L_b`` of each sequence (``1 <= L_b <= capacity``,
``M <= L_b`` with ``causal``; the capacity is ``N``, or ``max_pages * P``).  Query row
``i`` is position ``i + L_b - M`` of its sequence: with ``causal`` it attends the keys
``j <= i + L_b - M``, else all ``L_b``.

One proc, two kernels (two ``BLOCKS`` nests launched in order), split-KV
("FlashDecoding") as :mod:`.attention_split`:

1. blocks ``(b, kh, sb)``: the chunk ``[CH sb, CH sb + CH)`` of sequence ``b``'s keys
   for KV head ``kh`` is copied ONCE into SHARED (in the tensors' precision, ``V``
   consecutive entries a lane as one vector copy), through the block table when
   paged, by all ``32 W`` threads, then one barrier; warp ``w`` serves the query rows
   ``(gg, i) = (WG a + w % WG, WI it + w // WG)``, ``a, it = 0, 1, ...``: all ``G``
   heads of the group and all positions read the same staged tile (with ``wk`` key
   warps, warp ``w`` takes part ``w // (WG WI)`` of the chunk's keys and writes its
   own partial).  Per row a warp
   runs the online softmax of :mod:`.attention_split` over the chunk (lane ``l``
   holds the entries ``l + 32 c``, widened to f32 as read; the scores are warp sums;
   a step of 8 keys above the row's causal diagonal is skipped) and writes its
   partial ``(m, l, acc)`` to GLOBAL temporaries.  A chunk past ``L_b`` is skipped by
   a block-uniform ``if`` (it holds the barrier).
2. the combine, one block per ``(b, kh, i)``, ``D`` threads, the group's heads in
   turn: the partials of the chunks whose first key the row attends (each was
   written, and holds at least that
   key), merged as in :mod:`.attention_split`.

Indirect reads and what check() proves: a page number read from ``table`` is data,
so the proof cannot know it is in ``[0, pages)``; the kernel clamps it
(``min(max(table[b, j // P], 0), pages - 1)``), so every read is in bounds for ANY
table contents, and a thread that sees an entry outside ``[0, pages)`` sets the fault
flag (``atomic_max(err[0], 2)``), which the host turns into an error.  A length outside
its bounds sets ``err`` to 1 the same way; the kernel never reads past the capacity
whatever the lengths.  So check() proves both kernels race-free, barrier- and
collective-uniform and in bounds for all sizes and all table and length contents.

Like the other attention kernels it reassociates the sums (the online softmax): it is
its own proc, compared by the tests with :func:`.attention.attention_reference`
(``gqa_reference`` here reduces to it per sequence)."""
from __future__ import annotations

from functools import lru_cache

import numpy as np

from ..proc import Proc
from ..schedule import vectorize
from .attention import attention_reference, biased, capped, check_options, options_suffix
from .attention_split import lanes
from .common import make_proc
from .halves import halve_text
from .halves import load as load_of
from .derivation_cache import derivation

NEG = "-3.0e38"
WARP = 32
STEP = 8  # keys per step of a warp's online softmax
HEAD_DIMS = (32, 48, 64, 96, 128)  # 48: the lanes past it hold nothing (guarded)
PAGE_SIZES = (16, 32, 64, 128, 256)
CHUNK = 32  # keys staged per block (f32: 2 x 32 x 128 x 4 = 32 KiB of SHARED at D = 128)
MAX_WARPS = 8


def _block(lines: str, indent: int) -> str:
    pad = "    " * indent
    return "".join(f"{pad}{ln}\n" if ln else "\n" for ln in lines.strip("\n").split("\n"))


def sig_text(d, page: int, dt: str, idx: str = "i32", softcap: bool = False,
             alibi: bool = False) -> str:
    """The parameters (``cap: f32`` after ``scale`` with ``softcap``, then ``slopes:
    f32[hk, g]`` with ``alibi``: query head ``(kh, gg)``'s ALiBi slope)."""
    if page:
        kv = f"{dt}[pages, {page}, hk, {d}]"
        extra = "pages: size, mp: size, "
        table = f"table: {idx}[bt, mp], "
    else:
        kv = f"{dt}[bt, hk, n, {d}]"
        extra = "n: size, "
        table = ""
    return (f"(bt: size, hk: size, g: size, m: size, {extra}"
            f"q: f32[bt, hk, g, m, {d}], k: {kv}, v: {kv}, {table}lens: {idx}[bt], "
            "scale: f32, " + ("cap: f32, " if softcap else "") +
            ("slopes: f32[hk, g], " if alibi else "") +
            f"out: f32[bt, hk, g, m, {d}], err: i32[1]):\n")


def _cap(page: int) -> str:
    return f"mp * {page}" if page else "n"


def _row(page: int, j: str, e: str) -> str:
    """The index of entry ``e`` of key ``j`` (sequence ``b``, KV head ``kh``)."""
    if page:
        return f"min(max(table[b, ({j}) // {page}], 0), pages - 1), ({j}) % {page}, kh, {e}"
    return f"b, kh, {j}, {e}"


def attended(j: str, causal: bool, i: str, window: int = 0) -> str:
    """Key ``j`` of sequence ``b`` is attended by query row ``i`` (position ``i + L_b -
    M``): below the length; with ``causal`` at most the position; with ``window`` (and
    causal) above the position less the window."""
    c = f"{j} < lens[b]"
    if causal:
        c += f" and {j} <= {i} + lens[b] - m"
    if window:
        c += f" and {j} > {i} + lens[b] - m - {window}"
    return c


def some_attended(first: str, width: int, causal: bool, i: str, window: int = 0) -> str:
    """Some key of ``first .. first + width - 1`` is attended by row ``i``."""
    c = attended(first, causal, i)
    return c + (f" and {first} + {width - 1} > {i} + lens[b] - m - {window}" if window else "")



def combine_text(d: int, nparts: str, live: str, cast=None) -> str:
    """The split-KV combine (the second kernel of :func:`paged_text` and of
    :mod:`.attention_gqa_mma`'s kernel): one block per ``(b, kh, i)``, ``d`` threads,
    the group's heads ``gg`` in turn; the partials ``p < nparts`` for which ``live``
    holds (a key of the part is attended by row ``i``: it was written) merged, the
    largest maximum first.  ``cast``: the output's rounding (``None``: the f32 value,
    left to :func:`.halves.halve_text`)."""
    res = "select(tot > 0.0, o / tot, 0.0)"
    return f"""
for b in par(0, bt) @ BLOCKS:
    for kh in par(0, hk) @ BLOCKS:
        for i in par(0, m) @ BLOCKS:
            for t in par(0, {d}) @ THREADS:
                for gg in seq(0, g):
                    mx: f32
                    mx = {NEG}
                    for p in seq(0, {nparts}):
                        if {live}:
                            mx = max(mx, pm[b, kh, gg, i, p])
                    tot: f32
                    tot = 0.0
                    o: f32
                    o = 0.0
                    for p in seq(0, {nparts}):
                        if {live}:
                            wp: f32
                            wp = exp(pm[b, kh, gg, i, p] - mx)
                            tot += wp * pl[b, kh, gg, i, p]
                            o += wp * po[b, kh, gg, i, p, t]
                    out[b, kh, gg, i, t] = {cast(res) if cast else res}"""


def kernel_name(d, causal, page, dt, chunk, wg, wi, idx="i32", wk=1, window=0,
                softcap=False, alibi=False) -> str:
    return (f"attention_gqa_d{d}" + ("_causal" if causal else "") +
            (f"_paged{page}" if page else "") + options_suffix(window, softcap, alibi) +
            f"_c{chunk}_w{wg}x{wi}" +
            (f"x{wk}" if wk > 1 else "") +
            ("" if dt == "f32" else f"_{dt}") + ("" if idx == "i32" else f"_{idx}"))


def paged_text(d: int = 64, causal: bool = False, page: int = 0, dt: str = "f32",
               chunk: int = CHUNK, wg: int = 1, wi: int = 1, idx: str = "i32",
               wk: int = 1, window: int = 0, softcap: bool = False,
               alibi: bool = False) -> str:
    """The source of :func:`paged_kernel` (see the module's text): ``wg x wi x wk``
    warps per block (``wg`` over the group's heads, ``wi`` over positions, ``wk`` over
    the chunk's keys: warp ``w``'s key part is ``w // (wg wi)``, a partial of its own),
    ``chunk`` keys staged per block; ``idx``: the type of ``table`` and ``lens``
    (``"i32"``, or ``"i64"``: the graph's integers and the one-sequence ``prefix``
    tensor); ``window`` (static, with ``causal``) and ``softcap`` (the run-time argument
    ``cap``) as :func:`attended` and :func:`capped` say: chunks and steps no row
    attends (before the window) are skipped; ``alibi``: the run-time ``slopes`` as
    :func:`.attention.biased` (the row's position ``i + L_b - M``)."""
    check_options(causal, window, softcap)
    if idx not in ("i32", "i64"):
        raise ValueError(f"the table and lengths are i32 or i64, not {idx!r}")
    if d not in HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {HEAD_DIMS}")
    if page and page not in PAGE_SIZES:
        raise ValueError(f"page size {page} is not one of {PAGE_SIZES}")
    W, R = wg * wi * wk, wg * wi
    if W > MAX_WARPS or chunk % W or chunk % (STEP * wk) or chunk < STEP:
        raise ValueError(f"{wg} x {wi} x {wk} warps and a chunk of {chunk} keys: the "
                         f"warps must be at most {MAX_WARPS} and divide the chunk, whose "
                         f"part a key warp takes is a multiple of {STEP}")
    C, CH, U, SC = -(-d // WARP), chunk, STEP, chunk // wk
    cap = _cap(page)
    ns = f"({cap} + {CH - 1}) // {CH}"
    nparts = ns if wk == 1 else f"{wk} * {ns}"
    low = "m" if causal else "1"
    name = kernel_name(d, causal, page, dt, chunk, wg, wi, idx, wk, window, softcap, alibi)
    key = f"{CH} * sb + {W} * kk + w"
    rw = "w" if wk == 1 else f"w % {R}"  # the warp's rows; its key part w // R
    gg, i = f"{wg} * a + w % {wg}", f"{wi} * it + {rw} // {wg}"
    part = "" if wk == 1 else f"{SC} * (w // {R}) + "  # the key part's first row
    slot = "sb" if wk == 1 else f"{wk} * sb + w // {R}"
    # (causal: the last row attends the first L_b keys; the first row's window is lowest)
    live = some_attended(f"{CH} * sb", CH, False, "0", window)
    pg_fault = (f"if l == 0 and (table[b, ({key}) // {page}] < 0 or "
                f"table[b, ({key}) // {page}] >= pages):\n    atomic_max(err[0], 2)\n"
                if page else "")
    vec, cv, _ = lanes(d)  # the staging copies: V consecutive entries a lane
    ent = f"{vec} * l + {WARP * vec} * c"

    def copy(arr, src, x):
        val = f"{src}[" + _row(page, key, f"{ent} + {x}") + "]" if src else "0.0"
        return (f"for c in seq(0, {cv}):\n    for {x} in seq(0, {vec}):\n"
                f"        {arr}[{W} * kk + w, {ent} + {x}] = {val}\n")
    load = f"""
for kk in seq(0, {CH // W}):
    if {key} < lens[b] and {key} < {cap}:
{_block(pg_fault, 2)}{_block(copy("ks", "k", "xk") + copy("vs", "v", "xv"), 2)}    else:
{_block(copy("ks", "", "xz") + copy("vs", "", "xw"), 2)}"""
    kj = f"{CH} * sb + {part}{U} * st + u"
    ok = attended(kj, causal, i, window)
    score = biased(capped("s[u]", softcap), alibi, f"slopes[kh, {gg}]", f"{i} + lens[b] - m",
                   kj)
    step_live = some_attended(f"{CH} * sb + {part}{U} * st", U, causal, i, window)
    rows = f"""
for a in seq(0, (g + {wg - 1}) // {wg}):
  for it in seq(0, (m + {wi - 1}) // {wi}):
    if {gg} < g and {i} < m:
        qr: f32[{C}]
        acc: f32[{C}]
        for c in seq(0, {C}):
            qr[c] = scale * q[b, kh, {gg}, {i}, 32 * c + l]
            acc[c] = 0.0
        mr: f32
        mr = {NEG}
        lr: f32
        lr = 0.0
        for st in seq(0, {SC // U}):
            if {step_live}:
                s: f32[{U}]
                tmax: f32
                tmax = {NEG}
                for u in seq(0, {U}, unroll=True):
                    dot: f32
                    dot = 0.0
                    for c in seq(0, {C}):
                        dot += qr[c] * {load_of(f"ks[{part}{U} * st + u, 32 * c + l]", dt)}
                    s[u] = warp_sum(dot)
                    s[u] = select({ok}, {score}, {NEG})
                    tmax = max(tmax, s[u])
                mnew: f32
                mnew = max(mr, tmax)
                alpha: f32
                alpha = exp(mr - mnew)
                lr = lr * alpha
                for c in seq(0, {C}):
                    acc[c] = acc[c] * alpha
                for u in seq(0, {U}, unroll=True):
                    pu: f32
                    pu = select({ok}, exp(s[u] - mnew), 0.0)
                    lr += pu
                    for c in seq(0, {C}):
                        acc[c] += pu * {load_of(f"vs[{part}{U} * st + u, 32 * c + l]", dt)}
                mr = mnew
        if l == 0:
            pm[b, kh, {gg}, {i}, {slot}] = mr
            pl[b, kh, {gg}, {i}, {slot}] = lr
        for c in seq(0, {C}):
            po[b, kh, {gg}, {i}, {slot}, 32 * c + l] = acc[c]
"""
    fault = (f"if kh == 0 and sb == 0 and w == 0 and l == 0 and "
             f"(lens[b] < {low} or lens[b] > {cap}):\n    atomic_max(err[0], 1)\n")
    threads = f"for w in par(0, {W}) @ THREADS:\n    for l in par(0, {WARP}) @ THREADS:\n"
    combine = combine_text(d, nparts, some_attended(f"{SC} * p", SC, causal, "i", window))
    text = (
        f"def {name}" + sig_text(d, page, dt, idx, softcap, alibi) +
        f"    pm: f32[bt, hk, g, m, {nparts}]\n"
        f"    pl: f32[bt, hk, g, m, {nparts}]\n"
        f"    po: f32[bt, hk, g, m, {nparts}, {d}]\n"
        "    for b in par(0, bt) @ BLOCKS:\n"
        "        for kh in par(0, hk) @ BLOCKS:\n"
        f"            for sb in par(0, {ns}) @ BLOCKS:\n"
        f"                ks: {dt}[{CH}, {d}] @ SHARED\n"
        f"                vs: {dt}[{CH}, {d}] @ SHARED\n"
        + _block(threads + _block(fault, 2), 4) +
        f"                if {live}:\n"
        + _block(threads + _block(load, 2), 5) +
        "                    sync()\n"
        + _block(threads + _block(rows, 2), 5) + _block(combine, 1))
    if d % WARP:
        text = _guard_lanes(text, d)
    # k and v are declared dt by _sig and widened where read (their indices nest
    # brackets, which halve_text's patterns do not take)
    return halve_text(text, dt, ("q",), ("out",))


@lru_cache(maxsize=None)
def paged_rows(causal: bool = False, page: int = 0, dt: str = "f32", window: int = 0,
               softcap: bool = False, alibi: bool = False) -> Proc:
    """The algorithm (plain loops; it defines what :func:`paged_kernel` computes): for
    each sequence, KV head, query head of its group and query row, the scores of the
    attended keys read through the table (clamped as the kernel's), their maximum,
    ``exp(score - max)`` and its sum, each output entry the weighted sum of the values
    divided by the sum.  A length outside its bounds sets ``err`` to 1, a used table
    entry outside the cache to 2.  ``d`` is a size here (any head dimension).
    ``window`` (with ``causal``): only the keys above the row's position less the
    window are attended; ``softcap``: each score ``cap * tanh(score / cap)``; ``alibi``:
    then ``slopes[kh, gg] * |p - j|`` subtracted (``p`` the row's position)."""
    check_options(causal, window, softcap)
    if page and page not in PAGE_SIZES:
        raise ValueError(f"page size {page} is not one of {PAGE_SIZES}")
    cap = _cap(page)
    low = "m" if causal else "1"
    name = "attention_gqa_rows" + ("_causal" if causal else "") + \
        (f"_paged{page}" if page else "") + options_suffix(window, softcap, alibi) + \
        ("" if dt == "f32" else f"_{dt}")
    sig = sig_text("d", page, dt, "i32", softcap, alibi).replace(
        "(bt: size,", "(d: size, bt: size,", 1)
    ok = attended("j", causal, "i", window)
    kj, vj = (load_of(f"{a}[" + _row(page, "j", "e") + "]", dt) for a in ("k", "v"))
    bad_page = (f"if table[b, j // {page}] < 0 or table[b, j // {page}] >= pages:\n"
                "    err[0] = 2\n" if page else "")
    text = (
        f"def {name}" + sig +
        "    for b in seq(0, bt):\n"
        f"        if lens[b] < {low} or lens[b] > {cap}:\n"
        "            err[0] = 1\n"
        "        for kh in seq(0, hk):\n"
        "            for gg in seq(0, g):\n"
        "                for i in seq(0, m):\n"
        + _block(f"""
sc: f32[{cap}]
mx: f32
mx = {NEG}
for j in seq(0, {cap}):
    if {ok}:
{_block(bad_page, 2)}        dot: f32
        dot = 0.0
        for e in seq(0, d):
            dot += q[b, kh, gg, i, e] * {kj}
        sc[j] = {biased(capped("scale * dot", softcap), alibi, "slopes[kh, gg]",
                        "i + lens[b] - m", "j")}
        mx = max(mx, sc[j])
total: f32
total = 0.0
for j in seq(0, {cap}):
    if {ok}:
        sc[j] = exp(sc[j] - mx)
        total += sc[j]
for e in seq(0, d):
    o: f32
    o = 0.0
    for j in seq(0, {cap}):
        if {ok}:
            o += sc[j] * {vj}
    out[b, kh, gg, i, e] = select(total > 0.0, o / total, 0.0)
""", 5))
    return make_proc("attention", halve_text(text, dt, ("q",), ("out",)))


def _guard_lanes(text: str, d: int) -> str:
    """Each lane loop ``for c`` with its body under ``if 32 * c + l < d`` (a head
    dimension not a multiple of 32: the last chunk's lanes past ``d`` hold nothing;
    the warp sums stay outside, with every lane)."""
    out, lines, k = [], text.split("\n"), 0
    while k < len(lines):
        line = lines[k]
        out.append(line)
        k += 1
        if line.strip().startswith("for c in seq(0, "):
            pad = len(line) - len(line.lstrip())
            out.append(" " * (pad + 4) + f"if 32 * c + l < {d}:")
            while k < len(lines) and len(lines[k]) - len(lines[k].lstrip()) > pad \
                    and lines[k].strip():
                out.append("    " + lines[k])
                k += 1
    return "\n".join(out)


@derivation
def paged_kernel(d: int = 64, causal: bool = False, page: int = 0, dt: str = "f32",
                 chunk: int = CHUNK, wg: int = 1, wi: int = 1, idx: str = "i32",
                 wk: int = 1, window: int = 0, softcap: bool = False,
                 alibi: bool = False) -> Proc:
    """The grouped-query, paged or contiguous attention proc (see the module's text):
    the staging copies of ``V`` entries a lane made ``V``-wide vector copies
    (``vectorize``: 128-bit loads of f32 at ``D = 128``)."""
    p = make_proc("attention", paged_text(d, causal, page, dt, chunk, wg, wi, idx, wk,
                                          window, softcap, alibi))
    vec = lanes(d)[0]
    if vec > 1:
        for loop in ("xk", "xv"):  # (the zero fill past the length stays scalar)
            for _ in range(len(p.find_loop(loop, many=True))):
                p = vectorize(p, loop, vec)
    return p


def _pow2_at_most(x: int, cap: int) -> int:
    p = 1
    while p * 2 <= min(x, cap):
        p *= 2
    return p


def plan_gqa(d: int, causal: bool, group: int, m: int, page: int = 0,
             dt: str = "f32", idx: str = "i32", window: int = 0,
             softcap: bool = False, alibi: bool = False) -> Proc:
    """The proc for ``group`` query heads per KV head and ``m`` query rows: warps over
    the group's heads (``wg``, the power of two up to ``group``, at most 8), then over
    the positions up to 4 warps (``wi``), so that one staged chunk serves ``wg x wi``
    rows at once; a block of fewer than 4 such warps (a small group's decode) splits
    the chunk's keys over ``wk`` warps instead (4 in all), each with its own partial.
    (:func:`.attention_gqa_mma.plan_grouped` is the choice with the tensor-core decode
    on CUDA.)"""
    wg = _pow2_at_most(group, MAX_WARPS)
    wi = 1 if m == 1 else max(1, _pow2_at_most(m, max(1, 4 // wg)))
    wk = max(1, 4 // (wg * wi))
    return paged_kernel(d, bool(causal), page, dt, CHUNK, wg, wi, idx, wk, window,
                        bool(softcap), bool(alibi))


def gqa_reference(q, k, v, lens, causal: bool = False, table=None, scale=None,
                  window=None, softcap=None, alibi=None):
    """The meaning in float64 (float32 result): ``q [B, H, M, D]``; ``k, v`` contiguous
    ``[B, Hkv, N, D]`` or (``table``) paged ``[pages, P, Hkv, D]``; sequence ``b`` is
    :func:`.attention.attention_reference` (grouped heads: query head ``h`` against KV
    head ``h // (H / Hkv)``) over its first ``lens[b]`` keys (``window``, ``softcap``
    as there; ``alibi``: the slopes ``[H]``)."""
    q = np.asarray(q)
    k, v = np.asarray(k), np.asarray(v)
    bt = q.shape[0]
    out = np.zeros(q.shape, np.float32)
    for b in range(bt):
        L = int(lens[b])
        if table is None:
            kb, vb = k[b], v[b]
        else:
            p = k.shape[1]
            pages = [int(x) for x in np.asarray(table)[b, :-(-L // p)]]
            kb = np.concatenate([k[x] for x in pages], 0)[:L].transpose(1, 0, 2)
            vb = np.concatenate([v[x] for x in pages], 0)[:L].transpose(1, 0, 2)
        out[b] = attention_reference(q[b], kb, vb, causal, L, scale, window, softcap, alibi)
    return out


__all__ = ["paged_rows", "paged_kernel", "paged_text", "combine_text", "plan_gqa",
           "gqa_reference", "kernel_name",
           "HEAD_DIMS", "PAGE_SIZES", "CHUNK"]
