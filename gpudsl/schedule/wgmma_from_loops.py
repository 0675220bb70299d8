"""``make_wgmma``: a warpgroup's product loops, written per thread, become one ``wgmma``
(docs/hopper.md, "Warpgroup MMA").

A wgmma means, for each thread of its warpgroup, a nest of plain statements
(:func:`gpudsl.ir.wgmma_meaning.elements`): element ``i`` of the thread's accumulator gets the
16 products of row ``frag_row(lane, i)`` of A and column ``frag_col(lane, i)`` of B
added in order of ``k``.  A thread loop whose body is such a nest, however its loops
are cut and its indices written, may be replaced by the wgmma: the primitive finds the
three windows (the accumulator's range, and the A and B tiles at the warpgroup's first
lane) and proves with Z3 that, for every thread and every iteration, the nest reads
and accumulates exactly the elements the wgmma's meaning names, in the same order.
Loops around that nest (the k16 steps, chained; tiles of the accumulator's leading
indices, each its own wgmma) stay loops around the wgmma.
The wgmma then lands at a ``wgmma_commit(); wgmma_wait(0)`` placed after it in the
thread loop (inside the warpgroup's branch: a commit or wait outside it, where other
warps run too, makes ptxas serialize the wgmmas), so the sequential meaning is the
nest's; check()'s wgmma obligations
(whole converged warpgroups, one descriptor per operand, the layouts, nothing touched
in flight) are asked of the result by the async guard of every primitive.
"""
from __future__ import annotations

import z3

from ..ir.nodes import (Alloc, BinOp, Builtin, Const, For, Interval, Point, Read, Reduce, Var,
                        Wgmma, WgmmaCommit, WgmmaWait, WindowArg)
from ..ir.types import INDEX, THREADS, f32
from ..ir.visitor import free_vars, substitute, walk
from ..ir.wgmma_meaning import (HALF_TYPES, K, M, N_MAX, TF32, WARPGROUP, col_expr, core_of, k_of,
                                 row_expr)
from .cursors import Into
from .edits import replace
from .legality import prove
from .primitive import LOOP, fail, primitive
from .simplify import const_seq_nest, const_value, normalize


def _b(op, a, b):
    return BinOp(op, a, Const(b) if isinstance(b, int) else b, INDEX)


def _nest(L: For):
    """``(loops, reduce)``: the perfect nest of seq loops in ``L`` (constant extents,
    from 0) and the one ``+=`` at its heart."""
    loops, body = const_seq_nest(L)
    if len(body) != 1 or not isinstance(body[0], Reduce) or body[0].op != "+":
        raise fail(f"the body of thread loop {L.iter} is not a nest of seq loops (from 0 to "
                   "constants) around one `acc[...] += f32(a[...]) * f32(b[...])`", L.loc)
    return loops, body[0]


def _factors(red: Reduce):
    """The two reads of ``f32(a[..]) * f32(b[..])`` (halves) or ``tf32(a[..]) *
    tf32(b[..])`` (f32 read as tf32: the tf32 wgmma's meaning)."""
    e = red.rhs
    ok = isinstance(e, BinOp) and e.op == "*" and all(
        isinstance(x, Builtin) and x.name in (f32.name, TF32) and len(x.args) == 1 and
        isinstance(x.args[0], Read) for x in (e.lhs, e.rhs)) and e.lhs.name == e.rhs.name
    if not ok:
        raise fail("the product is not `f32(a[...]) * f32(b[...])` (halves) or "
                   "`tf32(a[...]) * tf32(b[...])` (f32)", red.loc)
    ra, rb = e.lhs.args[0], e.rhs.args[0]
    tf32 = e.lhs.name == TF32
    if ra.ty != rb.ty or (ra.ty.name not in HALF_TYPES and not tf32) or \
            (tf32 and ra.ty != f32):
        raise fail(f"the operands hold {ra.ty.name} and {rb.ty.name}; make_wgmma makes "
                   "wgmmas of f16 or bf16 products (`f32(a[..]) * f32(b[..])`) and of f32 "
                   "read as tf32 (`tf32(a[..]) * tf32(b[..])`): a product of plain f32 "
                   "does not round as the tf32 wgmma reads its operands", red.loc,
                   "write the products as tf32(a[..]) * tf32(b[..]) (docs/hopper.md)")
    return ra, rb


def _flat(loops) -> tuple:
    """The row-major index over ``loops`` (outer first) and their total extent."""
    idx, total = Const(0), 1
    for f in reversed(loops):
        idx = _b("+", idx, _b("*", Const(total), Var(f.iter, INDEX)))
        total *= const_value(f.hi)
    return normalize(idx), total


