"""The block shape of a kernel, read off its ``@ THREADS`` loops.

The race detector must know how many threads a block has (code at block level
is executed by all of them) and how many thread dimensions it has (a
block-level ``REGISTER`` array has one leading dimension per thread
dimension).  SPEC 2.4: directly nested ``@ THREADS`` loops map to
``threadIdx.z/y/x``, innermost to ``x``; the block extent in a dimension is the
largest ``hi`` among the kernel's thread loops.
"""
from __future__ import annotations

from ..ir.nodes import Call, Expr, For, If, Read, Stmt
from ..ir.types import THREADS
from ..ir.visitor import substitute, walk


def thread_nests(body: tuple[Stmt, ...]) -> list[list[Expr]]:
    """The ``hi`` bounds of every maximal nest of thread loops in ``body``
    (outermost first), seen through ``seq`` loops, ``if``s and calls (callee
    parameters replaced by the call's arguments).  A thread loop inside a thread
    loop extends the nest, as the interpreter's thread stack does."""
    out: list[list[Expr]] = []
    _collect(body, [], out, {})
    return out


def _collect(body, nest, out, env) -> bool:
    """Appends the maximal nests under ``body``; True if there was a thread loop."""
    found = False
    for s in body:
        if isinstance(s, For):
            if s.mapping == THREADS:
                found = True
                mine = nest + [substitute(s.hi, env) if env else s.hi]
                if not _collect(s.body, mine, out, env):
                    out.append(mine)
            else:
                found |= _collect(s.body, nest, out, env)
        elif isinstance(s, If):
            found |= _collect(s.body, nest, out, env)
            found |= _collect(s.orelse, nest, out, env)
        elif isinstance(s, Call):
            cenv = {}
            for p, a in zip(s.proc.params, s.args):
                if p.kind in ("size", "index"):
                    cenv[p.name] = substitute(a, env) if env else a
            found |= _collect(s.proc.body, nest, out, cenv)
    return found


def block_shape(body: tuple[Stmt, ...], known: set[str]):
    """``(dims, depth)``: for each of x, y, z the bound expressions whose maximum
    is the block's extent (only those computable from ``known`` names and
    without memory reads), and the deepest thread nest."""
    nests = thread_nests(body)
    depth = max((len(n) for n in nests), default=0)
    dims: list[list[Expr]] = [[], [], []]
    for n in nests:
        for k, hi in enumerate(reversed(n[-3:])):
            if _computable(hi, known):
                dims[k].append(hi)
    return dims, depth


def _computable(e: Expr, known: set[str]) -> bool:
    from ..ir.nodes import Var

    for n in walk(e):
        if isinstance(n, Read):
            return False
        if isinstance(n, Var) and n.name not in known:
            return False
    return True
