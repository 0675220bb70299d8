"""Asynchronous copies by primitives: ``make_async`` (staged copies become async copies)
and ``pipeline_loop`` (a loop that stages tiles then computes on them becomes a k-deep
circular buffer of async copies).

Both are checked after the rewrite like every primitive on a proc with async statements
(:mod:`.async_guard`: no access in flight, misaligned copy or uncounted copy that the
input did not have); ``pipeline_loop`` also asks check() for no new race.
"""
from __future__ import annotations

from ..ir.nodes import (Alloc, AsyncCommit, AsyncCopy, AsyncWait, BinOp, Call, Const, For,
                        If, Pass, Read, Stmt, Sync, Var)
from ..ir.types import INDEX, THREADS, bool_
from ..ir.visitor import Transformer, bound_names, free_vars, substitute, walk
from .cursors import block_of
from .edits import Into, MovedRange, insert, replace, update
from .patterns import scope_at
from .primitive import BLOCK, LOOP, POSITIVE_INT, fail, primitive
from .proved_as_before import refuse_new_findings
from .simplify import const_value, normalize

_VCOPY = "vcopy"


def _as_async(s, env):
    """``s`` (a plain copy GLOBAL -> SHARED, element or vector) as an AsyncCopy, else None."""
    from ..ir.nodes import Assign, Interval, Point

    if isinstance(s, Assign) and isinstance(s.rhs, Read) and s.idx and s.rhs.idx:
        d, r = env.get(s.name), env.get(s.rhs.name)
        if d is None or r is None or not d[1].async_destination or not r[1].async_source or d[0] != r[0]:
            return None
        if d[0].bits // 8 not in (4, 8, 16):
            return None
        return AsyncCopy(s.name, s.idx, s.rhs.name, s.rhs.idx, 1, s.loc)
    if isinstance(s, Call) and s.proc.instr is not None and \
            s.proc.name.startswith(_VCOPY) and s.proc.name.endswith("_SHARED_GLOBAL"):
        dst, src = s.args
        n = const_value(s.proc.params[0].shape[0])
        sides = []
        for w in (dst, src):
            if not w.idx or not isinstance(w.idx[-1], Interval) or \
                    not all(isinstance(i, Point) for i in w.idx[:-1]):
                return None
            sides.append((w.name, tuple(i.pt for i in w.idx[:-1]) + (w.idx[-1].lo,)))
        return AsyncCopy(sides[0][0], sides[0][1], sides[1][0], sides[1][1], n, s.loc)
    return None


@primitive("make_async", block=BLOCK)
def make_async(p, block):
    """Turn the copies from GLOBAL to SHARED memory in the thread loops of ``block`` (at
    block level) into async copies (``async_copy``: element copies ``s[i] = x[j]`` and
    the float2/float4 copies of ``vectorize``), followed by ``async_commit()`` and
    ``async_wait(0)``.

    Legality: every statement of ``block`` is a ``@ THREADS`` loop at block level;
    each copy moves 4, 8 or 16 bytes; the result is checked like every rewrite of a proc
    with async copies: no access of a copy's destination (or write of its source) before
    the wait, no other thread's before a barrier after it, the windows aligned.  The
    copies land at the new wait, so a read of the destination in the same thread loop
    is refused.

    Example: ``make_async(p, "for ib in _: _")``
    """
    c = block
    stmts = c.stmts()
    addr = c.addr
    env = _arrays_at(p.ir, addr)
    for s in stmts:
        if not (isinstance(s, For) and s.mapping == THREADS):
            raise fail("make_async takes thread loops at block level (the loops of a "
                       "staged copy)", s.loc)
    count = [0]

    class Conv(Transformer):
        def _copy(self, s):  # an element copy, or a call of a vector copy
            a = _as_async(s, env)
            if a is None:
                return s
            count[0] += 1
            return a

        visit_Assign = visit_Call = _copy

    new = Conv().visit_block(tuple(stmts))
    if not count[0]:
        raise fail("no copy from a GLOBAL array to a SHARED array in the block", stmts[0].loc)
    last = stmts[-1].loc
    # the copies rewritten in place, the commit and the wait after them
    return update(p.ir, addr, new).then(insert, addr[:-1] + (addr[-1] + len(new),),
                                        [AsyncCommit(last), AsyncWait(0, last)])


def _arrays_at(pdef, addr) -> dict:
    """The arrays visible before the statement at ``addr``: name -> (type, memory)."""
    from .patterns import string_scope

    out = {}
    for f in string_scope(pdef, addr).frames:
        for name, sym in f.items():
            if sym.kind == "array":
                out[name] = (sym.ty, sym.mem)
    return out


