"""Loop primitives: divide_loop, reorder_loops, unroll_loop, cut_loop, remove_loop,
parallelize_loop, specialize, simplify, rename (fission and fuse are in
:mod:`.fission`; the compiler hints set_unroll and set_blocks_per_sm in :mod:`.hints`).

Each primitive is declared with :func:`~gpudsl.schedule.primitive.primitive`: its
legality check (built on :mod:`.legality` and :mod:`.parallel`), then the rewrite,
which returns the new IR and the cursor forwarding.
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.nodes import Alloc, BinOp, Builtin, Const, For, If, Read, UnOp, Var
from ..ir.types import BLOCKS, CLUSTERS, INDEX, REGISTER, THREADS, bool_
from ..ir.visitor import bound_names, free_vars, substitute, walk
from .cursors import ancestors, block_of
from .edits import Moved, insert, replace, unwrap, update, with_proc, wrap
from .fresh import freshen_top_allocs, names_outside
from .legality import collect, find_conflict, prove, raise_conflict
from .parallel import check_parallel, refuse_new_mapping_issues
from .patterns import parse_at, scope_at
from .primitive import (BLOCK, BOOL, LOOP, POSITIVE_INT, PROC_NAME, TEXT, TEXTS, choice, current, fail, names as names_kind, primitive)
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

    A BLOCKS loop (ungrouped, not a cluster's) divides too, with "guard" or "perfect":
    both new loops are BLOCKS loops, the outer one first, so code generation gives the
    inner one the block dimension the loops inside it do not take (the grid's shape
    sets the order in which the hardware starts the blocks; blocks are independent,
    so the meaning is unchanged).

    Legality: the loop is not mapped (or is a BLOCKS loop, above), and the new names are
    free. "perfect":
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
    if s.mapping is not None and (s.mapping != BLOCKS or tail == "cut" or s.group
                                  or s.cluster):
        raise fail(f"loop {s.iter} is mapped to {s.mapping.name}; divide it before mapping "
                   "it" + (" (a BLOCKS loop divides with tail='guard' or 'perfect', "
                           "ungrouped and outside clusters)" if s.mapping == BLOCKS else ""),
                   s.loc)
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
    inner_loop = For(inner, Const(0), f, body, s.kind, s.mapping, s.unroll, s.loc)
    outer_loop = For(outer, Const(0), n_out, (inner_loop,), s.kind, s.mapping, False, s.loc)
    new = [outer_loop]
    if tail == "cut":
        base = normalize(_e("+", s.lo, _e("*", f, normalize(_e("//", n, f)))))
        tbody = _norm_block(substitute(s.body, {s.iter: normalize(_e("+", base, vi))}))
        new.append(For(inner, Const(0), normalize(_e("%", n, f)), tbody, s.kind, None,
                       s.unroll, s.loc))
    a = c.addr
    deep = ("body", 0, "body", 0, "body") if tail == "guard" else ("body", 0, "body")

    # the loop's cursor follows the outer loop, its statements the new body
    return replace(p.ir, a, new, keep=[Moved((0,), a), Moved((0, "body"), a + deep)])


def _pe(e):
    from ..ir.printer import print_expr

    return print_expr(e)


# ------------------------------------------------------------------ reorder_loops


@primitive("reorder_loops", outer=LOOP)
def reorder_loops(p, outer):
    """Swap loop ``outer`` with the loop directly (and only) nested in it, or nested
    in ``if`` statements each the whole body of the one before: ``for a: if g: for b:
    S`` becomes ``for b: for a: if g: S`` (the guards of ``divide_loop(tail="guard")``
    move inwards).

    Legality: a guard between the loops reads no array and not the inner variable;
    the inner loop's bounds do not use the outer variable, and no two
    accesses (one a write) touch the same element in iterations whose order the
    swap reverses (no dependence of direction ``(<, >)``).

    Example: ``reorder_loops(p, "i")``
    """
    c = outer
    s: For = c.node()
    chain = _lone_guard(s)
    if chain is not None:
        return _reorder_through_guard(p, c, s, chain)
    if len(s.body) != 1 or not isinstance(s.body[0], For):
        raise fail(f"loop {s.iter} must contain exactly one statement, a loop, to be "
                   "reordered with it", s.loc,
                   "use fission to separate the other statements first")
    t: For = s.body[0]
    if s.iter in free_vars((t.lo, t.hi)):
        raise fail(f"the bounds of loop {t.iter} depend on {s.iter}", t.loc)
    if s.cluster or t.cluster:
        raise fail("a CLUSTERS loop stays the innermost loop of its BLOCKS nest (its "
                   "iterations are the blocks of one cluster)", s.loc)
    # legality: no dependence with direction (<, >)
    _check_no_reversed_dependence(p, c, s, t)
    new = t.with_(body=(s.with_(body=t.body),))
    a = c.addr

    return replace(p.ir, a, [new], keep=[
        Moved((0,), a + ("body", 0)), Moved((0, "body", 0), a),
        Moved((0, "body", 0, "body"), a + ("body", 0, "body"))])


def _check_no_reversed_dependence(p, c, s: For, t: For) -> None:
    """Swapping loops ``s`` (outer) and ``t`` is legal when no two accesses of ``t``'s
    body depend with direction (<, >): the pair whose order the swap reverses."""
    accs = collect(t.body, loops=(s, t))
    hit = find_conflict(p.ir, c.addr, accs, accs,
                        lambda e1, e2: z3.And(e1[s.iter] < e2[s.iter],
                                              e1[t.iter] > e2[t.iter]))
    if hit:
        raise_conflict(f"swapping loops {s.iter} and {t.iter} reverses the order of two "
                       "accesses", hit, s.loc)


def _lone_guard(s: For):
    """The chain of ``if`` statements between ``s`` and a loop (``for a: if g1: if g2:
    for b: ...``: each the whole body of the one before, without ``else``; the guards
    of ``divide_loop(tail="guard")``), else None."""
    chain, blk = [], s.body
    while len(blk) == 1 and isinstance(blk[0], If) and not blk[0].orelse:
        chain.append(blk[0])
        blk = blk[0].body
    if not chain or len(blk) != 1 or not isinstance(blk[0], For):
        return None
    return chain


def _reorder_through_guard(p, c, s: For, chain: list):
    """``for a: if g1: ... if gn: for b: S`` → ``for b: for a: if g1: ... if gn: S``.
    The guards read no array and not ``b`` (they are outside ``b``), so they select
    the same ``(a, b)`` pairs in both nests; the pairs whose order changes are checked
    as without the guards (every pair of ``S``'s accesses, a superset of those that
    run)."""
    from ..ir.nodes import Read

    t: For = chain[-1].body[0]
    for g in chain:
        if any(isinstance(x, Read) for x in walk(g.cond)) or t.iter in free_vars(g.cond):
            raise fail(f"the condition between loops {s.iter} and {t.iter} reads an array",
                       g.loc)
    if s.iter in free_vars((t.lo, t.hi)):
        raise fail(f"the bounds of loop {t.iter} depend on {s.iter}", t.loc)
    _check_no_reversed_dependence(p, c, s, t)
    inner = t.body
    for g in reversed(chain):
        inner = (g.with_(body=inner),)
    new = t.with_(body=(s.with_(body=inner),))
    a = c.addr
    depth = ("body", 0) * len(chain)           # from a loop to its innermost guard
    keep = [Moved((0,), a + ("body", 0))]      # the old outer loop
    for k in range(len(chain)):                # the guards
        keep.append(Moved((0,) + ("body", 0) * (k + 1), a + ("body", 0) + ("body", 0) * (k + 1)))
    keep.append(Moved((0,) + depth + ("body", 0), a))          # the old inner loop
    keep.append(Moved((0,) + depth + ("body", 0, "body"), a + ("body", 0) + depth + ("body",)))
    return replace(p.ir, a, [new], keep=keep)


# ------------------------------------------------------------------ fission


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
    out = unwrap(p.ir, c.addr, "body", new)  # the body's cursors follow the first copy
    refuse_new_mapping_issues(p.ir, out.ir, s.loc)
    return out


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
    a = c.addr
    # the loop's cursors follow its first part
    return update(p.ir, a, [s.with_(hi=cut)]).then(insert, a[:-1] + (a[-1] + 1,),
                                                   [s.with_(lo=cut)])


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
        out = unwrap(p.ir, a, "body", body)
    except SchedulingError:
        # it may run zero times: keep the body under the guard `lo < hi` (as Exo does);
        # the loop's cursors follow the guard
        out = update(p.ir, a, [If(BinOp("<", s.lo, s.hi, bool_, s.loc), body, (), s.loc)])
    refuse_new_mapping_issues(p.ir, out.ir, s.loc)
    return out


# ------------------------------------------------------------------ parallelize_loop


@primitive("parallelize_loop", loop=LOOP, mapping=choice(None, BLOCKS, THREADS, CLUSTERS))
def parallelize_loop(p, loop, mapping=None):
    """Make ``loop`` a ``par`` loop mapped to ``mapping`` (BLOCKS, THREADS, CLUSTERS or None).
    ``CLUSTERS`` (docs/hopper.md (clusters)) makes a loop of constant extent (1 to 8), the
    innermost of a kernel's BLOCKS nest (e.g. the inner loop of ``divide_loop`` on a BLOCKS
    loop), the blocks of one thread block cluster.

    A scalar local of the loop that only host code may hold (GLOBAL, the default outside
    kernels) becomes REGISTER: each iteration keeps its own.

    Legality: no two iterations conflict (touch one element, one of them writing;
    reductions included); re-mapping a mapped loop breaks no mapping rule (docs/language.md,
    "Meaning") that the input kept (a first mapping may pass through the transient states
    of a top-down mapping).

    Example: ``parallelize_loop(p, "io", BLOCKS)``
    """
    c = loop
    s: For = c.node()
    check_parallel(p.ir, c.addr, s)
    cluster = mapping == CLUSTERS
    if cluster:
        mapping = BLOCKS
    new = s.with_(kind="par", mapping=mapping, cluster=cluster)
    if mapping is not None:
        new = new.with_(body=_thread_scalars(new.body, mapping))
    out = update(p.ir, c.addr, [new])
    # mapping a loop for the first time may pass through a transient state; re-mapping
    # a mapped loop (or unmapping it) must not break any rule the input kept
    refuse_new_mapping_issues(p.ir, out.ir, s.loc, strict=s.mapping is not None or cluster)
    return out


def _thread_scalars(body: tuple, mapping) -> tuple:
    """``body`` of a loop now mapped to ``mapping``, its scalar locals placed where a kernel
    can hold them: a scalar that only host code may allocate (GLOBAL, the default outside
    kernels) becomes REGISTER.  Each iteration has its own scalar either way: in a THREADS
    loop every one (at any depth of seq loops and ifs), in a BLOCKS loop those that no
    parallel loop below uses (one per block, used by its sequential code)."""
    def place(st):
        if isinstance(st, Alloc) and not st.shape and st.mem.scope == "grid":
            if mapping == THREADS or not any(
                    isinstance(f, For) and f.kind == "par" and st.name in free_vars(f)
                    for f in walk(body)):
                return st.with_(mem=REGISTER)
        if isinstance(st, For) and st.kind == "seq":
            return st.with_(body=tuple(map(place, st.body)))
        if isinstance(st, If):
            return st.with_(body=tuple(map(place, st.body)),
                            orelse=tuple(map(place, st.orelse)))
        return st

    return tuple(map(place, body))


# ------------------------------------------------------------------ specialize / simplify / rename


@primitive("specialize", block=BLOCK, conds=TEXTS)
def specialize(p, block, conds):
    """Copy ``block`` into the branches of ``if c1: block`` / ``elif c2: block``
    ... ``else: block``, one per condition of ``conds`` (a string or a list).

    Legality: each branch is the same block, so the meaning is kept whatever the
    conditions, but each condition must be defined wherever it is evaluated (where
    the earlier ones are false): its divisors are proved non-zero and its reads in
    bounds (under its own ``and`` / ``or`` / ``select`` guards); inside a parallel loop,
    a condition must not read what another iteration writes (check() must find no new
    race); an allocation of the block must not be used after it (it would go out of
    scope).

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
    for k, x in enumerate(cs):  # each evaluated where the earlier ones are false
        _refuse_partial(p.ir, a, x, [UnOp("not", y, bool_) for y in cs[:k]], c.loc)
    after = block_of(p.ir, a[:-1])[a[-1] + len(stmts):]
    for st in stmts:
        if isinstance(st, Alloc) and st.name in free_vars(tuple(after)):
            raise fail(f"'{st.name}' is allocated in the block and used after it: inside the "
                       "branches it would go out of scope", st.loc,
                       f"specialize a block that ends after the last use of {st.name}")
    out = tuple(stmts)
    for x in reversed(cs):
        out = (If(normalize(x), tuple(stmts), out, stmts[0].loc),)
    # the statements' cursors follow them into the first branch
    done = wrap(p.ir, a, len(stmts), out[0])
    _no_race_in_conditions(p.ir, done.ir, a, cs, c.loc)
    return done


