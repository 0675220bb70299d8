"""The blocks of a thread block cluster, run together (docs/hopper.md (clusters)).

The interpreter runs a ``par(0, c) @ CLUSTERS`` loop that holds ``sync_cluster()`` as ``c``
generators, one per block: each runs to its next ``sync_cluster()`` in turn, so what a
block wrote before the barrier is there for every block of the cluster after it (the
meaning).  A block that finishes while another waits at a ``sync_cluster()`` is the
divergence check() refuses; here it is an :class:`InterpError`.

With the race detector, the running block's place (its block key, thread dimensions) is
saved and restored around each turn, each turn starts a new barrier phase of the block,
and GLOBAL accesses remember the cluster and the cluster phase (the count of
``sync_cluster()`` the block has passed): two blocks of one cluster meet only in the same
cluster phase (:func:`global_access`)."""
from __future__ import annotations

from ..errors import InterpError

_SAVED = ("bstack", "bkey", "bdims", "nthreads", "multi", "kdims", "tkey", "tnames", "tvals",
          "cphase")


def misplaced(loc):
    raise InterpError("sync_cluster() stands outside a CLUSTERS loop's block-level code: it "
                      "meets every thread of every block of one cluster", loc,
                      "put it inside `par(0, c) @ CLUSTERS`, outside THREADS loops")


def _save(ctx) -> dict:
    st = {k: getattr(ctx, k, None) for k in _SAVED}
    st["bstack"] = list(ctx.bstack)
    return st


def _restore(ctx, st: dict) -> None:
    for k, v in st.items():
        setattr(ctx, k, v)
    ctx.bstack = list(st["bstack"])
    ctx.phase += 1          # a new barrier phase: the turn starts after a barrier
    ctx.order.reset()


def cluster_loop(ctx, lo: int, hi: int, fn, loc) -> None:
    """Run the blocks ``fn(lo)`` .. ``fn(hi - 1)`` of one cluster together."""
    live = [(r, fn(r)) for r in range(lo, hi)]
    if ctx is not None:
        ctx.clusters = True
        base = _save(ctx)
        base["cphase"] = 0
        states = {}
    passed = 0
    while live:
        waiting, done = [], []
        for r, g in live:
            if ctx is not None:
                _restore(ctx, states.get(r, base))
                ctx.in_cluster = True
            try:
                next(g)
                waiting.append((r, g))
            except StopIteration:
                done.append(r)
            if ctx is not None:
                states[r] = _save(ctx)
        if waiting and done:
            if ctx is not None:
                _restore(ctx, base)
                ctx.in_cluster = False
            raise InterpError(
                f"divergence: block(s) {done} of the cluster finished while block(s) "
                f"{[r for r, _ in waiting]} wait at their sync_cluster() number {passed + 1}",
                loc, "every block of a cluster must reach the same sync_cluster()s")
        passed += 1
        live = waiting
    if ctx is not None:
        _restore(ctx, base)
        ctx.in_cluster = False


def global_access(tr, k: int, kind: int, entry, conflicts) -> None:
    """The race detector's check of a GLOBAL access against other blocks of the kernel,
    where blocks of one cluster are ordered by ``sync_cluster()``: per element and kind, the
    latest access of each block with its cluster and cluster phase."""
    ctx = tr.ctx
    g = tr.gcells.get(k)
    if g is None or g[0] != ctx.kernel or not isinstance(g[1], dict):
        g = [ctx.kernel, {}, {}, {}]
        tr.gcells[k] = g
    b = ctx.bkey
    ck = b[:-1] if ctx.in_cluster and b else None
    cp = ctx.cphase
    for c in conflicts[kind]:
        for ob, (ock, ocp, e) in g[c].items():
            if ob != b and not (ck is not None and ock == ck and ocp != cp):
                tr._race(k, e, c, entry, kind, True)
    g[kind][b] = (ck, cp, entry)
