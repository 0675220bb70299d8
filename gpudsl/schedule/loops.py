"""Loop primitives: divide_loop, reorder_loops, fission, fuse, unroll_loop,
cut_loop, remove_loop, parallelize_loop, specialize, simplify, rename (the
compiler hints set_unroll and set_blocks_per_sm are in :mod:`.hints`).

Each primitive is declared with :func:`~gpudsl.schedule.primitive.primitive`: its
legality check (built on :mod:`.legality` and :mod:`.parallel`), then the rewrite,
which returns the new IR and the cursor forwarding.
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.nodes import Alloc, Assign, BinOp, Const, For, If, Sync, Var
from ..ir.types import BLOCKS, INDEX, THREADS, bool_
from ..ir.visitor import bound_names, free_vars, rename as rename_names, substitute, walk
from .cursors import (ancestors, block_of, compose, fwd_identity, fwd_splice, replace_block,
                      splice)
from .fresh import freshen, freshen_top_allocs, names_outside, proc_names, top_allocs
from .legality import collect, find_conflict, prove, raise_conflict
from .parallel import check_fused_blocks, check_parallel, refuse_new_mapping_issues
from .patterns import parse_at, scope_at
from .primitive import (BLOCK, BOOL, GAP, LOOP, POSITIVE_INT, PROC_NAME, TEXT,
                        TEXTS, Rewrite, choice, current, fail, names as names_kind, primitive)
from .simplify import const_value, normalize, simplify_ir


def _norm_block(stmts):
    """Normalise index expressions of freshly substituted statements."""
    from .simplify import _Simplifier

    return _Simplifier(()).visit_block(tuple(stmts))


def _check_new_names(p, addr, names, loc, old=()):
    """Refuse a new name already in use at ``addr`` or inside its statement."""
    taken = set(scope_at(p.ir, addr)) | bound_names(tuple(block_of(p.ir, addr[:-1])
                                                          [addr[-1]:addr[-1] + 1]))
    taken -= set(old)
    for n in names:
        if n in taken:
            raise fail(f"the name '{n}' is already used here", loc, "pick a fresh name")


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


# ------------------------------------------------------------------ divide_loop


@primitive("divide_loop", loop=LOOP, factor=POSITIVE_INT, names=names_kind(2),
           tail=choice("guard", "cut", "perfect"), perfect=BOOL)
def divide_loop(p, loop, factor: int, names, tail: str = "guard", perfect: bool = False):
    """Split a loop into an outer and an inner loop of ``factor`` iterations.

    ``for i in seq(lo, hi)`` becomes ``for outer: for inner in seq(0, factor)``
    with ``i = lo + factor * outer + inner``; ``names`` = ``[outer, inner]``.
    ``tail``: "guard" (an ``if`` around the body), "cut" (a remainder loop after
    the nest) or "perfect" (no remainder; ``perfect=True`` says the same).

    Legality: the loop is not mapped, and the new names are free. "perfect":
    proves that ``factor`` divides ``hi - lo``; "cut": proves ``hi - lo >= 0``;
    "guard" needs no proof (every original iteration runs once, in order; a
    ``sync()`` in the body ends up under an ``if`` on sequential loop variables:
    uniform, and check() follows such barriers).

    Example: ``divide_loop(p, "i", 16, ["io", "ii"], tail="perfect")``
    """
    s: For = loop.node()
    c = loop
    if perfect:
        tail = "perfect"
    outer, inner = names
    _check_new_names(p, c.addr, [outer, inner], s.loc, old=(s.iter,))
    if s.mapping is not None:
        raise fail(f"loop {s.iter} is mapped to {s.mapping.name}; divide it before mapping "
                   "it", s.loc)
    n = normalize(_e("-", s.hi, s.lo))
    # legality
    if tail == "perfect":
        prove(p.ir, c.addr, lambda enc, env: enc.int(n, env) % factor == 0,
              f"{factor} divides the extent {_pe(n)} of loop {s.iter}", s.loc,
              f"add an assert such as `assert {_pe(n)} % {factor} == 0`, or use "
              "tail=\"guard\" or \"cut\"")
    elif tail == "cut":
        prove(p.ir, c.addr, lambda enc, env: enc.int(n, env) >= 0,
              f"the extent {_pe(n)} of loop {s.iter} is not negative", s.loc)
    # rewrite
    vo, vi = Var(outer), Var(inner)
    idx = normalize(_e("+", _e("+", s.lo, _e("*", Const(factor), vo)), vi))
    body = _norm_block(substitute(s.body, {s.iter: idx}))
    f = Const(factor)
    if tail == "guard":
        n_out = normalize(_e("//", _e("+", n, Const(factor - 1)), f))
        cond = BinOp("<", normalize(_e("+", _e("*", f, vo), vi)), n, bool_, s.loc)
        if const_value(s.lo) != 0:
            cond = BinOp("<", idx, s.hi, bool_, s.loc)
        body = (If(cond, body, (), s.loc),)
    else:
        n_out = normalize(_e("//", n, f))
    inner_loop = For(inner, Const(0), f, body, s.kind, None, s.unroll, s.loc)
    outer_loop = For(outer, Const(0), n_out, (inner_loop,), s.kind, None, False, s.loc)
    new = [outer_loop]
    if tail == "cut":
        base = normalize(_e("+", s.lo, _e("*", f, normalize(_e("//", n, f)))))
        tbody = _norm_block(substitute(s.body, {s.iter: normalize(_e("+", base, vi))}))
        new.append(For(inner, Const(0), normalize(_e("%", n, f)), tbody, s.kind, None,
                       s.unroll, s.loc))
    a = c.addr
    deep = ("body", 0, "body", 0, "body") if tail == "guard" else ("body", 0, "body")

    def inner_map(r):
        if len(r) == 1:
            return a
        return a + deep + r[2:]

    return Rewrite(splice(p.ir, a, new), fwd_splice(a, len(new), inner_map))


def _pe(e):
    from ..ir.printer import print_expr

    return print_expr(e)


# ------------------------------------------------------------------ reorder_loops


@primitive("reorder_loops", outer=LOOP)
def reorder_loops(p, outer):
    """Swap loop ``outer`` with the loop directly (and only) nested in it, or nested
    in an ``if`` that is its whole body: ``for a: if g: for b: S`` becomes ``for b:
    for a: if g: S`` (the guards of ``divide_loop(tail="guard")`` move inwards).

    Legality: a guard between the loops reads no array and not the inner variable;
    the inner loop's bounds do not use the outer variable, and no two
    accesses (one a write) touch the same element in iterations whose order the
    swap reverses (no dependence of direction ``(<, >)``).

    Example: ``reorder_loops(p, "i")``
    """
    c = outer
    s: For = c.node()
    guard = _lone_guard(s)
    if guard is not None:
        return _reorder_through_guard(p, c, s, guard)
    if len(s.body) != 1 or not isinstance(s.body[0], For):
        raise fail(f"loop {s.iter} must contain exactly one statement, a loop, to be "
                   "reordered with it", s.loc,
                   "use fission to separate the other statements first")
    t: For = s.body[0]
    if s.iter in free_vars((t.lo, t.hi)):
        raise fail(f"the bounds of loop {t.iter} depend on {s.iter}", t.loc)
    # legality: no dependence with direction (<, >)
    accs = collect(t.body, loops=(s, t))
    hit = find_conflict(p.ir, c.addr, accs, accs,
                        lambda e1, e2: z3.And(e1[s.iter] < e2[s.iter],
                                              e1[t.iter] > e2[t.iter]))
    if hit:
        raise_conflict(f"swapping loops {s.iter} and {t.iter} reverses the order of two "
                       "accesses", hit, s.loc)
    new = t.with_(body=(s.with_(body=t.body),))
    a = c.addr

    def inner_map(r):
        if len(r) == 1:
            return a + ("body", 0)
        if len(r) == 3:
            return a
        return a + ("body", 0) + r[3:]

    return Rewrite(splice(p.ir, a, [new]), fwd_splice(a, 1, inner_map))


def _lone_guard(s: For):
    """The ``if`` that is the whole body of ``s`` and whose whole body is a loop
    (``for a: if g: for b: ...``, a guard of ``divide_loop(tail="guard")``), else None."""
    if len(s.body) != 1 or not isinstance(s.body[0], If):
        return None
    g = s.body[0]
    if g.orelse or len(g.body) != 1 or not isinstance(g.body[0], For):
        return None
    return g


def _reorder_through_guard(p, c, s: For, g: If):
    """``for a: if g: for b: S`` → ``for b: for a: if g: S``.  The guard reads no
    array and not ``b`` (it is outside ``b``), so it selects the same ``(a, b)`` pairs
    in both nests; the pairs whose order changes are checked as without the guard
    (every pair of ``S``'s accesses, a superset of those that run)."""
    from ..ir.nodes import Read

    t: For = g.body[0]
    if any(isinstance(x, Read) for x in walk(g.cond)) or t.iter in free_vars(g.cond):
        raise fail(f"the condition between loops {s.iter} and {t.iter} reads an array",
                   g.loc)
    if s.iter in free_vars((t.lo, t.hi)):
        raise fail(f"the bounds of loop {t.iter} depend on {s.iter}", t.loc)
    accs = collect(t.body, loops=(s, t))
    hit = find_conflict(p.ir, c.addr, accs, accs,
                        lambda e1, e2: z3.And(e1[s.iter] < e2[s.iter],
                                              e1[t.iter] > e2[t.iter]))
    if hit:
        raise_conflict(f"swapping loops {s.iter} and {t.iter} reverses the order of two "
                       "accesses", hit, s.loc)
    new = t.with_(body=(s.with_(body=(g.with_(body=t.body),)),))
    a = c.addr

    def inner_map(r):
        if len(r) == 1:  # the old outer loop
            return a + ("body", 0)
        if len(r) == 3:  # the guard
            return a + ("body", 0, "body", 0)
        if len(r) == 5:  # the old inner loop
            return a
        return a + ("body", 0, "body", 0) + r[5:]

    return Rewrite(splice(p.ir, a, [new]), fwd_splice(a, 1, inner_map))


# ------------------------------------------------------------------ fission


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
    ir, addr, fwd = p.ir, gap.addr, fwd_identity
    for _ in range(n_lifts):
        ir, addr, f = _fission_once(ir, addr)
        fwd = compose(fwd, f)
    _barriers_still_order(p.ir, ir, gap.addr)
    return Rewrite(ir, fwd)


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
    from ..analysis.obligations.races import added_races

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
    """One level of fission at the gap address ``gap``: the new IR, the gap
    between the two loops, and the forwarding."""
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
    statement ``k``): the new proc, the second half's address, and the forwarding of
    addresses inside the old statement into the halves."""

    def inner_map(r):
        if len(r) == 1:
            return a
        j = r[2]
        if j < k:
            return a + ("body", j) + r[3:]
        return a[:-1] + (a[-1] + 1, "body", j - k) + r[3:]

    return splice(pdef, a, new), a[:-1] + (a[-1] + 1,), fwd_splice(a, 2, inner_map)


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
    """The accesses of ``acc_pre`` that are plain writes directly in loop ``L``'s
    body (no guard, no inner loop, not in a call) whose place and value are the
    same in every iteration: neither uses ``L.iter`` nor reads anything the loop
    writes.  Every iteration of ``pre`` ends with the last such write's value."""
    written = {x.buf for x in collect(L.body) if x.writes}
    out = []
    for x in acc_pre:
        st = x.stmt
        if x.mode != "w" or not isinstance(st, Assign) or not any(st is q for q in pre) or \
                x.guards or \
                len(x.loops) != 1:
            continue
        used = free_vars((st.rhs,) + tuple(st.idx))
        if L.iter in used or used & written:
            continue
        out.append(x)
    # the last write to a buffer decides what a later iteration leaves there: keep
    # the exemption only for buffers with no other write before the gap
    bufs = {x.buf for x in out}
    others = [x for x in acc_pre if x.writes and x.buf in bufs and not any(x is y for y in out)]
    return [x for x in out if x.buf not in {y.buf for y in others}]


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
    F = A.with_(body=A.body + bbody)
    acc_a = collect(A.body, loops=(F,))
    acc_b = collect(bbody, loops=(F,))
    has_sync = any(isinstance(n, Sync) for n in walk(F.body))
    hit = find_conflict(p.ir, c1.addr, acc_b, acc_a,
                        lambda e1, e2: e1[A.iter] < e2[A.iter], allow_reduce=not has_sync)
    if hit:
        raise_conflict("backward dependence: an access of the second loop would come "
                       "before an access of the first loop in a later iteration", hit, B.loc)
    if F.kind == "par":
        # the fused iterations run at the same time: none may conflict with another
        check_parallel(p.ir, c1.addr, F)
        if F.mapping == BLOCKS:
            check_fused_blocks(p.ir, c1.addr, F, acc_a, acc_b, B.loc)
    a1 = c1.addr
    n1 = len(A.body)
    ir = splice(p.ir, a1, [F])
    ir = splice(ir, c2.addr, [])
    refuse_new_mapping_issues(p.ir, ir, B.loc)

    def inner_map(r):
        if len(r) == 1:
            return a1
        return a1 + ("body", n1 + r[2]) + r[3:]

    return Rewrite(ir, fwd_splice(c2.addr, 0, inner_map))


