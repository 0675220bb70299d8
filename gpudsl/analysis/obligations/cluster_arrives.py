"""Arrives on every block of a cluster (``arrive(bar[e], lo, hi, cluster=True)``,
docs/hopper.md (remote arrives)): what check() proves of them.

Every block of a cluster runs the same block-level code (the uniformity obligation of
:mod:`.cluster_obligations` covers these arrives too), so the k-th instance of a cluster
arrive in each block arrives on element ``e`` of every block's barrier, and phase ``k`` of
each block's element completes once all ``c`` blocks made their k-th arrive on it: one
statement still completes one phase, and every count of :mod:`..sync_counts` is the
block's own.  What is added:

* placement (kind ``"mapping"``): a cluster arrive stands inside a ``@ CLUSTERS`` loop;
  the arrives on one barrier are all cluster arrives or none (``"divergence"``: the
  expected arrival count of a phase differs);
* orderings between blocks of one cluster (:func:`cross_block_unordered`, used by
  :func:`.cluster_obligations.block_alternative`): an access of thread ``t1`` in block
  ``p`` is ordered before one of ``t2`` in block ``q`` of the same cluster when ``t1`` is
  in the arrive range ``A`` of a cluster-arrived barrier and ``t2`` has waited on it more
  times than arrives ran in ``p`` before ``t1``'s access: ``NW_t2(a2) > NA_t1(a1)`` (the
  direct edge; chains through relays in other blocks are not followed: check() may then
  refuse a kernel that is correct, never the other way round);
* no arrive counts toward the phase before (``"unknown"`` unless proved): block ``p``'s
  ``k + 1``-th arrive on an element must not reach block ``q``'s barrier before every
  block's ``k``-th arrive has: the arrival counts of phase ``k`` would mix two phases.
  Proved when a ``sync_cluster()`` stands between any two consecutive cluster arrives on
  one element (its release/acquire orders every block's earlier arrive before any
  block's later one); other orders (chains through another block's waits, or the bytes
  of a multicast copy) are not proved yet.
"""
from __future__ import annotations

import z3

from ...ir.nodes import Arrive, SyncCluster
from ...ir.smt import SAT, UNKNOWN, Unsupported
from ...ir.types import BLOCKS
from ...ir.visitor import walk
from ..check_report import Diagnostic
from ..sync_counts import KeyCounter, count_at, kernel_syncs


def cluster_bars(ctx, kernel) -> frozenset:
    """The names of the barriers a kernel arrives on with ``cluster=True``."""
    memo = ctx.__dict__.setdefault("_cluster_bars", {})
    if kernel not in memo:
        loop = ctx.eff.kernels[kernel].loop
        memo[kernel] = frozenset(n.name for n in walk(loop)
                                 if isinstance(n, Arrive) and n.cluster)
    return memo[kernel]


def _flat_or_none(ks, t):
    if t.tc is None:
        return None
    return ks.flat(t)


def cross_block_unordered(ctx, a1, a2, t1, t2) -> list:
    """Constraints under which the accesses ``a1`` (thread ``t1``) and ``a2`` (``t2``), in
    two blocks of one cluster, are ordered neither way by a cluster-arrived barrier."""
    bars = cluster_bars(ctx, a1.kernel)
    if not bars or a1.path is None or a2.path is None:
        return []
    ks = kernel_syncs(ctx, a1.kernel)
    if ks is None:
        return []
    out = []
    try:
        f1, f2 = _flat_or_none(ks, t1), _flat_or_none(ks, t2)
    except Unsupported:
        return []
    for bar in sorted(bars):
        A = ks.arrive_range(bar)
        if A is None or bar not in ks.bars:
            continue
        for el in ks.elements(bar):
            for (fa, ta, pa), (fb, tb, pb) in (((f1, t1, a1.path), (f2, t2, a2.path)),
                                               ((f2, t2, a2.path), (f1, t1, a1.path))):
                if fa is None or fb is None:
                    continue   # an access outside THREADS loops: no edge assumed
                sent = ks.count(ta, ("arrive", bar, el), pa)
                got = ks.waits(tb, fb, bar, pb, element=el)
                out.append(z3.Not(z3.And(ks.inside(fa, A), got > sent)))
    return out


def _text(s) -> str:
    from ...ir.printer import print_stmt
    return print_stmt(s)[0].strip()


def check_cluster_arrives(ctx) -> None:
    for k in ctx.eff.kernels:
        if not cluster_bars(ctx, k):
            continue
        arrives = [si for si in ctx.eff.syncs if si.kernel == k and
                   isinstance(si.stmt, Arrive) and si.at is not None]
        ok = _placement(ctx, arrives) and _expected_count(ctx, arrives)
        ks = kernel_syncs(ctx, k)
        if ok and ks is not None:
            for bar in sorted(cluster_bars(ctx, k)):
                mine = [si for si in arrives if si.stmt.name == bar]
                _no_early_arrive(ctx, ks, mine)


