"""The dynamic race detector: ``interpret(p, detect_races=True)``.

The interpreter still runs every loop in order (that is the meaning); the
detector only watches.  It knows, at each memory access, which kernel, block,
thread and barrier phase the sequential execution is in:

* a *kernel* is one execution of an outermost ``@ BLOCKS`` loop nest;
* a *block* is one iteration of the ``@ BLOCKS`` loops, named by their variables;
* a *thread* is named by the enclosing ``@ THREADS`` loop variables, padded on
  the left with zeros to ``(z, y, x)``; code at block level (outside thread
  loops) is executed by every thread of the block (``ALL``, kept as ``None``);
* a *phase* ends at each ``sync()`` executed at block level.

Two accesses conflict when they touch the same element, at least one writes,
and they are not both atomic.  A conflict is a race when the two threads are
distinct and in the same block and phase, or, for ``GLOBAL`` memory, in
distinct blocks of the same kernel (barriers do not order blocks).  A
``REGISTER`` array allocated at block level belongs row by row to threads: the
first thread to touch a row owns it, and any other thread touching it is
reported too.

Per element and per kind (read, write, atomic) the detector keeps at most two
accesses by distinct threads: enough to know whether *some* earlier access was
made by a thread other than the current one, so each access costs O(1).
"""
from __future__ import annotations

from ..errors import InterpError, RaceError
from ..ir.types import GLOBAL, memory_with
from . import sync_order
from .runtime import AccessSite, noop_tracker
from .sync_order import PartialOrder

READ, WRITE, ATOMIC = 1, 2, 3
_KIND = {READ: "read", WRITE: "write", ATOMIC: "atomic update"}
# For each kind, the kinds of earlier accesses it conflicts with.
_CONFLICTS = {READ: (WRITE, ATOMIC), WRITE: (READ, WRITE, ATOMIC), ATOMIC: (READ, WRITE)}


class RaceContext:
    """Where the sequential execution is, in GPU terms."""

    def __init__(self):
        self.kernel = 0  # epoch of the running kernel, 0 outside kernels
        self._kernels = 0
        self._depth = 0  # nesting of @ BLOCKS loops
        self.phase = 0  # epoch of the running barrier phase (unique per block)
        self._phase_ids = 0  # the last epoch given out (new_phase)
        self.bstack: list[tuple[str, int]] = []
        self.bkey: tuple | None = None
        self.tkey: tuple | None = None  # (z, y, x); None: all threads (block level)
        self.tnames: tuple = ()  # names of the enclosing thread loop variables
        self.tvals: tuple = ()  # their values
        self.multi = False  # the block has two threads or more
        self.kdims = 0  # thread dimensions of the block
        self.nthreads = 1
        self._shared: dict = {}  # (site, kernel, block) -> Tracker of a SHARED array
        # ranged and split barriers (docs/language.md (synchronization)): the partial order of the running block
        self.partial = False  # set when the proc uses them
        self.order = PartialOrder()
        self.bdims = (1, 1, 1)
        # thread block clusters (:mod:`.clusters`): set once a cluster's blocks run together
        self.clusters = False
        self.in_cluster = False
        self.cphase = 0   # sync_cluster()s the running block has passed

    # ------------------------------------------------------------ structure

    def new_phase(self) -> None:
        """A new barrier phase of the running block, with an epoch never given before (a
        cluster's blocks keep theirs across their turns, :mod:`.clusters`)."""
        self._phase_ids += 1
        self.phase = self._phase_ids

    def kernel_enter(self):
        """Before a ``@ BLOCKS`` loop; the outermost one starts a kernel."""
        self._depth += 1
        if self._depth == 1:
            self._kernels += 1
            self.kernel = self._kernels

    def kernel_exit(self):
        self._depth -= 1
        if self._depth == 0:
            self.kernel = 0

    def block_enter(self, name: str, value: int, dims: tuple, kdims: int):
        self.bstack.append((name, value))
        self.bkey = tuple(self.bstack)
        self.new_phase()
        self.order.reset()
        self.bdims = tuple(max(d, 1) for d in dims) + (1,) * (3 - len(dims))
        n = 1
        for d in dims:
            n *= max(d, 1)
        self.nthreads = n
        self.multi = n >= 2
        self.kdims = kdims

    def block_exit(self):
        self.bstack.pop()
        self.bkey = tuple(self.bstack) if self.bstack else None
        self.new_phase()
        self.order.reset()

    def thread_loop(self, name: str):
        """Before a ``@ THREADS`` loop: what its iterations extend, and what to
        restore after it."""
        return ((self.tkey, self.tnames, self.tvals), self.tvals, self.tnames + (name,))

    def thread_set(self, loop, value: int):
        """At each iteration of a ``@ THREADS`` loop."""
        vals = loop[1] + (value,)
        self.tvals = vals
        self.tnames = loop[2]
        n = len(vals)
        self.tkey = (0, 0, value) if n == 1 else (0, vals[0], value) if n == 2 else vals

    def thread_done(self, loop):
        self.tkey, self.tnames, self.tvals = loop[0]

    def sync(self, acc: AccessSite):
        if self.kernel == 0:
            return
        if self.tkey is not None:
            raise InterpError(
                f"sync() inside a THREADS loop (thread {_thread(self.tnames, self.tkey)}): a barrier "
                "must stand at block level, where every thread of the block reaches it",
                acc.loc, "move the sync() out of the thread loop")
        self.new_phase()
        self.order.reset()

    def sync_cluster(self, acc: AccessSite):
        """``sync_cluster()``: a block barrier that also ends the cluster phase."""
        self.sync(acc)
        self.cphase += 1

    def sync_range(self, lo: int, hi: int, acc: AccessSite):
        sync_order.sync_range(self, lo, hi, acc)

    def arrive(self, bar, lo: int, hi: int, acc: AccessSite):
        sync_order.arrive(self, bar, lo, hi, acc)

    def wait(self, bar, lo: int, hi: int, acc: AccessSite):
        sync_order.wait(self, bar, lo, hi, acc)

    # ------------------------------------------------------------ memory

    def tracker(self, mem, name: str, dims: tuple, param: bool = False, site=None):
        """The access hook of a fresh array (or a tensor argument, ``param``).

        A SHARED array has one copy per block (docs/language.md (meaning), and the generated CUDA: a
        ``__shared__`` declaration), wherever in the block's code it is allocated:
        an allocation statement (``site``) run again in the same block, e.g. in
        each iteration of a ``seq`` loop, gets the same access log, so an access in
        one iteration and a conflicting one in the next without a barrier between
        are a race."""
        if param:
            return Tracker(self, name, dims, GLOBAL).access
        if self.kernel == 0:  # a host-level temporary, which later kernels may share
            return Tracker(self, name, dims, mem if not mem.per_thread else memory_with(scope="grid")).access
        if self.tkey is not None:
            return noop_tracker  # thread-private memory
        if mem.per_thread:
            return RowTracker(self, name, dims, self.kdims).access
        if mem.per_block and site is not None:
            key = (site, self.kernel, self.bkey)
            tr = self._shared.get(key)
            if tr is None or tr.dims != tuple(dims):
                if len(self._shared) > 4096:
                    self._shared.clear()
                tr = self._shared[key] = Tracker(self, name, dims, mem)
            return tr.access
        return Tracker(self, name, dims, mem).access


