"""``make_tma``: a thread's element copies of a box become TMA loads (docs/hopper.md,
"TMA loads").

A ``tma_load`` means the copy of its box (:func:`gpudsl.ir.tma_meaning.elements`), landing with
the phase that the issuing thread's next arrive on its barrier completes.  A one-thread
loop whose body is a nest of seq loops around ``dst[...] = src[...]`` (SHARED from a
GLOBAL array) copies boxes when its indices are linear in the loops: a loop that moves
exactly one index of each side by 1 runs along a range of the box (a *box* loop), the
others (*selector* loops, e.g. the two 8-column halves of a wgmma tile) pick which box.
The primitive keeps the selector loops, in their order, around one ``tma_load`` per box,
on the barrier of the thread's next ``arrive`` after the loop.  Proved: every copy
reads inside its array (a TMA box would read zeros past the edge, where the plain copy
had no meaning) and no two iterations write one element (so the order of the copies
does not matter); then the result is checked like every rewrite of a proc with TMA
(check()'s obligations: aligned, in flight until the phase completes, nothing read or
written too soon).
"""
from __future__ import annotations

import z3

from ..ir.nodes import Arrive, Assign, Const, For, If, Interval, Point, Read, TmaLoad, WindowArg
from ..ir.tma_meaning import ELEM_TYPES, dst_problem, pitch_rule, src_problem
from ..ir.types import THREADS
from ..ir.visitor import substitute
from .cursors import Into, block_of
from .edits import replace
from .legality import prove
from .primitive import LOOP, fail, primitive
from .simplify import const_seq_nest, const_value, linear_form, normalize


def _nest(L: For):
    """``(loops, copy, cond)``: the perfect nest of seq loops in ``L``, its one copy and
    the copy's guard (None: unguarded): ``if cond: dst[...] = src[...]`` ``else:
    dst[...] = 0`` (``stage_mem(..., zeros=True)``) is a copy that reads zeros past the
    array's edge, as a TMA box does."""
    loops, body = const_seq_nest(L)
    s = body[0] if len(body) == 1 else None
    cond = None
    if isinstance(s, If) and len(s.body) == 1 and len(s.orelse) == 1:
        copy, zero = s.body[0], s.orelse[0]
        if isinstance(copy, Assign) and isinstance(zero, Assign) and \
                zero.name == copy.name and zero.idx == copy.idx and \
                isinstance(zero.rhs, Const) and zero.rhs.val == 0:
            s, cond = copy, s.cond
    if not (isinstance(s, Assign) and isinstance(s.rhs, Read) and s.idx and s.rhs.idx):
        raise fail(f"the body of thread loop {L.iter} is not a nest of seq loops (from 0 to "
                   "constants) around one copy `dst[...] = src[...]` (or `if inside: dst[...] "
                   "= src[...]` `else: dst[...] = 0`)", L.loc)
    return loops, s, cond


def _sides(p, addr, s: Assign):
    """The copy's two arrays checked: a SHARED tile from a GLOBAL array, one type a
    tensor map holds; returns the source's shape."""
    from .patterns import string_scope

    syms = {}
    for f in string_scope(p.ir, addr).frames:
        syms.update({n: sym for n, sym in f.items() if sym.kind == "array"})
    d, r = syms.get(s.name), syms.get(s.rhs.name)
    if d is None or r is None or not d.mem.async_destination or not r.mem.async_source:
        raise fail(f"the copy `{s.name}[...] = {s.rhs.name}[...]` is not from a GLOBAL array "
                   "to a SHARED one", s.loc)
    if d.ty != r.ty or r.ty.name not in ELEM_TYPES:
        raise fail(f"the copy converts or moves {r.ty.name}; a TMA box copies "
                   f"{', '.join(ELEM_TYPES)} unchanged", s.loc)
    return tuple(r.shape), tuple(d.shape)


def _forms(idx, names, ranges, loc):
    out = []
    for e in idx:
        f = linear_form(e, names, ranges)
        if f is None:
            raise fail(f"the index `{_show(e)}` is not linear in the copy's loops", loc,
                       "divide the loops so that each index is a sum of loop variables "
                       "(divide_loop, simplify)")
        out.append(f)
    return out


def _show(e):
    from ..ir.printer import print_expr

    return print_expr(e)


def _classify(loops, dst, src):
    """``(box, selectors)``: the box loops, each ``(loop, dst dim, src dim)``, and the
    selector loops."""
    box, sel = [], []
    for f in loops:
        dd = [k for k, (c, _) in enumerate(dst) if c.get(f.iter)]
        sd = [k for k, (c, _) in enumerate(src) if c.get(f.iter)]
        if len(dd) == 1 and len(sd) == 1 and dst[dd[0]][0][f.iter] == 1 and \
                src[sd[0]][0][f.iter] == 1:
            box.append((f, dd[0], sd[0]))
        else:
            sel.append(f)
    return box, sel