# ------------------------------------------------------------------ unroll / cut / remove


@primitive("unroll_loop", loop=LOOP)
def unroll_loop(p, loop):
    """Replace a loop with constant bounds by copies of its body (local
    allocations of each copy get fresh names).

    Legality: the bounds are constants (at most 1024 iterations) and the loop is
    not mapped; the copies run in the loop's order, so the meaning is kept; no
    mapping rule breaks.

    Example: ``unroll_loop(p, "ji")``
    """
    c = loop
    s: For = c.node()
    lo, hi = const_value(s.lo), const_value(s.hi)
    if lo is None or hi is None:
        raise fail(f"loop {s.iter} does not have constant bounds", s.loc,
                   "divide it first, or specialize the size")
    if hi - lo > 1024:
        raise fail(f"loop {s.iter} has {hi - lo} iterations; unrolling more than 1024 is "
                   "refused", s.loc)
    if s.mapping is not None:
        raise fail(f"loop {s.iter} is mapped to {s.mapping.name}: unrolled, its body would "
                   "run on every thread of the enclosing level", s.loc,
                   "unroll a seq loop (inside the thread loop)")
    new = []
    taken = names_outside(p.ir, c.addr)
    for v in range(lo, hi):
        new += freshen_top_allocs(_norm_block(substitute(s.body, {s.iter: Const(v)})), taken)
    a = c.addr
    ir = splice(p.ir, a, new)
    refuse_new_mapping_issues(p.ir, ir, s.loc)

    def inner_map(r):
        if len(r) == 1:
            return None
        return a[:-1] + (a[-1] + r[2],) + r[3:]

    return Rewrite(ir, fwd_splice(a, len(new), inner_map))


