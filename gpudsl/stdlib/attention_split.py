"""Split-key attention for decode shapes ("flash-decoding"): the keys of each query row
are split over many warps, each warp computing a partial online softmax of its chunk
of keys, then a combine kernel merges the partials (issue 27).

Why: a decode step has one query row per head, so one block per head (the tiled kernel
of :mod:`.attention`) runs only ``H`` blocks, a few per cent of an H100's 132 SMs.  Here
the work is ``H x M x ceil(N / CH)`` warps of ``CH`` keys each, enough to fill the SMs.

One proc, two kernels (two ``BLOCKS`` nests, launched in order) and three ``GLOBAL``
temporaries allocated by the call:

1. ``attention_split``: blocks ``(h, i, sb)``, ``W`` warps each; warp ``w`` owns the
   keys ``[CH p, CH p + CH)`` of partial ``p = W sb + w``.  Lane ``l`` holds the ``q``
   entries ``E(c, x) = V l + 32 V c + x`` (``V``-wide vector loads, ``C`` chunks; with
   a head dimension not a multiple of 32, ``V = 1`` and the lanes past it hold none).
   Per step of ``U`` keys: the ``U`` key and value rows loaded (``V``-wide, all issued
   before their use), the ``U`` scores as warp sums (``warp_sum``: a shuffle
   butterfly in registers, no SHARED memory), their maximum, then the online update
   (``alpha = exp(m_old - m_new)``, ``l = l alpha + sum p``, ``acc = acc alpha +
   sum p v``).  Every value is warp-uniform after the warp sum, so there is no
   barrier at all: the warps never share memory.  A step whose first key no row
   attends (past the prefix, or above the causal diagonal) is skipped (a condition
   the same in every lane).  The partial ``(m, l, acc)`` goes to ``pm``, ``pl``,
   ``po`` in GLOBAL memory; an empty chunk writes ``(-3e38, 0, 0)``.
2. ``combine``: one block per ``(h, i)``, ``D`` threads; thread ``t`` takes the largest
   partial maximum ``M``, then ``out[t] = sum_p exp(m_p - M) acc_p[t] /
   sum_p exp(m_p - M) l_p``.

``one``: up to ``W x CH`` keys (``assert n <= W CH``), one block per row whose warps'
partials go to SHARED rows, one barrier, and the block's own threads combine them:
one launch, no temporaries (:func:`plan_split` takes it up to 256 keys).

``layout``: ``"hnd"`` reads ``k, v`` as ``[H, N, D]`` (as ``gpudsl.ops.attention``),
``"nhd"`` as ``[N, H, D]`` (a KV cache written one position per row, as the LLaMA
example's, read in place by the graph's fused attention).

``sliced``: the meaning of the graph's ``SlicedSoftmaxNode`` times a ``mask [n]`` before
the weighted values (:mod:`gpudsl.graph.attention_fusion`): the prefix's normalized
weights times the mask, plus ``mask[j] * score[j] * v[j]`` for the keys past the prefix
(a fourth partial ``pt``, not rescaled), which are read only where the mask is not
zero; a prefix of 0 is allowed (no normalized part).

Like the tiled kernel it reassociates the sums, so it is its own proc: check() proves
both kernels race-free, collective-uniform and in bounds for all sizes, and the tests
compare them with the float64 reference."""
from __future__ import annotations

from ..proc import Proc
from ..schedule import vectorize
from .common import make_proc
from .halves import halve_text
from .derivation_cache import derivation

NEG = "-3.0e38"
WARP = 32
SPLIT_HEAD_DIMS = (32, 48, 64, 96, 128)
LAYOUTS = ("hnd", "nhd")
SMS = 132  # an H100's SMs: the split aims at WARPS_PER_SM warps on each
WARPS_PER_SM = 32
STEP = 8  # keys per step of a warp (U): their 2 U row loads are in flight together
MIN_CHUNK = 32  # keys per warp at least