# ------------------------------------------------------------------ pipeline_loop


def _copy_part(body):
    """(lead, copies, rest) of ``[sync()] copies async_commit() async_wait(0) sync() rest``,
    else a reason."""
    k = 0
    lead = []
    if k < len(body) and isinstance(body[k], Sync) and not body[k].ranged:
        lead.append(body[k])
        k += 1
    copies = []
    while k < len(body) and isinstance(body[k], For) and body[k].mapping == THREADS:
        copies.append(body[k])
        k += 1
    tail = body[k:k + 3]
    if not copies or len(tail) < 3 or not isinstance(tail[0], AsyncCommit) or \
            not isinstance(tail[1], AsyncWait) or tail[1].depth != 0 or \
            not isinstance(tail[2], Sync) or tail[2].ranged:
        return None
    for s in copies:
        for n in walk(s.body):
            if isinstance(n, Stmt) and not isinstance(n, (For, If, Pass, AsyncCopy)):
                return None
        if not any(isinstance(n, AsyncCopy) for n in walk(s.body)):
            return None
    return lead, copies, list(body[k + 3:])


@primitive("pipeline_loop", loop=LOOP, stages=POSITIVE_INT)
def pipeline_loop(p, loop, stages: int = 2):
    """Software-pipeline a loop that stages tiles with async copies then computes on
    them: a ``stages``-deep circular buffer.  The body must read

        [sync()]  copies(i)  async_commit()  async_wait(0)  sync()  compute(i)

    (``copies``: thread loops of async copies, as ``make_async`` leaves them), and
    becomes, each copy's SHARED destination given a leading dimension of ``stages``
    indexed by ``i % stages``:

        copies(lo), ..., copies(lo + stages - 2)      (each under `if` and committed)
        for i in seq(lo, hi):
            async_wait(stages - 2)
            sync()
            if i + stages - 1 < hi:
                copies(i + stages - 1)
            async_commit()
            compute(i)

    Copies of ``stages - 1`` tiles are in flight while a tile is computed on; one
    barrier per iteration both publishes tile ``i`` and frees the slot of tile ``i - 1``.

    Legality: ``2 <= stages <= 8``; the loop is a block-level ``seq`` loop of that form;
    the copies' sources are written nowhere in the loop and their indices use only the
    loop variable and names from outside the loop; each destination is allocated outside
    the loop, written in it only by the copies, and not used after it.  The result is
    checked: the async obligations (every tile landed and published before it is read,
    no slot refilled before every thread read it) and no race or divergence check()
    did not find in the input.

    Example: ``pipeline_loop(p, "po", stages=3)``
    """
    c = loop
    L: For = c.node()
    k = stages
    lead, copies, rest = _pipelined_form(L, k)
    dsts = _staged_destinations(p, c.addr, L, k, lead, copies, rest)
    # the circular buffer: a leading dimension of k indexed by i % k
    q = circular_buffers(p, dsts, L.iter, k)
    c2 = q.forward(c)
    L2: For = c2.node()
    lead2, copies2, rest2 = _copy_part(L2.body)
    out = _pipelined(L, L2, copies2, rest2, k)
    a = c2.addr
    baddr, i = a[:-1], a[-1]
    main = baddr + (i + len(out) - 1,)
    skip = len(lead2) + len(copies2) + 3
    # expand_dim moves no statement: addresses of p are addresses of q; the leading
    # sync and the copies became part of the loop, the compute follows its 4 new steps
    done = replace(q.ir, a, out, keep=[
        Into((0,), main), MovedRange((0, "body"), skip, None, main + ("body",), 4)])
    _no_new_races(q.ir, done.ir, L.loc)
    return done


def circular_buffers(p, names, it: str, k: int):
    """``p`` with each array of ``names`` given a leading dimension of ``k`` indexed
    by ``it % k`` (``expand_dim``): the slots of a ``k``-deep circular buffer."""
    from .memory import expand_dim

    for d in names:
        p = expand_dim(p, d, str(k), f"{it} % {k}")
    return p


