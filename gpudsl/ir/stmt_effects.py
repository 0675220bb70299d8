"""The one effect collector: every memory access of a block of statements, with
the loops and guards it runs under and the statement it belongs to.

::

    from gpudsl.ir.stmt_effects import collect, RegionAccess, conflicts

    accs = collect(stmts, loops=(), guards=())   # list[RegionAccess], in program order

An :class:`RegionAccess` has ``buf`` (the source name), ``mode`` (``"r"``, ``"w"``, ``"+"``,
``"-"``, ``"*"`` for reductions, ``"atomic"``), ``idx`` (IR index expressions),
``loops`` (enclosing ``For`` statements below the region, outer first), ``guards``
(``(condition, positive)`` pairs), ``stmt`` (the statement; the call for accesses
of an inlined callee) and ``local`` (allocated inside the collected statements).
Calls are seen through the one inliner (:func:`inline_call`), so a window passed to
a callee shows up as accesses of the caller's array.  ``reads_of(expr)`` lists the
reads of one expression.

Both uses walk statements with :class:`Walker`: :func:`collect` is a thin subclass,
and check()'s collector (gpudsl.analysis.proc_effects) extends it with storage keys per
allocation, kernels, levels, barrier counts and mapping issues through its hooks.
"""
from __future__ import annotations

from dataclasses import dataclass

from .inline import Inliner
from .async_copy_meaning import elements
from .nodes import (Alloc, Arrive, AsyncCommit, AsyncCopy, AsyncWait, Wait, Assign, Atomic, Call,
                    Expr, For, If, Read, Reduce, SetMaxNReg, Stmt, Sync, TmaCommit, TmaLoad, TmaStore, TmaWait, Wgmma, WgmmaCommit,
                    WgmmaWait)
from .types import THREADS, f32
from .wgmma_meaning import elements as wgmma_elements, lane_of
from .tma_meaning import elements as tma_elements, store_elements

UNKNOWN_LANE = "__wg_lane"   # a free name: any lane
from .visitor import walk


@dataclass
class RegionAccess:
    buf: str
    mode: str  # "r", "w", "+", "-", "*" (reductions), "atomic"
    idx: tuple
    loops: tuple  # For statements between the region and the access (outer first)
    guards: tuple  # (cond, positive) pairs
    stmt: Stmt
    local: bool = False  # buffer allocated inside the region

    @property
    def writes(self) -> bool:
        return self.mode != "r"


_READS: dict = {}  # id(expr) -> (expr, its reads): nodes are immutable


def reads_of(e: Expr) -> list:
    """The ``Read`` nodes of an expression, outermost first."""
    hit = _READS.get(id(e))
    if hit is not None and hit[0] is e:
        return list(hit[1])
    out = [n for n in walk(e) if isinstance(n, Read)]
    if len(_READS) > 200_000:
        _READS.clear()
    _READS[id(e)] = (e, tuple(out))
    return out


def write_mode(s) -> str:
    """The access mode of an assignment, reduction or atomic statement."""
    if isinstance(s, Assign):
        return "w"
    return "atomic" if isinstance(s, Atomic) else s.op


def inline_call(s: Call, taken: set) -> tuple:
    """The body of a call through the one inliner (:mod:`gpudsl.ir.inline`), its
    names renamed away from ``taken`` and from the call's argument names."""
    return Inliner(taken).expand(s)


