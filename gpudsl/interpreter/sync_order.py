"""Ranged barriers and split barriers in the interpreter (docs/language.md (synchronization)).

A synchronization statement never changes the sequential meaning; it only orders the
parallel execution.  Two things live here:

* :class:`SplitBarrier`, the sequential state of one ``bar: barrier @ SHARED``: every
  ``arrive(bar, lo, hi, count=c)`` completes one phase (the barrier expects
  ``(hi - lo) * c`` arrivals, so all arrives of one barrier name the same range and
  count); a thread's k-th
  ``wait`` waits for phase k.  A wait for a phase that has not completed at that
  point of the program never returns (the interpreter reports the deadlock), and a
  wait for phase k after phase k + 1 has completed too cannot be told apart from a
  wait for phase k + 2 by the hardware's phase parity (reported as well).

* :class:`PartialOrder`, what the race detector needs when a block uses them: the
  ranged barriers, arrives and waits of the running block since its last block-wide
  ``sync()`` ("events"), and the happens-before relation they make.  An access by
  thread ``t1`` after ``i1`` events is ordered before one by ``t2`` after ``i2``
  events when a chain of events leads from ``t1`` to ``t2``: a ranged barrier whose
  range holds a thread reached so far adds its whole range; an arrive by a reached
  thread taints its phase, and a wait for a tainted phase adds its waiting threads.
  Cells of the tracker keep, per kind, the latest access of each thread (an earlier
  access of the same thread is ordered before whatever the later one is).
"""
from __future__ import annotations

from ..errors import InterpError


def _mask(lo: int, hi: int) -> int:
    return ((1 << hi) - 1) ^ ((1 << lo) - 1)


class SplitBarrier:
    """The sequential state of one split barrier (one per block)."""

    __slots__ = ("name", "range", "phases", "waits", "arrive_at", "waiters", "tma", "cl",
                 "sent", "got")

    def __init__(self, name: str):
        self.name = name
        self.range = None  # (lo, hi) of its arrives
        self.phases = 0  # completed phases
        self.waits: dict = {}  # flat thread -> waits done
        self.arrive_at: dict = {}  # phase -> (event index, epoch) of its completion
        self.waiters: dict = {}  # phase -> [(mask, event index, epoch)]
        self.tma = None  # phase -> bulk tensor copies it lands (:mod:`.tma_copies`)
        self.cl = 0  # cluster arrives (:mod:`.clusters`): the cluster's size
        self.sent: dict = {}  # block rank -> its arrives on this barrier so far
        self.got: set = set()  # the ranks that arrived for the phase in progress

    def cluster_arrive(self, rank: int, lo: int, hi: int, acc, count: int, c: int) -> bool:
        """Block ``rank``'s arrive (``cluster=True``) on this barrier of a cluster of ``c``
        blocks; True when it completes a phase.  A block's arrive for the phase after the
        one in progress is an error: its arrivals would count toward the wrong phase."""
        self.cl = c
        k = self.sent.get(rank, 0)
        if k > self.phases:
            raise InterpError(
                f"block {rank} of the cluster arrives on {self.name} for phase {k} while "
                f"phase {self.phases} is still waiting for other blocks: its arrivals would "
                "count toward that phase", acc.loc,
                "order each block's next arrive after every block's previous one (a "
                "sync_cluster() between them)")
        self.sent[rank] = k + 1
        self.got.add(rank)
        if len(self.got) < c:
            self._range_of(lo, hi, acc, count)
            return False
        self.got = set()
        self.arrive(lo, hi, acc, count)
        return True

    def ready(self, lo: int, hi: int) -> bool:
        """Has the phase the threads of ``[lo, hi)`` wait for next completed?"""
        return self.phases > max(self.waits.get(t, 0) for t in range(lo, hi))

    def _range_of(self, lo, hi, acc, count):
        if self.range is None:
            self.range = (lo, hi, count)
        elif self.range != (lo, hi, count):
            self.arrive(lo, hi, acc, count)   # reports the mismatch

    def arrive(self, lo: int, hi: int, acc, count: int = 1) -> int:
        """Phase ``P`` completes (returned): the threads of ``[lo, hi)`` bring ``count``
        arrivals each, the barrier's expected count (the same in every phase)."""
        if self.range is None:
            self.range = (lo, hi, count)
        elif self.range != (lo, hi, count):
            c = f", count={count}" if count != 1 else ""
            was = ", ".join(map(str, self.range[:2])) + \
                (f", count={self.range[2]}" if self.range[2] != 1 else "")
            raise InterpError(
                f"arrive({self.name}, {lo}, {hi}{c}) names another range or count than an "
                f"earlier arrive on {self.name} ({was}): a split barrier expects the same "
                "arrivals in every phase", acc.loc,
                "use one barrier per group of arriving threads")
        self.phases += 1
        return self.phases - 1

    def wait(self, lo: int, hi: int, acc) -> int:
        """The phase the threads of ``[lo, hi)`` wait for (all must agree)."""
        ks = {self.waits.get(t, 0) for t in range(lo, hi)}
        if len(ks) != 1:
            raise InterpError(
                f"wait({self.name}, {lo}, {hi}): its threads have waited different numbers of "
                f"times on {self.name} before, so they wait for different phases", acc.loc,
                "wait with the same thread range every time")
        k = ks.pop()
        if self.phases <= k:
            raise InterpError(
                f"deadlock: wait({self.name}, {lo}, {hi}) waits for phase {k} of {self.name}, "
                f"which no arrive before it completes ({self.phases} phase(s) completed): "
                "the threads would wait forever", acc.loc,
                f"arrive on {self.name} before waiting on it")
        if self.phases > k + 1:
            raise InterpError(
                f"deadlock: wait({self.name}, {lo}, {hi}) waits for phase {k} of {self.name}, "
                f"but phase {k + 1} completed too before it: the barrier's phase parity "
                f"cannot tell phase {k} from phase {k + 2}", acc.loc,
                "wait for each phase before the next arrive")
        for t in range(lo, hi):
            self.waits[t] = k + 1
        return k


