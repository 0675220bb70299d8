"""``persist_blocks``: a constant number of blocks walks the rows of tiles of a barrier-ring
kernel (a persistent tile scheduler, docs/hopper.md "Persistent blocks").

The kernel it rewrites is a nest ``for bi in par(0, M) @ BLOCKS: for bj in par(0, N) @
BLOCKS: body`` whose body allocates a barrier ring, releases its slots once (``for j in
seq(0, R): arrive(empty[j], lo, hi)``) and runs one ``seq`` loop of ring steps ``po`` of
``K`` iterations (``warp_specialize(..., ring=True)``, ``pipeline_wgmma``).  The result:

    for bi in par(0, G) @ BLOCKS:          # G: a constant, the blocks of a column
        for bj in par(0, N) @ BLOCKS:
            <the allocations, the ring's first release, setmaxnreg, idle thread loops>
            for ti in seq(0, (M - bi + G - 1) // G):    # row tile G ti + bi
                <the rest of the body, bi replaced by G * ti + bi>

(the tile's accumulators are set to zero again in each, as before).

and in the repeated part:

- the ring loop walks whole turns of the ring: ``for pt in seq(0, (K + S - 1) // S): for
  ps in seq(0, S)`` (step ``po = S pt + ps``, its slot ``po % S`` named ``ps``; ``S``: the
  ring's slots), so every tile starts at slot 0, where the previous tile's last step left
  the consumers' release (the shifted release of ``pipeline_wgmma`` releases slot
  ``S - 1`` at step 0: the ring's first release the first time, the previous tile's last
  slot after); the steps past ``K`` wait and arrive, their copies and wgmmas guarded off
  (``if S pt + ps < K``: a step with no bytes).  Naming the slot by the inner loop keeps a
  turn's count of each ring statement a constant, which the solver needs (with ``po % S``
  over padded steps the counts are right, but the producer's wait was not proved in the
  primitives' time);
- the block's barriers ``sync()`` become barriers of the consumers, ``sync(lo, hi)`` with
  the range of the ring's release: the producer then runs into the next tile's steps
  while the consumers write the epilogue (the point of persistence).

Only ``G`` constant keeps it linear: the tile ``G ti + bi`` of block ``bi`` (``bi < G``)
is another block's only for another ``(bi, ti)``, and the rings' counts over tiles are a
count per tile (the same in every tile) times ``ti``; a 2-D walk (``G_n`` columns too)
multiplies two symbolic trip counts and the solver gives up (docs/decisions.md).

The meaning is unchanged: the iterations of a ``par`` loop are order-free, a padded step
reads and writes nothing, and waits, arrives and barriers move no data.  What can go
wrong is the synchronization, so the result is asked of check() (sm_90a): it may have no
race, barrier divergence, out-of-bounds access or unknown obligation the input does not
have.
"""
from __future__ import annotations

from ..ir.nodes import (Alloc, Arrive, BinOp, Const, For, If, Pass, SetMaxNReg, Sync, Var,
                        Wait, WgmmaCommit, WgmmaWait)
from ..ir.types import BLOCKS, INDEX, THREADS, bool_
from ..ir.visitor import ExprMap, free_vars, substitute, walk
from .edits import replace
from .primitive import LOOP, POSITIVE_INT, fail, primitive
from .proved_as_before import refuse_new_findings
from .simplify import const_value


_CONTROL = (Arrive, Wait, Sync, WgmmaCommit, WgmmaWait)


def _b(op, a, b, ty=INDEX):
    return BinOp(op, a, b, ty)


def _release(s):
    """``(ring, lo, hi)`` of ``for j in seq(0, R): arrive(ring[j], lo, hi)``, else None."""
    if isinstance(s, For) and s.mapping is None and s.kind == "seq" and len(s.body) == 1:
        a = s.body[0]
        if isinstance(a, Arrive) and isinstance(a.index, Var) and a.index.name == s.iter:
            return a.name, a.lo, a.hi
    return None