@primitive("cut_loop", loop=LOOP, at=TEXT)
def cut_loop(p, loop, at):
    """Cut a loop in two at ``at``: ``for i in seq(lo, hi)`` becomes
    ``for i in seq(lo, at)`` followed by ``for i in seq(at, hi)``.

    ``at`` is an integer expression in the loop's scope (a string or a number).

    Legality: proves ``lo <= at <= hi`` for every value of the sizes and of the
    enclosing loops and conditions.

    Example: ``cut_loop(p, "i", "n - 1")``
    """
    c = loop
    s: For = c.node()
    cut = normalize(parse_at(p.ir, c.addr, at, current(), "int", s.loc, "the cut point"))
    prove(p.ir, c.addr, lambda enc, env: z3.And(enc.int(s.lo, env) <= enc.int(cut, env),
                                                enc.int(cut, env) <= enc.int(s.hi, env)),
          f"{s.iter}'s bounds satisfy {_pe(s.lo)} <= {_pe(cut)} <= {_pe(s.hi)}", s.loc)
    new = [s.with_(hi=cut), s.with_(lo=cut)]
    a = c.addr

    def inner_map(r):
        return a + r[1:]

    return Rewrite(splice(p.ir, a, new), fwd_splice(a, 2, inner_map))


@primitive("remove_loop", loop=LOOP)
def remove_loop(p, loop):
    """Replace a loop by its body, under the guard ``lo < hi`` unless the loop is
    proved to run at least once.

    Legality: the body does not use the loop variable and is idempotent (its
    global effects are plain reads and writes, and it reads nothing it writes),
    so running it once equals running it several times; the loop is not mapped;
    no mapping rule breaks.

    Example: ``remove_loop(p, "k")``
    """
    c = loop
    s: For = c.node()
    if s.iter in free_vars(s.body):
        raise fail(f"the body of loop {s.iter} uses {s.iter}", s.loc)
    accs = collect(s.body)
    written = {x.buf for x in accs if x.writes and not x.local}
    for x in accs:
        if x.local:
            continue
        if x.mode not in ("r", "w"):
            line = x.stmt.loc.line if x.stmt.loc else '?'
            raise fail(f"the body of loop {s.iter} is not idempotent: it updates {x.buf} "
                       f"(line {line})", s.loc)
        if x.mode == "r" and x.buf in written:
            raise fail(f"the body of loop {s.iter} is not idempotent: it reads {x.buf}, "
                       "which it writes", s.loc)
    if s.mapping is not None:
        raise fail(f"loop {s.iter} is mapped to {s.mapping.name}", s.loc)
    a = c.addr
    body = freshen_top_allocs(tuple(s.body), names_outside(p.ir, a))
    try:
        prove(p.ir, a, lambda enc, env: enc.int(s.hi, env) > enc.int(s.lo, env),
              f"loop {s.iter} runs at least once", s.loc)
        new, deep = body, ()
    except SchedulingError:
        # it may run zero times: keep the body under the guard `lo < hi` (as Exo does)
        new = (If(BinOp("<", s.lo, s.hi, bool_, s.loc), body, (), s.loc),)
        deep = (0, "body")
    ir = splice(p.ir, a, new)
    refuse_new_mapping_issues(p.ir, ir, s.loc)

    def inner_map(r):
        if len(r) == 1:
            return a if deep else None
        if deep:
            return a + ("body",) + r[2:]
        return a[:-1] + (a[-1] + r[2],) + r[3:]

    return Rewrite(ir, fwd_splice(a, len(new), inner_map))


