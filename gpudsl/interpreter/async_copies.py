"""The interpreter's meaning of the asynchronous copies (docs/async_copies.md; the rules are in
:mod:`gpudsl.ir.async_copy_meaning`).

One :class:`AsyncState` per run of a proc that holds async copies.  Per block it keeps,
for each thread, the groups of its copies; a copy's elements are *in flight* from
``async_copy`` to the ``async_wait`` that completes its group, and only there does the
copy land (its destination gets the source's values).  While in flight, reading or
writing a destination element, or writing a source element, stops the run with an
:class:`InterpError` naming the access and the copy; so does a copy still in flight
where the block's code ends (it would land nowhere).

The warpgroup MMAs (docs/hopper.md, :mod:`gpudsl.ir.wgmma_meaning`) are a second family with groups
of their own (``wgmma_commit`` / ``wgmma_wait``): a wgmma computes where it is issued
(its thread's share of ``acc += a @ b``) and stays in flight until the wait that
completes its group: its ``acc`` elements may not be touched, nor its ``a`` / ``b``
elements written, meanwhile, except by later wgmmas of the same shape on the same
accumulator (the hardware orders those).

With the race detector on, a copy's accesses are recorded twice: at the copy (by the
issuing thread, in the phase of the copy) and where it lands (by the issuing thread,
in the phase of the wait): accesses of other threads between the two are in-flight
errors already, so every conflicting access unordered with the copy is seen.
"""
from __future__ import annotations

from ..errors import InterpError
from ..ir.wgmma_meaning import WARPGROUP

READ, WRITE = 1, 2


class _Copy:
    __slots__ = ("site", "group", "dst", "dk", "src", "sk", "race", "dims")
    family = "cp"
    hint = ("commit the copy's group and async_wait for it (then sync() if other threads "
            "read it) before touching its destination, or its source for writing")

    def __init__(self, site, group, dst, dk, src, sk, race, dims):
        self.site, self.group = site, group
        self.dst, self.dk, self.src, self.sk = dst, dk, src, sk
        self.race = race   # (ctx, thread key, names, values, dst tracker, src tracker) or None
        self.dims = dims   # (dst shape, src shape) as the copy sees them, or None

    def keys(self):
        """((buffer, flat index), side) of every element the copy holds in flight."""
        return [((self.dst, k), "dst") for k in self.dk] + \
            [((self.src, k), "src") for k in self.sk]

    def land(self):
        for dk, sk in zip(self.dk, self.sk):
            self.dst[dk] = self.src[sk]
        if self.race is not None:
            ctx, tkey, tnames, tvals, trd, trs = self.race
            _replay(ctx, tkey, tnames, tvals,
                    [(trs, sk, READ) for sk in self.sk] + [(trd, dk, WRITE) for dk in self.dk],
                    self.site)

    def describe(self, side, k, buf, acc):
        what = "destination" if side == "dst" else "source"
        shape = self.dims[0 if side == "dst" else 1] if self.dims else None
        name = self.site.name if side == "dst" else acc.name
        return (f"{name}{_element(k, shape, buf)}, the {what} of the async copy "
                f"`{self.site.text}` at {self.site.where()}, before the async_wait that "
                "completes the copy's group has run")


class _Mma:
    """One thread's share of a wgmma in flight: ``notes`` lists ``(buffer, flat index,
    tracker, kind, role)`` of every access it made (computed where it was issued)."""

    __slots__ = ("site", "group", "notes", "node", "race", "dims")
    family = "wg"
    hint = ("wgmma_commit the group and wgmma_wait for it (then sync() if other threads "
            "write the operands) before touching the accumulator, or the operands for "
            "writing")

    def __init__(self, site, group, notes, node, race, dims=None):
        self.site, self.group, self.notes, self.node, self.race = site, group, notes, node, race
        self.dims = dims or {}   # id(buffer) -> (name, shape) of the operands

    def keys(self):
        seen = {}
        for buf, k, _, _, role in self.notes:
            seen.setdefault((id(buf), k, role), ((buf, k), role))
        return list(seen.values())

    def land(self):
        if self.race is not None:
            ctx, tkey, tnames, tvals = self.race
            _replay(ctx, tkey, tnames, tvals, [(tr, k, kind) for _, k, tr, kind, _ in
                                               self.notes if tr is not None], self.site)

    def describe(self, side, k, buf, acc):
        what = "accumulator" if side == "dst" else "operand"
        name, shape = self.dims.get(id(buf), (acc.name, None))
        return (f"{name}{_element(k, shape, buf)}, an {what} of the wgmma `{self.site.text}` "
                f"at {self.site.where()}, before the wgmma_wait that completes its group "
                "has run")


