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
from ..ir.nests import block_shape

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


# ------------------------------------------------------------------ emitting


def emit_cluster_loop(self, s) -> None:
    """A CLUSTERS loop holding sync_cluster(): its body becomes a generator of one
    block, the blocks of the cluster run together by :func:`cluster_loop`
    (each to its next sync_cluster(), in turn)."""
    if self.asy:
        raise InterpError("sync_cluster() in a proc with async copies, wgmma or bulk "
                          "copies is not interpreted yet", s.loc,
                          "docs/hopper.md (clusters)")
    if self.race:
        self.line("_ctx.kernel_enter()")
    fn = self.fresh("_blk")
    outer = set(self.scalars)
    self.line(f"def {fn}(v_{s.iter}):")
    self.depth += 1
    self.nonlocal_scalars(s.body, outer)
    self.known.add(s.iter)
    self.block_bodies.append(s.body)
    if self.race:
        dims, kd = block_shape(s.body, self.known)
        ds = ", ".join(
            "1" if not d else self.ex(d[0]) if len(d) == 1 else
            f"max({', '.join(self.ex(x) for x in d)})" for d in dims)
        self.line(f"_ctx.block_enter({s.iter!r}, v_{s.iter}, ({ds}), {kd})")
    self.in_cluster = getattr(self, "in_cluster", 0) + 1
    self.block(s.body)
    self.in_cluster -= 1
    self.block_bodies.pop()
    self.loc = s.loc
    if self.race:
        self.line("_ctx.block_exit()")
    self.line("return")
    self.line("yield")
    self.depth -= 1
    self.known.discard(s.iter)
    loop = self.const(cluster_loop, "_F")
    self.line(f"{loop}(_ctx, {self.ex(s.lo)}, {self.ex(s.hi)}, {fn}, "
              f"{self.const(s.loc, '_K')})")
    if self.race:
        self.line("_ctx.kernel_exit()")

def emit_sync_cluster(self, s) -> None:
    if not getattr(self, "in_cluster", 0) or self.tdepth or self.in_warp:
        bad = self.const(misplaced, "_F")
        self.line(f"{bad}({self.const(s.loc, '_K')})")
        return
    if self.race:
        self.line(f"_ctx.sync_cluster({self.access(s.loc, 'sync_cluster()', 'sync', '')})")
    self.line("yield  # sync_cluster()")
