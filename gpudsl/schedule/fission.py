"""Splitting and joining loops: the fission and fuse primitives (the other loop
primitives are in :mod:`.loops`).  Each is declared with
:func:`~gpudsl.schedule.primitive.primitive`: its legality check, then the rewrite
returning the new IR and the cursor forwarding.
"""
from __future__ import annotations

from ..ir.nodes import Alloc, Assign, BinOp, Const, For, If, Sync, Var
from ..ir.sync_meaning import is_sync
from ..ir.types import BLOCKS
from ..ir.visitor import bound_names, free_vars, rename as rename_names, walk
from .cursors import ancestors, block_of
from .edits import join, split, unchanged
from .fresh import freshen, proc_names, top_allocs
from .legality import collect, find_conflict, prove, raise_conflict
from .parallel import check_fused_blocks, check_parallel, refuse_new_mapping_issues
from .primitive import GAP, LOOP, POSITIVE_INT, fail, primitive
from .simplify import normalize


@primitive("fission", gap=GAP, n_lifts=POSITIVE_INT)
def fission(p, gap, n_lifts: int = 1):
    """Split the loop around ``gap`` into two loops, one running the statements
    before the gap and one those after it (``n_lifts`` levels of loops; a level may
    be an ``if`` without ``else`` whose condition reads no array: two ``if``s).

    Legality: no allocation before the gap is used after it, and no access after
    the gap in one iteration conflicts with an access before the gap in a later
    iteration (a write of the same value in every iteration is allowed).

    Example: ``fission(p, p.find("s[_] = _").after())``
    """
    out, addr = unchanged(p.ir), gap.addr
    for _ in range(n_lifts):
        step, addr = _fission_once(out.ir, addr)
        out = out.then(step)
    _barriers_still_order(p.ir, out.ir, gap.addr)
    return out


def _barriers_still_order(old, new, gap):
    """Splitting loops of a kernel moves barriers away from the accesses they
    ordered (a trailing ``sync()`` split off a ``seq`` loop no longer separates one
    iteration from the next): when the split loops hold a ``sync()``, the result may
    have no race between threads of one block that ``old`` has not (check()'s race
    obligation decides, as for ``delete_sync``)."""
    loops = [x for x in ancestors(old, gap) if isinstance(x, For)]
    if not any(x.mapping == BLOCKS for x in loops) or \
            not any(isinstance(n, Sync) for x in loops for n in walk(x.body)):
        return
    from ..analysis.obligations.race_obligations import added_races

    for d in added_races(old, new):
        raise fail(f"the split loops' barriers would no longer order their accesses: "
                   f"{d.message}", _gap_loc(old, gap), "keep the loops together, or "
                   "add a sync() where the loops split", d.witness or None)


def _gap_loc(pdef, addr):
    blk = block_of(pdef, addr[:-1])
    i = addr[-1]
    n = blk[i] if i < len(blk) else (blk[i - 1] if blk else None)
    return getattr(n, "loc", None)


def _fission_once(pdef, gap):
    """One level of fission at the gap address ``gap``: the edit, and the gap
    between the two loops."""
    baddr, k = gap[:-1], gap[-1]
    if not baddr or baddr[-1] != "body":
        raise fail("the gap is not inside a loop", _gap_loc(pdef, gap))
    a = baddr[:-1]
    L = block_of(pdef, a[:-1])[a[-1]]
    if isinstance(L, If):
        return _fission_guard(pdef, a, L, k)
    if not isinstance(L, For):
        raise fail("the gap is not directly inside a loop", _gap_loc(pdef, gap))
    pre, post = L.body[:k], L.body[k:]
    if not pre or not post:
        raise fail(f"the gap is at the edge of loop {L.iter}: nothing to split", L.loc)
    used_after = free_vars(post)
    for st in pre:
        if isinstance(st, Alloc) and st.name in used_after:
            raise fail(f"'{st.name}' is allocated before the gap and used after it", st.loc,
                       f"lift_alloc {st.name} out of loop {L.iter} first")
    acc_pre = collect(pre, loops=(L,))
    acc_post = collect(post, loops=(L,))
    # A read after the gap may come before a later iteration's write before the gap
    # when that write stores the same value at the same place in every iteration:
    # after fission the read sees that value from the last iteration instead.
    same = _same_value_writes(L, pre, acc_pre)
    reads = [x for x in acc_post if x.mode == "r"]
    hit = find_conflict(pdef, a, [x for x in acc_post if x.mode != "r"], acc_pre,
                        lambda e1, e2: e1[L.iter] < e2[L.iter]) or \
        find_conflict(pdef, a, reads, [x for x in acc_pre if not any(x is y for y in same)],
                      lambda e1, e2: e1[L.iter] < e2[L.iter])
    if hit:
        raise_conflict(f"an access after the gap in an iteration of {L.iter} comes before "
                       "an access before the gap in a later iteration", hit, L.loc)
    new = [L.with_(body=pre), L.with_(body=post)]

    return _split_result(pdef, a, k, new)