class Tracker:
    """The access log of one array (tensor argument or shared/global allocation)."""

    __slots__ = ("ctx", "name", "dims", "mem", "cells", "gcells", "is_global")

    def __init__(self, ctx: RaceContext, name: str, dims: tuple, mem):
        self.ctx = ctx
        self.name = name
        self.dims = tuple(dims)
        self.mem = mem
        self.cells: dict[int, list] = {}
        self.gcells: dict[int, list] = {}
        self.is_global = mem.scope == "grid"

    def access(self, k: int, kind: int, acc: AccessSite) -> int:
        ctx = self.ctx
        if not ctx.kernel:
            return k
        t = ctx.tkey
        entry = (t, ctx.tnames, ctx.bkey, acc)
        # Threads of one block, within one phase.
        cell = self.cells.get(k)
        if ctx.partial:
            sync_order.partial_access(self, k, kind, acc, _CONFLICTS)
        elif cell is None or cell[0] != ctx.phase:
            cell = [ctx.phase, None, None, None]
            cell[kind] = [entry]
            self.cells[k] = cell
        else:
            for c in _CONFLICTS[kind]:
                lst = cell[c]
                if lst is not None:
                    for e in lst:
                        et = e[0]
                        if (et != t) if (et is not None and t is not None) else ctx.multi:
                            self._race(k, e, c, entry, kind, False)
            lst = cell[kind]
            if lst is None:
                cell[kind] = [entry]
            elif len(lst) == 1 and lst[0][0] != t:
                lst.append(entry)
        if not self.is_global:
            return k
        # Blocks of one kernel, on global memory.
        if ctx.clusters:
            from .clusters import global_access
            global_access(self, k, kind, entry, _CONFLICTS)
            return k
        g = self.gcells.get(k)
        if g is None or g[0] != ctx.kernel:
            g = [ctx.kernel, None, None, None]
            g[kind] = [entry]
            self.gcells[k] = g
            return k
        b = ctx.bkey
        for c in _CONFLICTS[kind]:
            lst = g[c]
            if lst is not None:
                for e in lst:
                    if e[2] != b:
                        self._race(k, e, c, entry, kind, True)
        lst = g[kind]
        if lst is None:
            g[kind] = [entry]
        elif len(lst) == 1 and lst[0][2] != b:
            lst.append(entry)
        return k

    def element(self, k: int) -> tuple:
        idx = []
        for d in reversed(self.dims):
            idx.append(k % d if d else 0)
            k = k // d if d else 0
        return tuple(reversed(idx))

    def _race(self, k, first, kind1, second, kind2, across_blocks: bool):
        t1, td1, b1, a1 = first
        t2, td2, b2, a2 = second
        el = self.element(k)
        elem = f"{self.name}[{', '.join(map(str, el))}]" if el else self.name
        if across_blocks:
            why = (f"two blocks of one kernel touch the same {self.mem.name} element "
                   "(a block barrier does not order blocks; only sync_cluster() or a "
                   "cluster arrive orders blocks of one cluster)")
        else:
            why = "two threads of one block touch it between the same two barriers"
        landing = [a.text.startswith("tma_load(") for a in (a1, a2)]
        msg = (f"data race on {self.mem.name} {elem}: {why}\n"
               f"  {_KIND[kind1]} `{a1.text}` at {a1.where()} by "
               f"{_who(b1, td1, t1, landing[0])}\n"
               f"  {_KIND[kind2]} `{a2.text}` at {a2.where()} by "
               f"{_who(b2, td2, t2, landing[1])}")
        hint = ("separate the accesses with sync()" if not across_blocks else
                "give each block its own elements, use atomics, or split the kernel")
        if any(landing) and not across_blocks:
            hint = ("a bulk copy lands when the phase of its barrier completes: wait for that "
                    "phase before touching its tile, and have the issuing thread wait for "
                    "the tile's release before it refills it")
        err = RaceError(msg, a2.loc, hint, accesses=(a1, a2), element=(self.name, el))
        # For programs comparing with the detector: ((block, thread), (block, thread)),
        # blocks as ((name, value), ...), threads as (z, y, x) or None (all threads).
        err.threads = ((b1, t1), (b2, t2))
        raise err


