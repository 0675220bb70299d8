"""``pipeline_wgmma``: the consumers of a barrier ring keep one wgmma group in flight
(docs/hopper.md, "A main loop derived by primitives"), as CUTLASS's Hopper mainloop does.

The loop it rewrites consumes one ring slot per iteration ``i`` of a ``seq`` loop: a
thread loop of wgmmas reading slot ``i % S`` completes them (``wgmma_commit(); wgmma_wait(0)``)
and the consumers release the slot (``arrive(empty[i % S], lo, hi)``); before the loop,
``for j in seq(0, S): arrive(empty[j], lo, hi)`` released every slot once.  The rewrite:

- the commit and wait leave the thread loop for block level, and the wait keeps one group
  in flight: ``wgmma_commit(); wgmma_wait(1)`` after the thread loop (the wgmmas of step
  ``i + 1`` chain on those of step ``i``: the hardware orders wgmmas of one shape on one
  accumulator);
- the consumers release the previous slot, whose wgmmas that wait completed:
  ``arrive(empty[(i + S - 1) % S], lo, hi)``; the first iteration releases slot ``S - 1``,
  so the loop before it releases ``S - 1`` slots;
- ``wgmma_wait(0)`` after the loop lands the last group.

The values computed are the same (a wait or an arrive moves no data: the sequential
meaning is unchanged); what changes is what may run in flight, so the result is asked of
check() (sm_90a): it may have no race, barrier divergence, out-of-bounds access or
unknown obligation that the input does not have (besides the guards every primitive on a
proc with barriers and wgmmas passes).
"""
from __future__ import annotations

from ..ir.nodes import Arrive, BinOp, Const, For, Var, Wgmma, WgmmaCommit, WgmmaWait
from ..ir.types import INDEX, THREADS
from ..ir.visitor import walk
from .cursors import block_of
from .edits import replace
from .primitive import LOOP, fail, primitive
from .proved_as_before import refuse_new_findings
from .simplify import const_value


def _is_mod(e, it: str, s: int) -> bool:
    """``e`` is ``it % s``."""
    return isinstance(e, BinOp) and e.op == "%" and isinstance(e.lhs, Var) and \
        e.lhs.name == it and const_value(e.rhs) == s


def _release_loop(s):
    """``(ring, lo, hi, S)`` of ``for j in seq(0, S): arrive(ring[j], lo, hi)``."""
    if not (isinstance(s, For) and s.mapping is None and s.kind == "seq" and
            const_value(s.lo) == 0 and const_value(s.hi) is not None and len(s.body) == 1):
        return None
    a = s.body[0]
    if not (isinstance(a, Arrive) and isinstance(a.index, Var) and a.index.name == s.iter):
        return None
    return a.name, a.lo, a.hi, const_value(s.hi)


def _consumer(L: For, ring: str, lo, hi, S: int):
    """``(k, thread loop, rest)``: the thread loop of wgmmas at ``k`` in ``L``'s body that
    completes its group (``wgmma_commit(); wgmma_wait(0)``, in it or after it) and the
    consumers' release of slot ``L.iter % S`` after it; ``rest``: the statements between."""
    body = L.body
    for k, T in enumerate(body):
        if not (isinstance(T, For) and T.mapping == THREADS and
                any(isinstance(n, Wgmma) for n in walk(T.body))):
            continue
        local = len(T.body) >= 2 and isinstance(T.body[-2], WgmmaCommit) and \
            isinstance(T.body[-1], WgmmaWait) and T.body[-1].depth == 0
        rest = body[k + 1:k + 3]
        block = len(rest) == 2 and isinstance(rest[0], WgmmaCommit) and \
            isinstance(rest[1], WgmmaWait) and rest[1].depth == 0
        j = k + 1 + (2 if block else 0)
        if not (local or block) or j >= len(body):
            continue
        a = body[j]
        if isinstance(a, Arrive) and a.name == ring and a.lo == lo and a.hi == hi and \
                _is_mod(a.index, L.iter, S) and a.count == 1:
            return k, T, local, j
    return None