def _setup(s) -> bool:
    """Statements run once per block: allocations, setmaxnreg, idle thread loops, the
    ring's first release (and the block's barriers before it, :func:`persist_blocks`)."""
    if isinstance(s, (Alloc, SetMaxNReg)) or _release(s) is not None:
        return True
    return isinstance(s, For) and s.mapping == THREADS and all(isinstance(x, Pass)
                                                              for x in s.body)


def _ring_slots(body, ring: str):
    for s in body:
        if isinstance(s, Alloc) and s.name == ring and len(s.shape) == 1:
            return const_value(s.shape[0])
    return None


def _guard_work(stmts, cond):
    """A ring step's work put under ``if cond``: the body of each of its thread loops
    (the copies, the products); its block-level statements are the ring's waits and
    arrives and the wgmma groups' commits and waits, which move no data.  Any other
    statement at block level: None (not rewritten)."""
    out = []
    for s in stmts:
        if isinstance(s, For) and s.mapping == THREADS:
            s = s.with_(body=(If(cond, s.body, (), s.loc),))
        elif not isinstance(s, _CONTROL):
            return None
        out.append(s)
    return tuple(out)


def _tile_body(stmts, ring_loop: str, S: int, consumers, names):
    """The repeated part: the ring loop in whole turns, the block's barriers the
    consumers'."""
    out = []
    for s in stmts:
        if isinstance(s, For) and s.iter == ring_loop:
            s = _turns(s, S, *names)
        elif isinstance(s, Sync) and not s.ranged and type(s) is Sync:
            s = Sync(s.loc, consumers[0], consumers[1])
        elif isinstance(s, (For, If)) and not (isinstance(s, For) and s.mapping == THREADS):
            s = _syncs_ranged(s, consumers)
        out.append(s)
    return tuple(out)


def _turns(L: For, S: int, turn: str, slot: str):
    """``for po in seq(0, K)`` as ``for turn in seq(0, (K + S - 1) // S): for slot in
    seq(0, S)`` (``po = S turn + slot``, its slot ``po % S`` now ``slot``): the ring's
    statements name ``slot`` directly, which keeps their counts per turn constants; the
    copies and wgmmas of a step past ``K`` are guarded off."""
    po, ps = L.iter, Var(slot, INDEX)

    def slots(e):
        if isinstance(e, BinOp) and e.op == "%" and const_value(e.rhs) == S:
            x = e.lhs
            if isinstance(x, Var) and x.name == po:
                return ps
            if isinstance(x, BinOp) and x.op == "+" and isinstance(x.lhs, Var) and \
                    x.lhs.name == po and const_value(x.rhs) is not None:
                return _b("%", _b("+", ps, x.rhs), e.rhs)
        return e

    step = _b("+", _b("*", Const(S), Var(turn, INDEX)), ps)
    body = substitute(ExprMap(slots).visit_block(L.body), {po: step})
    body = _guard_work(body, _b("<", step, L.hi, bool_))
    if body is None:
        raise fail(f"a step of loop {po} has a statement at block level that is neither a "
                   "thread loop nor a wait, arrive or wgmma commit/wait: a step past the "
                   "loop's end could not be guarded off", L.loc)
    inner = For(slot, Const(0), Const(S), body, kind="seq", loc=L.loc)
    trips = _b("//", _b("+", L.hi, Const(S - 1)), Const(S))
    return For(turn, Const(0), trips, (inner,), kind="seq", loc=L.loc)


def _syncs_ranged(s, consumers):
    if isinstance(s, For):
        return s.with_(body=tuple(_one(x, consumers) for x in s.body))
    return s.with_(body=tuple(_one(x, consumers) for x in s.body),
                   orelse=tuple(_one(x, consumers) for x in s.orelse))


def _one(s, consumers):
    if isinstance(s, Sync) and not s.ranged and type(s) is Sync:
        return Sync(s.loc, consumers[0], consumers[1])
    if isinstance(s, (For, If)) and not (isinstance(s, For) and s.mapping == THREADS):
        return _syncs_ranged(s, consumers)
    return s


