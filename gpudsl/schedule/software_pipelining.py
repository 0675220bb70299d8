"""Software-pipelining primitives: ``reorder_stmts`` and ``rotate_loop``.

These are the two moves a multistage main loop is built from (CUTLASS's mainloops,
Triton's ``num_stages``): ``rotate_loop`` peels the first statements of an iteration
(the load of a tile) into the previous iteration, so that the load of tile ``i + 1``
stands in the body of iteration ``i``; ``reorder_stmts`` then moves it ahead of the
compute on tile ``i`` when nothing orders the two.

Both keep the sequential meaning; neither moves a statement across a barrier or any
other synchronization (``rotate_loop`` runs the very same statements in the very
same order, ``reorder_stmts`` refuses a statement that synchronizes).
"""
from __future__ import annotations

from dataclasses import replace

import z3

from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Call, Const, For, If, Pass, Reduce,
                        Stmt, Var)
from ..ir.types import INDEX, bool_
from ..ir.visitor import bound_names, free_vars, substitute, walk
from .edits import Moved, MovedRange, move, replace as replace_stmts
from .fresh import freshen_top_allocs, names_outside
from .legality import collect, find_conflict, raise_conflict
from .parallel import refuse_new_mapping_issues
from .primitive import BLOCK, LOOP, POSITIVE_INT, fail, primitive
from .simplify import const_value

# Statements that only compute; anything else (a barrier, an arrive or wait, an
# asynchronous copy or its wait, a statement kind added later) stops a reorder.
_PLAIN = (Assign, Reduce, Atomic, Alloc, For, If, Pass, Call)


def _synchronizing(s: Stmt):
    """The first statement in ``s`` (calls followed) that is not plain computation."""
    for n in walk(s):
        if isinstance(n, Stmt) and not isinstance(n, _PLAIN):
            return n
        if isinstance(n, Call):
            inner = next(filter(None, map(_synchronizing, n.proc.body)), None)
            if inner is not None:
                return inner
    return None


def _ordered_accesses(stmts) -> list:
    """The accesses of ``stmts`` with atomics counted as writes: two atomic updates
    of one element do not race, but their order is seen (old values, rounding)."""
    return [replace(a, mode="w") if a.mode == "atomic" else a for a in collect(stmts)]


@primitive("reorder_stmts", block=BLOCK)
def reorder_stmts(p, block):
    """Swap two adjacent statements ``s1; s2`` into ``s2; s1``.

    Legality: neither statement synchronizes (a barrier, an arrive, a wait or an
    asynchronous copy stays where it is); ``s1`` allocates nothing ``s2`` uses; no
    access of one touches an element that the other writes in the same iteration
    of the enclosing loops (reductions and atomics count as writes: their order
    changes rounding and old values).  Only the order inside one iteration changes,
    so the sequential meaning is kept, and the accesses between two barriers are
    the same, so no race appears.

    Example: ``reorder_stmts(p, p.find("a[_] = _").expand(0, 1))``
    """
    c = block
    stmts = c.stmts()
    if len(stmts) != 2:
        raise fail(f"expected two adjacent statements, got {len(stmts)}", c.loc,
                   "select them with cursor.expand(0, 1)")
    s1, s2 = stmts
    for s in stmts:
        bad = _synchronizing(s)
        if bad is not None:
            raise fail("a synchronizing statement stays in place: statements are never "
                       "moved across it", getattr(bad, "loc", None) or s.loc)
    if isinstance(s1, Alloc) and s1.name in free_vars(s2):
        raise fail(f"'{s1.name}' is allocated by the first statement and used by the "
                   "second", s1.loc)
    a1 = c.addr
    hit = find_conflict(p.ir, a1, _ordered_accesses((s1,)), _ordered_accesses((s2,)),
                        lambda e1, e2: z3.BoolVal(True), allow_reduce=False)
    if hit:
        raise_conflict("the two statements depend on each other in one iteration", hit,
                       s1.loc, "a dependence fixes their order")
    out = move(p.ir, a1[:-1] + (a1[-1] + 1,), a1)  # the second before the first
    refuse_new_mapping_issues(p.ir, out.ir, s1.loc)
    return out