def _split(loops, red: Reduce):
    """``(f_loops, k_loops)``: the loops the accumulator's index names, the others."""
    named = set().union(*(free_vars(e) for e in red.idx)) if red.idx else set()
    f_loops = [f for f in loops if f.iter in named]
    k_loops = [f for f in loops if f.iter not in named]
    return f_loops, k_loops


def _steps(loops, red: Reduce, L: For, K: int):
    """``(outer, rest)``: the outermost loops, each a wgmma's repeat: the k16 (tf32: k8)
    steps, loops that the accumulator's index does not name whose extents multiply to the
    number of steps (chained on the accumulator), and *tiles*, loops that only its
    leading indices name (a warpgroup's second 64 rows or further columns: another
    accumulator, its wgmmas independent of these); and the loops inside them (one
    wgmma's)."""
    f_loops, k_loops = _split(loops, red)
    tiles = _tile_loops(loops, red)
    total = 1
    for f in k_loops:
        total *= const_value(f.hi)
    if total % K:
        raise fail(f"the loops the accumulator's index does not name make {total} step(s) "
                   f"of k, not a multiple of {K}", L.loc)
    want, got, k = total // K, 1, 0
    while k < len(loops) and (loops[k] in tiles or (got < want and loops[k] in k_loops)):
        if loops[k] in k_loops:
            got *= const_value(loops[k].hi)
        k += 1
    if got != want:
        raise fail(f"{want} wgmmas are needed, one per {K} steps of k: the outermost loops of "
                   f"the nest must be the {want} k16 steps (their extents multiplying to "
                   f"{want}), inside them one wgmma's loops", L.loc,
                   f"divide the k loop by {K} and move the outer part outermost")
    inner = [f for f in loops[k:] if f in tiles]
    if inner:
        raise fail(f"loop {inner[0].iter} names only the accumulator's leading indices (a "
                   "tile of its own: one wgmma each) but stands inside a wgmma's loops",
                   inner[0].loc, f"move loop {inner[0].iter} outside the fragment's loops")
    return loops[:k], loops[k:]


def _tile_loops(loops, red: Reduce) -> list:
    """The loops that the accumulator's leading indices name and its last does not."""
    if not red.idx:
        return []
    lead = set().union(*(free_vars(e) for e in red.idx[:-1]))
    last = free_vars(red.idx[-1])
    return [f for f in loops if f.iter in lead and f.iter not in last]


def _acc_window(red: Reduce, names: set, i_expr, n_half: int) -> WindowArg:
    """The accumulator's window: its last index is ``base + i``, the others name no
    loop of the nest."""
    if not red.idx:
        raise fail(f"the accumulator '{red.name}' is a scalar", red.loc)
    base = normalize(_b("-", red.idx[-1], i_expr))
    for e in (base, *red.idx[:-1]):
        if free_vars(e) & names:
            raise fail(f"the accumulator's index must be `[..., base + i]` with i the "
                       f"row-major index of the loops it names; `{red.name}` is not", red.loc,
                       "merge the fragment loops into one (merge_loops) or order them "
                       "as the fragment: element i = 4 (i // 4) + 2 (i // 2 % 2) + i % 2")
    idx = tuple(Point(e) for e in red.idx[:-1]) + \
        (Interval(base, normalize(_b("+", base, n_half))),)
    return WindowArg(red.name, idx, f32, red.loc)


def _tile_window(r: Read, at_lane0: dict, rows: int, ranges: dict,
                 swizzled: bool, K: int = 16, CORE: int = 8) -> WindowArg:
    """The operand's window: its last indices from their values at the warpgroup's
    first lane, iteration 0: ``[2, rows, 8]`` ranges of a plain tile, ``[rows, 16]`` of
    a swizzled one (docs/hopper.md; of f32, ``[2, rows, 4]`` and ``[rows, 8]``)."""
    ext = (rows, K) if swizzled else (2, rows, CORE)
    if len(r.idx) < len(ext):
        raise fail(f"'{r.name}' is read with {len(r.idx)} index(es); a wgmma operand is a "
                   f"[2, rows, {CORE}] tile (divide_dim, rearrange_dim) or a [rows, {K}] "
                   "window of a swizzled one (set_swizzle)", r.loc)
    base = [normalize(substitute(e, at_lane0), ranges) for e in r.idx]
    n = len(ext)
    idx = tuple(Point(e) for e in base[:-n]) + tuple(
        Interval(b, normalize(_b("+", b, x))) for b, x in zip(base[-n:], ext))
    return WindowArg(r.name, idx, r.ty, r.loc), base