def _split_result(pdef, a, k: int, new: list):
    """The statement at ``a`` replaced by the two halves ``new`` (its body split before
    statement ``k``): the edit, and the gap between the halves."""
    return split(pdef, a, k, new), a[:-1] + (a[-1] + 1,)


def _fission_guard(pdef, a, g: If, k: int):
    """``if c: pre; post`` (no else) → ``if c: pre`` then ``if c: post``: one level of
    fission through a guard whose condition reads no array (``pre`` cannot change
    it), so both halves run exactly when the one ``if`` did, in the same order."""
    from ..ir.nodes import Read

    if g.orelse or any(isinstance(x, Read) for x in walk(g.cond)):
        raise fail("fission splits an if only when it has no else and its condition "
                   "reads no array", g.loc)
    pre, post = g.body[:k], g.body[k:]
    if not pre or not post:
        raise fail("the gap is at the edge of the if: nothing to split", g.loc)
    used_after = free_vars(post)
    for st in pre:
        if isinstance(st, Alloc) and st.name in used_after:
            raise fail(f"'{st.name}' is allocated before the gap and used after it", st.loc,
                       f"lift_alloc {st.name} out of the if first")
    new = [g.with_(body=pre), g.with_(body=post)]

    return _split_result(pdef, a, k, new)


def _same_value_writes(L: For, pre, acc_pre) -> list:
    """The accesses of ``acc_pre`` that are plain writes in loop ``L``'s body (not in a
    call) that every iteration of ``L`` makes alike: neither their place, their value,
    nor the ``seq`` loops and guards between ``L`` and them use ``L.iter`` or anything
    the loop writes.  Every iteration of ``pre`` then makes the same sequence of such
    writes, so it leaves each element they write with the same value (``B1[ii, kk] =
    B[4 * i + ii, 4 * k + kk]`` in a loop ``kk`` inside the loop ``jj`` split)."""
    written = {x.buf for x in collect(L.body) if x.writes}
    mine = _plain_stmts(pre)
    out = []
    for x in acc_pre:
        st = x.stmt
        if x.mode != "w" or not isinstance(st, Assign) or not any(st is q for q in mine) or \
                not x.loops or x.loops[0] is not L:
            continue
        inner = x.loops[1:]
        if any(lp.kind != "seq" or lp.mapping is not None for lp in inner):
            continue
        used = free_vars((st.rhs,) + tuple(st.idx))
        for lp in inner:
            used |= free_vars((lp.lo, lp.hi))
        for cond, _positive in x.guards:
            used |= free_vars(cond)
        if L.iter in used or used & written:
            continue
        out.append(x)
    # the last write to a buffer decides what a later iteration leaves there: keep
    # the exemption only for buffers with no other write before the gap
    bufs = {x.buf for x in out}
    others = [x for x in acc_pre if x.writes and x.buf in bufs and not any(x is y for y in out)]
    return [x for x in out if x.buf not in {y.buf for y in others}]


def _plain_stmts(stmts) -> list:
    """The statements of ``stmts`` and of the loops and ifs in them (not of callees)."""
    out, todo = [], list(stmts)
    while todo:
        s = todo.pop()
        out.append(s)
        if isinstance(s, For):
            todo.extend(s.body)
        elif isinstance(s, If):
            todo.extend(s.body + s.orelse)
    return out