class Walker:
    """The one walk of statements for memory effects.

    ``block(stmts, ctx)`` visits statements in program order with a context ``ctx``
    that the walker never looks into: subclasses say what it is and how it grows
    through the hooks below.  Each block opens a scope of allocations
    (``self.scopes``, a stack of ``name -> key`` dicts; :meth:`lookup` resolves a
    name through it).

    Hooks (all optional):

    - ``step(stmts, i, ctx)``: the context of ``stmts[i]`` (e.g. barrier counts);
    - ``read(node, s, ctx)``: a ``Read`` in an expression of statement ``s``;
    - ``write(s, ctx)``: the write of an assignment, reduction or atomic, after the
      reads of its right-hand side and indices (``rhs_first`` orders those two);
    - ``write_result(s, ctx)``: after ``write``, the write of the local scalar
      ``s.result`` that receives an atomic's old value (``old = atomic_add(...)``);
    - ``enter_loop(s, ctx)`` / ``enter_branch(s, positive, ctx)``: the context of a
      loop body / of the ``then`` (``positive``) or ``else`` block of an ``if``;
    - ``declare(s, ctx)``: the key an allocation gets in its scope;
    - ``sync(s, ctx)``, ``call(s, ctx)`` (default: walk the callee's body through
      the one inliner, names renamed away from every name in scope).
    """

    rhs_first = True  # reads of the right-hand side before those of the indices

    def __init__(self, scope=None):
        self.scopes: list[dict] = [dict(scope or {})]

    def lookup(self, name):
        for sc in reversed(self.scopes):
            if name in sc:
                return sc[name]
        return None

    def block(self, stmts, ctx):
        self.scopes.append({})
        step, stmt = self.step, self.stmt
        try:
            for i, s in enumerate(stmts):
                stmt(s, step(stmts, i, ctx))
        finally:
            self.scopes.pop()

    def stmt(self, s: Stmt, ctx):
        if isinstance(s, (Assign, Reduce, Atomic)):
            self.assign(s, ctx)
        elif isinstance(s, For):
            self.loop(s, ctx)
        elif isinstance(s, If):
            self.branch(s, ctx)
        elif isinstance(s, Alloc):
            self.alloc(s, ctx)
        elif isinstance(s, (Sync, Arrive, Wait)):
            self.sync(s, ctx)
        elif isinstance(s, Call):
            self.call(s, ctx)
        elif isinstance(s, AsyncCopy):
            self.async_copy(s, ctx)
        elif isinstance(s, (AsyncCommit, AsyncWait, WgmmaCommit, WgmmaWait, TmaCommit, TmaWait)):
            self.async_sync(s, ctx)
        elif isinstance(s, SetMaxNReg):
            self.setmaxnreg(s, ctx)
        elif isinstance(s, Wgmma):
            self.wgmma(s, ctx)
        elif isinstance(s, TmaLoad):
            self.tma_load(s, ctx)
        elif isinstance(s, TmaStore):
            self.tma_store(s, ctx)

    def tma_store(self, s, ctx):
        """A bulk tensor store as its meaning for the issuing thread
        (:func:`gpudsl.ir.tma_meaning.store_elements`)."""
        for e in store_elements(s):
            self.stmt(e, ctx)

    def tma_load(self, s: TmaLoad, ctx):
        """A bulk tensor copy as its meaning for the issuing thread
        (:func:`gpudsl.ir.tma_meaning.elements`: a loop per range around a guarded assignment that
        remembers the copy)."""
        for e in tma_elements(s):
            self.stmt(e, ctx)

    def wgmma(self, s: Wgmma, ctx):
        """A wgmma as its meaning for the running thread (:func:`gpudsl.ir.wgmma_meaning.elements`:
        two loops around a reduction that remembers the wgmma)."""
        for e in wgmma_elements(s, self.wgmma_lane(ctx)):
            self.stmt(e, ctx)

    def wgmma_lane(self, ctx):
        """The running thread's lane in its warpgroup (the innermost thread loop's
        variable modulo 128; an unknown lane where no thread loop is in view)."""
        return lane_of(UNKNOWN_LANE)

    def async_copy(self, s: AsyncCopy, ctx):
        """An async copy as its element copies (:func:`gpudsl.ir.async_copy_meaning.elements`:
        assignments that remember the copy)."""
        for e in elements(s, self.elem_type(s.src)):
            self.assign(e, ctx)

    def elem_type(self, name):
        return f32

    def async_sync(self, s, ctx):
        """``async_commit()`` / ``async_wait(n)``: no memory access of their own."""

    def setmaxnreg(self, s, ctx):
        """``setmaxnreg(n, lo, hi)``: registers, no memory access (docs/hopper.md)."""

    def assign(self, s, ctx):
        vals = (getattr(s, "cmp", None), s.rhs)  # atomic_cas's compare value first
        if self.rhs_first:
            self.exprs(vals, s, ctx)
            self.exprs(s.idx, s, ctx)
        else:
            self.exprs(s.idx, s, ctx)
            self.exprs(vals, s, ctx)
        self.write(s, ctx)
        if isinstance(s, Atomic) and s.result is not None:
            self.write_result(s, ctx)

    def loop(self, s: For, ctx):
        self.exprs((s.lo, s.hi), s, ctx)
        self.block(s.body, self.enter_loop(s, ctx))

    def branch(self, s: If, ctx):
        self.exprs((s.cond,), s, ctx)
        self.block(s.body, self.enter_branch(s, True, ctx))
        if s.orelse:
            self.block(s.orelse, self.enter_branch(s, False, ctx))

    def alloc(self, s: Alloc, ctx):
        self.scopes[-1][s.name] = self.declare(s, ctx)

    def call(self, s: Call, ctx):
        self.block(inline_call(s, self.taken(ctx)), ctx)

    def taken(self, ctx) -> set:
        """The names a callee's body must be renamed away from."""
        return {n for sc in self.scopes for n in sc}

    def exprs(self, es, s, ctx):
        read = self.read
        for e in es:
            if e is not None:
                for n in reads_of(e):
                    read(n, s, ctx)

    # hooks ------------------------------------------------------------------

    def step(self, stmts, i, ctx):
        return ctx

    def read(self, n: Read, s, ctx):
        pass

    def write(self, s, ctx):
        pass

    def write_result(self, s, ctx):
        pass

    def enter_loop(self, s: For, ctx):
        return ctx

    def enter_branch(self, s: If, positive: bool, ctx):
        return ctx

    def declare(self, s: Alloc, ctx):
        return s.name

    def sync(self, s: Sync, ctx):
        pass


