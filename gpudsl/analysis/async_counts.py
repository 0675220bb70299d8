"""Where an async copy completes (SPEC 2.8), as integer expressions of the block-level
loop variables, for check().

Block-level control flow is uniform, so where ``async_commit()`` and ``async_wait(n)``
stand at block level every thread runs the same ones.  Then, at any statement:

- ``commits(path)``: the number of commits run before it (a barrier count
  (:class:`gpudsl.analysis.phases.PhaseCounter`) of commits); a copy there belongs to
  group ``commits(path)``;
- ``landed(path)``: a number ``W`` such that every group below ``W`` has completed
  when the statement runs: ``commits(w) - n`` of a wait ``w`` known to have run
  before it (the nearest one that runs unconditionally: earlier in the statement
  list, the last one of a loop that ran, of the previous iteration); 0 when none is
  known.  Completed groups only grow, so any wait that ran gives a sound ``W``;
- ``synced(path)``: ``landed`` at the nearest block barrier ``sync()`` known to have
  run before the statement: a group below it completed, in every thread, before a
  barrier that every thread passed before this statement.

Counts that depend on the loop variable of their own loop are unknown (``__bc_*``
variables, :mod:`gpudsl.analysis.phases`): the obligations then answer "unknown".
"""
from __future__ import annotations

from ..ir.nodes import AsyncCommit, AsyncWait, BinOp, Builtin, Const, For, Sync, Var
from ..ir.types import BLOCKS, INDEX, bool_
from ..ir.visitor import substitute, walk
from .phases import PhaseCounter, add, sub


def _is_commit(s) -> bool:
    return isinstance(s, AsyncCommit)


def _is_wait(s) -> bool:
    return isinstance(s, AsyncWait)


def _is_block_sync(s) -> bool:
    return isinstance(s, Sync) and not s.ranged


def _seq(s) -> bool:
    return isinstance(s, For) and s.mapping is None and s.kind == "seq"


def _select(c, a, b):
    if a == b:
        return a
    return Builtin("select", (c, a, b), INDEX)


class AsyncCounts:
    """The three functions above for one kernel (paths: ``Access.path`` steps)."""

    def __init__(self):
        self.commits_counter = PhaseCounter(_is_commit)

    def commits(self, path) -> object:
        start = Const(0)
        for d, (L, i) in enumerate(path):
            s = L[i]
            if isinstance(s, For) and s.mapping == BLOCKS:
                start = Const(0)
                continue
            start = self.commits_counter.position(start, L, i)
            if d + 1 < len(path) and _seq(s):
                start = self.commits_counter.loop_body_start(start, s)
        return start

    def landed(self, path):
        def value(p, env):
            w = p[-1][0][p[-1][1]]
            return substitute(sub(self.commits(p), Const(w.depth)), env)
        return self._search(path, len(path) - 1, None, _is_wait, value, Const(0))

    def synced(self, path):
        def value(p, env):
            return substitute(self.landed(p), env)
        return self._search(path, len(path) - 1, None, _is_block_sync, value, Const(0))

    # ------------------------------------------------------------ the search

    def _search(self, path, d, j0, pred, value, default):
        """``value(path', env)`` at the nearest statement matching ``pred`` that runs
        unconditionally before the statement at ``path`` (before index ``j0`` of the
        list at depth ``d`` when given), else ``default``."""
        if d < 0:
            return default
        L, i = path[d]
        prefix = path[:d]
        start = i if j0 is None else j0
        for j in range(start - 1, -1, -1):
            s = L[j]
            if pred(s):
                return value(prefix + ((L, j),), {})
            if _seq(s):
                k = _last(s.body, pred)
                if k is not None:
                    hi1 = BinOp("-", s.hi, Const(1), INDEX)
                    v = value(prefix + ((L, j), (s.body, k)), {s.iter: hi1})
                    rest = self._search(path, d, j, pred, value, default)
                    return _select(BinOp(">", s.hi, s.lo, bool_), v, rest)
        if d == 0:
            return default
        PL, pi = path[d - 1]
        ps = PL[pi]
        if isinstance(ps, For) and ps.mapping == BLOCKS:
            return default
        if _seq(ps):
            k = _last(ps.body, pred)
            if k is not None:
                prev = BinOp("-", Var(ps.iter), Const(1), INDEX)
                v = value(path[:d] + ((ps.body, k),), {ps.iter: prev})
                rest = self._search(path, d - 1, None, pred, value, default)
                return _select(BinOp(">", Var(ps.iter), ps.lo, bool_), v, rest)
        return self._search(path, d - 1, None, pred, value, default)


def _last(body, pred):
    """The index of the last statement of ``body`` (top level) matching ``pred``."""
    for k in range(len(body) - 1, -1, -1):
        if pred(body[k]):
            return k
    return None


def has_unknown(e) -> bool:
    return any(isinstance(n, Var) and n.name.startswith("__bc_") for n in walk(e))


__all__ = ["AsyncCounts", "has_unknown", "add"]
