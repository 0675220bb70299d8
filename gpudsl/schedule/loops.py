"""Loop primitives: divide_loop, reorder_loops, fission, fuse, unroll_loop,
cut_loop, remove_loop, parallelize_loop, specialize, simplify, rename.

Each primitive is a rewrite (building the new IR and the cursor forwarding)
preceded by its legality check (``_check_*`` functions here, built on
:mod:`gpudsl.schedule.legality`).
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.nodes import (Alloc, Assign, BinOp, Call, Const, For, If, Read, Reduce, Sync, Var)
from ..ir.types import BLOCKS, INDEX, THREADS, Mapping, bool_
from ..ir.visitor import bound_names, free_vars, rename as rename_names, substitute, walk
from .fresh import freshen, freshen_top_allocs, names_outside, proc_names, top_allocs
from .cursors import (ancestors, block_of, fwd_identity, fwd_splice, replace_block, resolve,
                      result, splice)
from .legality import collect, find_conflict, prove, raise_conflict
from .patterns import check_new_name, parse_at, scope_at
from .simplify import const_value, normalize, simplify_ir


def _norm_block(stmts):
    """Normalise index expressions of freshly substituted statements."""
    from .simplify import _Simplifier

    return _Simplifier(()).visit_block(tuple(stmts))


def _check_new_names(p, addr, names, prim, loc, old=()):
    taken = set(scope_at(p.ir, addr)) | bound_names(tuple(block_of(p.ir, addr[:-1])
                                                          [addr[-1]:addr[-1] + 1]))
    taken -= set(old)
    for n in names:
        check_new_name(n, prim, loc)
        if n in taken:
            raise SchedulingError(prim, f"the name '{n}' is already used here", loc,
                                  "pick a fresh name")
    if len(set(names)) != len(names):
        raise SchedulingError(prim, "the new names must differ", loc)


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


# Mapping issues that a schedule passes through on its way to a legal proc (the
# outer loop mapped to BLOCKS before the inner one to THREADS, an allocation before
# the loop that will make it block level): not refused.
_TRANSIENT = ("a memory write at block level", "a memory write inside an unmapped par loop",
              "a SHARED array must be allocated", "a REGISTER allocation outside")


def _mapping_issues(pdef, strict: bool) -> set:
    """The broken mapping rules of SPEC 2.4 (structural, no solver) in ``pdef``."""
    from ..analysis.effects import collect as collect_effects

    return {(i.kind, i.message, tuple(map(str, i.locs)))
            for i in collect_effects(pdef).issues
            if i.kind == "mapping" and (strict or not i.message.startswith(_TRANSIENT))}


def refuse_new_mapping_issues(prim, old, new, loc, strict: bool = True):
    """Refuse a rewrite that breaks a mapping rule the input kept (``strict=False``:
    except the transient ones of a top-down mapping, see ``_TRANSIENT``)."""
    added = _mapping_issues(new, strict) - _mapping_issues(old, strict)
    if added:
        raise SchedulingError(prim, "the result would break a mapping rule: "
                              + "; ".join(sorted({m for _, m, _ in added})), loc,
                              "BLOCKS loops stand at host level (up to 3 directly nested), "
                              "THREADS loops at block level (up to 3 directly nested)")


# ------------------------------------------------------------------ divide_loop


def divide_loop(p, loop, factor: int, names, tail: str = "guard", perfect: bool = False):
    """``for i in seq(lo, hi)`` → ``for outer: for inner in seq(0, factor)`` with
    ``i = lo + factor * outer + inner``.  ``tail``: "guard" (an ``if``), "cut" (a
    remainder loop after the nest) or "perfect" (proved: factor divides hi - lo)."""
    prim = "divide_loop"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    if perfect:
        tail = "perfect"
    if tail not in ("guard", "cut", "perfect"):
        raise SchedulingError(prim, f"tail must be 'guard', 'cut' or 'perfect', not {tail!r}",
                              s.loc)
    if not isinstance(factor, int) or factor < 1:
        raise SchedulingError(prim, f"the factor must be a positive integer, not {factor!r}",
                              s.loc)
    if len(names) != 2:
        raise SchedulingError(prim, "give two names: [outer, inner]", s.loc)
    outer, inner = names
    _check_new_names(p, c.addr, [outer, inner], prim, s.loc, old=(s.iter,))
    if s.mapping is not None:
        raise SchedulingError(prim, f"loop {s.iter} is mapped to {s.mapping.name}; divide it "
                              "before mapping it", s.loc)
    n = normalize(_e("-", s.hi, s.lo))
    # legality
    if tail == "perfect":
        prove(p.ir, c.addr, lambda enc, env: enc.int(n, env) % factor == 0, prim,
              f"{factor} divides the extent {_pe(n)} of loop {s.iter}", s.loc,
              f"add an assert such as `assert {_pe(n)} % {factor} == 0`, or use "
              "tail=\"guard\" or \"cut\"")
    elif tail == "cut":
        prove(p.ir, c.addr, lambda enc, env: enc.int(n, env) >= 0, prim,
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

    return result(p, splice(p.ir, a, new), fwd_splice(a, len(new), inner_map))


def _pe(e):
    from ..ir.printer import print_expr

    return print_expr(e)


# ------------------------------------------------------------------ reorder_loops


def reorder_loops(p, outer):
    """Swap loop ``outer`` with the loop directly (and only) nested in it."""
    prim = "reorder_loops"
    c = resolve(p, outer, prim, "loop")
    s: For = c.node()
    if len(s.body) != 1 or not isinstance(s.body[0], For):
        raise SchedulingError(prim, f"loop {s.iter} must contain exactly one statement, a "
                              "loop, to be reordered with it", s.loc,
                              "use fission to separate the other statements first")
    t: For = s.body[0]
    if s.iter in free_vars((t.lo, t.hi)):
        raise SchedulingError(prim, f"the bounds of loop {t.iter} depend on {s.iter}", t.loc)
    # legality: no dependence with direction (<, >)
    accs = collect(t.body, loops=(s, t))
    hit = find_conflict(p.ir, c.addr, accs, accs,
                        lambda e1, e2: z3.And(e1[s.iter] < e2[s.iter],
                                              e1[t.iter] > e2[t.iter]))
    if hit:
        raise_conflict(prim, f"swapping loops {s.iter} and {t.iter} reverses the order of "
                       "two accesses", hit, s.loc)
    new = t.with_(body=(s.with_(body=t.body),))
    a = c.addr

    def inner_map(r):
        if len(r) == 1:
            return a + ("body", 0)
        if len(r) == 3:
            return a
        return a + ("body", 0) + r[3:]

    return result(p, splice(p.ir, a, [new]), fwd_splice(a, 1, inner_map))


# ------------------------------------------------------------------ fission


def fission(p, gap, n_lifts: int = 1):
    """Split the loop(s) around ``gap`` into two loop nests."""
    prim = "fission"
    c = resolve(p, gap, prim, "gap")
    q = p
    for _ in range(n_lifts):
        q, c = _fission_once(q, c, prim)
    return q


def _fission_once(p, c, prim):
    baddr, k = c.addr[:-1], c.addr[-1]
    if not baddr or baddr[-1] != "body":
        raise SchedulingError(prim, "the gap is not inside a loop", c.loc)
    a = baddr[:-1]
    L = block_of(p.ir, a[:-1])[a[-1]]
    if not isinstance(L, For):
        raise SchedulingError(prim, "the gap is not directly inside a loop", c.loc)
    pre, post = L.body[:k], L.body[k:]
    if not pre or not post:
        raise SchedulingError(prim, f"the gap is at the edge of loop {L.iter}: nothing to "
                              "split", L.loc)
    used_after = free_vars(post)
    for st in pre:
        if isinstance(st, Alloc) and st.name in used_after:
            raise SchedulingError(prim, f"'{st.name}' is allocated before the gap and used "
                                  "after it", st.loc, f"lift_alloc {st.name} out of loop "
                                  f"{L.iter} first")
    acc_pre = collect(pre, loops=(L,))
    acc_post = collect(post, loops=(L,))
    # A read after the gap may come before a later iteration's write before the gap
    # when that write stores the same value at the same place in every iteration:
    # after fission the read sees that value from the last iteration instead.
    same = _same_value_writes(L, pre, acc_pre)
    reads = [x for x in acc_post if x.mode == "r"]
    hit = find_conflict(p.ir, a, [x for x in acc_post if x.mode != "r"], acc_pre,
                        lambda e1, e2: e1[L.iter] < e2[L.iter]) or \
        find_conflict(p.ir, a, reads, [x for x in acc_pre if not any(x is y for y in same)],
                      lambda e1, e2: e1[L.iter] < e2[L.iter])
    if hit:
        raise_conflict(prim, f"an access after the gap in an iteration of {L.iter} comes "
                       "before an access before the gap in a later iteration", hit, L.loc)
    new = [L.with_(body=pre), L.with_(body=post)]

    def inner_map(r):
        if len(r) == 1:
            return a
        j = r[2]
        if j < k:
            return a + ("body", j) + r[3:]
        return a[:-1] + (a[-1] + 1, "body", j - k) + r[3:]

    q = result(p, splice(p.ir, a, new), fwd_splice(a, 2, inner_map))
    from .cursors import Cursor

    return q, Cursor(q, "gap", a[:-1] + (a[-1] + 1,))


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


def fuse(p, loop1, loop2):
    """Join two adjacent loops with equal bounds into one."""
    prim = "fuse"
    c1 = resolve(p, loop1, prim, "loop")
    c2 = resolve(p, loop2, prim, "loop")
    A, B = c1.node(), c2.node()
    if c1.addr[:-1] != c2.addr[:-1] or c2.addr[-1] != c1.addr[-1] + 1:
        raise SchedulingError(prim, f"loop {B.iter} must directly follow loop {A.iter}",
                              B.loc)
    if (A.kind, A.mapping) != (B.kind, B.mapping):
        raise SchedulingError(prim, "the loops differ in kind or mapping", B.loc)
    for x, y, what in ((A.lo, B.lo, "lower"), (A.hi, B.hi, "upper")):
        if normalize(x) != normalize(y):
            prove(p.ir, c1.addr, lambda enc, env, x=x, y=y: enc.int(x, env) == enc.int(y, env),
                  prim, f"the {what} bounds of loops {A.iter} and {B.iter} are equal", B.loc)
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
        raise_conflict(prim, "backward dependence: an access of the second loop would come "
                       "before an access of the first loop in a later iteration", hit, B.loc)
    if F.kind == "par":
        # the fused iterations run at the same time: none may conflict with another
        check_parallel(p.ir, c1.addr, F, prim)
        if F.mapping == BLOCKS:
            _check_fused_blocks(p.ir, c1.addr, F, acc_a, acc_b, prim, B.loc)
    a1 = c1.addr
    n1 = len(A.body)
    ir = splice(p.ir, a1, [F])
    ir = splice(ir, c2.addr, [])
    refuse_new_mapping_issues(prim, p.ir, ir, B.loc)

    def inner_map(r):
        if len(r) == 1:
            return a1
        return a1 + ("body", n1 + r[2]) + r[3:]

    return result(p, ir, fwd_splice(c2.addr, 0, inner_map))


def _thread_id(acc, enc_env, tag):
    """The (x, y, z) thread coordinates of an access instance: the variables of its
    directly nested THREADS loops, innermost on x; any thread outside them."""
    th = [L for L in acc.loops if L.mapping == THREADS]
    if not th:
        return None
    ids = [enc_env[L.iter] for L in reversed(th)]
    return ids + [z3.IntVal(0)] * (3 - len(ids))


def _check_fused_blocks(pdef, addr, F, acc_a, acc_b, prim, loc):
    """Fusing two BLOCKS loops puts both kernels' code in one block with no barrier
    between them: an access of the second by one thread must not conflict with an
    access of the first by another thread of the same block."""
    def relate(e1, e2):
        t1, t2 = _thread_id(relate.a, e1, "_1"), _thread_id(relate.b, e2, "_2")
        same_block = e1[F.iter] == e2[F.iter]
        if t1 is None or t2 is None:
            return same_block
        return z3.And(same_block, z3.Or(*[x != y for x, y in zip(t1, t2)]))

    for a in acc_b:
        for b in acc_a:
            relate.a, relate.b = a, b
            hit = find_conflict(pdef, addr, [a], [b], relate, allow_reduce=False)
            if hit:
                raise_conflict(prim, "in the fused kernel, two threads of one block would "
                               "conflict with no barrier between them", hit, loc,
                               "fuse the thread loops only where each thread reads what it "
                               "wrote itself")


# ------------------------------------------------------------------ unroll / cut / remove


def set_unroll(p, loop, unroll: bool = True):
    """Ask code generation to unroll a loop (``#pragma unroll``) or stop asking;
    the proc's meaning does not change (the loop prints as ``seq(lo, hi,
    unroll=True)``).  Unlike :func:`unroll_loop` the IR keeps one body."""
    prim = "set_unroll"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    if s.kind != "seq" and unroll:
        raise SchedulingError(prim, f"loop {s.iter} is a par loop; only seq loops unroll",
                              s.loc)
    return _with_loop_fields(p, c, unroll=bool(unroll))


def set_blocks_per_sm(p, loop, blocks: int):
    """Ask for ``blocks`` resident blocks per multiprocessor for the kernel of the
    outermost BLOCKS loop ``loop`` (``__launch_bounds__(threads, blocks)``: ptxas
    then keeps registers per thread within ``65536 / (threads * blocks)``); 0
    removes the hint.  The meaning does not change."""
    prim = "set_blocks_per_sm"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    if s.mapping != BLOCKS or any(isinstance(a, For) and a.mapping == BLOCKS
                                  for a in ancestors(p.ir, c.addr)):
        raise SchedulingError(prim, f"loop {s.iter} is not the outermost BLOCKS loop of a "
                              "kernel", s.loc)
    if not isinstance(blocks, int) or blocks < 0:
        raise SchedulingError(prim, f"blocks per multiprocessor must be an int >= 0, not "
                              f"{blocks!r}", s.loc)
    return _with_loop_fields(p, c, blocks_per_sm=blocks)


def _with_loop_fields(p, c, **fields):
    """The loop at cursor ``c`` with ``fields`` changed, nothing else (hints only)."""
    return result(p, splice(p.ir, c.addr, [c.node().with_(**fields)]),
                  fwd_splice(c.addr, 1, lambda r: c.addr + r[1:]))


def unroll_loop(p, loop):
    """Replace a loop with constant bounds by copies of its body."""
    prim = "unroll_loop"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    lo, hi = const_value(s.lo), const_value(s.hi)
    if lo is None or hi is None:
        raise SchedulingError(prim, f"loop {s.iter} does not have constant bounds", s.loc,
                              "divide it first, or specialize the size")
    if hi - lo > 1024:
        raise SchedulingError(prim, f"loop {s.iter} has {hi - lo} iterations; unrolling "
                              "more than 1024 is refused", s.loc)
    if s.mapping is not None:
        raise SchedulingError(prim, f"loop {s.iter} is mapped to {s.mapping.name}: unrolled, "
                              "its body would run on every thread of the enclosing level",
                              s.loc, "unroll a seq loop (inside the thread loop)")
    new = []
    taken = names_outside(p.ir, c.addr)
    for v in range(lo, hi):
        new += freshen_top_allocs(_norm_block(substitute(s.body, {s.iter: Const(v)})), taken)
    a = c.addr
    ir = splice(p.ir, a, new)
    refuse_new_mapping_issues(prim, p.ir, ir, s.loc)
    nb = len(s.body)

    def inner_map(r):
        if len(r) == 1:
            return None
        return a[:-1] + (a[-1] + r[2],) + r[3:]

    return result(p, ir, fwd_splice(a, len(new), inner_map))


def cut_loop(p, loop, at):
    """``for i in seq(lo, hi)`` → ``for i in seq(lo, at)``; ``for i in seq(at, hi)``."""
    prim = "cut_loop"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    cut = normalize(parse_at(p.ir, c.addr, at, prim, "int", s.loc, "the cut point"))
    prove(p.ir, c.addr, lambda enc, env: z3.And(enc.int(s.lo, env) <= enc.int(cut, env),
                                                enc.int(cut, env) <= enc.int(s.hi, env)),
          prim, f"{s.iter}'s bounds satisfy {_pe(s.lo)} <= {_pe(cut)} <= {_pe(s.hi)}", s.loc)
    new = [s.with_(hi=cut), s.with_(lo=cut)]
    a = c.addr

    def inner_map(r):
        return a + r[1:]

    return result(p, splice(p.ir, a, new), fwd_splice(a, 2, inner_map))


def remove_loop(p, loop):
    """Replace a loop by its body when the body does not use the loop variable,
    is idempotent and the loop runs at least once."""
    prim = "remove_loop"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    if s.iter in free_vars(s.body):
        raise SchedulingError(prim, f"the body of loop {s.iter} uses {s.iter}", s.loc)
    accs = collect(s.body)
    written = {x.buf for x in accs if x.writes and not x.local}
    for x in accs:
        if x.local:
            continue
        if x.mode not in ("r", "w"):
            raise SchedulingError(prim, f"the body of loop {s.iter} is not idempotent: it "
                                  f"updates {x.buf} (line {x.stmt.loc.line if x.stmt.loc else '?'})",
                                  s.loc)
        if x.mode == "r" and x.buf in written:
            raise SchedulingError(prim, f"the body of loop {s.iter} is not idempotent: it "
                                  f"reads {x.buf}, which it writes", s.loc)
    if s.mapping is not None:
        raise SchedulingError(prim, f"loop {s.iter} is mapped to {s.mapping.name}", s.loc)
    a = c.addr
    body = freshen_top_allocs(tuple(s.body), names_outside(p.ir, a))
    try:
        prove(p.ir, a, lambda enc, env: enc.int(s.hi, env) > enc.int(s.lo, env), prim,
              f"loop {s.iter} runs at least once", s.loc)
        new, deep = body, ()
    except SchedulingError:
        # it may run zero times: keep the body under the guard `lo < hi` (as Exo does)
        new = (If(BinOp("<", s.lo, s.hi, bool_, s.loc), body, (), s.loc),)
        deep = (0, "body")
    ir = splice(p.ir, a, new)
    refuse_new_mapping_issues(prim, p.ir, ir, s.loc)

    def inner_map(r):
        if len(r) == 1:
            return a if deep else None
        if deep:
            return a + ("body",) + r[2:]
        return a[:-1] + (a[-1] + r[2],) + r[3:]

    return result(p, ir, fwd_splice(a, len(new), inner_map))


# ------------------------------------------------------------------ parallelize_loop


def parallelize_loop(p, loop, mapping: Mapping | None = None):
    """Make ``loop`` a ``par`` loop mapped to ``mapping`` (BLOCKS, THREADS or None),
    after proving that its iterations do not conflict."""
    prim = "parallelize_loop"
    c = resolve(p, loop, prim, "loop")
    s: For = c.node()
    if mapping not in (None, BLOCKS, THREADS):
        raise SchedulingError(prim, f"mapping must be BLOCKS, THREADS or None, not "
                              f"{mapping!r}", s.loc)
    check_parallel(p.ir, c.addr, s, prim)
    new = s.with_(kind="par", mapping=mapping)
    ir = splice(p.ir, c.addr, [new])
    # mapping a loop for the first time may pass through a transient state; re-mapping
    # a mapped loop (or unmapping it) must not break any rule the input kept
    refuse_new_mapping_issues(prim, p.ir, ir, s.loc, strict=s.mapping is not None)
    return result(p, ir, fwd_identity)


def check_parallel(pdef, addr, s: For, prim: str, only: set | None = None):
    accs = collect(s.body, loops=(s,))
    if only is not None:
        accs = [x for x in accs if x.buf in only]
    hit = find_conflict(pdef, addr, accs, accs,
                        lambda e1, e2: e1[s.iter] != e2[s.iter], allow_reduce=False)
    if hit:
        raise_conflict(prim, f"iterations of loop {s.iter} conflict", hit, s.loc,
                       "stage the data, expand the allocation, or keep the loop sequential")


# ------------------------------------------------------------------ specialize / simplify / rename


def specialize(p, block, conds):
    """``if c1: block`` / ``elif c2: block`` ... ``else: block``."""
    prim = "specialize"
    c = resolve(p, block, prim, "block")
    if isinstance(conds, str):
        conds = [conds]
    if not conds:
        raise SchedulingError(prim, "give at least one condition", c.loc)
    stmts = c.node()
    cs = [parse_at(p.ir, c.addr, x, prim, "bool", c.loc, "a specialization") for x in conds]
    for x in cs:
        if x.ty != bool_:
            raise SchedulingError(prim, f"{_pe(x)} is not a condition", c.loc)
    a = c.addr
    after = block_of(p.ir, a[:-1])[a[-1] + len(stmts):]
    for st in stmts:
        if isinstance(st, Alloc) and st.name in free_vars(tuple(after)):
            raise SchedulingError(prim, f"'{st.name}' is allocated in the block and used "
                                  "after it: inside the branches it would go out of scope",
                                  st.loc, f"specialize a block that ends after the last use "
                                  f"of {st.name}")
    out = tuple(stmts)
    for x in reversed(cs):
        out = (If(normalize(x), tuple(stmts), out, stmts[0].loc),)
    n_old = len(stmts)

    def inner_map(r):
        return a + ("body", r[0]) + r[1:]

    return result(p, replace_block(p.ir, a[:-1], block_of(p.ir, a[:-1])[:a[-1]] + out +
                                   block_of(p.ir, a[:-1])[a[-1] + n_old:]),
                  fwd_splice(a, 1, inner_map, n_old=n_old))


def simplify(p):
    """Normalise index arithmetic, fold constants, drop ``if``s decided by the
    loop ranges."""
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

    return result(p, ir, fwd)


def rename(p, name: str):
    """The same proc under another name."""
    check_new_name(name, "rename", p.ir.loc, proc=True)
    return result(p, p.ir.with_(name=name), fwd_identity)


__all__ = ["divide_loop", "reorder_loops", "fission", "fuse", "unroll_loop", "cut_loop",
           "remove_loop", "parallelize_loop", "specialize", "simplify", "rename",
           "check_parallel", "Read", "Reduce", "Assign", "Call", "walk"]