# ------------------------------------------------------------------ parallelize_loop


@primitive("parallelize_loop", loop=LOOP, mapping=choice(None, BLOCKS, THREADS))
def parallelize_loop(p, loop, mapping=None):
    """Make ``loop`` a ``par`` loop mapped to ``mapping`` (BLOCKS, THREADS or None).

    Legality: no two iterations conflict (touch one element, one of them writing;
    reductions included); re-mapping a mapped loop breaks no mapping rule of SPEC
    2.4 that the input kept (a first mapping may pass through the transient states
    of a top-down mapping).

    Example: ``parallelize_loop(p, "io", BLOCKS)``
    """
    c = loop
    s: For = c.node()
    check_parallel(p.ir, c.addr, s)
    new = s.with_(kind="par", mapping=mapping)
    ir = splice(p.ir, c.addr, [new])
    # mapping a loop for the first time may pass through a transient state; re-mapping
    # a mapped loop (or unmapping it) must not break any rule the input kept
    refuse_new_mapping_issues(p.ir, ir, s.loc, strict=s.mapping is not None)
    return Rewrite(ir, fwd_identity)


# ------------------------------------------------------------------ specialize / simplify / rename


@primitive("specialize", block=BLOCK, conds=TEXTS)
def specialize(p, block, conds):
    """Copy ``block`` into the branches of ``if c1: block`` / ``elif c2: block``
    ... ``else: block``, one per condition of ``conds`` (a string or a list).

    Legality: none needed beyond scoping: each branch is the same block, so the
    meaning is kept whatever the conditions; an allocation of the block must not
    be used after it (it would go out of scope).

    Example: ``specialize(p, "for i in _: _", "n % 4 == 0")``
    """
    c = block
    stmts = c.node()
    cs = [parse_at(p.ir, c.addr, x, current(), "bool", c.loc, "a specialization")
          for x in conds]
    for x in cs:
        if x.ty != bool_:
            raise fail(f"{_pe(x)} is not a condition", c.loc)
    a = c.addr
    after = block_of(p.ir, a[:-1])[a[-1] + len(stmts):]
    for st in stmts:
        if isinstance(st, Alloc) and st.name in free_vars(tuple(after)):
            raise fail(f"'{st.name}' is allocated in the block and used after it: inside the "
                       "branches it would go out of scope", st.loc,
                       f"specialize a block that ends after the last use of {st.name}")
    out = tuple(stmts)
    for x in reversed(cs):
        out = (If(normalize(x), tuple(stmts), out, stmts[0].loc),)
    n_old = len(stmts)

    def inner_map(r):
        return a + ("body", r[0]) + r[1:]

    return Rewrite(replace_block(p.ir, a[:-1], block_of(p.ir, a[:-1])[:a[-1]] + out +
                                 block_of(p.ir, a[:-1])[a[-1] + n_old:]),
                   fwd_splice(a, 1, inner_map, n_old=n_old))