@primitive("persist_blocks", loop=LOOP, blocks=POSITIVE_INT)
def persist_blocks(p, loop, blocks: int, ring: str = "empty", steps: str = "po"):
    """Run the block loop ``loop`` (``for bi in par(0, M) @ BLOCKS`` around one BLOCKS
    loop) with ``blocks`` blocks, block ``bi`` walking the tiles ``blocks * ti + bi``
    (module docs): the allocations, setmaxnreg, idle thread loops and the first release
    of the barrier ring ``ring`` stay once per block; the rest repeats per tile, its
    ring loop ``steps`` walking whole turns of the ring (``pt``, ``ps``: the steps past
    the loop's end guarded off) and its ``sync()`` turned into barriers of the ring's
    releasing threads.

    Legality: the values are unchanged (a ``par`` loop's iterations are order-free; a
    padded step moves no data); the result may have no race, barrier divergence,
    out-of-bounds access or unknown obligation of check() (target sm_90a) that the input
    does not have.

    Example: ``persist_blocks(p, "bi", 8)``
    """
    L: For = loop.node()
    if not (L.mapping == BLOCKS and L.kind == "par" and const_value(L.lo) == 0 and
            len(L.body) == 1 and isinstance(L.body[0], For) and L.body[0].mapping == BLOCKS):
        raise fail(f"loop {L.iter} is not a BLOCKS loop from 0 around one BLOCKS loop", L.loc)
    inner: For = L.body[0]
    body = inner.body
    rel = [k for k, s in enumerate(body) if _release(s) is not None and _release(s)[0] == ring]
    S = _ring_slots(body, ring)
    loops = [k for k, s in enumerate(body) if isinstance(s, For) and s.iter == steps]
    if len(rel) != 1 or S is None or len(loops) != 1 or loops[0] < rel[0]:
        raise fail(f"the body of loop {inner.iter} has no ring '{ring}' released once by "
                   f"`for j in seq(0, R): arrive({ring}[j], lo, hi)` and stepped by one "
                   f"loop {steps}", L.loc, "warp_specialize(..., ring=True) first")
    _, lo, hi = _release(body[rel[0]])
    once = [_setup(s) or (type(s) is Sync and not s.ranged and k < rel[0])
            for k, s in enumerate(body)]
    if any(L.iter in free_vars((s,)) for s, o in zip(body, once) if o):
        raise fail(f"a statement run once per block reads {L.iter}", L.loc)
    G, M = Const(blocks), L.hi
    ti, turn, slot = _fresh(p, "ti"), _fresh(p, "pt"), _fresh(p, "ps")
    tile = substitute(tuple(s for s, o in zip(body, once) if not o),
                      {L.iter: _b("+", _b("*", G, Var(ti, INDEX)), Var(L.iter, INDEX))})
    tile = _tile_body(tile, steps, S, (lo, hi), (turn, slot))
    trips = _b("//", _b("+", _b("-", M, Var(L.iter, INDEX)), Const(blocks - 1)), G)
    walk_loop = For(ti, Const(0), trips, tile, kind="seq", loc=L.loc)
    new_inner = inner.with_(body=tuple(s for s, o in zip(body, once) if o) + (walk_loop,))
    new = L.with_(hi=G, body=(new_inner,), group=0)
    out = replace(p.ir, loop.addr, [new])
    _proved_as_before(p, out.ir, L.loc)
    return out


def _fresh(p, base: str) -> str:
    from .fresh import proc_names
    taken = proc_names(p.ir)
    name, i = base, 0
    while name in taken:
        i += 1
        name = f"{base}{i}"
    return name


def _proved_as_before(p, new_ir, loc):
    refuse_new_findings(p.ir, new_ir, loc, "the persistent blocks",
                        "a ring stepped once per tile, released by the consumers, and "
                        "a constant number of blocks", target="sm_90a")


__all__ = ["persist_blocks"]
