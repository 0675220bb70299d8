"""The one effect collector: every memory access of a block of statements, with
the loops and guards it runs under and the statement it belongs to.

::

    from gpudsl.ir.effects import collect, Access, conflicts

    accs = collect(stmts, loops=(), guards=())   # list[Access], in program order

An :class:`Access` has ``buf`` (the source name), ``mode`` (``"r"``, ``"w"``, ``"+"``,
``"-"``, ``"*"`` for reductions, ``"atomic"``), ``idx`` (IR index expressions),
``loops`` (enclosing ``For`` statements below the region, outer first), ``guards``
(``(condition, positive)`` pairs), ``stmt`` (the statement; the call for accesses
of an inlined callee) and ``local`` (allocated inside the collected statements).
Calls are seen through the one inliner (:func:`inline_call`), so a window passed to
a callee shows up as accesses of the caller's array.  ``reads_of(expr)`` lists the
reads of one expression; gpudsl.analysis.effects builds its richer Effects (kernels,
barrier counts, storage keys) on the same walk of expressions.
"""
from __future__ import annotations

from dataclasses import dataclass

from .inline import Inliner
from .nodes import Alloc, Assign, Atomic, Call, Expr, For, If, Read, Reduce, Stmt
from .visitor import walk


@dataclass
class Access:
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


def reads_of(e: Expr) -> list:
    """The ``Read`` nodes of an expression, outermost first."""
    return [n for n in walk(e) if isinstance(n, Read)]


def write_mode(s) -> str:
    """The access mode of an assignment, reduction or atomic statement."""
    if isinstance(s, Assign):
        return "w"
    return "atomic" if isinstance(s, Atomic) else s.op


def inline_call(s: Call, taken: set) -> tuple:
    """The body of a call through the one inliner (:mod:`gpudsl.ir.inline`), its
    names renamed away from ``taken`` and from the call's argument names."""
    return Inliner(taken).expand(s)


def collect(stmts: tuple, loops=(), guards=(), locals_=frozenset(), out=None) -> list:
    """Every memory access in ``stmts`` with its loops and guards."""
    out = [] if out is None else out
    locals_ = set(locals_)

    def reads(e: Expr, s, loops, guards):
        for n in reads_of(e):
            out.append(Access(n.name, "r", n.idx, loops, guards, s, n.name in locals_))

    for s in stmts:
        if isinstance(s, Alloc):
            locals_.add(s.name)
        elif isinstance(s, (Assign, Reduce, Atomic)):
            reads(s.rhs, s, loops, guards)
            for i in s.idx:
                reads(i, s, loops, guards)
            out.append(Access(s.name, write_mode(s), s.idx, loops, guards, s,
                              s.name in locals_))
        elif isinstance(s, For):
            reads(s.lo, s, loops, guards)
            reads(s.hi, s, loops, guards)
            collect(s.body, loops + (s,), guards, locals_, out)
        elif isinstance(s, If):
            reads(s.cond, s, loops, guards)
            collect(s.body, loops, guards + ((s.cond, True),), locals_, out)
            collect(s.orelse, loops, guards + ((s.cond, False),), locals_, out)
        elif isinstance(s, Call):
            # the callee's names are renamed away from every caller name the body
            # can meet after substitution: the arguments' names (the inliner adds
            # them), the enclosing loops and the region's allocations
            n0 = len(out)
            body = inline_call(s, {L.iter for L in loops} | set(locals_))
            collect(body, loops, guards, locals_, out)
            for a in out[n0:]:
                a.stmt = s
    return out


def conflicts(a: Access, b: Access, allow_reduce: bool = True) -> bool:
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
