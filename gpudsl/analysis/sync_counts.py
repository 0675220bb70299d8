"""Orderings made by ranged and split barriers (docs/language.md (synchronization)), as counts.

Block-level control flow is uniform, so every thread of a block runs the same
sequence of block-level statements.  For a kind of synchronization statement (a
*key*: the ranged barriers of one range, the arrives on one split barrier, the waits
on one split barrier with one range) the number of its instances executed before a
block-level position is an IR expression over the enclosing loop variables
(:class:`KeyCounter`, the barrier counts of :mod:`.phases` restricted to the key),
exact where the per-iteration count does not depend on the loop variable and a fresh
unknown otherwise.

- ``sync(lo, hi)``: accesses by ``t1`` and ``t2`` are ordered when both threads are in
  ``[lo, hi)`` and the counts of that range at the two positions differ (an instance
  lies between them).
- split barrier ``bar`` (arrive range ``A``): thread ``T``'s k-th wait waits for phase
  k, which the k-th arrive completes.  Phases are counted in arrivals: an arrive brings
  ``|A| * count`` of them (``arrive(bar, lo, hi, count=c)``), the barrier's expected
  count; every arrive on ``bar`` names one range and one count (:mod:`.obligations.barriers`),
  so each arrive statement completes exactly one phase and counting statements is
  counting phases.  Each element of a barrier ring
  (``bar: barrier[k] @ SHARED``) keeps its own phases: its counts are those of the
  statements on that element (:mod:`.ring_counts`).  An access by ``t1`` before an access by ``t2``
  is ordered when ``t1`` is in ``A`` and ``t2`` has waited on ``bar`` more times before
  its access than arrives ran before ``t1``'s: ``NW_t2(a2) > NA(a1)`` (the phase it last
  waited for was completed by an arrive that ``t1`` made after its access).

These are the direct orderings (one barrier instance, or one arrive/wait pair, plus
program order); :mod:`.sync_chains` composes them through relay threads.  A fresh
unknown count lets the solver pick the value that makes the pair unordered.
"""
from __future__ import annotations

import z3

from ..ir.nodes import Alloc, Arrive, Const, For, Sync, Wait
from ..ir.smt import Unsupported
from ..ir.sync_meaning import is_partial_sync, is_sync
from ..ir.types import BARRIER, BLOCKS
from ..ir.visitor import walk
from .phases import PhaseCounter, add


class KeyCounter(PhaseCounter):
    """Barrier counts of the statements ``hit`` accepts: ``hit(s)`` is True (counts 1),
    an expression (a ring statement's count for one element, :mod:`.ring_counts`) or
    False (other syncs count 0)."""

    def __init__(self, hit):
        super().__init__()
        self.hit = hit

    def _count(self, s):
        h = self.hit(s)
        if h is True:
            return Const(1)
        if h is not False and h is not None:
            return h
        if is_sync(s):
            return Const(0)
        return super()._count(s)


def _on(s, bar, element):
    """Does split-barrier statement ``s`` name ``bar`` (element ``element`` of a ring):
    True, False, or the ring statement's count for the element."""
    if s.name != bar:
        return False
    if element is None or s.index is None:
        return True
    from .ring_counts import indicator
    return indicator(s.index, element)


def count_at(counter: PhaseCounter, path, after: bool = False):
    """The count at the block-level position ``path`` (the (list, index) steps of an
    access or statement); ``after``: just after the statement the path ends at."""
    pos = Const(0)
    for j, (L, i) in enumerate(path):
        pos = counter.position(pos, L, i)
        s = L[i]
        if j + 1 < len(path) and isinstance(s, For) and s.kind == "seq" and \
                s.mapping != BLOCKS:
            pos = counter.loop_body_start(pos, s)
    if after:
        L, i = path[-1]
        pos = add(pos, counter.count(L[i]))
    return pos


