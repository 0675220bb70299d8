"""The interpreter's meaning of the asynchronous copies (docs/async_copies.md; the rules are in
:mod:`gpudsl.ir.asyncs`).

One :class:`AsyncState` per run of a proc that holds async copies.  Per block it keeps,
for each thread, the groups of its copies; a copy's elements are *in flight* from
``async_copy`` to the ``async_wait`` that completes its group, and only there does the
copy land (its destination gets the source's values).  While in flight, reading or
writing a destination element, or writing a source element, stops the run with an
:class:`InterpError` naming the access and the copy; so does a copy still in flight
where the block's code ends (it would land nowhere).

With the race detector on, a copy's accesses are recorded twice: at the copy (by the
issuing thread, in the phase of the copy) and where it lands (by the issuing thread,
in the phase of the wait): accesses of other threads between the two are in-flight
errors already, so every conflicting access unordered with the copy is seen.
"""
from __future__ import annotations

from ..errors import InterpError

READ, WRITE = 1, 2


class _Copy:
    __slots__ = ("site", "group", "dst", "dk", "src", "sk", "race", "dims")

    def __init__(self, site, group, dst, dk, src, sk, race, dims):
        self.site, self.group = site, group
        self.dst, self.dk, self.src, self.sk = dst, dk, src, sk
        self.race = race   # (ctx, thread key, names, values, dst tracker, src tracker) or None
        self.dims = dims   # (dst shape, src shape) as the copy sees them, or None


class _Thread:
    __slots__ = ("commits", "pending")

    def __init__(self):
        self.commits = 0      # commits run by this thread itself (in thread loops)
        self.pending = []     # _Copy, in issue order


class AsyncState:
    def __init__(self):
        self.block()

    def block(self):
        """A new block starts (or the last one ended): nothing is in flight."""
        self.threads: dict = {}
        self.block_commits = 0   # commits run at block level (by every thread)
        self.inflight: dict = {}  # (id(buffer), flat index) -> (_Copy, "dst" | "src")

    def block_end(self):
        """The block's code ends: a copy still in flight is an error (it lands nowhere in
        the meaning, and on the GPU it may write SHARED memory the block no longer
        owns)."""
        for th in self.threads.values():
            if th.pending:
                c = th.pending[0]
                self.block()
                raise InterpError(
                    f"the async copy `{c.site.text}` at {c.site.where()} is still in flight "
                    "where the block's code ends: no async_wait completed its group",
                    c.site.loc, "async_commit the copy's group and async_wait for it before "
                    "the block ends")
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
        c = _Copy(site, self.block_commits + th.commits, dst, dks, src, sks, race, dims)
        th.pending.append(c)
        fl = self.inflight
        for k in dks:
            fl[(id(dst), k)] = (c, "dst")
        for k in sks:
            fl.setdefault((id(src), k), (c, "src"))

    def commit(self, tkey):
        """``async_commit()``; ``tkey`` None: at block level (every thread)."""
        if tkey is None:
            self.block_commits += 1
        else:
            self._thread(tkey).commits += 1

    def wait(self, tkey, depth: int):
        """``async_wait(depth)``: land the copies of every committed group of the
        thread (of every thread at block level) but the ``depth`` most recent."""
        ths = list(self.threads.values()) if tkey is None else [self._thread(tkey)]
        for th in ths:
            done = self.block_commits + th.commits - depth
            keep = []
            for c in th.pending:
                if c.group < done:
                    self._land(c)
                else:
                    keep.append(c)
            th.pending = keep

    def _land(self, c: _Copy):
        fl = self.inflight
        for k in c.dk:
            fl.pop((id(c.dst), k), None)
        for k in c.sk:
            if fl.get((id(c.src), k), (None,))[0] is c:
                del fl[(id(c.src), k)]
        for dk, sk in zip(c.dk, c.sk):
            c.dst[dk] = c.src[sk]
        if c.race is not None:
            ctx, tkey, tnames, tvals, trd, trs = c.race
            saved = (ctx.tkey, ctx.tnames, ctx.tvals)
            ctx.tkey, ctx.tnames, ctx.tvals = tkey, tnames, tvals
            try:
                for dk, sk in zip(c.dk, c.sk):
                    trs(sk, READ, c.site)
                    trd(dk, WRITE, c.site)
            finally:
                ctx.tkey, ctx.tnames, ctx.tvals = saved

    # ------------------------------------------------------------ accesses

    def touch(self, buf, k: int, kind: int, acc):
        """Every access of an array that a copy may be in flight on (returns ``k``)."""
        fl = self.inflight
        if not fl:
            return k
        hit = fl.get((id(buf), k))
        if hit is None:
            return k
        c, side = hit
        if side == "src" and kind == READ:
            return k
        how = {READ: "reads", WRITE: "writes"}.get(kind, "updates")
        what = "destination" if side == "dst" else "source"
        shape = c.dims[0 if side == "dst" else 1] if c.dims else None
        el = _element(k, shape, buf)
        name = c.site.name if side == "dst" else acc.name
        raise InterpError(
            f"`{acc.text}` at {acc.where()} {how} {name}{el}, the {what} of the async "
            f"copy `{c.site.text}` at {c.site.where()}, "
            "before the async_wait that completes the copy's group has run",
            acc.loc, "commit the copy's group and async_wait for it (then sync() if other "
            "threads read it) before touching its destination, or its source for writing")


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