class PartialOrder:
    """The events of the running block since its last block-wide barrier."""

    def __init__(self):
        self.events: list = []
        self.epoch = 0
        self._memo: dict = {}

    def reset(self):
        self.events = []
        self.epoch += 1
        self._memo = {}

    def forward(self, t: int, i1: int, i2: int) -> int:
        """The threads whose accesses after ``i2`` events are ordered after thread
        ``t``'s accesses after ``i1`` events (a bit mask over flat indices)."""
        key = (t, i1, i2)
        r = self._memo.get(key)
        if r is not None:
            return r
        reach = 1 << t
        tainted: set = set()
        for ev in self.events[i1:i2]:
            kind = ev[0]
            if kind == "sync":
                if reach & ev[1]:
                    reach |= ev[1]
            elif kind == "arrive":
                if reach & ev[1]:
                    tainted.add((id(ev[2]), ev[3]))
            elif (id(ev[2]), ev[3]) in tainted:
                reach |= ev[1]
        if len(self._memo) > 100000:
            self._memo.clear()
        self._memo[key] = reach
        return reach

    def ordered(self, t1, i1: int, t2, i2: int, all_mask: int) -> bool:
        """Is every access of ``t1`` (a flat index, or None: every thread) after ``i1``
        events ordered before ``t2``'s (likewise) after ``i2`` events?"""
        if i1 == i2:
            return False
        if t1 is None:
            srcs = [k for k in range(all_mask.bit_length()) if all_mask >> k & 1]
        else:
            srcs = [t1]
        for s in srcs:
            need = all_mask & ~(1 << s) if t2 is None else (1 << t2) * (t2 != s)
            if need and self.forward(s, i1, i2) & need != need:
                return False
        return True


def flat_thread(ctx, tkey) -> int | None:
    if tkey is None:
        return None
    z, y, x = tkey
    X, Y = ctx.bdims[0], ctx.bdims[1]
    return x + X * (y + Y * z)


def _check_range(ctx, what, lo, hi, acc):
    if hi > ctx.nthreads:
        raise InterpError(
            f"deadlock: {what} expects threads [{lo}, {hi}), but the block has "
            f"{ctx.nthreads} thread(s): the missing ones never arrive", acc.loc,
            "keep barrier ranges inside the block")


