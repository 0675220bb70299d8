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
from ..ir.nodes import Arrive, SyncCluster
from ..ir.visitor import walk

_SAVED = ("bstack", "bkey", "bdims", "nthreads", "multi", "kdims", "tkey", "tnames", "tvals",
          "cphase")


def misplaced(loc):
    raise InterpError("sync_cluster() stands outside a CLUSTERS loop's block-level code: it "
                      "meets every thread of every block of one cluster", loc,
                      "put it inside `par(0, c) @ CLUSTERS`, outside THREADS loops")


def _save(ctx, own: bool = True) -> dict:
    """The running block's place (``own``: with its phase and partial order)."""
    st = {k: getattr(ctx, k, None) for k in _SAVED}
    st["bstack"] = list(ctx.bstack)
    if own:
        st["phase"], st["order"] = ctx.phase, ctx.order
    return st


def _restore(ctx, st: dict, resume: bool = False) -> None:
    """The running block's place.  A turn that starts after a barrier (the block's first,
    or after a sync_cluster()) starts a new barrier phase of the block with its own
    partial order; a block that resumes where it waited for another block (``resume``)
    goes on in its phase, with its partial order (so races inside the block across that
    point are still seen)."""
    from .sync_order import PartialOrder
    for k, v in st.items():
        if k not in ("phase", "order"):
            setattr(ctx, k, v)
    ctx.bstack = list(st["bstack"])
    if resume and st.get("order") is not None:
        ctx.phase, ctx.order = st["phase"], st["order"]
        return
    ctx.new_phase()
    order = st.get("order")
    ctx.order = order if order is not None else PartialOrder()
    ctx.order.reset()


SYNC, BLOCKED = 0, 1   # what a block's generator yields: at a sync_cluster(), or blocked


class Team:
    """The blocks of one cluster while they run: each block's split barriers that other
    blocks arrive on (``cluster=True``), by name and rank, and a count of the events that
    may unblock a block (an arrive, a barrier allocated)."""

    def __init__(self, c: int, lo: int = 0):
        self.c, self.lo = c, lo
        self.bars: dict = {}
        self.progress = 0

    def register(self, name: str, rank: int, bar) -> None:
        self.bars.setdefault(name, {})[rank] = bar
        self.progress += 1

    def elements(self, rank: int) -> list:
        """Block ``rank``'s barrier elements that the blocks arrive on, in a fixed order."""
        out = []
        for name in sorted(self.bars):
            b = self.bars[name].get(rank)
            if b is not None:
                out += b if isinstance(b, list) else [b]
        return out

    def snapshot(self, rank: int) -> tuple:
        """How many times block ``rank`` has arrived on each of its elements."""
        return tuple(b.sent.get(rank, 0) for b in self.elements(rank))

    def ordered(self, old_snap: tuple, old_t, rank: int, t) -> bool:
        """Is an access of thread ``old_t`` of another block of the cluster, made when its
        block had arrived ``old_snap`` times, ordered before thread ``t`` of block ``rank``
        now: ``old_t`` in an element's arrive range, and ``t`` has waited on that element
        (of its own block) more times (the direct edge check() uses)."""
        if old_t is None or t is None or not old_snap:
            return False
        for n, b in zip(old_snap, self.elements(rank)):
            rng = b.range
            if rng is not None and rng[0] <= old_t < rng[1] and b.waits.get(t, 0) > n:
                return True
        return False


def cluster_arrive(ctx, team, name: str, e, rank: int, lo: int, hi: int, acc,
                   count: int = 1):
    """``arrive(bar[e], lo, hi, cluster=True)`` by block ``rank``: on the element of every
    block's barrier; False (nothing done) while a block has not allocated it yet.  With
    the race detector, the block's own arrive is an event of its partial order."""
    from .sync_order import _block_level, _check_range, _mask, ring_element
    mine = team.bars.get(name, {})
    if len(mine) < team.c:
        return False
    if ctx is not None and ctx.kernel:
        what = f"arrive({name}, {lo}, {hi}, cluster=True)"
        _block_level(ctx, what, acc)
        _check_range(ctx, what, lo, hi, acc)
    own = None
    for q in sorted(mine):
        bar = mine[q] if e is None else ring_element(mine[q], e, acc)
        k = bar.sent.get(rank, 0)
        bar.cluster_arrive(rank, lo, hi, acc, count, team.c)
        if q == rank:
            own = (bar, k)
    if ctx is not None and ctx.kernel and own is not None:
        ctx.order.events.append(("arrive", _mask(lo, hi), own[0], own[1]))
    team.progress += 1
    return True


