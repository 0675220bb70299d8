"""Where an async copy completes (docs/async_copies.md), as integer expressions of the block-level
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

from ..ir.nodes import AsyncCommit, AsyncWait, BinOp, Builtin, Const, For, If, Sync, Var
from ..ir.types import BLOCKS, INDEX, bool_
from ..ir.visitor import substitute, walk
from .phases import PhaseCounter, add, sub


def _is_block_sync(s) -> bool:
    return isinstance(s, Sync) and not s.ranged


def _seq(s) -> bool:
    return isinstance(s, For) and s.mapping is None and s.kind == "seq"


def _select(c, a, b):
    if a == b:
        return a
    return Builtin("select", (c, a, b), INDEX)


class AsyncCounts:
    """The three functions above for one kernel (paths: ``KernelAccess.path`` steps), for
    the family whose commits and waits are ``commit`` / ``wait`` statements (the async
    copies' by default; the wgmmas' are ``WgmmaCommit`` / ``WgmmaWait``)."""

    def __init__(self, commit=AsyncCommit, wait=AsyncWait):
        self._commit, self._wait = commit, wait
        self.commits_counter = PhaseCounter(self._is_commit)

    def _is_commit(self, s) -> bool:
        return isinstance(s, self._commit)

    def _is_wait(self, s) -> bool:
        return isinstance(s, self._wait)

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
        def value(p):
            w = p[-1][0][p[-1][1]]
            return sub(self.commits(p), Const(w.depth))
        return self._search(path, len(path) - 1, self._is_wait, value, Const(0))

    def landed_at_end(self, path):
        """``landed`` where the block's code ends (``path``: any statement of it)."""
        cut = 0
        for d, (L, i) in enumerate(path):
            if isinstance(L[i], For) and L[i].mapping == BLOCKS:
                cut = d + 1
        if cut:
            body = path[cut - 1][0][path[cut - 1][1]].body
            end = path[:cut] + ((body, len(body)),)
        else:
            body = path[0][0]
            end = ((body, len(body)),)
        return self._search(end, len(end) - 1, self._is_wait, self._wait_value, Const(0))

    def _wait_value(self, p):
        w = p[-1][0][p[-1][1]]
        return sub(self.commits(p), Const(w.depth))

    def synced(self, path):
        return self._search(path, len(path) - 1, _is_block_sync, self.landed, Const(0))

    # ------------------------------------------------------------ the search

    def _search(self, path, d, pred, value, default):
        """``value(path')`` at the nearest statement matching ``pred`` known to run
        before the statement at ``path`` (its list before it, the last iteration of
        the loops there, the previous iteration of the enclosing loop, and so on
        outwards), else ``default``."""
        if d < 0:
            return default
        L, i = path[d]
        if d == 0:
            rest = default
        else:
            PL, pi = path[d - 1]
            ps = PL[pi]
            if isinstance(ps, For) and ps.mapping == BLOCKS:
                rest = default
            else:
                rest = self._search(path, d - 1, pred, value, default)
                if _seq(ps) and _contains(ps.body, pred):
                    prev = BinOp("-", Var(ps.iter), Const(1), INDEX)
                    inner = self._back(path[:d], ps.body, len(ps.body), pred, value, rest,
                                       {ps.iter: prev})
                    rest = _select(BinOp(">", Var(ps.iter), ps.lo, bool_), inner, rest)
        return self._back(path[:d], L, i, pred, value, rest, None)

    def _back(self, prefix, L, j, pred, value, default, env):
        """The nearest match running unconditionally in ``L[:j]`` (in the last
        iteration of the seq loops there), ``env`` substituted into the value."""
        out = default
        for jj in range(j):   # built from the front: the last match wins
            s = L[jj]
            if pred(s):
                out = value(prefix + ((L, jj),))
            elif _seq(s) and _contains(s.body, pred):
                hi1 = BinOp("-", s.hi, Const(1), INDEX)
                inner = self._back(prefix + ((L, jj),), s.body, len(s.body), pred, value,
                                   out, {s.iter: hi1})
                out = _select(BinOp(">", s.hi, s.lo, bool_), inner, out)
            elif isinstance(s, If) and (_contains(s.body, pred) or _contains(s.orelse, pred)):
                then = self._back(prefix + ((L, jj),), s.body, len(s.body), pred, value,
                                  out, None)
                other = self._back(prefix + ((L, jj),), s.orelse, len(s.orelse), pred, value,
                                   out, None) if s.orelse else out
                out = _select(s.cond, then, other)
        return substitute(out, env) if env else out


def _contains(body, pred) -> bool:
    return any(pred(n) for n in walk(tuple(body)))


def _last(body, pred):
    """The index of the last statement of ``body`` (top level) matching ``pred``."""
    for k in range(len(body) - 1, -1, -1):
        if pred(body[k]):
            return k
    return None


def has_unknown(e) -> bool:
    return any(isinstance(n, Var) and n.name.startswith("__bc_") for n in walk(e))


__all__ = ["AsyncCounts", "has_unknown", "add"]