@primitive("pipeline_wgmma", loop=LOOP)
def pipeline_wgmma(p, loop):
    """Keep one wgmma group in flight across the iterations of ``loop`` (module docs):
    a ``seq`` loop from 0 at block level whose body holds a thread loop of wgmmas that
    completes its group (``wgmma_commit(); wgmma_wait(0)`` at its end, or right after
    it) followed by ``arrive(empty[i % S], lo, hi)``, and preceded in its block by
    ``for j in seq(0, S): arrive(empty[j], lo, hi)`` (``S >= 2``).  The group is then
    committed after the thread loop and waited with ``wgmma_wait(1)``, the previous slot
    released (``arrive(empty[(i + S - 1) % S], lo, hi)``), ``S - 1`` slots released
    before the loop, and ``wgmma_wait(0)`` put after it.

    Legality: the values are unchanged (waits and arrives move no data); the result may
    have no race, barrier divergence, out-of-bounds access or unknown obligation of
    check() (target sm_90a) that the input does not have: the producer's wait on the
    ring, which the shifted release completes, still orders its refill after the
    wgmmas that read the slot.

    Example: ``pipeline_wgmma(p, "po")``
    """
    L: For = loop.node()
    if not (L.mapping is None and L.kind == "seq" and const_value(L.lo) == 0):
        raise fail(f"loop {L.iter} is not a seq loop from 0", L.loc)
    at = loop.addr
    blk = block_of(p.ir, at[:-1])
    k0 = next((k for k in range(at[-1] - 1, -1, -1) if _release_loop(blk[k])), None)
    if k0 is None:
        raise fail(f"no `for j in seq(0, S): arrive(ring[j], lo, hi)` before loop {L.iter} "
                   "in its block: the consumers' first release of the ring's slots", L.loc)
    ring, lo, hi, S = _release_loop(blk[k0])
    if S < 2:
        raise fail(f"the ring '{ring}' has {S} slot(s): a group in flight needs two", L.loc)
    found = _consumer(L, ring, lo, hi, S)
    if found is None:
        raise fail(f"the body of loop {L.iter} has no thread loop of wgmmas completing its "
                   f"group (wgmma_commit(); wgmma_wait(0)) followed by "
                   f"`arrive({ring}[{L.iter} % {S}], ...)`", L.loc,
                   "make_wgmma, then warp_specialize(..., ring=True)")
    waits = [n for n in walk(p.ir.body) if isinstance(n, (WgmmaWait, WgmmaCommit))]
    if len(waits) != 2:
        raise fail("the proc has other wgmma_commit / wgmma_wait statements: the groups "
                   "this loop leaves in flight would be counted with theirs", L.loc)
    k, T, local, j = found
    it = Var(L.iter, INDEX)
    prev = BinOp("%", BinOp("+", it, Const(S - 1), INDEX), Const(S), INDEX)
    a = L.body[j]
    T2 = T.with_(body=T.body[:-2]) if local else T
    body = (L.body[:k] + (T2, WgmmaCommit(T.loc), WgmmaWait(1, T.loc),
                          a.with_(index=prev)) + L.body[j + 1:])
    pre = blk[k0]
    stmts = (pre.with_(hi=Const(S - 1)),) + tuple(blk[k0 + 1:at[-1]]) + \
        (L.with_(body=body), WgmmaWait(0, L.loc))
    out = replace(p.ir, at[:-1] + (k0,), stmts, n_old=at[-1] - k0 + 1)
    _proved_as_before(p, out.ir, L.loc)
    return out


def _proved_as_before(p, new_ir, loc):
    refuse_new_findings(p.ir, new_ir, loc, "the loop with a wgmma group in flight",
                        "the ring's producer must wait on the slot the consumers release",
                        target="sm_90a")


__all__ = ["pipeline_wgmma"]