def cluster_loop(ctx, lo: int, hi: int, fn, loc) -> None:
    """Run the blocks ``fn(lo)`` .. ``fn(hi - 1)`` of one cluster together: each block runs
    until it reaches a sync_cluster() or blocks (a wait for a phase other blocks complete,
    a cluster arrive before every block allocated the barrier), in turn; a sync_cluster()
    passes when every block stands at it.  A round in which no block moves is a deadlock."""
    team = Team(hi - lo, lo)
    gens = {r: fn(r, team) for r in range(lo, hi)}
    at_sync: set = set()
    done: set = set()
    blocked: set = set()   # blocks that yielded where they wait for another
    base = outer_order = None
    if ctx is not None:
        ctx.clusters = True
        ctx.team = team
        base = _save(ctx, own=False)
        outer_order = ctx.order
        base["cphase"] = 0
        states = {}
    passed = 0
    while len(done) < len(gens):
        moved = False
        for r, g in gens.items():
            if r in at_sync or r in done:
                continue
            if ctx is not None:
                _restore(ctx, states.get(r, base), resume=r in blocked)
                ctx.in_cluster = True
            before = team.progress
            try:
                kind = next(g)
                blocked.discard(r)
                if kind == SYNC:
                    at_sync.add(r)
                else:
                    blocked.add(r)
                moved = moved or kind == SYNC or team.progress != before
            except StopIteration:
                done.add(r)
                moved = True
            if ctx is not None:
                states[r] = _save(ctx)
        if at_sync and len(at_sync) + len(done) == len(gens):
            if done:
                _leave(ctx, base, outer_order)
                raise InterpError(
                    f"divergence: block(s) {sorted(done)} of the cluster finished while "
                    f"block(s) {sorted(at_sync)} wait at their sync_cluster() number "
                    f"{passed + 1}", loc, "every block of a cluster must reach the same "
                    "sync_cluster()s")
            passed += 1
            at_sync.clear()
        elif not moved:
            stuck = sorted(set(gens) - done - at_sync)
            _leave(ctx, base, outer_order)
            raise InterpError(
                f"deadlock: block(s) {stuck} of the cluster wait for a barrier phase (or "
                "for a block to allocate a barrier) that no block can complete any more",
                loc, "every block's waits need arrives that every block of the cluster "
                "reaches before them")
    _leave(ctx, base, outer_order)


def _leave(ctx, base, order=None) -> None:
    if ctx is not None:
        _restore(ctx, base)
        if order is not None:
            ctx.order = order
            order.reset()
        ctx.in_cluster = False


def global_access(tr, k: int, kind: int, entry, conflicts) -> None:
    """The race detector's check of a GLOBAL access against other blocks of the kernel,
    where blocks of one cluster are ordered by ``sync_cluster()`` (the same cluster phase
    or not) and by arrives on every block's barrier (:meth:`Team.ordered`): per element
    and kind, the latest access of each thread of each block with its cluster, cluster
    phase and its block's arrive counts."""
    from .sync_order import flat_thread
    ctx = tr.ctx
    g = tr.gcells.get(k)
    if g is None or g[0] != ctx.kernel or not isinstance(g[1], dict):
        g = [ctx.kernel, {}, {}, {}]
        tr.gcells[k] = g
    b = ctx.bkey
    ck = b[:-1] if ctx.in_cluster and b else None
    cp = ctx.cphase
    team = getattr(ctx, "team", None) if ck is not None else None
    rank = b[-1][1] - team.lo if team is not None else None
    t = flat_thread(ctx, ctx.tkey) if team is not None else None
    for c in conflicts[kind]:
        for (ob, ot), (ock, ocp, e, osnap) in g[c].items():
            if ob == b:
                continue
            if ck is not None and ock == ck and (
                    ocp != cp or (team is not None and team.ordered(osnap, ot, rank, t))):
                continue
            tr._race(k, e, c, entry, kind, True)
    snap = team.snapshot(rank) if team is not None and team.bars else ()
    g[kind][(b, t)] = (ck, cp, entry, snap)


