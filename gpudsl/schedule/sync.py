"""Barriers: insert_sync and delete_sync.

``insert_sync`` never changes the sequential meaning; it only checks that the
gap is at block level (inside a ``@ BLOCKS`` loop, outside any ``@ THREADS``
loop), where SPEC 2.4 allows a ``sync()``.

``delete_sync`` proves through check()'s race obligation itself
(:func:`gpudsl.analysis.obligations.races.added_races`): the proc without the
barrier has no race between threads of one block that the proc with it does not
have.  The barrier counts of the analysis follow control flow, so code before a
loop, its iterations and code after it are all covered.
"""
from __future__ import annotations

from ..analysis.obligations.races import added_races
from ..errors import SchedulingError
from ..ir.nodes import For, Sync
from ..ir.types import BLOCKS, THREADS
from .cursors import (block_of, fwd_insert, fwd_splice, resolve, result,
                      stmt_at)


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


def delete_sync(p, sync):
    """Remove a ``sync()`` after proving that it orders no conflicting accesses."""
    prim = "delete_sync"
    c = resolve(p, sync, prim, "stmt")
    s = c.node()
    if not isinstance(s, Sync):
        raise SchedulingError(prim, "expected a sync() statement", s.loc)
    a = c.addr
    _block_level(p.ir, a[:-1], prim, s.loc)
    from .cursors import splice

    ir = splice(p.ir, a, [])
    for d in added_races(p.ir, ir):
        if d.kind == "race":
            raise SchedulingError(prim, f"the barrier orders accesses of two threads: "
                                  f"without it, {d.message}", s.loc, "keep the barrier",
                                  d.witness)
        raise SchedulingError(prim, f"could not prove that the barrier orders no "
                              f"conflicting accesses: {d.message}", s.loc,
                              "keep the barrier")
    return result(p, ir, fwd_splice(a, 0, None))


__all__ = ["insert_sync", "delete_sync"]
