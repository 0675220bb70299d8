"""The interpreter's meaning of the bulk tensor copies (``tma_load``; the rules are in
:mod:`gpudsl.ir.tma_meaning`), and of the async copies that complete on a barrier
(``async_copy(dst, src, bar=b)``), which follow the same rule.

A copy reads its box where it is issued (zeros outside the source) and holds its elements
in flight (:class:`gpudsl.interpreter.async_copies.AsyncState`'s table: the destination
untouchable, the source unwritable) until the split barrier's phase that the issuing
thread's next arrive completes; the arrive that completes it lands the copy
(:meth:`TmaCopy.arrived`, called by :func:`gpudsl.interpreter.sync_order.arrive`).  A copy whose
issuing thread never arrives there is still in flight where the block ends: an error.

With the race detector on, a copy's accesses are recorded twice: at the issue (by the
issuing thread) and where it lands, by a *landing thread* of its own (a flat index past
the block's threads) that is ordered after the issue and before exactly the waiters of
the phase it completes (and what they order): a thread ordered after the issue but not
after that phase (say, through another barrier the issuing thread arrives on) races
with the landing, as on the GPU.
"""
from __future__ import annotations

from ..errors import InterpError
from .async_copies import READ, WRITE, _element

class TmaCopy:
    __slots__ = ("site", "bar", "phase", "issuer", "dst", "items", "src", "race", "dims",
                 "vkey", "asy", "what")
    family = "tma"
    hint = ("wait on the copy's barrier for the phase it completes (the phase of the "
            "issuing thread's next arrive) before touching its destination, or its source "
            "for writing")

    def __init__(self, asy, site, bar, issuer, dst, items, src, race, dims,
                 what="bulk tensor copy"):
        self.asy, self.site, self.bar, self.issuer = asy, site, bar, issuer
        self.what = what                 # "bulk tensor copy" or "async copy"
        self.phase = bar.phases          # the phase the issuer's next arrive completes
        self.dst, self.items, self.src = dst, items, src
        self.race, self.dims = race, dims
        self.vkey = None

    def arrived(self, lo: int, hi: int) -> None:
        """The arrive of ``[lo, hi)`` completed this copy's phase: it lands, unless its
        issuer is not among the arriving threads (then it stays in flight)."""
        if isinstance(self.issuer, int) and not lo <= self.issuer < hi:
            return
        for th in self.asy.threads.values():
            lst = th.pending.get("tma")
            if lst and self in lst:
                lst.remove(self)
        self.asy._land(self)

    def unlanded(self) -> InterpError:
        return InterpError(
            f"the {self.what} `{self.site.text}` at {self.site.where()} is still in "
            f"flight where the block's code ends: the issuing thread made no arrive on "
            f"{self.bar.name} after it, so no phase completes it", self.site.loc,
            f"arrive on {self.bar.name} (with the issuing thread in the range) after the "
            f"{self.site.text.split('(')[0]}")

    def keys(self):
        return [((self.dst, dk), "dst") for dk, _, _ in self.items] + \
            [((self.src, sk), "src") for _, sk, _ in self.items if sk is not None]

    def land(self):
        for dk, _, v in self.items:
            self.dst[dk] = v
        if self.race is None:
            return
        ctx, tkey, tnames, tvals, trd, trs = self.race
        if not ctx.kernel:
            return
        saved = (ctx.tkey, ctx.tnames, ctx.tvals)
        ctx.tkey, ctx.tnames, ctx.tvals = self.vkey, tnames, tvals
        try:
            for dk, sk, _ in self.items:
                if sk is not None:
                    trs(sk, READ, self.site)
                trd(dk, WRITE, self.site)
        finally:
            ctx.tkey, ctx.tnames, ctx.tvals = saved
        vflat = self.vkey[2]
        ctx.order.events.append(("arrive", 1 << vflat, self.bar, self.phase))

    def describe(self, side, k, buf, acc):
        what = "destination" if side == "dst" else "source"
        shape = self.dims[0 if side == "dst" else 1] if self.dims else None
        name = self.site.name if side == "dst" else acc.name
        return (f"{name}{_element(k, shape, buf)}, the {what} of the {self.what} "
                f"`{self.site.text}` at {self.site.where()}, before the phase of "
                f"{self.bar.name} it completes (phase {self.phase}) has completed")


