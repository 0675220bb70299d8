"""``make_tma_store``: a thread's element copies of a SHARED tile into a box of a GLOBAL
array become bulk tensor stores (docs/hopper.md, "TMA stores"), the other direction of
:mod:`.tma_from_copies`.

A ``tma_store`` means the copy of its box, landing at the ``tma_wait`` that completes its
group; elements of the box outside the array are not written.  A one-thread loop whose
body is a nest of seq loops around ``dst[...] = src[...]`` (a GLOBAL array from a SHARED
tile), its indices linear in the loops, copies boxes: the box and selector loops are
found as for loads, and the loop becomes a ``tma_store`` for each box (the selector
loops around it) followed in the thread loop by ``tma_commit(); tma_wait(0)``, so that
every store lands before the thread leaves the loop, as its plain copies did.  The copy
may be guarded, ``if inside: dst[...] = src[...]`` with no else (``stage_mem``'s copy out
of a window past the array's edge): a box that clips there.  Proved (with make_tma's
helper, :func:`.tma_from_copies.prove_box_copies`): every copy writes inside its array,
or, guarded, the guard holds exactly where it does (so the box writes what the copies
wrote, and nothing where they wrote nothing); no two iterations write one element (the
boxes' order does not matter); the result is checked like every rewrite of a proc
with TMA (check()'s obligations: the box's rules, nothing touched in flight).
"""
from __future__ import annotations

from ..ir.nodes import Assign, For, If, Read, TmaCommit, TmaStore, TmaWait
from ..ir.tma_meaning import ELEM_TYPES, dst_problem, src_problem
from ..ir.types import THREADS
from .edits import Into, replace
from .primitive import LOOP, fail, primitive
from .simplify import const_seq_nest, const_value
from .tma_from_copies import _show_w, box_windows, prove_box_copies


def _nest(L: For):
    """``(loops, copy, cond)``: the perfect nest of seq loops in ``L``, its one copy and
    the copy's guard (None: unguarded): ``if cond: dst[...] = src[...]`` (no else; a
    window past the array's edge copied out by ``stage_mem``) writes nothing where the
    guard fails, as a box does outside the array."""
    loops, body = const_seq_nest(L)
    s = body[0] if len(body) == 1 else None
    cond = None
    if isinstance(s, If) and len(s.body) == 1 and not s.orelse:
        s, cond = s.body[0], s.cond
    if not (isinstance(s, Assign) and isinstance(s.rhs, Read) and s.idx and s.rhs.idx):
        raise fail(f"the body of thread loop {L.iter} is not a nest of seq loops (from 0 to "
                   "constants) around one copy `dst[...] = src[...]` (or `if inside: "
                   "dst[...] = src[...]`)", L.loc)
    return loops, s, cond


def _sides(p, addr, s: Assign):
    """A GLOBAL array from a SHARED tile, one type a tensor map holds: ``(array's shape,
    tile's shape)``."""
    from .patterns import string_scope

    syms = {}
    for f in string_scope(p.ir, addr).frames:
        syms.update({n: sym for n, sym in f.items() if sym.kind == "array"})
    d, r = syms.get(s.name), syms.get(s.rhs.name)
    if d is None or r is None or not d.mem.async_source or not r.mem.async_destination:
        raise fail(f"the copy `{s.name}[...] = {s.rhs.name}[...]` is not from a SHARED tile "
                   "to a GLOBAL array", s.loc)
    if d.ty != r.ty or r.ty.name not in ELEM_TYPES:
        raise fail(f"the copy converts or moves {r.ty.name}; a TMA box copies "
                   f"{', '.join(ELEM_TYPES)} unchanged", s.loc)
    return tuple(d.shape), tuple(r.shape)


@primitive("make_tma_store", loop=LOOP)
def make_tma_store(p, loop):
    """Turn a one-thread loop's element copies from a SHARED tile into a GLOBAL array
    into bulk tensor stores (``tma_store``, docs/hopper.md), one per box, followed in
    the thread loop by ``tma_commit(); tma_wait(0)``.  The loop's body is a nest of
    seq loops (constant extents, from 0) around one ``dst[...] = src[...]`` whose indices
    are linear in the loops: a loop moving one index of each side by 1 runs along the
    box; the other loops stay, around the store, and pick the box.

    The copy may be guarded by its bounds with nothing written elsewhere (``if inside:
    dst[...] = src[...]``, from ``stage_mem`` of a window past the array's edge): that
    is what the box does at the array's edge (it writes only its elements inside).

    Legality: every copy writes inside its array (a guarded copy: its guard holds
    exactly there, proved for every instance) and no two write one element (proved);
    the boxes are boxes a tensor map describes (ranges in the array's order, at most 5
    of at most 256 elements, 16-byte rows) from contiguous tiles; the array's rows lie a
    multiple of 16 bytes apart (proved: check()'s rule, ``pitch_rule``); the result is checked
    like every rewrite of a proc with TMA (check()'s obligations for sm_90a: the tile
    written before the store by other threads only behind a barrier, nothing touched
    before the store lands).

    Example: ``make_tma_store(p, "Cs_o")``
    """
    c = loop
    L: For = c.node()
    lo, hi = const_value(L.lo), const_value(L.hi)
    if L.mapping != THREADS or lo is None or hi != lo + 1:
        raise fail(f"loop {L.iter} is not a thread loop of one thread (a TMA store is "
                   "issued by one thread)", L.loc, "divide the copy's loop so that one "
                   "thread runs it: divide_loop, parallelize_loop on a loop of extent 1")
    loops, s, cond = _nest(L)
    shape, tile = _sides(p, c.addr, s)
    box, sel, dst_w, src_w = box_windows(L, lo, loops, s)
    why = src_problem(dst_w, len(shape))
    why = why and f"the box `{_show_w(dst_w)}` is not one a tensor map describes: {why}"
    if why is None:
        d = dst_problem(src_w, tile, [const_value(f.hi) for f, _, _ in
                                      sorted(box, key=lambda x: x[1])])
        why = d and f"the tile `{_show_w(src_w)}` is not the box's: {d}"
    if why is not None:
        raise fail(why, s.loc)
    prove_box_copies(p, c.addr, L, loops, s, shape, cond, store=True)
    body = (TmaStore(dst_w, src_w, shape, s.loc),)
    for f in reversed(sel):
        body = (f.with_(body=body),)
    body += (TmaCommit(s.loc), TmaWait(0, s.loc))   # at the thread loop's top level
    return replace(p.ir, c.addr, [L.with_(body=body)], keep=[Into((), c.addr)])


__all__ = ["make_tma_store"]