def ring_element(ring: list, e: int, acc) -> "SplitBarrier":
    """Element ``e`` of a barrier ring (``bar: barrier[k] @ SHARED``)."""
    if not 0 <= e < len(ring):
        name = ring[0].name.split("[")[0]
        raise InterpError(f"out of bounds: element {e} of the barrier ring '{name}', which "
                          f"has {len(ring)}", acc.loc, f"index the ring modulo {len(ring)}")
    return ring[e]


def _block_level(ctx, what, acc):
    if ctx.tkey is not None:
        raise InterpError(f"{what} inside a THREADS loop: it must stand at block level, "
                          "where every thread of the block reaches it", acc.loc,
                          f"move the {what} out of the thread loop")


def sync_range(ctx, lo: int, hi: int, acc):
    if ctx.kernel == 0:
        return
    _block_level(ctx, f"sync({lo}, {hi})", acc)
    _check_range(ctx, f"sync({lo}, {hi})", lo, hi, acc)
    ctx.order.events.append(("sync", _mask(lo, hi)))


def arrive(ctx, bar: SplitBarrier, lo: int, hi: int, acc, count: int = 1):
    what = f"arrive({bar.name}, {lo}, {hi}{f', count={count}' if count != 1 else ''})"
    if ctx is None or ctx.kernel == 0:
        p = bar.arrive(lo, hi, acc, count)
        _land_tma(bar, p, lo, hi)
        return p
    _block_level(ctx, what, acc)
    _check_range(ctx, what, lo, hi, acc)
    p = bar.arrive(lo, hi, acc, count)
    order = ctx.order
    ka = len(order.events)
    m = _mask(lo, hi)
    for wm, kw, ep in bar.waiters.get(p - 1, ()):
        if ep != order.epoch:
            continue  # a block-wide barrier came between
        for c in range(wm.bit_length()):
            if wm >> c & 1 and not order.forward(c, kw + 1, ka) & m:
                raise InterpError(
                    f"deadlock: {what} may complete phase {p} of {bar.name} before thread "
                    f"{c} has passed its wait for phase {p - 1}: the barrier's phase parity "
                    f"would make that thread wait for phase {p + 1}", acc.loc,
                    "order the next arrive after the wait (a barrier, or a second split "
                    "barrier that the waiters arrive on)")
    order.events.append(("arrive", m, bar, p))
    _land_tma(bar, p, lo, hi)


def _land_tma(bar, p, lo, hi):
    """The copies of phase ``p`` (bulk tensor copies, async copies with ``bar=``) land
    (:mod:`.tma_copies`)."""
    if bar.tma and p in bar.tma:
        for c in bar.tma.pop(p):
            c.arrived(lo, hi)


def wait(ctx, bar: SplitBarrier, lo: int, hi: int, acc):
    what = f"wait({bar.name}, {lo}, {hi})"
    if ctx is None or ctx.kernel == 0:
        bar.wait(lo, hi, acc)
        return
    _block_level(ctx, what, acc)
    _check_range(ctx, what, lo, hi, acc)
    p = bar.wait(lo, hi, acc)
    order = ctx.order
    bar.waiters.setdefault(p, []).append((_mask(lo, hi), len(order.events), order.epoch))
    order.events.append(("wait", _mask(lo, hi), bar, p))


def partial_access(tr, k: int, kind: int, acc, conflicts) -> None:
    """The same-block part of :meth:`Tracker.access` under the partial order."""
    ctx = tr.ctx
    order = ctx.order
    t = flat_thread(ctx, ctx.tkey)
    i = len(order.events)
    entry = (ctx.tkey, ctx.tnames, ctx.bkey, acc, i, t)
    cell = tr.cells.get(k)
    if cell is None or cell[0] != ctx.phase:
        cell = [ctx.phase, {}, {}, {}]
        tr.cells[k] = cell
    else:
        full = (1 << ctx.nthreads) - 1
        for c in conflicts[kind]:
            for et, e in cell[c].items():
                if et == t and t is not None:
                    continue
                if et is None and t is None and not ctx.multi:
                    continue
                if not order.ordered(et, e[4], t, i, full):
                    tr._race(k, e[:4], c, entry[:4], kind, False)
    cell[kind][t] = entry


__all__ = ["SplitBarrier", "ring_element", "PartialOrder", "sync_range", "arrive",
           "wait", "partial_access"]