class KernelSyncs:
    """The ranged and split barriers of one kernel, their counters and formulas."""

    def __init__(self, ctx, kernel):
        self.ctx = ctx
        self.kernel = kernel
        ki = ctx.eff.kernels[kernel]
        stmts, self.allocs = [], []
        for n in walk(ki.loop):
            if isinstance(n, (Sync, Arrive, Wait)):
                stmts.append(n)
            elif isinstance(n, Alloc) and n.ty == BARRIER:
                self.allocs.append(n)
        self.ranges = sorted({(s.lo.val, s.hi.val) for s in stmts
                              if isinstance(s, Sync) and s.ranged})
        self.bars: dict = {}
        self.arrive_counts: dict = {}
        self.rings = {a.name: a.shape[0].val for a in self.allocs if a.shape}
        for s in stmts:
            if isinstance(s, (Arrive, Wait)):
                b = self.bars.setdefault(s.name, {"arrive": set(), "wait": set()})
                b["arrive" if isinstance(s, Arrive) else "wait"].add((s.lo.val, s.hi.val))
                if isinstance(s, Arrive):   # the count= of its arrives
                    self.arrive_counts.setdefault(s.name, set()).add(s.count)
        self._counters: dict = {}
        self.block_size = self._block_size(ki)

    @property
    def empty(self) -> bool:
        return not self.ranges and not self.bars

    def _block_size(self, ki):
        n = 1
        self.dims = []
        for d in range(3):
            his = ki.thread_extents.get(d, [])
            if not his:
                self.dims.append(1)
                continue
            if not all(isinstance(h, Const) for h in his):
                self.dims.append(None)
                n = None
                continue
            m = max(h.val for h in his)
            self.dims.append(m)
            n = None if n is None else n * m
        return n

    def counter(self, key):
        c = self._counters.get(key)
        if c is None:
            kind = key[0]
            if kind == "sync":
                c = KeyCounter(lambda s, r=key[1]: isinstance(s, Sync) and s.ranged and
                               (s.lo.val, s.hi.val) == r)
            elif kind == "arrive":
                c = KeyCounter(lambda s, b=key[1], e=key[2]: isinstance(s, Arrive) and
                               _on(s, b, e))
            else:
                c = KeyCounter(lambda s, b=key[1], r=key[2], e=key[3]: isinstance(s, Wait)
                               and (s.lo.val, s.hi.val) == r and _on(s, b, e))
            self._counters[key] = c
        return c

    def exact(self, path) -> bool:
        """Are all counts at ``path``, and at the statements a relay of a chain may
        stand at (:mod:`.sync_chains`), exact (no fresh unknown)?"""
        if not self._exact_at(path):
            return False
        ok = self.__dict__.get("_relays_exact")
        if ok is None:
            from .sync_chains import chains
            ok = self._relays_exact = all(self._exact_at(p, after)
                                          for p in chains(self).relay_paths
                                          for after in (False, True))
        return ok

    def _exact_at(self, path, after=False) -> bool:
        """Exactness at one position; a True answer is kept: it is asked again for
        each pair of accesses, and with every count at the position free of unknowns
        the counts build again from the counters' memories alone, making no fresh
        unknown (only a count that holds one makes one), so keeping it changes no
        count's name.  False is asked again (it may make fresh unknowns)."""
        memo = self.__dict__.setdefault("_exact_memo", {})
        mkey = (tuple((id(L), i) for L, i in path), after)
        held = memo.get(mkey)
        if held is not None and all(a is L for a, (L, _) in zip(held, path)):
            return True
        if self._counts_exact(path, after):
            memo[mkey] = tuple(L for L, _ in path)   # held: their ids stay theirs
            return True
        return False

    def _counts_exact(self, path, after) -> bool:
        keys = [("sync", r) for r in self.ranges] + \
            [("arrive", b, e) for b in self.bars for e in self.elements(b)] + \
            [("wait", b, r, e) for b in self.bars for r in self.bars[b]["wait"]
             for e in self.elements(b)]
        for key in keys:
            e = count_at(self.counter(key), path, after)
            if any(getattr(n, "name", "").startswith("__bc_") for n in walk(e)):
                return False
        return True

    # -- z3 terms
    def flat(self, t):
        """The flat thread index of thread env ``t`` (its coordinates must be set)."""
        if None in self.dims:
            raise Unsupported("a block size that is not a constant")
        x, y, z = t.tc
        return x + self.dims[0] * (y + self.dims[1] * z)

    @staticmethod
    def inside(f, r):
        return z3.And(f >= r[0], f < r[1])

    def count(self, t, key, path, after=False):
        return t.expr(count_at(self.counter(key), path, after))

    def elements(self, bar) -> list:
        """The elements of ``bar`` as count keys: ``[None]`` for a single barrier, the
        constants ``0 .. k - 1`` for a ring of ``k``."""
        k = self.rings.get(bar)
        return [None] if k is None else [Const(j) for j in range(k)]

    def waits(self, t, f, bar, path, after=False, element=None):
        """How many times thread ``t`` (flat index ``f``) waited on ``bar`` (on
        ``element`` of a ring: an IR expression free of loop variables) before ``path``
        (after, with ``after``)."""
        terms = [z3.If(self.inside(f, r),
                       self.count(t, ("wait", bar, r, element), path, after), 0)
                 for r in sorted(self.bars[bar]["wait"])]
        return z3.Sum(*terms) if terms else z3.IntVal(0)

    def arrive_range(self, bar):
        rs = self.bars[bar]["arrive"]
        return next(iter(rs)) if len(rs) == 1 else None

    def unordered(self, p1, t1, p2, t2, after1=False, span1=None, span2=None,
                  relays=None) -> list:
        """Constraints under which position ``p1`` of thread ``t1`` and ``p2`` of ``t2``
        are ordered neither way, by a ranged barrier, a split barrier or a chain of them
        through relay threads (:mod:`.sync_chains`); ``after1``: ``p1`` is just after its
        statement; ``span1``/``span2``: the flat thread indices each may have, when
        known (they only prune the formula); ``relays``: the longest chain followed
        (default :data:`.sync_chains.MAX_RELAYS`)."""
        from .sync_chains import MAX_RELAYS, Pos, chains
        return chains(self).unordered(Pos(t1, p1, after1, span1), Pos(t2, p2, False, span2),
                                      MAX_RELAYS if relays is None else relays)


def kernel_syncs(ctx, kernel):
    """The :class:`KernelSyncs` of a kernel (memoised on the obligation context)."""
    memo = ctx.__dict__.get("_kernel_syncs")
    if memo is None:
        # kernels without ranged or split barriers (most) need no walk at all
        memo = ctx.__dict__["_kernel_syncs"] = {
            k: None for k in ctx.eff.kernels
            if not any(si.kernel == k and is_partial_sync(si.stmt) for si in ctx.eff.syncs)}
    if kernel not in memo:
        ks = KernelSyncs(ctx, kernel)
        memo[kernel] = None if ks.empty else ks
    return memo[kernel]


__all__ = ["KeyCounter", "count_at", "KernelSyncs", "kernel_syncs"]