def _windows(s: Assign, box, dst, src, loc):
    """The box's two windows: a range where a box loop runs (from the index without
    it), a point elsewhere."""
    def window(name, forms, dim_of, ty):
        idx = []
        for k, (coef, rest) in enumerate(forms):
            lo = _plus(rest, coef, skip=dim_of.get(k))
            if k in dim_of:
                ext = const_value(dim_of[k].hi)
                idx.append(Interval(lo, normalize(_add(lo, Const(ext)))))
            else:
                idx.append(Point(lo))
        return WindowArg(name, tuple(idx), ty, loc)

    by_dst = {}
    by_src = {}
    for f, dk, sk in box:
        if dk in by_dst or sk in by_src:
            raise fail("two loops run along one dimension of the copy", loc)
        by_dst[dk], by_src[sk] = f, f
    if [f.iter for _, f in sorted(by_dst.items())] != [f.iter for _, f in sorted(by_src.items())]:
        raise fail("the box's ranges run in another order in the tile than in the array: a "
                   "TMA box lands in the array's order", loc, "rearrange_dim the tile")
    return (window(s.name, dst, by_dst, s.rhs.ty), window(s.rhs.name, src, by_src, s.rhs.ty))


def _add(a, b):
    from ..ir.nodes import BinOp
    from ..ir.types import INDEX

    return BinOp("+", a, b, INDEX)


def _plus(rest, coef, skip):
    """``rest`` plus the selector terms of ``coef`` (the box loop ``skip`` left out)."""
    from ..ir.nodes import BinOp, Var
    from ..ir.types import INDEX

    out = rest
    for name, c in coef.items():
        if skip is not None and name == skip.iter:
            continue
        out = _add(out, BinOp("*", Const(c), Var(name, INDEX), INDEX))
    return normalize(out)


def box_windows(L: For, lo: int, loops, s: Assign):
    """``(box loops, selector loops, dst window, src window)`` of the one-thread loop
    ``L`` (thread ``lo``) around the nest ``loops`` of the copy ``s`` (for loads and
    stores alike)."""
    names = {f.iter for f in loops}
    ranges = {f.iter: (0, const_value(f.hi) - 1) for f in loops}
    ranges[L.iter] = (lo, lo)
    one = {L.iter: Const(lo)}  # the one thread's index, in the boxes
    dst = _forms(tuple(normalize(substitute(e, one)) for e in s.idx), names, ranges, s.loc)
    src = _forms(tuple(normalize(substitute(e, one)) for e in s.rhs.idx), names, ranges,
                 s.loc)
    box, sel = _classify(loops, dst, src)
    if not box:
        raise fail("no loop runs along the copy's indices: nothing to make a box of", s.loc)
    return (box, sel) + _windows(s, box, dst, src, s.loc)


def _next_arrive(p, addr, thread: int, loc):
    """``(name, index)`` of the first arrive after the statement at ``addr`` in its block
    whose threads include ``thread``."""
    from .patterns import scope_at

    blk = block_of(p.ir, addr[:-1])
    for st in blk[addr[-1] + 1:]:
        if isinstance(st, Arrive):
            lo, hi = const_value(st.lo), const_value(st.hi)
            if lo is not None and hi is not None and lo <= thread < hi:
                if st.name not in scope_at(p.ir, addr):
                    raise fail(f"the barrier '{st.name}' the thread arrives on next is "
                               "allocated after the loop: the copy could not name it", loc,
                               "allocate the barrier before the copies")
                return st.name, st.index
    raise fail(f"thread {thread} arrives on no barrier after the loop: a TMA load completes "
               "on the barrier its thread arrives on next", loc,
               "make the copies after warp_specialize, before the producers' arrive")


