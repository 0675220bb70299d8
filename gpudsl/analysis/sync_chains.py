"""Orderings that compose: chains of barrier and arrive/wait edges through relay threads
(docs/language.md (synchronization), "Orderings compose").

An *edge* is a kind of synchronization that orders one thread's earlier code before
another thread's later code (:mod:`.sync_counts` counts them):

- a ranged barrier ``sync(lo, hi)``: it sends from, and delivers to, the threads of
  ``[lo, hi)``; thread ``u`` at position ``q`` has received what ``t`` sent from ``p``
  when ``count(u, q) > count(t, p)``;
- a split barrier ``bar`` (one arrive range ``A``): it sends from ``A`` (the arrive after
  ``p``, number ``NA(t, p)``, completes phase ``NA(t, p)``) and delivers to its waiters:
  ``u`` has received it when it waited on ``bar`` more than ``NA(t, p)`` times.

PTX's release/acquire is transitive, so ``t``'s access at ``p`` is ordered before
``u``'s at ``q`` also when a chain ``t -> r1 -> ... -> u`` of such edges leads there,
each relay ``r`` receiving an edge and then (later in its own program order) sending
the next.  A relay is best placed just after the instance of a receiving statement
that delivers the previous edge (receiving later only delays what it sends), and that
instance is unique: a thread's receive count grows by exactly one per instance, so the
instance delivering "more than ``s``" is the one where the count before it is ``s``,
and it exists exactly when the count at the end of the block's code exceeds ``s``.
Relays are taken per *class* of threads (the elementary intervals of the ranges' ends:
threads of one class take part in the same barriers and so have the same counts).

Chains only add orderings, so a query that finds no race with the direct edges alone
finds none with chains: the obligations ask first without relays (cheap) and only
when that finds a pair, again with them (:func:`first_direct`).

"Not ordered" (what a race needs) is then a conjunction: no direct edge, and for each
edge and relay class either no delivering instance or, at that (unique) instance, the
relay not ordered before the destination (recursively, at most ``MAX_RELAYS`` relays).
Beyond ``MAX_RELAYS`` a chain is not followed: check() may then refuse a kernel the
detector runs clean, never the other way round.  The unique instance lets a
satisfiability query state "for every relay" without a quantifier.
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import z3

from ..ir.nodes import Arrive, Const, For, Sync, Wait
from ..ir.types import BLOCKS, THREADS

MAX_RELAYS = 2
# a query with chains is asked only for a pair the direct orderings leave, and is
# larger (a relay per edge and class): it gets this many times the per-query time
CHAIN_TIME = 4
_tags = itertools.count()


@dataclass(frozen=True)
class Pos:
    """A position of a symbolic thread: ``t`` placed at block-level ``path``, just
    after its statement when ``after``."""

    t: object
    path: tuple
    after: bool = False
    span: tuple | None = None   # the flat thread indices it may have (None: any)


@dataclass
class Edge:
    """One kind of synchronization: who sends (``send`` range, ``send_key`` counts)
    and who receives (``recv``: (count key, thread range, receiving statements))."""

    send_key: tuple
    send: tuple
    recv: list
    element: object = None   # the ring element (an IR constant), None for one barrier
    senders: tuple = ()      # the arrive statements (SyncInfo) of a split barrier


def edges(ks) -> list:
    """The edges of kernel ``ks`` (a :class:`.sync_counts.KernelSyncs`)."""
    by_key: dict = {}
    for si in ks.ctx.eff.syncs:
        s = si.stmt
        if si.kernel != ks.kernel or si.level != "block" or si.at is None or \
                si.at.path is None:
            continue
        if isinstance(s, Sync) and s.ranged:
            by_key.setdefault(("sync", (s.lo.val, s.hi.val)), []).append(si)
        elif isinstance(s, Wait):
            by_key.setdefault((s.name, (s.lo.val, s.hi.val)), []).append(si)
        elif isinstance(s, Arrive):
            by_key.setdefault((s.name, "arrive"), []).append(si)
    out = []
    for r in ks.ranges:
        out.append(Edge(("sync", r), r, [(("sync", r), r, by_key.get(("sync", r), []))]))
    for bar, b in ks.bars.items():
        a = ks.arrive_range(bar)
        if a is None:
            continue  # arrives of several ranges: a divergence, no ordering used
        for el in ks.elements(bar):  # each element of a ring is an edge of its own
            out.append(Edge(("arrive", bar, el), a,
                            [(("wait", bar, r, el), r, by_key.get((bar, r), []))
                             for r in sorted(b["wait"])], el,
                            tuple(by_key.get((bar, "arrive"), []))))
    return out


def classes(ks) -> list:
    """The elementary thread intervals of the kernel's ranges."""
    ends = {0, ks.block_size}
    for r in ks.ranges:
        ends.update(r)
    for b in ks.bars.values():
        for rs in b.values():
            for r in rs:
                ends.update(r)
    ends = sorted(e for e in ends if 0 <= e <= ks.block_size)
    return list(zip(ends, ends[1:]))