class RowTracker:
    """A ``REGISTER`` array allocated at block level: each row (the leading
    ``kdims`` indices) belongs to the first thread that touches it."""

    __slots__ = ("ctx", "name", "dims", "rowsize", "owners", "lead")

    def __init__(self, ctx: RaceContext, name: str, dims: tuple, kdims: int):
        self.ctx = ctx
        self.name = name
        self.dims = tuple(dims)
        self.lead = min(kdims, len(self.dims))
        n = 1
        for d in self.dims[self.lead:]:
            n *= d
        self.rowsize = max(n, 1)
        self.owners: dict[int, tuple] = {}

    def access(self, k: int, kind: int, acc: AccessSite) -> int:
        ctx = self.ctx
        t = ctx.tkey
        if t is None:
            if ctx.multi:
                raise RaceError(
                    f"the block-level REGISTER array {self.name} is touched by code at block "
                    f"level (`{acc.text}`), which every thread of "
                    f"{_block(ctx.bkey)} executes: each thread has its own copy",
                    acc.loc, "touch per-thread REGISTER arrays inside THREADS loops, or "
                    "make the array SHARED", accesses=(acc,), element=(self.name, None))
            t = (0, 0, 0)
        row = k // self.rowsize
        own = self.owners.get(row)
        if own is None:
            self.owners[row] = (t, ctx.tnames, acc, kind)
        elif own[0] != t:
            el = Tracker.element(self, k)
            msg = (f"REGISTER array {self.name} (allocated at block level) is per thread, "
                   f"but two threads touch its row {self.name}[{', '.join(map(str, el[:self.lead]))}] "
                   f"of it in {_block(ctx.bkey)}\n"
                   f"  {_KIND[own[3]]} `{own[2].text}` at {own[2].where()} by "
                   f"thread {_thread(own[1], own[0])}\n"
                   f"  {_KIND[kind]} `{acc.text}` at {acc.where()} by thread {_thread(ctx.tnames, t)}")
            err = RaceError(msg, acc.loc, "index a block-level REGISTER array by the thread "
                            "variables in its leading dimensions",
                            accesses=(own[2], acc), element=(self.name, el))
            err.threads = ((ctx.bkey, own[0]), (ctx.bkey, t))
            raise err
        return k


def _thread(tnames, tkey) -> str:
    if not tnames or tkey is None:
        return "(all threads: block-level code)"
    vals = tkey[len(tkey) - len(tnames):]
    return "(" + ", ".join(f"{n}={v}" for n, v in zip(tnames, vals)) + ")"


def _block(bkey) -> str:
    if not bkey:
        return "block ()"
    return "block (" + ", ".join(f"{n}={v}" for n, v in bkey) + ")"


def _who(bkey, tdesc, t, landing: bool = False) -> str:
    if t is None:
        return f"{_block(bkey)}, all threads (block-level code)"
    if landing:   # a bulk copy: its thread issues it, it lands with a barrier's phase
        return f"{_block(bkey)}, the bulk copy issued by thread {_thread(tdesc, t)}"
    return f"{_block(bkey)}, thread {_thread(tdesc, t)}"