def _no_race_in_conditions(old, new, addr, conds, loc):
    """A condition that reads memory, evaluated inside a parallel loop, reads it in
    every iteration: where another iteration writes it, the branch taken depends on
    the schedule (a race the block alone did not have).  Refuse when check() finds a
    race in the result that it did not find before (differential seed 3002, case
    7374: ``if x[0] > 0.0`` around ``x[k] = ...`` in ``for k in par(0, 2)``)."""
    from ..analysis.check import check

    reads = {n.name for x in conds for n in walk(x) if isinstance(n, Read)}
    if not reads or not any(isinstance(s, For) and s.kind == "par"
                            for s in ancestors(old, addr)):
        return
    before, after = check(old), check(new)
    if len(after.of_kind("race")) > len(before.of_kind("race")):
        d = after.of_kind("race")[0]
        raise fail(f"the condition reads {', '.join(sorted(reads))}, which another "
                   f"iteration of an enclosing parallel loop may write: {d.message}", loc,
                   "specialize outside the parallel loop, or on values no iteration "
                   "writes", d.witness or None)


def _refuse_partial(pdef, addr, cond, guards, loc):
    """Refuse a user-given condition that is not defined wherever it is evaluated: a
    division or modulo by what may be zero, a read that may leave its array (``and``,
    ``or`` and ``select`` evaluate an operand only where the other decides so)."""
    shapes = scope_at(pdef, addr)
    hint = "a condition must be defined wherever the block runs (guard it with `and`)"

    def holds(goal, gs, what):
        def prop(sc, env):
            facts = [sc.cond(g, env) for g in gs]
            return z3.Implies(z3.And(*facts), goal(sc, env)) if facts else goal(sc, env)
        prove(pdef, addr, prop, what, loc, hint)

    def visit(e, gs):
        if isinstance(e, BinOp) and e.op in ("and", "or"):
            visit(e.lhs, gs)
            visit(e.rhs, gs + [e.lhs if e.op == "and" else UnOp("not", e.lhs, bool_)])
            return
        if isinstance(e, Builtin) and e.name == "select":
            c, x, y = e.args
            visit(c, gs)
            visit(x, gs + [c])
            visit(y, gs + [UnOp("not", c, bool_)])
            return
        if isinstance(e, BinOp) and e.op in ("//", "%"):
            visit(e.lhs, gs)
            visit(e.rhs, gs)
            holds(lambda sc, env, d=e.rhs: sc.int(d, env) != 0, gs,
                  f"the divisor {_pe(e.rhs)} in the condition {_pe(cond)} is not zero")
            return
        if isinstance(e, Read):
            for i, X in zip(e.idx, shapes[e.name][2] or ()):
                visit(i, gs)
                holds(lambda sc, env, i=i, X=X: z3.And(sc.int(i, env) >= 0,
                                                       sc.int(i, env) < sc.int(X, env)),
                      gs, f"the read {_pe(e)} in the condition {_pe(cond)} is in bounds")
            return
        for kid in _kids(e):
            visit(kid, gs)

    visit(cond, list(guards))


def _kids(e):
    if isinstance(e, BinOp):
        return (e.lhs, e.rhs)
    if isinstance(e, UnOp):
        return (e.arg,)
    if isinstance(e, Builtin):
        return e.args
    return ()


@primitive("simplify")
def simplify(p):
    """Normalise index arithmetic, fold constants, and drop ``if``s decided by the
    loop ranges.

    Legality: none needed: each step is an identity of integer arithmetic, and a
    branch is dropped only where the enclosing loop ranges decide its condition.

    Example: ``simplify(p)``
    """
    return simplify_ir(p.ir)


@primitive("rename", name=PROC_NAME)
def rename(p, name: str):
    """The same proc under another name.

    Legality: none needed (the name is not part of the meaning); it must be a
    valid identifier that is not a keyword or a statement of the language.

    Example: ``rename(p, "saxpy_tiled")``
    """
    return with_proc(p.ir, name=name)


__all__ = ["divide_loop", "reorder_loops", "unroll_loop", "cut_loop", "remove_loop", "parallelize_loop", "specialize",
           "simplify", "rename", "check_parallel"]