@primitive("make_wgmma", loop=LOOP)
def make_wgmma(p, loop):
    """Turn a warpgroup's product loops into one ``wgmma`` (docs/hopper.md), followed in
    the thread loop by ``wgmma_commit()`` and ``wgmma_wait(0)``.  ``loop`` is a thread loop
    at block level whose body is a nest of seq loops (constant extents, from 0) around
    one ``acc[..., f] += f32(a[.., h, r, j]) * f32(b[.., h, c, j])`` (of swizzled tiles:
    ``f32(a[.., r, k]) * f32(b[.., c, k])``; B read as ``b[.., k, c]`` or
    ``b[.., c // E, k, c % E]``, its last index naming the fragment: an MN-major B,
    ``b_major="mn"``, E the tile's row): the loops that the
    accumulator's index names are the fragment (``N / 2`` elements, its last index
    ``base + i`` with ``i`` their row-major index), the others the 16 steps of ``k``.

    Of f32 tiles the product is ``tf32(a[..]) * tf32(b[..])`` (each operand read as tf32,
    the tf32 wgmma's meaning): K = 8 per wgmma, windows ``[2, rows, 4]`` / ``[rows, 8]``,
    B K-major only; a plain f32 product is refused (it does not round).

    Outer loops of the nest that the accumulator does not name, with ``q`` iterations
    in all, where the others make ``16 q`` steps of ``k``: ``q`` chained wgmmas (their
    windows following those loops), in order.  Outer loops that only the accumulator's
    leading indices name (``acc[t, mi, f]``: a warpgroup's second m64 tile, or another
    column tile) stay loops too, a wgmma per iteration on its own accumulator (the
    256 x 128 GEMM's two tiles per warpgroup); such a loop inside the fragment's loops is
    refused.

    Legality: the thread loop covers whole warpgroups; the nest is, for every thread
    and every iteration, the wgmma's meaning: element ``i`` of the thread's fragment
    gets ``f32(A[m, k]) * f32(B[k, n])`` added for ``m = frag_row(lane, i)``,
    ``n = frag_col(lane, i)`` and ``k`` in order (``A[m, k]`` the A window's element
    ``[k // 8, m, k % 8]``, of a swizzled one ``[m, k]``; ``B[k, n]`` of an MN-major B
    ``[k, n]`` or ``[n // E, k, n % E]``; the windows those at the
    warpgroup's first lane), proved
    with Z3; the result is checked like every rewrite of a proc with wgmmas (check()'s
    wgmma obligations for sm_90a: layouts, whole warpgroups, nothing in flight).

    Example: ``make_wgmma(p, "t #1")``
    """
    c = loop
    L: For = c.node()
    lo, hi = const_value(L.lo), const_value(L.hi)
    if L.mapping != THREADS or lo is None or hi is None or lo % WARPGROUP or hi % WARPGROUP:
        raise fail(f"loop {L.iter} is not a thread loop over whole warpgroups (constant "
                   f"bounds, multiples of {WARPGROUP})", L.loc)
    loops, red = _nest(L)
    ra, rb = _factors(red)
    K, CORE = k_of(ra.ty.bits // 8), core_of(ra.ty.bits // 8)
    steps, loops_in = _steps(loops, red, L, K)
    f_loops, k_loops = _split(loops_in, red)
    i_expr, n_half = _flat(f_loops)
    k_expr, n_k = _flat(k_loops)
    n = 2 * n_half
    if n_k != K or n % 8 or not 8 <= n <= N_MAX:
        raise fail(f"the nest makes {n_half} accumulator element(s) of {n_k} step(s) each; "
                   f"a wgmma is N // 2 elements (N a multiple of 8 up to {N_MAX}) of {K} "
                   "steps", L.loc)
    names = {f.iter for f in loops_in}
    acc = _acc_window(red, names, i_expr, n_half)
    t = Var(L.iter, INDEX)
    at_lane0 = {L.iter: _b("*", _b("//", t, WARPGROUP), WARPGROUP),
                **{f.iter: Const(0) for f in loops_in}}
    ranges = {L.iter: (lo, hi - 1)}
    ranges.update({f.iter: (0, const_value(f.hi) - 1) for f in steps})
    allocs = {x.name: x for x in walk(p.ir.body) if isinstance(x, Alloc)}
    sa = bool(getattr(allocs.get(ra.name), "swizzle", 0))
    sb = bool(getattr(allocs.get(rb.name), "swizzle", 0))
    a_w, a_base = _tile_window(ra, at_lane0, M, ranges, sa, K, CORE)
    lane = _b("%", t, WARPGROUP)
    h, j = _b("//", k_expr, CORE), _b("%", k_expr, CORE)
    row, col = row_expr(lane, i_expr), col_expr(lane, i_expr)
    major = _b_major(rb, f_loops)
    if major == "mn" and ra.ty == f32:
        raise fail("B is read MN-major (its last index names the fragment); the tf32 wgmma "
                   "reads K-major operands only (the hardware has no transposed tf32 form)",
                   rb.loc, "stage B as N x K (bt), its rows along k")
    if major == "mn":
        b_w, b_base, tail = _mn_window(rb, allocs.get(rb.name), at_lane0, n, ranges, col,
                                       k_expr)
        want_b = _offsets(b_base, tail)
    else:
        b_w, b_base = _tile_window(rb, at_lane0, n, ranges, sb, K, CORE)
        want_b = _offsets(b_base, (col, k_expr) if sb else (h, col, j))
    want_a = _offsets(a_base, (row, k_expr) if sa else (h, row, j))
    _prove_meaning(p, c.addr, L, loops, ((ra, want_a), (rb, want_b)))
    body = (Wgmma(acc, a_w, b_w, n, red.loc, major),)
    for f in reversed(steps):
        body = (f.with_(body=body),)
    body += (WgmmaCommit(L.loc), WgmmaWait(0, L.loc))
    return replace(p.ir, c.addr, [L.with_(body=body)], keep=[Into((), c.addr)])


def _b_major(rb: Read, f_loops) -> str:
    """``"mn"`` when B's last index names a fragment loop (its column ``n``: B stored K x N,
    N contiguous), else ``"k"``."""
    named = {f.iter for f in f_loops}
    return "mn" if rb.idx and free_vars(rb.idx[-1]) & named else "k"


def _mn_window(r: Read, alloc, at_lane0: dict, n: int, ranges: dict, col, k_expr):
    """An MN-major B window (docs/hopper.md): ``[16, N]`` when N is the tile's row of E
    elements, else ``[N // E, 16, E]``; with the tail of indices the wgmma's meaning reads
    ``B[k, col]`` at."""
    if alloc is None or not alloc.shape or const_value(alloc.shape[-1]) is None:
        raise fail(f"'{r.name}' is not a SHARED tile of constant rows allocated in the proc",
                   r.loc)
    e = const_value(alloc.shape[-1])
    two = n == e
    ext = (K, e) if two else (n // e if n % e == 0 else 0, K, e)
    if len(r.idx) < len(ext) or 0 in ext:
        raise fail(f"'{r.name}' read as B[k, n] (N contiguous) is an MN-major operand: "
                   f"[16, {e}] or [N // {e}, 16, {e}] with N a multiple of its rows of {e}",
                   r.loc, "give B's tile rows of 8 elements (plain) or of the swizzle's width")
    base = [normalize(substitute(x, at_lane0), ranges) for x in r.idx]
    m = len(ext)
    idx = tuple(Point(x) for x in base[:-m]) + tuple(
        Interval(b, normalize(_b("+", b, x))) for b, x in zip(base[-m:], ext))
    tail = (k_expr, col) if two else (_b("//", col, e), k_expr, _b("%", col, e))
    return WindowArg(r.name, idx, r.ty, r.loc), base, tail


def _offsets(base, tail) -> tuple:
    """``base`` with its last ``len(tail)`` indices moved by ``tail``."""
    n = len(tail)
    return tuple(base[:-n]) + tuple(_b("+", b, x) for b, x in zip(base[-n:], tail))


def _prove_meaning(p, addr, L: For, loops, pairs):
    """Prove that each read of ``pairs`` (read, wanted index) reads the wanted element
    for every thread of ``L`` and every iteration of ``loops``."""
    def goal(sc, env):
        inst = sc.instance([L, *loops], [], "_w", env)
        eqs = [sc.int(got, inst.env) == sc.int(want, inst.env)
               for r, want in pairs for got, want in zip(r.idx, want)]
        return z3.Implies(z3.And(*inst.facts), z3.And(*eqs))

    what = ("the nest reads, for every thread and step, the elements of A and B that the "
            "wgmma's fragment layout gives that thread")
    prove(p.ir, addr, goal, what, L.loc,
          "the rows of A are frag_row(t % 128, i), the columns of B frag_col(t % 128, i), "
          "k the row-major index of the other loops (docs/hopper.md)")


__all__ = ["make_wgmma"]