def prove_box_copies(p, addr, L: For, loops, s: Assign, shape, cond=None, store=False):
    """The proofs of a copy nest a box replaces (loads and stores alike): every copy's
    global side (the source of a load, the destination of a store: ``store``) lies
    inside its array, or, with a guard ``cond``, the guard holds exactly where it does
    (a load's box reads zeros elsewhere, where the copy writes 0; a store's box writes
    nothing outside the array, where the guarded copy writes nothing); no two
    iterations write one element (the order of the copies does not matter)."""
    glob = s.idx if store else s.rhs.idx
    rule = pitch_rule(s.name if store else s.rhs.name, s.rhs.ty, shape)
    if rule is not None:   # the rule check() applies to the box (tma_obligations)
        prove(p.ir, addr, lambda sc, env: sc.int(rule.extent, env) % rule.per == 0,
              rule.holds(), s.loc, rule.hint())

    def inside(sc, env):
        inst = sc.instance([L, *loops], [], "_c", env)
        ok = z3.And(*[z3.And(sc.int(e, inst.env) >= 0, sc.int(e, inst.env) < sc.int(n, inst.env))
                      for e, n in zip(glob, shape)])
        if cond is not None:
            return z3.Implies(z3.And(*inst.facts), sc.cond(cond, inst.env) == ok)
        return z3.Implies(z3.And(*inst.facts), ok)

    def once(sc, env):
        a = sc.instance([L, *loops], [], "_a", env)
        b = sc.instance([L, *loops], [], "_b", env)
        same = [sc.int(e, a.env) == sc.int(e, b.env) for e in s.idx]
        differ = z3.Or(*[a.env[f.iter] != b.env[f.iter] for f in loops]) if loops else \
            z3.BoolVal(False)
        return z3.Implies(z3.And(*a.facts, *b.facts, differ), z3.Not(z3.And(*same)))

    verb, edge = ("writes", "writes nothing") if store else ("reads", "reads zeros")
    fix = ("stage the tile's window with stage_mem: a window past the array's edge is "
           "copied out under its bounds") if store else "stage the tile with stage_mem(..., zeros=True)"
    if cond is None:
        prove(p.ir, addr, inside, f"every copy {verb} inside its array (a TMA box {edge} "
              "past its edge)", s.loc, f"copy only what lies inside, or {fix}")
    else:
        prove(p.ir, addr, inside, f"the copy's guard holds exactly where it {verb} inside "
              f"its array (a TMA box {edge} elsewhere)", s.loc,
              f"guard the copy by its bounds: {fix}")
    prove(p.ir, addr, once, "no two copies write one element", s.loc)


@primitive("make_tma", loop=LOOP)
def make_tma(p, loop):
    """Turn a one-thread loop's element copies from a GLOBAL array into a SHARED tile
    into TMA loads (``tma_load``, docs/hopper.md), one per box, on the split barrier the
    thread arrives on next (a barrier ring's element included).  The loop's body is a
    nest of seq loops (constant extents, from 0) around one ``dst[...] = src[...]``
    whose indices are linear in the loops: a loop moving one index of each side by 1
    runs along the box; the other loops stay, around the ``tma_load``, and pick the box.

    The copy may be guarded by its bounds with 0 written elsewhere (``if inside:
    dst[...] = src[...]`` ``else: dst[...] = 0``, from ``stage_mem(..., zeros=True)``):
    that is what the box does at the array's edge.

    Legality: the thread's next arrive after the loop (in its block) names the barrier;
    every copy reads inside its array (a guarded copy: its guard holds exactly there)
    and no two write one element (proved); the boxes
    are boxes a tensor map describes (ranges in the array's order, at most 5 of at most
    256 elements, 16-byte rows) into contiguous tiles; the array's rows lie a multiple of
    16 bytes apart (proved: check()'s rule, ``pitch_rule``); the result is checked like every
    rewrite of a proc with TMA loads (check()'s obligations for sm_90a: aligned, nothing
    read, written or refilled before the copy lands).

    Example: ``make_tma(p, "As_r")``
    """
    c = loop
    L: For = c.node()
    lo, hi = const_value(L.lo), const_value(L.hi)
    if L.mapping != THREADS or lo is None or hi != lo + 1:
        raise fail(f"loop {L.iter} is not a thread loop of one thread (a TMA load is issued "
                   "by one thread)", L.loc, "divide the copy's loop so that one thread "
                   "runs it: divide_loop, parallelize_loop on a loop of extent 1")
    loops, s, cond = _nest(L)
    shape, tile = _sides(p, c.addr, s)
    box, sel, dst_w, src_w = box_windows(L, lo, loops, s)
    why = src_problem(src_w, len(shape))
    why = why and f"the box `{_show_w(src_w)}` is not one a tensor map describes: {why}"
    if why is None:
        d = dst_problem(dst_w, tile, [const_value(f.hi) for f, _, _ in
                                      sorted(box, key=lambda x: x[2])])
        why = d and f"the tile `{_show_w(dst_w)}` is not the box's: {d}"
    if why is not None:
        raise fail(why, s.loc)
    prove_box_copies(p, c.addr, L, loops, s, shape, cond)
    name, index = _next_arrive(p, c.addr, lo, L.loc)
    body = (TmaLoad(dst_w, src_w, name, shape, s.loc, index),)
    for f in reversed(sel):
        body = (f.with_(body=body),)
    return replace(p.ir, c.addr, [L.with_(body=body)], keep=[Into((), c.addr)])


def _show_w(w: WindowArg) -> str:
    parts = [_show(i.pt) if isinstance(i, Point) else f"{_show(i.lo)}:{_show(i.hi)}"
             for i in w.idx]
    return f"{w.name}[{', '.join(parts)}]"


__all__ = ["make_tma", "box_windows", "prove_box_copies"]