class _Accesses(Walker):
    """:func:`collect`: the context is ``(loops, guards)``; every allocation of the
    region is local."""

    def __init__(self, locals_, out):
        super().__init__({n: n for n in locals_})
        self.out = out

    def read(self, n, s, ctx):
        self.out.append(RegionAccess(n.name, "r", n.idx, ctx[0], ctx[1], s,
                               self.lookup(n.name) is not None))

    def write(self, s, ctx):
        self.out.append(RegionAccess(s.name, write_mode(s), s.idx, ctx[0], ctx[1], s,
                               self.lookup(s.name) is not None))

    def write_result(self, s, ctx):
        self.out.append(RegionAccess(s.result, "w", (), ctx[0], ctx[1], s,
                               self.lookup(s.result) is not None))

    def enter_loop(self, s, ctx):
        return (ctx[0] + (s,), ctx[1])

    def wgmma_lane(self, ctx):
        return innermost_lane(ctx[0])

    def enter_branch(self, s, positive, ctx):
        return (ctx[0], ctx[1] + ((s.cond, positive),))

    def taken(self, ctx):
        # the callee's names are renamed away from every caller name the body
        # can meet after substitution: the arguments' names (the inliner adds
        # them), the enclosing loops and the region's allocations
        return {L.iter for L in ctx[0]} | super().taken(ctx)

    def call(self, s, ctx):
        n0 = len(self.out)
        super().call(s, ctx)
        for a in self.out[n0:]:
            a.stmt = s


def innermost_lane(loops):
    """The warpgroup lane of the innermost ``@ THREADS`` loop among ``loops`` (``For``
    statements or check()'s loop records), an unknown lane when there is none."""
    for L in reversed(tuple(loops)):
        if getattr(L, "mapping", None) == THREADS:
            return lane_of(L.iter)
    return lane_of(UNKNOWN_LANE)


def collect(stmts: tuple, loops=(), guards=(), locals_=frozenset(), out=None) -> list:
    """Every memory access in ``stmts`` with its loops and guards."""
    out = [] if out is None else out
    _Accesses(locals_, out).block(stmts, (tuple(loops), tuple(guards)))
    return out


def conflicts(a: RegionAccess, b: RegionAccess, allow_reduce: bool = True) -> bool:
    """Could these two accesses conflict (same buffer, order matters)?"""
    if a.buf != b.buf or a.local or b.local:
        return False
    if not (a.writes or b.writes):
        return False
    if a.mode == "atomic" and b.mode == "atomic":
        return False
    if allow_reduce and a.mode == b.mode and a.mode in ("+", "*"):
        return False  # reductions commute (as in Exo)
    return True