def _replay(ctx, tkey, tnames, tvals, accesses, site):
    """Record ``accesses`` (tracker, flat index, kind) for the issuing thread again."""
    saved = (ctx.tkey, ctx.tnames, ctx.tvals)
    ctx.tkey, ctx.tnames, ctx.tvals = tkey, tnames, tvals
    try:
        for tr, k, kind in accesses:
            tr(k, kind, site)
    finally:
        ctx.tkey, ctx.tnames, ctx.tvals = saved


class _Thread:
    __slots__ = ("commits", "pending")

    def __init__(self):
        self.commits = {"cp": 0, "wg": 0, "ts": 0}   # commits run by this thread (thread loops)
        self.pending = {"cp": [], "wg": [], "ts": []}  # in issue order, per family


class AsyncState:
    def __init__(self):
        self.block()

    def block(self):
        """A new block starts (or the last one ended): nothing is in flight."""
        self.threads: dict = {}
        self.block_commits = {"cp": 0, "wg": 0, "ts": 0}   # commits at block level (every thread)
        self.inflight: dict = {}  # (id(buffer), flat index) -> [(op, "dst" | "src"), ...]
        self.issued: dict = {}    # (site, warpgroup) -> lane -> wgmmas issued (wg_converged)
        self.landings = 0         # bulk tensor copies' landing threads (.tma_copies)

    def block_end(self):
        """The block's code ends: an operation still in flight is an error (it lands
        nowhere in the meaning, and on the GPU it may write memory the block no longer
        owns)."""
        for th in self.threads.values():
            for fam, what, wait in (("cp", "async copy", "async_wait"),
                                    ("wg", "wgmma", "wgmma_wait"),
                                    ("ts", "bulk tensor store", "tma_wait")):
                if th.pending[fam]:
                    c = th.pending[fam][0]
                    self.block()
                    raise InterpError(
                        f"the {what} `{c.site.text}` at {c.site.where()} is still in flight "
                        f"where the block's code ends: no {wait} completed its group",
                        c.site.loc, f"commit the group and {wait} for it before the block "
                        "ends")
        for th in self.threads.values():
            for c in th.pending.get("tma", ()):   # bulk tensor copies (.tma_copies)
                self.block()
                raise c.unlanded()
        self.block()

    def _thread(self, tkey) -> _Thread:
        th = self.threads.get(tkey)
        if th is None:
            th = self.threads[tkey] = _Thread()
        return th

    # ------------------------------------------------------------ statements

    def copy(self, tkey, site, dst, dks, src, sks, ctx=None, trackers=None, dims=None):
        """``async_copy``: the flat indices ``dks`` of ``dst`` and ``sks`` of ``src``
        (already checked in bounds and against copies in flight); ``dims``: the shapes
        of both arrays, to name elements in errors."""
        th = self._thread(tkey)
        race = None
        if ctx is not None and ctx.kernel:
            race = (ctx, ctx.tkey, ctx.tnames, ctx.tvals) + tuple(trackers)
        self._issue(th, _Copy(site, self.block_commits["cp"] + th.commits["cp"], dst, dks,
                              src, sks, race, dims))

    def wgmma(self, tkey, site, notes, node, ctx=None, dims=None):
        """A wgmma (``node``) of thread ``tkey`` issued (its accesses ``notes``, already
        computed; ``dims``: id(buffer) -> (name, shape) of its operands, for errors)."""
        th = self._thread(tkey)
        race = (ctx, ctx.tkey, ctx.tnames, ctx.tvals) if ctx is not None and ctx.kernel \
            else None
        group = (id(site), tkey[0], tkey[1], tkey[2] // WARPGROUP)
        lanes = self.issued.setdefault(group, (site, {}))[1]
        lanes[tkey[2] % WARPGROUP] = lanes.get(tkey[2] % WARPGROUP, 0) + 1
        self._issue(th, _Mma(site, self.block_commits["wg"] + th.commits["wg"], notes, node,
                             race, dims))

    def wg_converged(self):
        """A run of a thread loop holding wgmmas ends: every lane of each warpgroup that
        issued a wgmma there issued it as often as the others (the 128 threads of a
        warpgroup issue each wgmma together)."""
        issued, self.issued = self.issued, {}
        for (_, *where), (site, lanes) in issued.items():
            counts = [lanes.get(l, 0) for l in range(WARPGROUP)]
            if len(set(counts)) > 1:
                lo = counts.index(min(counts))
                hi = counts.index(max(counts))
                base = WARPGROUP * where[-1]
                raise InterpError(
                    f"the wgmma `{site.text}` at {site.where()} ran {counts[hi]} time(s) in "
                    f"thread {base + hi} and {counts[lo]} in thread {base + lo} of one "
                    "warpgroup: its 128 threads issue it together", site.loc,
                    "keep wgmma out of lane-dependent ifs and loops, in a thread loop that "
                    "covers whole warpgroups (bounds multiples of 128)")

    def _issue(self, th, op):
        th.pending[op.family].append(op)
        self._track(op)

    def _track(self, op):
        """``op``'s elements are in flight."""
        fl = self.inflight
        for (buf, k), side in op.keys():
            fl.setdefault((id(buf), k), []).append((op, side))

    def commit(self, tkey, fam: str = "cp"):
        """``async_commit()`` (``wgmma_commit()``: ``fam="wg"``); ``tkey`` None: at block
        level (every thread)."""
        if tkey is None:
            self.block_commits[fam] += 1
        else:
            self._thread(tkey).commits[fam] += 1

    def wait(self, tkey, depth: int, fam: str = "cp"):
        """``async_wait(depth)`` (``wgmma_wait``: ``fam="wg"``): land the operations of
        every committed group of the thread (of every thread at block level) but the
        ``depth`` most recent."""
        ths = list(self.threads.values()) if tkey is None else [self._thread(tkey)]
        for th in ths:
            done = self.block_commits[fam] + th.commits[fam] - depth
            keep = []
            for c in th.pending[fam]:
                if c.group < done:
                    self._land(c)
                else:
                    keep.append(c)
            th.pending[fam] = keep

    def _land(self, c):
        fl = self.inflight
        for (buf, k), _ in c.keys():
            key = (id(buf), k)
            ops = fl.get(key)
            if ops is not None:
                ops[:] = [x for x in ops if x[0] is not c]
                if not ops:
                    del fl[key]
        c.land()

    # ------------------------------------------------------------ accesses

    def touch(self, buf, k: int, kind: int, acc, mma=None):
        """Every access of an array that an operation may be in flight on (returns
        ``k``); ``mma``: the wgmma making the access, if one does."""
        fl = self.inflight
        if not fl:
            return k
        hits = fl.get((id(buf), k))
        if not hits:
            return k
        for c, side in hits:
            if side == "src" and kind == READ:
                continue
            if mma is not None and c.family == "wg" and side == "dst" and _chained(c, mma):
                continue
            how = {READ: "reads", WRITE: "writes"}.get(kind, "updates")
            raise InterpError(
                f"`{acc.text}` at {acc.where()} {how} {c.describe(side, k, buf, acc)}",
                acc.loc, c.hint)
        return k

    def wg_note(self, notes, buf, tr, role, k, kind, acc, mma):
        """An access of a wgmma being issued (thread ``mma``'s share): checked against
        what is in flight and noted for its landing."""
        self.touch(buf, k, kind, acc, mma)
        notes.append((buf, k, tr, kind, role))
        return k


def _chained(c, mma) -> bool:
    """A later wgmma of the same shape on the same accumulator: ordered by the hardware."""
    from ..ir.wgmma_meaning import same_shape
    return same_shape(c.node, mma)


def _element(k: int, shape, buf) -> str:
    """``[i, j]`` of flat index ``k`` in an array of ``shape`` that fills its buffer,
    else ``[...] (element k of its buffer)``."""
    n = 1
    for d in shape or ():
        n *= d
    if not shape or n != len(buf):
        return f"[...] (element {k} of its buffer)"
    idx = []
    for d in reversed(shape):
        idx.append(k % d)
        k //= d
    return "[" + ", ".join(str(i) for i in reversed(idx)) + "]"


_CURRENT: list = []


def begin() -> AsyncState:
    """The state of a new run (a top-level proc holding async copies)."""
    st = AsyncState()
    _CURRENT[:] = [st]
    return st


def current() -> AsyncState:
    """The state of the run a callee belongs to."""
    if not _CURRENT:
        _CURRENT.append(AsyncState())
    return _CURRENT[-1]