def lanes(d: int) -> tuple[int, int, bool]:
    """``(V, C, guarded)``: each lane holds ``C`` chunks of ``V`` consecutive entries
    (``V`` = 4, 2 or 1, the widest with ``d`` a multiple of ``32 V``); ``guarded`` when
    ``d`` is not a multiple of 32 (the last chunk's lanes past ``d`` hold nothing)."""
    for vec in (4, 2, 1):
        if d % (WARP * vec) == 0:
            return vec, d // (WARP * vec), False
    return 1, -(-d // WARP), True


def _sig(d: int, layout: str, sliced: bool = False, dt: str = "f32") -> str:
    kv = f"{dt}[hh, n, {d}]" if layout == "hnd" else f"{dt}[n, hh, {d}]"
    mask = f"mask: {dt}[n], " if sliced else ""
    return (f"(hh: size, m: size, n: size, q: f32[hh, m, {d}], k: {kv}, v: {kv}, "
            f"prefix: i64[1], {mask}scale: f32, out: f32[hh, m, {d}], err: i32[1]):\n")


def _bad_prefix(causal: bool, sliced: bool = False) -> str:
    low = "m" if causal else "0" if sliced else "1"
    return f"prefix[0] < {low} or prefix[0] > n"


def _valid(j: str, causal: bool) -> str:
    c = f"{j} < prefix[0]"
    return c + (f" and {j} <= i + prefix[0] - m" if causal else "")


def _block(lines: str, indent: int) -> str:
    pad = "    " * indent
    return "".join(f"{pad}{ln}\n" if ln else "\n" for ln in lines.strip("\n").split("\n"))


def _entry(vec: int) -> str:
    return f"{vec} * l + {WARP * vec} * c"


def _lane_loop(d: int, body: str, name: str) -> str:
    """``for c: [if entry < d:] for <name> in seq(0, V): body`` over the lane's entries
    (``{e}`` in ``body``: the entry index)."""
    vec, chunks, guarded = lanes(d)
    e = f"{_entry(vec)} + {name}"
    inner = f"for {name} in seq(0, {vec}):\n" + _block(body.format(e=e), 1)
    if guarded:
        inner = f"if {_entry(vec)} < {d}:\n" + _block(inner, 1)
    return f"for c in seq(0, {chunks}):\n" + _block(inner, 1)


def split_text(d: int = 128, causal: bool = False, chunk: int = 32, warps: int = 4,
               layout: str = "hnd", step: int = STEP, sliced: bool = False,
               one: bool = False, dt: str = "f32") -> str:
    """The source of :func:`split_kernel`'s proc before its copies are vectorized.
    ``dt`` f16/bf16: ``q, k, v, out`` of that type; the key and value rows are copied
    as halves into registers (so that the copies stay vector copies) and widened to
    f32 where they are used, ``q`` widened as it is read, the output rounded once."""
    if d not in SPLIT_HEAD_DIMS:
        raise ValueError(f"head dimension {d} is not one of {SPLIT_HEAD_DIMS}")
    if layout not in LAYOUTS:
        raise ValueError(f"layout must be one of {LAYOUTS}, not {layout!r}")
    if chunk < step or chunk % step:
        raise ValueError(f"chunk {chunk} must be a positive multiple of the step {step}")
    if sliced and causal:
        raise ValueError("the sliced-softmax meaning has no causal mask")
    if one and d > WARP * warps:
        raise ValueError(f"one block of {warps} warps cannot combine {d} entries")
    # (one: the combine runs on the same (w, l) threads, so that the block's warps stay
    # whole for the warp sums: a thread loop of d = 48 would make the block 48 wide)
    vec, chunks, _ = lanes(d)
    W, CH, U = warps, chunk, step
    kw = CH * W
    nparts = str(W) if one else f"{W} * ((n + {kw - 1}) // {kw})"
    row = (lambda j: f"h, {j}") if layout == "hnd" else (lambda j: f"{j}, h")
    name = (f"attention_split_d{d}" + ("_causal" if causal else "") +
            ("_nhd" if layout == "nhd" else "") + ("_sliced" if sliced else "") +
            f"_c{CH}" + (f"_one{W}" if one else "") + ("" if dt == "f32" else f"_{dt}"))
    jb = f"{CH} * ({W} * sb + w) + {U} * it"
    key = f"{jb} + u"
    ok = _valid(key, causal)
    load = (_lane_loop(d, f"kr[u, c, xk] = k[{row(key)}, {{e}}]", "xk")
            + _lane_loop(d, f"vr[u, c, xv] = v[{row(key)}, {{e}}]", "xv"))
    zero = _lane_loop(d, "kr[u, c, xk0] = 0.0\nvr[u, c, xk0] = 0.0", "xk0")
    if sliced:  # a key past the prefix is read only where its mask is not zero
        load = (f"mk[u] = mask[{key}]\nif {key} < prefix[0] or mk[u] != 0.0:\n"
                + _block(load, 1) + "else:\n" + _block(zero, 1))
        zero = "mk[u] = 0.0\n" + zero
    loads = f"if {key} < n:\n" + _block(load, 1) + "else:\n" + _block(zero, 1)
    dot = _lane_loop(d, "dot += qr[c, x] * kr[u, c, x]", "x")
    acc_update = _lane_loop(d, "acc[c, x] = acc[c, x] * alpha", "x")
    if sliced:  # the prefix's weights times the mask; past it the mask times the score
        acc_add = _lane_loop(d, "acc[c, x] += pu * mk[u] * vr[u, c, x]\n"
                             "tacc[c, x] += tu * vr[u, c, x]", "x")
        tail = f"tu: f32\ntu = select({ok}, 0.0, mk[u] * s[u])\n"
        score = f"sv: f32\nsv = select({ok}, s[u], {NEG})\ntmax = max(tmax, sv)\n"
    else:
        acc_add = _lane_loop(d, "acc[c, x] += pu * vr[u, c, x]", "x")
        tail = ""
        score = f"s[u] = select({ok}, s[u], {NEG})\ntmax = max(tmax, s[u])\n"
    skip = "True" if sliced else _valid(jb, causal)
    part = f"{W} * sb + w"
    # the partials: GLOBAL temporaries of all blocks, or (one) the block's SHARED rows
    wr = (lambda a, *e: f"{a}s[{', '.join(('w',) + e)}]") if one else \
        (lambda a, *e: f"{a}[{', '.join(('h', 'i', part) + e)}]")
    rd = (lambda a, *e: f"{a}s[{', '.join(('p',) + e)}]") if one else \
        (lambda a, *e: f"{a}[{', '.join(('h', 'i', 'p') + e)}]")
    warp_body = f"""
if h == 0 and i == 0 and sb == 0 and w == 0 and l == 0 and ({_bad_prefix(causal, sliced)}):
    err[0] = 1
qr: f32[{chunks}, {vec}]
acc: f32[{chunks}, {vec}]
{_lane_loop(d, "qr[c, x] = scale * q[h, i, {e}]", "x")}
{_lane_loop(d, "acc[c, x] = 0.0", "x")}
""" + (f"""tacc: f32[{chunks}, {vec}]
{_lane_loop(d, "tacc[c, x] = 0.0", "x")}
""" if sliced else "") + f"""mr: f32
mr = {NEG}
lr: f32
lr = 0.0
for it in seq(0, {CH // U}):
    if {skip}:
        kr: f32[{U}, {chunks}, {vec}]
        vr: f32[{U}, {chunks}, {vec}]
""" + ("        mk: f32[{U}]\n".format(U=U) if sliced else "") + f"""        for u in seq(0, {U}, unroll=True):
{_block(loads, 3)}
        s: f32[{U}]
        tmax: f32
        tmax = {NEG}
        for u in seq(0, {U}, unroll=True):
            dot: f32
            dot = 0.0
{_block(dot, 3)}
            s[u] = warp_sum(dot)
{_block(score, 3)}
        mnew: f32
        mnew = max(mr, tmax)
        alpha: f32
        alpha = exp(mr - mnew)
        lr = lr * alpha
{_block(acc_update, 2)}
        for u in seq(0, {U}, unroll=True):
            pu: f32
            pu = select({ok}, exp(s[u] - mnew), 0.0)
            lr += pu
{_block(tail, 3)}
{_block(acc_add, 3)}
        mr = mnew
if l == 0:
    {wr("pm")} = mr
    {wr("pl")} = lr
{_lane_loop(d, wr("po", "{e}") + " = acc[c, xo]", "xo")}
""" + (_lane_loop(d, wr("pt", "{e}") + " = tacc[c, xt]", "xt") if sliced else "")
    te = f"{WARP} * w + l" if one else "t"  # the output entry of the combining thread
    combine = f"""
mx: f32
mx = {NEG}
for p in seq(0, {nparts}):
    mx = max(mx, {rd("pm")})
tot: f32
tot = 0.0
o: f32
o = 0.0
""" + ("ot: f32\not = 0.0\n" if sliced else "") + f"""for p in seq(0, {nparts}):
    wp: f32
    wp = exp({rd("pm")} - mx)
    tot += wp * {rd("pl")}
    o += wp * {rd("po", te)}
""" + (f"    ot += {rd('pt', te)}\n"
       f"out[h, i, {te}] = select(tot > 0.0, o / tot, 0.0) + ot\n" if sliced else
       f"out[h, i, {te}] = o / tot\n")
    warp_loops = (f"for w in par(0, {W}) @ THREADS:\n"
                  f"    for l in par(0, {WARP}) @ THREADS:\n" + _block(warp_body, 2))
    if one:  # one block per row: the partials in SHARED, one barrier, the combine
        shared = "".join(f"{a}s: f32[{W}{', ' + str(d) if a in ('po', 'pt') else ''}] @ "
                         "SHARED\n" for a in ("pm", "pl", "po") + (("pt",) if sliced else ()))
        return _halve(
            f"def {name}" + _sig(d, layout, sliced, dt) +
            f"    assert n <= {kw}\n"
            "    for h in par(0, hh) @ BLOCKS:\n"
            "        for i in par(0, m) @ BLOCKS:\n"
            "            for sb in par(0, 1) @ BLOCKS:\n"
            + _block(shared + warp_loops + "sync()\n" +
                     f"for w in par(0, {W}) @ THREADS:\n"
                     f"    for l in par(0, {WARP}) @ THREADS:\n"
                     f"        if {te} < {d}:\n" + _block(combine, 3), 4), dt)
    temps = "".join(f"{a}: f32[hh, m, {nparts}{', ' + str(d) if a in ('po', 'pt') else ''}]\n"
                    for a in ("pm", "pl", "po") + (("pt",) if sliced else ()))
    text = (
        f"def {name}" + _sig(d, layout, sliced, dt) + _block(temps, 1) +
        f"    for h in par(0, hh{_bounds(dt)}) @ BLOCKS:\n"
        "        for i in par(0, m) @ BLOCKS:\n"
        f"            for sb in par(0, (n + {kw - 1}) // {kw}) @ BLOCKS:\n"
        + _block(warp_loops, 4) +
        "    for h in par(0, hh) @ BLOCKS:\n"
        "        for i in par(0, m) @ BLOCKS:\n"
        f"            for t in par(0, {d}) @ THREADS:\n"
        + _block(combine, 4))
    return _halve(text, dt)


HALF_BLOCKS_PER_SM = 5  # the split kernel on halves: at most 102 registers (see _bounds)


def _bounds(dt: str) -> str:
    """The split kernel's ``blocks_per_sm`` hint on halves: without it ptxas (CUDA
    12, sm_90) held the f16 d128 causal kernel to 72 registers and spilled two values
    outside the key loop; at most ``65536 / (128 x 5)`` = 102 registers it uses 77-91
    and spills nothing (f32 kernels: no hint, 64-96 registers without spills)."""
    return "" if dt == "f32" else f", blocks_per_sm={HALF_BLOCKS_PER_SM}"


def _halve(text: str, dt: str) -> str:
    """``q``, ``mask`` and the key/value registers ``kr``, ``vr`` (declared ``dt``)
    widened where read, ``out`` rounded once (``k``, ``v`` and ``mask`` are declared
    ``dt`` by :func:`_sig`)."""
    return halve_text(text, dt, ("q", "kr", "vr", "mask"), ("out",))


@derivation
def split_kernel(d: int = 128, causal: bool = False, chunk: int = 32, warps: int = 4,
                 layout: str = "hnd", step: int = STEP, sliced: bool = False,
                 one: bool = False, dt: str = "f32") -> Proc:
    """The split-key proc (see the module's text): ``chunk`` keys per warp (a multiple
    of ``step``), ``warps`` warps per block; the key, value and partial copies of
    ``V`` entries made ``V``-wide vector accesses (``vectorize``)."""
    vec = lanes(d)[0]
    p = make_proc("attention", split_text(d, causal, chunk, warps, layout, step, sliced,
                                          one, dt))
    for loop in ("xk", "xv", "xo") + (("xt",) if sliced else ()):
        if vec > 1:
            for _ in range(len(p.find_loop(loop, many=True))):
                p = vectorize(p, loop, vec)
    return p


ONE_WARPS = 8  # warps of the one-block kernel: up to ONE_WARPS * MIN_CHUNK keys


def plan_split(d: int, causal: bool = False, heads: int | None = None, m: int = 1,
               keys: int | None = None, layout: str = "hnd", sliced: bool = False,
               dt: str = "f32") -> Proc:
    """The split-key proc for the shape: up to ``ONE_WARPS * MIN_CHUNK`` keys one block
    per row (``one``: its warps' partials combined in SHARED, one launch); else
    :func:`plan_chunk` keys per warp (:data:`MIN_CHUNK` when the shape is not known)."""
    if keys is not None and keys <= ONE_WARPS * MIN_CHUNK:
        return split_kernel(d, causal, MIN_CHUNK, ONE_WARPS, layout, sliced=sliced,
                            one=True, dt=dt)
    chunk = MIN_CHUNK if heads is None or keys is None else plan_chunk(heads, m, keys)
    return split_kernel(d, causal, chunk, layout=layout, sliced=sliced, dt=dt)


def plan_chunk(heads: int, m: int, n: int) -> int:
    """Keys per warp: about ``SMS x WARPS_PER_SM`` warps in all, at least
    :data:`MIN_CHUNK` keys each, a multiple of :data:`STEP`."""
    want = -(-heads * m * n // (SMS * WARPS_PER_SM))
    return max(MIN_CHUNK, -(-want // STEP) * STEP)


__all__ = ["split_kernel", "split_text", "plan_split", "ONE_WARPS", "plan_chunk", "lanes", "SPLIT_HEAD_DIMS", "LAYOUTS"]