def _placement(ctx, arrives) -> bool:
    ok = True
    for si in arrives:
        if si.stmt.cluster and not any(l.cluster for l in si.loops):
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"`{_text(si.stmt)}` outside any @ CLUSTERS loop: it arrives on "
                "the barrier of every block of a cluster", [si.loc], {},
                "put it inside the `par(0, c) @ CLUSTERS` loop, at block level"))
            ok = False
    by_bar: dict = {}
    for si in arrives:
        by_bar.setdefault(si.stmt.name, []).append(si)
    for bar, sis in by_bar.items():
        if len({si.stmt.cluster for si in sis}) > 1:
            ctx.diagnostics.append(Diagnostic(
                "divergence", f"the arrives on '{bar}' mix cluster=True with arrives of one "
                "block: a split barrier expects the same arrivals in every phase",
                [si.loc for si in sis], {},
                "arrive with cluster=True everywhere on it, or use two barriers"))
            ok = False
    return ok


def _expected_count(ctx, arrives) -> bool:
    """A phase expects ``c * (hi - lo) * count`` arrivals: at most an mbarrier's 2^20 - 1
    (kind ``"resource"``)."""
    MAX_COUNT = (1 << 20) - 1   # PTX: an mbarrier expects at most this many arrivals
    for si in arrives:
        s = si.stmt
        loop = next((l for l in si.loops if l.cluster), None)
        if not s.cluster or loop is None or not hasattr(loop.hi, "val") or \
                not hasattr(loop.lo, "val"):
            continue
        n = (loop.hi.val - loop.lo.val) * (s.hi.val - s.lo.val) * s.count
        if n > MAX_COUNT:
            ctx.diagnostics.append(Diagnostic(
                "resource", f"`{_text(s)}`: each phase expects {n} arrivals (the cluster's "
                f"blocks times the range times count=), more than an mbarrier's {MAX_COUNT}",
                [si.loc], {"arrivals": n}, "arrive from fewer threads with a larger count, "
                "e.g. one thread per warp"))
            return False
    return True


def _sc_counter(ks) -> KeyCounter:
    """The kernel's count of sync_cluster() instances (one counter per kernel: a
    counter remembers statements)."""
    c = ks.__dict__.get("_sync_cluster_counter")
    if c is None:
        c = ks.__dict__["_sync_cluster_counter"] = KeyCounter(
            lambda s: isinstance(s, SyncCluster))
    return c


def _no_early_arrive(ctx, ks, sis) -> None:
    """A sync_cluster() between any two consecutive cluster arrives on one element."""
    what = f"that no block's arrive on '{sis[0].stmt.name}' reaches another block's barrier " \
           "before that block's phase before it has completed"
    if not all(ks.exact(si.at.path) for si in sis):
        ctx.unknown(what, [si.loc for si in sis], "the number of barrier instances before "
                    "them depends on loop variables")
        return
    bar = sis[0].stmt.name
    for s1 in sis:
        for s2 in sis:
            if _early_pair(ctx, ks, bar, s1, s2, what):
                return


def _early_pair(ctx, ks, bar, s1, s2, what) -> bool:
    t, u = ctx.thread("1"), ctx.thread("2")   # t at the earlier arrive, u at the next
    try:
        cons = ctx.place(t, s1.at) + ctx.place(u, s2.at)
        for l in s1.at.loops:
            if l.mapping == BLOCKS or l.level == "host":
                cons.append(t.var(l.iter) == u.var(l.iter))
        el = None
        if s1.stmt.index is not None:
            from .barriers import _ELEMENT
            el = _ELEMENT
            cons += [t.expr(el) == t.expr(s1.stmt.index), u.expr(el) == u.expr(s2.stmt.index),
                     t.expr(el) == u.expr(el)]
        cons.append(ks.count(u, ("arrive", bar, el), s2.at.path) ==
                    ks.count(t, ("arrive", bar, el), s1.at.path) + 1)
        sc = _sc_counter(ks)
        cons.append(t.expr(count_at(sc, s1.at.path)) == u.expr(count_at(sc, s2.at.path)))
    except Unsupported as e:
        ctx.unknown(what, [s1.loc, s2.loc], str(e) or "unsupported expression")
        return True
    r = ctx.solve(cons)
    if r.status == UNKNOWN:
        ctx.unknown(what, [s1.loc, s2.loc], f"solver: {r.reason or 'unknown'}")
        return True
    if r.status != SAT:
        return False
    m = r.model
    ctx.unknown(what, [s1.loc, s2.loc],
                "no sync_cluster() stands between two consecutive cluster arrives on one "
                "element (e.g. sizes " + str(ctx.enc.size_values(m)) + "), and the other "
                "orders that would keep them apart are not proved yet")
    return True


__all__ = ["check_cluster_arrives", "cluster_bars", "cross_block_unordered"]