class TmaStoreOp:
    """A bulk tensor store in flight (family ``"ts"``: ``tma_commit`` / ``tma_wait`` groups):
    ``items`` as for a load, read where it was issued, written where it lands."""

    __slots__ = ("site", "group", "dst", "items", "src", "race", "dims")
    family = "ts"
    hint = ("tma_commit the store's group and tma_wait for it before touching its "
            "destination, or writing its source")

    def __init__(self, site, group, dst, items, src, race, dims):
        self.site, self.group, self.dst, self.items, self.src = site, group, dst, items, src
        self.race, self.dims = race, dims

    def keys(self):
        return [((self.dst, dk), "dst") for dk, _, _ in self.items] + \
            [((self.src, sk), "src") for _, sk, _ in self.items]

    def land(self):
        for dk, _, v in self.items:
            self.dst[dk] = v
        if self.race is not None:
            ctx, tkey, tnames, tvals, trd, trs = self.race
            saved = (ctx.tkey, ctx.tnames, ctx.tvals)
            ctx.tkey, ctx.tnames, ctx.tvals = tkey, tnames, tvals
            try:
                for dk, sk, _ in self.items:
                    trs(sk, READ, self.site)
                    trd(dk, WRITE, self.site)
            finally:
                ctx.tkey, ctx.tnames, ctx.tvals = saved

    def describe(self, side, k, buf, acc):
        what = "destination" if side == "dst" else "source"
        shape = self.dims[0 if side == "dst" else 1] if self.dims else None
        name = self.site.name if side == "dst" else acc.name
        return (f"{name}{_element(k, shape, buf)}, the {what} of the bulk tensor store "
                f"`{self.site.text}` at {self.site.where()}, before the tma_wait that "
                "completes its group has run")


def store(asy, tkey, site, dst, items, src, ctx=None, trackers=None, dims=None):
    """``tma_store`` by thread ``tkey`` (``items`` as for :func:`issue`)."""
    race = None
    if ctx is not None and ctx.kernel:
        race = (ctx, ctx.tkey, ctx.tnames, ctx.tvals) + tuple(trackers)
    th = asy._thread(tkey)
    asy._issue(th, TmaStoreOp(site, asy.block_commits["ts"] + th.commits["ts"], dst, items,
                              src, race, dims))


def issue(asy, tkey, site, bar, dst, items, src, ctx=None, trackers=None, dims=None,
          what="bulk tensor copy"):
    """``tma_load`` (or ``async_copy(..., bar=)``, ``what="async copy"``) by thread ``tkey``:
    ``items`` lists ``(dst flat index, src flat index or None, value)`` of the box (read
    here, checked in bounds and against what is in flight)."""
    from .sync_order import flat_thread
    race = None
    if ctx is not None and ctx.kernel:
        race = (ctx, ctx.tkey, ctx.tnames, ctx.tvals) + tuple(trackers)
    issuer = flat_thread(ctx, tkey) if ctx is not None and ctx.kernel else tkey
    c = TmaCopy(asy, site, bar, issuer, dst, items, src, race, dims, what)
    if race is not None:   # the landing thread: past the block's threads, one per copy
        asy.landings += 1
        v = ctx.nthreads + asy.landings
        c.vkey = (0, 0, v)
        if ctx.partial:   # the landing is ordered after the issue
            ctx.order.events.append(("sync", (1 << issuer) | (1 << v)))
    th = asy._thread(tkey)
    th.pending.setdefault("tma", []).append(c)
    asy._track(c)
    pend = getattr(bar, "tma", None)
    if pend is None:
        pend = bar.tma = {}
    pend.setdefault(c.phase, []).append(c)


__all__ = ["TmaCopy", "TmaStoreOp", "issue", "store"]