# ------------------------------------------------------------------ emitting


def emit_cluster_loop(self, s) -> None:
    """A CLUSTERS loop holding sync_cluster(): its body becomes a generator of one
    block, the blocks of the cluster run together by :func:`cluster_loop`
    (each to its next sync_cluster(), in turn)."""
    if self.asy:
        raise InterpError("sync_cluster() in a proc with async copies, wgmma or bulk "
                          "copies is not interpreted yet", s.loc,
                          "docs/hopper.md (clusters)")
    bars = cluster_bars(s.body)
    if self.race:
        self.line("_ctx.kernel_enter()")
    fn = self.fresh("_blk")
    outer = set(self.scalars)
    self.line(f"def {fn}(v_{s.iter}, _team):")
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
    saved = getattr(self, "cluster_at", None)
    self.cluster_at = (s.iter, self.ex(s.lo), bars)
    self.block(s.body)
    self.cluster_at = saved
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
    self.line(f"yield {SYNC}  # sync_cluster()")


def cluster_bars(body) -> frozenset:
    """The barriers arrived on with cluster=True in a CLUSTERS loop's body."""
    return frozenset(n.name for n in walk(body) if isinstance(n, Arrive) and n.cluster)


def holds_meeting(body) -> bool:
    """Does a CLUSTERS loop's body make its blocks meet (run them together)?"""
    return any(isinstance(n, SyncCluster) or (isinstance(n, Arrive) and n.cluster)
               for n in walk(body))


def emit_register(self, name: str) -> None:
    """After a split barrier's allocation in a cluster's block: other blocks find it."""
    at = getattr(self, "cluster_at", None)
    if at is not None and name in at[2]:
        self.line(f"_team.register({name!r}, v_{at[0]} - ({at[1]}), b_{name})")


def emit_cluster_split(self, s, acc: str, fn: str) -> bool:
    """A cluster arrive, or a wait on a barrier other blocks arrive on: the block yields
    while it cannot go on.  False when ``s`` is neither (the plain statement is emitted)."""
    at = getattr(self, "cluster_at", None)
    if at is None or s.name not in at[2]:
        if isinstance(s, Arrive) and s.cluster:
            bad = self.const(misplaced_arrive, "_F")
            self.line(f"{bad}({self.const(s.loc, '_K')})")
            return True
        return False
    if isinstance(s, Arrive):
        if not s.cluster:
            return False
        f = self.const(cluster_arrive, "_F")
        e = "None" if s.index is None else self.ex(s.index)
        self.line(f"while not {f}(_ctx, _team, {s.name!r}, {e}, v_{at[0]} - ({at[1]}), "
                  f"{self.ex(s.lo)}, {self.ex(s.hi)}, {acc}, {s.count}):")
        self.line(f"    yield {BLOCKED}")
        return True
    if s.index is None:
        bar = f"b_{s.name}"
    else:
        from .sync_order import ring_element
        bar = f"{self.const(ring_element, '_F')}(b_{s.name}, {self.ex(s.index)}, {acc})"
    self.line(f"while not {bar}.ready({self.ex(s.lo)}, {self.ex(s.hi)}):")
    self.line(f"    yield {BLOCKED}")
    return False


def misplaced_arrive(loc):
    raise InterpError("an arrive with cluster=True stands outside a CLUSTERS loop's "
                      "block-level code: it arrives on every block of one cluster", loc,
                      "put it inside `par(0, c) @ CLUSTERS`")
