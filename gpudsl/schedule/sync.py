"""Barriers: insert_sync and delete_sync.

``insert_sync`` never changes the sequential meaning; it only checks that the
gap is at block level (inside a ``@ BLOCKS`` loop, outside any ``@ THREADS``
loop), where SPEC 2.4 allows a ``sync()``.

``delete_sync`` proves that the barrier orders no conflicting accesses: no
access in the phase before it and access in the phase after it (in any
iterations of the block-level loops around them) by two different threads of
one block touch the same element with at least one write.
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.nodes import Alloc, For, If, Sync
from ..ir.visitor import walk as _walk
from ..ir.types import BLOCKS, THREADS
from .cursors import (ancestors, block_of, fwd_insert, fwd_splice, resolve, result,
                      stmt_at)
from .legality import collect, find_conflict, raise_conflict


def _block_level(pdef, baddr, prim, loc):
    anc = [stmt_at(pdef, baddr[:k]) for k in range(1, len(baddr), 2)]
    if not any(isinstance(s, For) and s.mapping == BLOCKS for s in anc):
        raise SchedulingError(prim, "a sync() belongs inside a @ BLOCKS loop", loc,
                              "parallelize the outer loops with BLOCKS first")
    for s in anc:
        if isinstance(s, For) and s.mapping == THREADS:
            raise SchedulingError(prim, f"a sync() cannot stand inside the thread loop "
                                  f"{s.iter}: it must be at block level", loc,
                                  "put it between the thread loops")
    return anc


def insert_sync(p, gap):
    """Insert a ``sync()`` at ``gap`` (a cursor's ``.before()`` / ``.after()``)."""
    prim = "insert_sync"
    c = resolve(p, gap, prim, "gap")
    baddr = c.addr[:-1]
    _block_level(p.ir, baddr, prim, c.loc)
    blk = block_of(p.ir, baddr)
    i = c.addr[-1]
    from .cursors import replace_block

    ir = replace_block(p.ir, baddr, blk[:i] + (Sync(c.loc),) + blk[i:])
    return result(p, ir, fwd_insert(c.addr, 1))


def _thread_dims(a):
    return [L for L in a.loops if isinstance(L, For) and L.mapping == THREADS]


def delete_sync(p, sync):
    """Remove a ``sync()`` after proving that it orders no conflicting accesses."""
    prim = "delete_sync"
    c = resolve(p, sync, prim, "stmt")
    s = c.node()
    if not isinstance(s, Sync):
        raise SchedulingError(prim, "expected a sync() statement", s.loc)
    a = c.addr
    baddr, i = a[:-1], a[-1]
    anc = _block_level(p.ir, baddr, prim, s.loc)
    blk = block_of(p.ir, baddr)
    lo = max([k + 1 for k in range(i) if isinstance(blk[k], Sync)], default=0)
    hi = min([k for k in range(i + 1, len(blk)) if isinstance(blk[k], Sync)],
             default=len(blk))
    before, after = blk[lo:i], blk[i + 1:hi]
    # the loops and conditions between the BLOCKS loop and the sync's block
    k_blocks = max(k for k, x in enumerate(anc) if isinstance(x, For) and x.mapping == BLOCKS)
    loops, guards = [], []
    for k in range(k_blocks + 1, len(anc)):
        x = anc[k]
        if isinstance(x, For):
            loops.append(x)
        elif isinstance(x, If):
            guards.append((x.cond, baddr[2 * k + 1] == "body"))
    wrap = bool(loops) and lo == 0 and hi == len(blk)
    if wrap:  # the only barrier of a loop body: all of the body is one phase after removal
        before = after = blk[:i] + blk[i + 1:]
    acc_b = collect(tuple(before), loops=tuple(loops), guards=tuple(guards))
    acc_a = collect(tuple(after), loops=tuple(loops), guards=tuple(guards))
    # allocations inside thread loops are per thread; the others are shared
    private = set()
    for st in tuple(before) + tuple(after):
        for n in _walk((st,)):
            if isinstance(n, For) and n.mapping == THREADS:
                private |= {m.name for m in _walk(n.body) if isinstance(m, Alloc)}
    for x in acc_b + acc_a:
        x.local = x.buf in private
    region = baddr[:2 * k_blocks + 1] + ("body", 0)
    hit = None
    for x in acc_b:
        for y in acc_a:
            tx, ty = _thread_dims(x), _thread_dims(y)

            def rel(e1, e2, tx=tx, ty=ty):
                diffs = []
                for d in range(3):
                    v1 = e1[tx[-1 - d].iter] if d < len(tx) else None
                    v2 = e2[ty[-1 - d].iter] if d < len(ty) else None
                    if v1 is None and v2 is None:
                        continue
                    # a thread nest leaves the block dimensions it does not use at 0
                    diffs.append((v1 if v1 is not None else z3.IntVal(0)) !=
                                 (v2 if v2 is not None else z3.IntVal(0)))
                return z3.Or(*diffs) if diffs else z3.BoolVal(False)

            hit = find_conflict(p.ir, region, [x], [y], rel, allow_reduce=False)
            if hit:
                break
        if hit:
            break
    if hit:
        raise_conflict(prim, "the barrier orders accesses of two threads", hit, s.loc,
                       "keep the barrier")
    ir = p.ir
    from .cursors import splice

    ir = splice(ir, a, [])
    return result(p, ir, fwd_splice(a, 0, None))


__all__ = ["insert_sync", "delete_sync"]