@primitive("simplify")
def simplify(p):
    """Normalise index arithmetic, fold constants, and drop ``if``s decided by the
    loop ranges.

    Legality: none needed: each step is an identity of integer arithmetic, and a
    branch is dropped only where the enclosing loop ranges decide its condition.

    Example: ``simplify(p)``
    """
    ir, edits = simplify_ir(p.ir)
    fs = []
    for a, n, fld in edits:
        def inner_map(r, a=a, fld=fld):
            if len(r) >= 3 and r[1] == fld:
                return a[:-1] + (a[-1] + r[2],) + r[3:]
            return None

        fs.append(fwd_splice(a, n, inner_map))

    def fwd(addr):
        for f in fs:
            addr = f(addr)
        return addr

    return Rewrite(ir, fwd)


@primitive("rename", name=PROC_NAME)
def rename(p, name: str):
    """The same proc under another name.

    Legality: none needed (the name is not part of the meaning); it must be a
    valid identifier that is not a keyword or a statement of the language.

    Example: ``rename(p, "saxpy_tiled")``
    """
    return Rewrite(p.ir.with_(name=name), fwd_identity)


__all__ = ["divide_loop", "reorder_loops", "fission", "fuse", "unroll_loop", "cut_loop", "remove_loop", "parallelize_loop", "specialize",
           "simplify", "rename", "check_parallel"]