# ------------------------------------------------------------------ rotate_loop


def _plus(e, k: int):
    v = const_value(e)
    return Const(v + k) if v is not None else BinOp("+" if k > 0 else "-", e,
                                                    Const(abs(k)), INDEX)


def _at(stmts, it: str, value):
    from .loops import _norm_block

    return _norm_block(substitute(tuple(stmts), {it: value}))


@primitive("rotate_loop", loop=LOOP, n=POSITIVE_INT)
def rotate_loop(p, loop, n: int = 1):
    """Peel the first ``n`` statements of each iteration into the previous one:
    ``for i in seq(lo, hi): S1; S2`` becomes:

        if lo < hi:
            S1[i = lo]
            for i in seq(lo, hi - 1):
                S2
                S1[i = i + 1]
            S2[i = hi - 1]

    (the ``if`` is left out when the bounds are constants).  This is the first step
    of software pipelining: the load of the next tile moves into the current
    iteration, where ``reorder_stmts`` can hoist it above the compute.

    Legality: the loop is a ``seq`` loop, not mapped; its bounds read nothing the
    body writes; ``S1`` allocates nothing ``S2`` uses.  The statements then run in
    exactly the original order, the same instances of the same statements, so no
    dependence and no barrier can be crossed.

    Example: ``rotate_loop(p, "ko", 1)``
    """
    c = loop
    L: For = c.node()
    if L.mapping is not None or L.kind != "seq":
        raise fail(f"loop {L.iter} is {'mapped' if L.mapping else 'parallel'}: only a "
                   "seq loop runs its iterations one after the other", L.loc)
    if not 0 < n < len(L.body):
        raise fail(f"rotate_loop needs 0 < n < {len(L.body)} (the statements of the body "
                   f"of {L.iter}), got {n}", L.loc)
    s1, s2 = L.body[:n], L.body[n:]
    written = {a.buf for a in collect(L.body) if a.writes}
    bounds_read = free_vars(L.lo) | free_vars(L.hi)
    if bounds_read & written:
        raise fail(f"the bounds of {L.iter} read "
                   f"{', '.join(sorted(bounds_read & written))}, which its body writes",
                   L.loc)
    allocated = {s.name for s in s1 if isinstance(s, Alloc)}
    if allocated & free_vars(s2):
        raise fail(f"'{sorted(allocated & free_vars(s2))[0]}' is allocated in the rotated "
                   "part and used by the rest of the body", L.loc,
                   f"lift_alloc it out of loop {L.iter} first")
    # the copies before and after the loop stand beside it: names its body allocates
    # are taken there (no shadowing)
    taken = names_outside(p.ir, c.addr) | bound_names(L.body) | {L.iter}
    prologue = freshen_top_allocs(_at(s1, L.iter, L.lo), taken)
    last = _plus(L.hi, -1)
    body = tuple(s2) + _at(s1, L.iter, _plus_var(L.iter))
    epilogue = freshen_top_allocs(_at(s2, L.iter, last), taken)
    inner = L.with_(hi=last, body=body)
    new = (*prologue, inner, *epilogue)
    lo, hi = const_value(L.lo), const_value(L.hi)
    if lo is not None and hi is not None:
        if hi <= lo:
            raise fail(f"loop {L.iter} runs no iteration: nothing to rotate", L.loc)
        out, loop_addr = list(new), c.addr[:-1] + (c.addr[-1] + len(prologue),)
    else:
        out = [If(BinOp("<", L.lo, L.hi, bool_), new, (), L.loc)]
        loop_addr = c.addr + ("body", len(prologue))
    # the loop's cursor follows the rotated loop, its statements their place in its body
    body = loop_addr + ("body",)
    done = replace_stmts(p.ir, c.addr, out, keep=[
        Moved((0,), loop_addr), MovedRange((0, "body"), n, None, body, 0),
        MovedRange((0, "body"), 0, n, body, len(s2))])
    refuse_new_mapping_issues(p.ir, done.ir, L.loc)
    return done


def _plus_var(it: str):
    return BinOp("+", Var(it), Const(1), INDEX)


__all__ = ["reorder_stmts", "rotate_loop"]
