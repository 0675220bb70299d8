"""Warp-synchronous execution of a thread loop that holds a collective (docs/language.md (synchronization)).

The compiled body of such a loop is a generator of one iteration (one lane); at
each collective it yields ``(site, operand, lane argument)`` and receives the
collective's result.  :func:`warp_loop` groups the iterations into warps (32
consecutive thread indices starting at a multiple of 32) and runs the lanes of a
warp up to their next collective, in lane order, then evaluates the collective on
all 32 operands (:func:`gpudsl.ir.collective_meaning.evaluate`, the one meaning) and
resumes them.  Between two collectives each lane runs its own statements in
order; on a race-free program (which the detector checks) that is the same as
running the lanes statement by statement.

A warp whose lanes do not all reach the same collective (a lane-dependent
condition, a loop covering part of a warp, a lane that finished) and a lane
argument outside ``[0, 32)`` are run-time errors: in CUDA they are undefined.
"""
from __future__ import annotations

from ..errors import InterpError
from ..ir.collective_meaning import COLLECTIVES, WARP, evaluate
from ..ir.nodes import Call, Collective, For, If
from ..ir.types import THREADS
from ..ir.visitor import walk
from .runtime import fmax, fmin


class Site:
    """One collective expression of the source: what the error messages show."""

    __slots__ = ("loc", "text", "name", "ty")

    def __init__(self, loc, text: str, name: str, ty):
        self.loc = loc
        self.text = text
        self.name = name
        self.ty = ty


def holds_collective(stmts) -> bool:
    """Does a collective run in ``stmts`` outside any nested ``@ THREADS`` loop
    (seen through calls)?"""
    for s in stmts:
        if isinstance(s, For):
            if s.mapping != THREADS and (_in_exprs((s.lo, s.hi)) or holds_collective(s.body)):
                return True
        elif isinstance(s, If):
            if _in_exprs((s.cond,)) or holds_collective(s.body) or holds_collective(s.orelse):
                return True
        elif isinstance(s, Call):
            if _in_exprs(s.args) or holds_collective(s.proc.body):
                return True
        elif any(isinstance(n, Collective) for n in walk(s)):
            return True
    return False


def _in_exprs(exprs) -> bool:
    return any(isinstance(n, Collective) for e in exprs for n in walk(e))


def no_warp(site: Site):
    """A collective reached outside a warp-synchronous thread loop (never returns)."""
    raise InterpError(
        f"the warp collective `{site.text}` runs outside any @ THREADS loop: a collective "
        "is evaluated by the 32 lanes of a warp together", site.loc,
        "put it inside a `par(...) @ THREADS` loop covering whole warps")


def _combine(op, a, b):
    if op == "sum":
        return a + b
    return fmax(a, b) if op == "max" else fmin(a, b)


def warp_loop(ctx, tl, lo: int, hi: int, body, xdim):
    """Run the iterations ``lo..hi-1`` of a thread loop warp by warp; ``xdim`` is
    the block's x extent when the loop is nested in another thread loop (a warp
    must then lie in one row), else None."""
    if xdim is not None and xdim % WARP:
        raise InterpError(
            f"a thread loop holding a warp collective is nested in another thread loop, "
            f"but the block's x extent {xdim} is not a multiple of {WARP}: warps would span "
            "rows", None, f"make the x thread loops cover a multiple of {WARP} threads")
    v = lo
    while v < hi:
        w0 = (v // WARP) * WARP
        _run_warp(ctx, tl, list(range(max(lo, w0), min(hi, w0 + WARP))), w0, body)
        v = w0 + WARP


def _run_warp(ctx, tl, members, w0, body):
    gens = {v: body(v) for v in members}
    reqs = {v: _step(ctx, tl, v, gens[v], None) for v in members}
    while True:
        waiting = {v: r for v, r in reqs.items() if r is not None}
        if not waiting:
            return
        site = next(iter(waiting.values()))[0]
        if len(waiting) < WARP or any(r[0] is not site for r in waiting.values()):
            raise _divergence(site, members, waiting, w0)
        lanes = [waiting[w0 + k] for k in range(WARP)]
        results = _evaluate(site, lanes, w0)
        reqs = {v: _step(ctx, tl, v, gens[v], results[v - w0]) for v in members}


def _step(ctx, tl, v, gen, value):
    if ctx is not None:
        ctx.thread_set(tl, v)
    try:
        return gen.send(value)
    except StopIteration:
        return None


def _evaluate(site: Site, reqs, w0) -> list:
    lanes = [r[2] for r in reqs] if COLLECTIVES[site.name].lane is not None else None
    try:
        return evaluate(site.name, [r[1] for r in reqs], lanes, site.ty, _combine)
    except ValueError as e:
        k = next(i for i, r in enumerate(reqs) if not 0 <= int(r[2]) < WARP)
        raise InterpError(
            f"`{site.text}`: lane {k} of the warp of threads {w0}..{w0 + WARP - 1} gives "
            f"{COLLECTIVES[site.name].lane} {e.args[0]}, outside [0, {WARP})", site.loc,
            "keep lane arguments of shuffles in [0, 32), e.g. with % 32") from None


def _divergence(site: Site, members, waiting, w0) -> InterpError:
    there = sorted(v - w0 for v, r in waiting.items() if r[0] is site)
    missing = [k for k in range(WARP) if w0 + k not in waiting or waiting[w0 + k][0] is not site]
    why = (f"the thread loop covers only lanes {_ranges([v - w0 for v in members])} of it"
           if len(members) < WARP else
           f"lanes {_ranges(missing)} do not reach it with them (a lane-dependent condition "
           "or loop around it)")
    return InterpError(
        f"divergence: the warp collective `{site.text}` is reached by lanes {_ranges(there)} "
        f"of the warp of threads {w0}..{w0 + WARP - 1} only; {why}", site.loc,
        "all 32 lanes of a warp must evaluate a collective together: keep it out of "
        "lane-dependent ifs and make its thread loop cover whole warps")


def _ranges(ks) -> str:
    ks = sorted(ks)
    out, i = [], 0
    while i < len(ks):
        j = i
        while j + 1 < len(ks) and ks[j + 1] == ks[j] + 1:
            j += 1
        out.append(str(ks[i]) if i == j else f"{ks[i]}..{ks[j]}")
        i = j + 1
    return ", ".join(out) or "none"