def _pipelined_form(L: For, k: int):
    """``(lead, copies, rest)`` of the loop ``L``: a ``seq`` loop of the form
    :func:`_copy_part` reads, its staged buffers allocated outside it."""
    if not 2 <= k <= 8:
        raise fail(f"stages must be 2 to 8, not {k}", L.loc)
    if L.kind != "seq" or L.mapping is not None:
        raise fail(f"loop {L.iter} is not a seq loop", L.loc)
    staged = {n.dst for n in walk(L.body) if isinstance(n, AsyncCopy)}
    inside = sorted(s.name for s in L.body if isinstance(s, Alloc) and s.name in staged)
    if inside:
        raise fail(f"'{inside[0]}' is allocated in the loop: lift_alloc it out first", L.loc,
                   f"lift_alloc(p, \"{inside[0]}\")")
    parts = _copy_part(L.body)
    if parts is None:
        raise fail(f"the body of {L.iter} is not `[sync()] copies async_commit() "
                   "async_wait(0) sync() compute` with copies thread loops of async copies",
                   L.loc, "make the tile copies async first: make_async(p, copies)")
    return parts


def _staged_destinations(p, addr, L: For, k: int, lead, copies, rest) -> list:
    """The sorted destinations of the ``copies`` (of the loop ``L`` at ``addr``),
    which may be issued ``k - 1`` iterations early: their sources written nowhere in
    the loop, their indices free of the body's names; each destination allocated
    outside the loop, written in it only by the copies and unused after it."""
    dsts = sorted({n.dst for s in copies for n in walk(s) if isinstance(n, AsyncCopy)})
    srcs = sorted({n.src for s in copies for n in walk(s) if isinstance(n, AsyncCopy)})
    written = _written(L.body, copies)
    for x in srcs:
        if x in written:
            raise fail(f"the loop writes '{x}', which its copies read: a copy issued "
                       f"{k - 1} iterations early would read it too soon", L.loc)
    inner_names = bound_names(tuple(rest)) | bound_names(tuple(lead))
    for s in copies:
        bad = (free_vars(s) - bound_names(s) - {L.iter}) & inner_names
        if bad:
            raise fail(f"the copies use '{sorted(bad)[0]}', defined in the loop's body",
                       s.loc)
    env = scope_at(p.ir, addr)
    for d in dsts:
        if d not in env:
            raise fail(f"'{d}' is allocated in the loop: lift_alloc it out first", L.loc,
                       f"lift_alloc(p, \"{d}\")")
        if d in written:
            raise fail(f"the loop writes '{d}' outside its copies", L.loc)
    if _used_after(p.ir, addr, dsts):
        raise fail("a staged buffer is used after the loop", L.loc)
    return dsts


def _pipelined(L: For, L2: For, copies2, rest2, k: int) -> tuple:
    """The prologue (the copies of the first ``k - 1`` tiles, each under ``if`` and
    committed) and the loop ``L2`` (its slots expanded) that waits, publishes its
    tile, issues the copies of tile ``i + k - 1`` and computes on tile ``i``."""
    it = L.iter

    def at(delta_expr):
        return _tidy(substitute(tuple(copies2), {it: delta_expr}))

    pro = []
    for s in range(k - 1):
        e = normalize(BinOp("+", L2.lo, Const(s), INDEX))
        pro.append(If(BinOp("<", e, L2.hi, bool_), at(e), (), L.loc))
        pro.append(AsyncCommit(L.loc))
    nxt = normalize(BinOp("+", Var(it), Const(k - 1), INDEX))
    body = (AsyncWait(k - 2, L.loc), Sync(L.loc),
            If(BinOp("<", nxt, L2.hi, bool_), at(nxt), (), L.loc),
            AsyncCommit(L.loc)) + tuple(rest2)
    return tuple(pro) + (L2.with_(body=body),)


def _tidy(stmts) -> tuple:
    """The indices of the copies normalized (``0 % 3`` is ``0``)."""
    class T(Transformer):
        def visit_AsyncCopy(self, a):
            return a.with_(dst_idx=tuple(normalize(e) for e in a.dst_idx),
                           src_idx=tuple(normalize(e) for e in a.src_idx))
    return T().visit_block(tuple(stmts))


def _written(body, copies) -> set:
    from ..ir.stmt_effects import collect
    ids = {id(s) for s in copies}
    out = set()
    for s in body:
        if id(s) in ids:
            continue
        out |= {a.buf for a in collect((s,)) if a.writes}
    return out


def _used_after(pdef, addr, names) -> bool:
    """Is one of ``names`` used after the statement at ``addr`` (in its block and the
    enclosing ones)?"""
    a = tuple(addr)
    while a:
        baddr, i = a[:-1], a[-1]
        blk = block_of(pdef, baddr)
        if free_vars(tuple(blk[i + 1:])) & set(names):
            return True
        a = baddr[:-1]
    return False


def _no_new_races(old, new, loc):
    refuse_new_findings(old, new, loc, "the pipelined loop",
                        "the compute must read only the staged tile, and the copies "
                        "only what the loop does not write")


__all__ = ["make_async", "pipeline_loop"]