def _within(c, r) -> bool:
    return r[0] <= c[0] and c[1] <= r[1]


def _meets(c, span) -> bool:
    return span is None or (c[0] < span[1] and span[0] < c[1])


def thread_span(loops, ks):
    """The flat thread indices an access under ``loops`` may run on, from its thread
    loops with constant bounds (a 1-D block); None when not known statically."""
    if ks.block_size is None or ks.dims[1:] != [1, 1]:
        return None
    lo, hi = 0, ks.block_size
    for l in loops:
        if l.mapping == THREADS and l.dim == 0 and isinstance(l.lo, Const) and \
                isinstance(l.hi, Const):
            lo, hi = max(lo, l.lo.val), min(hi, l.hi.val)
    return (lo, hi)


class Chains:
    """Builds "not ordered" constraints for one kernel, chains included."""

    def __init__(self, ks):
        self.ks = ks
        self.edges = edges(ks)
        self.classes = classes(ks) if ks.block_size is not None else []
        senders = [e.send for e in self.edges]
        # relay classes worth trying: they receive the edge and can send one
        self.relays = {id(e): [c for c in self.classes
                               if any(_within(c, r) for _, r, _ in e.recv)
                               and any(_within(c, s) for s in senders)]
                       for e in self.edges}
        # class c -> the classes one edge sent from c reaches
        self.succ = {c: {d for e in self.edges if _within(c, e.send)
                         for d in self.classes if any(_within(d, r) for _, r, _ in e.recv)}
                     for c in self.classes}

    def _can_send(self, e, p: Pos) -> bool:
        return any(_within(c, e.send) and _meets(c, p.span) for c in self.classes)

    def _can_receive(self, e, p: Pos) -> bool:
        return any(_within(c, r) and _meets(c, p.span)
                   for c in self.classes for _, r, _ in e.recv)

    def _reaches(self, c, span, edges: int) -> bool:
        """Can a chain of at most ``edges`` edges lead from class ``c`` to ``span``?"""
        front = {c}
        for _ in range(edges):
            front = {d for x in front for d in self.succ[x]}
            if any(_meets(d, span) for d in front):
                return True
        return False

    @property
    def relay_paths(self):
        """The paths relays may stand at (their counts must be exact to trust a race)."""
        for e in self.edges:
            if self.relays[id(e)]:
                for _, _, sis in e.recv:
                    for si in sis:
                        yield si.at.path

    # -- counts of one edge at a position
    def sent(self, e, p: Pos):
        return self.ks.count(p.t, e.send_key, p.path, p.after)

    def received(self, e, p: Pos, f=None):
        """How many of ``e``'s deliveries the thread at ``p`` (flat index ``f``) has had."""
        f = self.ks.flat(p.t) if f is None else f
        terms = [z3.If(self.ks.inside(f, r), self.ks.count(p.t, key, p.path, p.after), 0)
                 for key, r, _ in e.recv]
        return z3.Sum(*terms) if terms else z3.IntVal(0)

    def direct(self, e, src: Pos, dst: Pos):
        return z3.And(self.ks.inside(self.ks.flat(src.t), e.send),
                      self.received(e, dst) > self.sent(e, src))

    # -- not ordered, chains included
    @property
    def any(self) -> bool:
        """Can any chain through a relay order something here?"""
        return any(self.relays.values())

    def unordered(self, a: Pos, b: Pos, relays: int = MAX_RELAYS) -> list:
        """Constraints: ``a`` and ``b`` ordered neither way (by chains of at most
        ``relays`` relays)."""
        return self.not_before(a, b, relays) + self.not_before(b, a, relays)

    def not_before(self, src: Pos, dst: Pos, relays: int) -> list:
        out = [z3.Not(self.direct(e, src, dst)) for e in self.edges
               if self._can_send(e, src) and self._can_receive(e, dst)]
        if relays <= 0:
            return out
        fs = self.ks.flat(src.t)
        for e in self.edges:
            if not self._can_send(e, src):
                continue
            for c in self.relays[id(e)]:
                if self._reaches(c, dst.span, relays):
                    out.append(z3.Implies(self.ks.inside(fs, e.send),
                                          self._no_relay(e, c, src, dst, relays)))
        return out

    def _no_relay(self, e, c, src: Pos, dst: Pos, relays: int):
        """No thread of class ``c`` relays ``e`` (sent from ``src``) on to ``dst``."""
        s = self.sent(e, src)
        alts = [self._total(e, c, src) <= s]
        for key, r, sis in e.recv:
            if not _within(c, r):
                continue
            for si in sis:
                alts.append(self._at_instance(e, c, si, s, src, dst, relays))
        return z3.Or(*alts)

    def not_released_after(self, t, done, dst: Pos) -> list:
        """Constraints: no split barrier delivers to ``dst`` an arrive that thread ``t``
        made where ``done(u, path)`` held (``u``: ``t`` at that arrive, placed at
        ``path``; ``done`` must be monotone along ``t``'s program order, e.g. "the async
        operation has landed").  The latest arrive ``dst`` received is the one to ask
        (``done`` only grows): the arrive instance of ``t`` whose send count before it
        is one less than what ``dst`` received, unique as for relays."""
        out = []
        f = self.ks.flat(t)
        for e in self.edges:
            if not e.senders or not self._can_receive(e, dst):
                continue
            got = self.received(e, dst)
            alts = [got == 0, z3.Not(self.ks.inside(f, e.send))]
            for si in e.senders:
                alts.append(self._sender_at(e, si, t, got, done))
            out.append(z3.Or(*alts))
        return out

    def _sender_at(self, e, si, t, got, done):
        ctx = self.ks.ctx
        u = ctx.thread(f"sender{next(_tags)}")
        cons = ctx.place(u, si.at)
        cons += [a == b for a, b in zip(u.tc, t.tc)]   # the same thread, elsewhere
        for l in si.at.loops:
            if l.mapping == BLOCKS or l.level == "host":
                cons.append(u.var(l.iter) == t.var(l.iter))
        if e.element is not None:
            cons.append(u.expr(si.stmt.index) == e.element.val)
        cons.append(self.sent(e, Pos(u, si.at.path)) == got - 1)
        cons.append(z3.Not(done(u, si.at.path)))
        return z3.And(*cons)

    def _total(self, e, c, src: Pos):
        """Deliveries of ``e`` to a thread of class ``c`` over the whole block's code."""
        body = block_body(src.path)
        counts = [self.ks.counter(key).count_block(body) for key, r, _ in e.recv
                  if _within(c, r)]
        return z3.Sum(*[src.t.expr(x) for x in counts]) if counts else z3.IntVal(0)

    def _at_instance(self, e, c, si, s, src: Pos, dst: Pos, relays: int):
        """The relay of class ``c`` at the instance of receiving statement ``si`` that
        delivers send number ``s``, not ordered before ``dst``."""
        ctx = self.ks.ctx
        u = ctx.thread(f"relay{next(_tags)}")
        cons = ctx.place(u, si.at)
        for l in si.at.loops:
            if l.mapping == BLOCKS or l.level == "host":
                cons.append(u.var(l.iter) == src.t.var(l.iter))
        f = self.ks.flat(u)
        cons += [f >= c[0], f < c[1]]
        if e.element is not None:  # an instance on the ring element the edge is
            cons.append(u.expr(si.stmt.index) == e.element.val)
        before = Pos(u, si.at.path)
        cons.append(self.received(e, before, f) == s)
        cons += self.not_before(Pos(u, si.at.path, True, c), dst, relays - 1)
        return z3.And(*cons)


def block_body(path) -> tuple:
    """The block's code: the body of the innermost block loop on ``path`` (a path starts
    inside the outermost one; with several block loops its first list holds the next)."""
    body = path[0][0]
    for L, i in path:
        if isinstance(L[i], For) and L[i].mapping == BLOCKS:
            body = L[i].body
    return body


def first_direct(ks, ask):
    """``ask(relays)`` builds and solves a query whose result is None when no pair is
    unordered; asked with no relay first, then (when that finds one and chains may
    order it) with ``MAX_RELAYS``."""
    r = ask(0)
    if r is not None and ks is not None and chains(ks).any:
        r = ask(MAX_RELAYS)
    return r


def chains(ks) -> Chains:
    c = ks.__dict__.get("_chains")
    if c is None:
        c = ks.__dict__["_chains"] = Chains(ks)
    return c


__all__ = ["block_body", "MAX_RELAYS", "CHAIN_TIME", "first_direct", "Pos", "Edge", "Chains", "chains", "edges", "classes"]
