"""Barriers: insert_sync and delete_sync.

``insert_sync`` never changes the sequential meaning; it only checks that the
gap is at block level (inside a ``@ BLOCKS`` loop, outside any ``@ THREADS``
loop), where the mapping rules allow a ``sync()``.

``delete_sync`` proves through check()'s race obligation itself
(:func:`gpudsl.analysis.obligations.race_obligations.added_races`): the proc without the
barrier has no race between threads of one block that the proc with it does not
have.  The barrier counts of the analysis follow control flow, so code before a
loop, its iterations and code after it are all covered.
"""
from __future__ import annotations

from ..analysis.obligations.race_obligations import added_races
from ..ir.nodes import Const, For, Pass, Sync, SyncCluster
from ..ir.types import BLOCKS, THREADS
from .cursors import block_of, stmt_at
from .edits import delete, insert, replace
from .primitive import ANY, GAP, STMT, fail, primitive


def _block_level(pdef, baddr, loc):
    anc = [stmt_at(pdef, baddr[:k]) for k in range(1, len(baddr), 2)]
    if not any(isinstance(s, For) and s.mapping == BLOCKS for s in anc):
        raise fail("a sync() belongs inside a @ BLOCKS loop", loc,
                   "parallelize the outer loops with BLOCKS first")
    for s in anc:
        if isinstance(s, For) and s.mapping == THREADS:
            raise fail(f"a sync() cannot stand inside the thread loop {s.iter}: it must be "
                       "at block level", loc, "put it between the thread loops")
    return anc


def _threads(threads, loc):
    """``None`` (the whole block) or ``(lo, hi)``: constants, ``0 <= lo < hi``."""
    if threads is None:
        return None, None
    ok = isinstance(threads, (tuple, list)) and len(threads) == 2 and \
        all(type(v) is int for v in threads) and 0 <= threads[0] < threads[1]
    if not ok:
        raise fail(f"threads must be None or a range (lo, hi) of integers with "
                   f"0 <= lo < hi, not {threads!r}", loc, "e.g. threads=(0, 64)")
    return Const(threads[0]), Const(threads[1])


@primitive("insert_sync", gap=GAP, threads=ANY)
def insert_sync(p, gap, threads=None):
    """Insert a ``sync()`` (a barrier of the threads of a block) at ``gap``; with
    ``threads=(lo, hi)`` a ranged barrier ``sync(lo, hi)`` of the threads whose flat
    index lies in ``[lo, hi)``.

    Legality: a barrier never changes the sequential meaning; the gap must be at
    block level (inside a BLOCKS loop, outside every THREADS loop), where the mapping rules
    allow a ``sync()``. Whether a range fits the block is check()'s question.

    Example: ``insert_sync(p, p.find_loop("i0").after(), threads=(0, 64))``
    """
    c = gap
    lo, hi = _threads(threads, c.loc)
    baddr = c.addr[:-1]
    _block_level(p.ir, baddr, c.loc)
    return insert(p.ir, c.addr, [Sync(c.loc, lo, hi)])


@primitive("delete_sync", sync=STMT)
def delete_sync(p, sync):
    """Remove a ``sync()`` or a ranged ``sync(lo, hi)``.

    Legality: proves through check()'s race obligation that the proc without the
    barrier has no race between threads of one block that the proc with it does
    not have (before a loop, across its iterations and after it; for a ranged
    barrier every pair is asked again, with the orderings of the barriers left).

    Example: ``delete_sync(p, "sync()")``
    """
    c = sync
    s = c.node()
    if not isinstance(s, Sync):
        raise fail("expected a sync() statement", s.loc,
                   "arrive and wait pair up by phases; they are not removed one by one")
    if isinstance(s, SyncCluster):
        raise fail("sync_cluster() orders the blocks of a cluster; delete_sync removes only "
                   "barriers of one block (sync(), sync(lo, hi))", s.loc,
                   "keep it, or edit the proc and check() it (docs/hopper.md (clusters))")
    a = c.addr
    _block_level(p.ir, a[:-1], s.loc)
    # a loop or if body the barrier was alone in keeps a `pass` (what the printer writes
    # and the parser reads back: an empty body would not round-trip)
    alone = a[-2:-1] == ("body",) and len(block_of(p.ir, a[:-1])) == 1
    out = replace(p.ir, a, [Pass(s.loc)]) if alone else delete(p.ir, a)
    ir = out.ir
    for d in added_races(p.ir, ir, partial=s.ranged):
        if d.kind == "race":
            raise fail(f"the barrier orders accesses of two threads: without it, "
                       f"{d.message}", s.loc, "keep the barrier", d.witness)
        raise fail(f"could not prove that the barrier orders no conflicting accesses: "
                   f"{d.message}", s.loc, "keep the barrier")
    return out


__all__ = ["insert_sync", "delete_sync"]
