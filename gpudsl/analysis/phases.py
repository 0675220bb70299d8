"""Barrier intervals (phases) that follow control flow.

Block-level control flow is uniform (every thread of a block runs the same block-level
loops and ifs; :mod:`gpudsl.analysis.mapping` proves it), so all threads of a block
pass the same sequence of barriers.  Each access therefore has a *barrier count*: the
number of ``sync()`` the block has executed before the access runs.  Two accesses by
different threads of one block can run concurrently exactly when their barrier counts
are equal.  The count is an IR integer expression over the enclosing block-level loop
variables and sizes, e.g. for::

    for k in seq(0, K):          # body has 2 syncs per iteration
        A                        # count = 2*k
        sync()
        B                        # count = 2*k + 1
        sync()
    C                            # count = 2*max(0, K)

Each of the two symbolic threads gets its own copy of ``k``, so a phase that starts in
iteration ``k`` and ends in iteration ``k+1`` (across the back edge: ``B`` at ``k`` and
``A`` at ``k+1`` have counts ``2k+1`` and ``2k+2``: different, ordered) and code before
and after the loop are handled by one equation, quantified over the iterations (this
is Faial's loop alignment, done by arithmetic).  Syncs under a uniform ``if`` count as
``select(cond, n_then, n_else)``.  When a loop body's count depends on the loop
variable, the count is replaced by a fresh unknown (``__bc_*``), which the encoder
leaves unconstrained and different for each thread: sound, possibly imprecise.
"""
from __future__ import annotations

import itertools

from ..ir.nodes import Builtin, BinOp, Const, Expr, For, If, Stmt, Sync, Var
from ..ir.types import INDEX, THREADS
from ..ir.visitor import walk

_fresh = itertools.count()


def fresh_unknown() -> Var:
    return Var(f"__bc_{next(_fresh)}")


def is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.val == 0


def add(a: Expr, b: Expr) -> Expr:
    if is_zero(a):
        return b
    if is_zero(b):
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.val + b.val)
    return BinOp("+", a, b, INDEX)


def sub(a: Expr, b: Expr) -> Expr:
    if is_zero(b):
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.val - b.val)
    return BinOp("-", a, b, INDEX)


def mul(a: Expr, b: Expr) -> Expr:
    if is_zero(a) or is_zero(b):
        return Const(0)
    if isinstance(a, Const) and a.val == 1:
        return b
    if isinstance(b, Const) and b.val == 1:
        return a
    if isinstance(a, Const) and isinstance(b, Const):
        return Const(a.val * b.val)
    return BinOp("*", a, b, INDEX)


def _mentions(e: Expr, name: str) -> bool:
    return any(isinstance(n, Var) and n.name == name for n in walk(e))


def _has_unknown(e: Expr) -> bool:
    return any(isinstance(n, Var) and n.name.startswith("__bc_") for n in walk(e))


class PhaseCounter:
    """Computes barrier counts of block-level statement positions (memoised)."""

    def __init__(self):
        self.memo: dict[int, Expr] = {}

    def count(self, s: Stmt) -> Expr:
        """Number of block-level barriers executed by running ``s`` once."""
        k = id(s)
        if k in self.memo:
            return self.memo[k]
        r = self._count(s)
        self.memo[k] = r
        return r

    def count_block(self, stmts) -> Expr:
        tot: Expr = Const(0)
        for s in stmts:
            tot = add(tot, self.count(s))
        return tot

    def _count(self, s: Stmt) -> Expr:
        if isinstance(s, Sync):
            return Const(1)
        if isinstance(s, If):
            a, b = self.count_block(s.body), self.count_block(s.orelse)
            if is_zero(a) and is_zero(b):
                return Const(0)
            if a == b:
                return a
            return Builtin("select", (s.cond, a, b), INDEX)
        if isinstance(s, For):
            if s.mapping == THREADS or (s.kind == "par"):
                return Const(0)  # no barrier may stand there (a mapping error)
            c = self.count_block(s.body)
            if is_zero(c):
                return Const(0)
            if _mentions(c, s.iter) or _has_unknown(c):
                return fresh_unknown()
            trips = Builtin("max", (Const(0), sub(s.hi, s.lo)), INDEX)
            if isinstance(s.hi, Const) and isinstance(s.lo, Const):
                trips = Const(max(0, s.hi.val - s.lo.val))
            return mul(trips, c)
        return Const(0)

    def position(self, start: Expr, stmts, i: int) -> Expr:
        """Count at the start of ``stmts[i]`` when ``stmts`` starts at ``start``."""
        return add(start, self.count_block(stmts[:i]))

    def loop_body_start(self, start: Expr, s: For) -> Expr:
        """Count at the start of the body of ``s`` in iteration ``s.iter``, when the
        loop starts at count ``start``."""
        c = self.count_block(s.body)
        if is_zero(c):
            return start
        if _mentions(c, s.iter) or _has_unknown(c):
            return fresh_unknown()
        return add(start, mul(sub(Var(s.iter), s.lo), c))
