"""Thread block clusters (``par(0, c) @ CLUSTERS``, ``sync_cluster()``; docs/hopper.md
(clusters)): what check() proves of them.

* uniformity (kind ``"divergence"``): every thread of every block of a cluster reaches the
  same sequence of ``sync_cluster()`` and of arrives with ``cluster=True``: the conditions of the block-level ifs and the bounds
  of the block-level seq loops around a ``sync_cluster()`` (inside the CLUSTERS loop) are
  equal in any two blocks of one cluster (a Z3 query: two ranks, the other block loop
  variables and the enclosing seq loops' equal); a memory read there is refused (another
  block's SHARED, or GLOBAL data, may differ);
* races between blocks (:func:`block_alternative`, used by
  :mod:`.race_obligations`): two blocks of different clusters always run concurrently;
  two blocks of one cluster only between the same two ``sync_cluster()`` (the phase
  relation of :mod:`..phases` with ``sync_cluster()`` as the barrier);
* the target (:mod:`.features`): ``clusters`` (sm_90a).
"""
from __future__ import annotations

import z3

from ...ir.nodes import Arrive, For, If, SyncCluster
from ...ir.printer import print_expr
from ...ir.smt import SAT, UNSAT, Unsupported
from ...ir.visitor import walk
from ...ir.types import BLOCKS
from ..check_report import Diagnostic
from ..phases import PhaseRelation


def _is_cluster_sync(s) -> bool:
    return isinstance(s, SyncCluster)


_CLUSTER_PHASES = PhaseRelation(_is_cluster_sync)


def _meets(s) -> bool:
    """Does statement ``s`` make blocks of one cluster meet (sync_cluster(), or an
    arrive on every block's barrier)?"""
    return isinstance(s, SyncCluster) or (isinstance(s, Arrive) and s.cluster)


def cluster_uses(eff) -> list:
    """Where the proc uses clusters: its CLUSTERS loops and sync_cluster()s."""
    return [s.loc for s in walk(tuple(eff.body))
            if (isinstance(s, For) and s.cluster) or isinstance(s, SyncCluster) or
            (isinstance(s, Arrive) and s.cluster)]


def kernel_cluster(ctx, kernel):
    """``(cluster loop, holds sync_cluster)`` of a kernel (its Loop record, or None)."""
    memo = ctx.__dict__.setdefault("_cluster_memo", {})
    if kernel not in memo:
        ki = ctx.eff.kernels[kernel]
        loop = next((l for l in ki.block_loops if l.cluster), None)
        synced = loop is not None and any(_meets(n) for n in walk(ki.loop))
        memo[kernel] = (loop, synced)
    return memo[kernel]


def block_alternative(ctx, a1, a2, t1, t2, block_loops, v):
    """The condition that the two threads are in different blocks that may meet: any two
    blocks, or, in a kernel with ``sync_cluster()``, blocks of different clusters and blocks
    of one cluster between the same two ``sync_cluster()``.  ``v(t, name)``: a thread's copy
    of a loop variable."""
    eq = [v(t1, l.iter) == v(t2, l.iter) for l in block_loops]
    loop, synced = kernel_cluster(ctx, a1.kernel)
    if loop is None or not synced:
        return z3.Not(z3.And(*eq))
    outer = [v(t1, l.iter) == v(t2, l.iter) for l in block_loops if not l.cluster]
    same = _CLUSTER_PHASES.same_phase(a1.path, a2.path, t1, t2)
    if same is False:
        return z3.Not(z3.And(*outer))
    ranks = v(t1, loop.iter) != v(t2, loop.iter)
    from .cluster_arrives import cross_block_unordered
    ranks = z3.And(ranks, *cross_block_unordered(ctx, a1, a2, t1, t2))
    one = z3.And(*outer, ranks) if same is True else z3.And(*outer, ranks, same)
    return z3.Or(z3.Not(z3.And(*outer)), one)


def check_cluster_uniformity(ctx) -> None:
    """Every sync_cluster() is reached alike by the blocks of its cluster (see above)."""
    seen = set()
    for si in ctx.eff.syncs:
        if not _meets(si.stmt) or si.kernel is None:
            continue
        inside = list(si.inside)
        at = next((j for j, s in enumerate(inside) if isinstance(s, For) and s.cluster), None)
        if at is None:
            continue   # reported as a mapping issue
        for j in range(at + 1, len(inside)):
            s = inside[j]
            if id(s) in seen or not isinstance(s, (If, For)) or \
                    (isinstance(s, For) and s.mapping == BLOCKS):
                continue
            seen.add(id(s))
            if _uneven(ctx, si, inside[:j], s):
                break


def _uneven(ctx, si, around, s) -> bool:
    """Report (and return True) when two blocks of one cluster may evaluate the condition
    or bounds of ``s`` differently."""
    what = f"the condition {print_expr(s.cond)}" if isinstance(s, If) else \
        f"the bounds of the seq loop '{s.iter}'"
    ki = ctx.eff.kernels[si.kernel]
    loops = [l for l in si.loops if l.mapping == BLOCKS] + \
        [l for l in si.loops if l.mapping != BLOCKS and any(
            isinstance(x, For) and x.iter == l.iter for x in around)]
    t1, t2 = ctx.thread("1"), ctx.thread("2")
    ctx.enc.data_dependent = False
    try:
        cons = []
        for l in loops:
            for t in (t1, t2):
                x = t.declare(l.iter)
                cons += [x >= t.expr(l.lo), x < t.expr(l.hi)]
            a, b = t1.var(l.iter), t2.var(l.iter)
            cons.append(a != b if l.cluster else a == b)
        if isinstance(s, If):
            cons.append(t1.cond(s.cond) != t2.cond(s.cond))
        else:
            cons.append(z3.Or(t1.expr(s.lo) != t2.expr(s.lo), t1.expr(s.hi) != t2.expr(s.hi)))
    except Unsupported as e:
        ctx.unknown(f"that every block of a cluster reaches sync_cluster() alike",
                    [s.loc, si.loc], str(e) or "unsupported expression")
        return True
    r = ctx.solve(cons)
    if r.status != SAT:
        if r.status != UNSAT:
            ctx.unknown("that every block of a cluster reaches sync_cluster() alike",
                        [s.loc, si.loc], f"solver: {r.reason or 'unknown'}")
        return r.status != UNSAT
    m = r.model
    blocks = [{l.iter: t.value(m, l.iter) for l in ki.block_loops} for t in (t1, t2)]
    data = " (it reads memory, which blocks may see differently)" \
        if ctx.enc.data_dependent else ""
    ctx.diagnostics.append(Diagnostic(
        "divergence", f"{what} may differ between two blocks of one cluster{data}: some would "
        "skip a sync_cluster() (or a cluster arrive) the others wait for (a deadlock)",
        [s.loc, si.loc],
        {"sizes": ctx.enc.size_values(m), "block1": blocks[0], "block2": blocks[1]},
        "branch and loop around sync_cluster() and cluster arrives on sizes and the BLOCKS loops that count "
        "clusters, not on the rank in the cluster or on memory"))
    return True


__all__ = ["block_alternative", "check_cluster_uniformity", "cluster_uses", "kernel_cluster"]
