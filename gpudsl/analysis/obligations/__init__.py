"""Obligations: each a Z3 query over one or two symbolic threads.

:class:`Ctx` holds what every obligation needs (the effects, the encoder, the
premises, the timeout) and builds the constraints that place an access in a thread:
its loop ranges, its guards, and the mapping of thread loop variables to the
thread's coordinates (``threadIdx``).  Obligation modules add diagnostics to
``ctx.diagnostics``.
"""
from __future__ import annotations

import time

import z3

from ...ir.nodes import Const
from ...ir.types import BLOCKS, GLOBAL, THREADS
from ..proc_effects import KernelAccess, Effects
from ..summaries import find_summaries, summary_facts, tag_readers
from ..check_report import Diagnostic
from ...ir.smt import SAT, UNKNOWN, UNSAT, Encoder, Result, ThreadEnv, Unsupported, solve
from ...targets import target


def budget_clock() -> float:
    """The clock of check()'s overall budget: this process's CPU seconds (the solver runs
    in it), not the wall clock, so that a verdict does not depend on how loaded the
    machine is (on an H200 running pytest in 12 processes, and on this project's 2-core
    machines beside other jobs, wall-clock budgets ran out on derivations an idle run
    proves in a third of them)."""
    return time.process_time()


class Ctx:
    def __init__(self, eff: Effects, bindings: dict, timeout_ms: int,
                 budget_s: float | None = None, tgt=None):
        self.eff = eff
        self.target = target(tgt)   # whose limits the resource rules apply
        self.bindings = bindings
        self.timeout_ms = timeout_ms   # per query
        self.deadline = None if budget_s is None else budget_clock() + budget_s
        written = {eff.arrays[k].name for k in eff.written}
        self.enc = Encoder(eff.proc, bindings, written)
        from ..tickets import find_tickets

        self.enc.tickets = find_tickets(eff.body, {q.name: q.mem or GLOBAL
                                                   for q in eff.proc.params if q.is_array})
        self.summaries = find_summaries(eff)
        tag_readers(eff, self.summaries)
        self.premises = self.enc.premises()
        self.diagnostics: list[Diagnostic] = []
        self.warnings: list[Diagnostic] = []
        self.queries = 0
        self.unknowns = 0

    # ------------------------------------------------------------------ threads

    def thread(self, tag: str) -> ThreadEnv:
        t = self.enc.thread(tag)
        t.tc = None
        return t

    def coords(self, t: ThreadEnv, kernel) -> list:
        """The thread's (x, y, z) coordinates in the block of ``kernel``, with their
        ranges; created once per thread."""
        if getattr(t, "tc", None) is not None:
            return t.tc
        tc = [z3.Int(f"threadIdx.{'xyz'[d]}@{t.tag}") for d in range(3)]
        cons = []
        ki = self.eff.kernels.get(kernel)
        for d in range(3):
            his = ki.thread_extents.get(d, []) if ki is not None else []
            cons.append(tc[d] >= 0)
            if not his:
                cons.append(tc[d] == 0)
                continue
            try:
                vals = [t.expr(h) for h in self._extents(kernel, d, his)]
                cons.append(z3.Or(*[tc[d] < v for v in vals]))
            except Unsupported:
                pass
        t.tc = tc
        t.tc_cons = cons
        return tc

    def _extents(self, kernel, d, his) -> list:
        """The distinct extents of a block dimension (many thread loops share one;
        constants reduce to the largest)."""
        key = (kernel, d)
        memo = self.__dict__.setdefault("_ext_memo", {})
        if key not in memo:
            seen, out = set(), []
            for h in his:
                r = repr(h)
                if r not in seen:
                    seen.add(r)
                    out.append(h)
            if out and all(isinstance(h, Const) and isinstance(h.val, int) for h in out):
                out = [max(out, key=lambda h: h.val)]
            memo[key] = out
        return memo[key]

    def place(self, t: ThreadEnv, a: KernelAccess) -> list:
        """Constraints that thread ``t`` executes access ``a`` (raises Unsupported)."""
        cons = []
        if a.kernel is not None:
            tc = self.coords(t, a.kernel)
            cons.extend(t.tc_cons)
        used = set()
        for l in a.loops:
            lo, hi = t.expr(l.lo), t.expr(l.hi)
            v = t.declare(l.iter)
            cons += [v >= lo, v < hi]
            if z3.is_int_value(lo) and z3.is_int_value(hi) and \
                    0 < hi.as_long() - lo.as_long() <= 64:
                t.ranges[l.iter] = (lo.as_long(), hi.as_long())  # asserted just above
            else:
                t.ranges.pop(l.iter, None)
            if l.mapping == THREADS and a.kernel is not None and l.dim >= 0:
                cons.append(v == tc[l.dim])
                used.add(l.dim)
        if used:
            # a thread nest that leaves a block dimension unused runs on index 0 of it
            cons += [tc[d] == 0 for d in range(3) if d not in used]
        start = a.same_from if a.same_from is not None else len(a.guards)
        t.placed = {}
        t.region = []
        try:
            for g in a.guards[:start]:
                cons.append(t.cond(g))
            reads, t.region = t.region, []
            for g in a.guards[start:]:
                cons.append(t.cond(g))
            if not a.same_access:
                cons += _same_values(t.region)
                reads, t.region = reads + t.region, []
            for e in a.idx:   # read at the access: one region of their own at least
                t.placed[id(e)] = t.expr(e)
            cons += _same_values(t.region)
            cons += summary_facts(self, t, a, reads + t.region)
        finally:
            t.region = None
        return cons

    def term(self, t: ThreadEnv, e):
        """``e`` in thread ``t``: the encoding :meth:`place` made of an index of the
        access (its reads tied to the guards' when they form one region), else a new
        one."""
        got = getattr(t, "placed", {}).get(id(e))
        return got if got is not None else t.expr(e)

    def two_threads(self, a1: KernelAccess, a2: KernelAccess, width: int | None = None):
        """Two symbolic threads, ``1`` executing ``a1`` and ``2`` executing ``a2``, on
        one element: ``(t1, t2, constraints, i1, i2)`` (``i1``, ``i2``: the indices).
        With ``width``, ``a2``'s element lies in the ``width`` elements from ``a1``'s
        along the last dimension (an async copy's run), the other indices equal.
        Raises Unsupported."""
        t1, t2 = self.thread("1"), self.thread("2")
        cons = self.place(t1, a1) + self.place(t2, a2)
        i1 = [self.term(t1, e) for e in a1.idx]
        i2 = [self.term(t2, e) for e in a2.idx]
        if width is None:
            cons += [x == y for x, y in zip(i1, i2)]
        else:
            cons += [x == y for x, y in zip(i1[:-1], i2[:-1])]
            if i1:
                cons += [i2[-1] - i1[-1] >= 0, i2[-1] - i1[-1] < width]
        return t1, t2, cons, i1, i2

    # ------------------------------------------------------------------ solving

    def out_of_time(self) -> bool:
        return self.deadline is not None and budget_clock() >= self.deadline

    def solve(self, cons, factor: float = 1) -> Result:
        """One query, limited by the per-query timeout (times ``factor``) and the
        overall budget left (UNKNOWN, never UNSAT, when either runs out)."""
        ms = int(self.timeout_ms * factor)
        if self.deadline is not None:
            left = int((self.deadline - budget_clock()) * 1000)
            if left <= 0:
                return Result(UNKNOWN, reason="check()'s overall time budget is spent")
            ms = min(ms, left)
        self.queries += 1
        return solve(self.premises + list(cons), ms)

    def unknown(self, what: str, locs, reason: str, notes=()):
        self.unknowns += 1
        self.diagnostics.append(Diagnostic(
            "unknown", f"could not prove {what}: {reason}", list(locs), {},
            "bind sizes (check(n=...)) or simplify the index expressions; a larger "
            "timeout may help (check(timeout=seconds))", list(notes)))

    def undecided(self, what: str, locs, reason: str) -> Diagnostic:
        """The "unknown" diagnostic of a question asked for a pair of accesses, returned
        to the caller (which decides where it goes), counted as :meth:`unknown` does."""
        self.unknown(what, locs, reason)
        return self.diagnostics.pop()

    def thread_witness(self, t: ThreadEnv, a: KernelAccess, model) -> dict:
        out = {"block": {}, "thread": {}, "loops": {}}
        for l in a.loops:
            v = t.value(model, l.iter)
            if l.mapping == BLOCKS:
                out["block"][l.iter] = v
            elif l.mapping == THREADS:
                out["thread"][l.iter] = v
            else:
                out["loops"][l.iter] = v
        if getattr(t, "tc", None) is not None and model is not None:
            out["threadIdx"] = tuple(model.eval(c, model_completion=True).as_long()
                                     for c in t.tc)
        if a.kernel is not None and model is not None:
            ki = self.eff.kernels[a.kernel]
            bidx = [0, 0, 0]
            for l in ki.block_loops:
                v = t.value(model, l.iter)
                lo = model.eval(t.expr(l.lo), model_completion=True)
                if v is not None and l.dim >= 0 and z3.is_int_value(lo):
                    bidx[l.dim] = v - lo.as_long()
            out["blockIdx"] = tuple(bidx)
        out["access"] = a.describe()
        return out

    def eval_ints(self, model, terms) -> tuple:
        out = []
        for x in terms:
            r = model.eval(x, model_completion=True)
            out.append(r.as_long() if z3.is_int_value(r) else None)
        return tuple(out)


MAX_SAME_PAIRS = 64


def _same_values(reads) -> list:
    """One thread's reads in one region (``effects._first_impure``: no write or
    barrier of the thread between them): reads of one location are one value."""
    out = []
    for j, (k1, n1, i1, v1) in enumerate(reads):
        for k2, n2, i2, v2 in reads[j + 1:]:
            if (k1, n1, len(i1)) != (k2, n2, len(i2)):
                continue
            same = z3.And(*[x == y for x, y in zip(i1, i2)])
            val = v1 == v2 if k1 == "i" else z3.And(v1[0] == v2[0], v1[1] == v2[1])
            out.append(z3.Implies(same, val))
            if len(out) >= MAX_SAME_PAIRS:   # fewer facts: weaker, still sound
                return out
    return out


__all__ = ["Ctx", "SAT", "UNSAT", "UNKNOWN"]