# ------------------------------------------------------------------ fuse


@primitive("fuse", loop1=LOOP, loop2=LOOP)
def fuse(p, loop1, loop2):
    """Join two adjacent loops with equal bounds into one (the second loop's
    variable and clashing local names are renamed).

    Legality: the loops have the same kind and mapping and proved-equal bounds;
    no access of the second body conflicts with an access of the first body in a
    later iteration; a par loop's fused iterations do not conflict, and in fused
    BLOCKS loops no two threads of a block conflict (there is no barrier between
    the two bodies); no mapping rule breaks.

    Example: ``fuse(p, "i", "i #1")``
    """
    c1, c2 = loop1, loop2
    A, B = c1.node(), c2.node()
    if c1.addr[:-1] != c2.addr[:-1] or c2.addr[-1] != c1.addr[-1] + 1:
        raise fail(f"loop {B.iter} must directly follow loop {A.iter}", B.loc)
    if (A.kind, A.mapping) != (B.kind, B.mapping):
        raise fail("the loops differ in kind or mapping", B.loc)
    for x, y, what in ((A.lo, B.lo, "lower"), (A.hi, B.hi, "upper")):
        if normalize(x) != normalize(y):
            prove(p.ir, c1.addr, lambda enc, env, x=x, y=y: enc.int(x, env) == enc.int(y, env),
                  f"the {what} bounds of loops {A.iter} and {B.iter} are equal", B.loc)
    # names of the second body that the fused body would capture or bind twice
    clash = ({A.iter} | top_allocs(A.body)) & bound_names(B.body)
    bbody = freshen(tuple(B.body), clash, proc_names(p.ir))
    bbody = rename_names(bbody, {B.iter: A.iter}) if B.iter != A.iter else bbody
    # one kernel now: the first loop's launch-bounds hint, else the second's
    F = A.with_(body=A.body + bbody, blocks_per_sm=A.blocks_per_sm or B.blocks_per_sm)
    acc_a = collect(A.body, loops=(F,))
    acc_b = collect(bbody, loops=(F,))
    has_sync = any(is_sync(n) for n in walk(F.body))
    hit = find_conflict(p.ir, c1.addr, acc_b, acc_a,
                        lambda e1, e2: e1[A.iter] < e2[A.iter], allow_reduce=not has_sync,
                        apart=lambda a, b: _same_iteration_only(a, b, A.iter))
    if hit:
        raise_conflict("backward dependence: an access of the second loop would come "
                       "before an access of the first loop in a later iteration", hit, B.loc)
    if F.kind == "par":
        # the fused iterations run at the same time: none may conflict with another
        check_parallel(p.ir, c1.addr, F)
        if F.mapping == BLOCKS:
            check_fused_blocks(p.ir, c1.addr, F, acc_a, acc_b, B.loc)
    # the second loop's cursors follow into the fused one
    out = join(p.ir, c1.addr, c2.addr, F)
    refuse_new_mapping_issues(p.ir, out.ir, B.loc)
    return out


def _same_iteration_only(a, b, it: str) -> bool:
    """Whether ``a`` and ``b`` can touch one element only in the same iteration of the
    fused loop ``it``: a subscript of both is ``it`` itself (or ``it`` plus the same
    constant), so equal elements mean equal iterations.  A chain of N fused nests
    (``out[i] = f(out[i])``) asks the solver nothing (issue 28)."""
    def shift(e):
        if isinstance(e, Var) and e.name == it:
            return 0
        if isinstance(e, BinOp) and e.op in ("+", "-"):
            for x, c in ((e.lhs, e.rhs), (e.rhs, e.lhs) if e.op == "+" else (None, None)):
                if isinstance(x, Var) and x.name == it and isinstance(c, Const) \
                        and type(c.val) is int:
                    return c.val if e.op == "+" else -c.val
        return None
    return any(shift(x) is not None and shift(x) == shift(y) for x, y in zip(a.idx, b.idx))


# ------------------------------------------------------------------ unroll / cut / remove


__all__ = ["fission", "fuse"]
