"""The one shared Z3 solver of gpudsl (:mod:`gpudsl.ir.smt`'s queries): one
``z3.Solver`` in Z3's main context, reused for every query with ``push``/``pop``, each
query with its own timeout; a timeout gives ``UNKNOWN``, never ``UNSAT``.

A verdict depends neither on the machine's load nor on what the process asked before:
a query the shared solver leaves undecided is asked again of a fresh one-shot solver,
and one starved of the CPU once more with three times the time (:func:`_query`).
Ctrl-C raises KeyboardInterrupt (:mod:`gpudsl.ir.smt_interrupt`).
"""
from __future__ import annotations

import time
from contextlib import contextmanager
from dataclasses import dataclass

import z3

from .smt_interrupt import ctrl_c_guard, quiet, raise_if_interrupted, running

SAT, UNSAT, UNKNOWN = "sat", "unsat", "unknown"
DEFAULT_TIMEOUT_MS = 3000


@dataclass
class Result:
    status: str
    model: object = None
    reason: str = ""


class _Shared:
    solver = None
    queries = 0
    facts: list = []    # what the enclosing pushed() blocks hold


def shared_solver() -> z3.Solver:
    if _Shared.solver is None:
        _Shared.solver = quiet(z3.Solver())
    return _Shared.solver


def queries() -> int:
    """How many queries the shared solver has answered in this process."""
    return _Shared.queries


def solve(constraints, timeout_ms: int = DEFAULT_TIMEOUT_MS, first_ms: int | None = None
          ) -> Result:
    """Check the conjunction of ``constraints`` (added to whatever facts an enclosing
    :func:`pushed` holds) with the shared solver.  With ``first_ms``, the shared
    (incremental) solver gets that long, and an undecided query is asked again of a
    one-shot solver for ``timeout_ms``: Z3's incremental core lacks the preprocessing
    of its one-shot tactic (e.g. for products of sizes under ``%``).  A Ctrl-C before or
    during the query raises KeyboardInterrupt (:mod:`gpudsl.ir.smt_interrupt`)."""
    with ctrl_c_guard():
        raise_if_interrupted()
        s = shared_solver()
        _Shared.queries += 1
        s.push()
        try:
            return _answer(*_query(s, constraints, timeout_ms, first_ms))
        except z3.Z3Exception as e:  # pragma: no cover - defensive
            raise_if_interrupted()
            return Result(UNKNOWN, reason=str(e))
        finally:
            s.pop()


def _query(s, constraints, timeout_ms: int, first_ms: int | None) -> tuple:
    """(z3 answer, the solver that gave it) of one query (see :func:`solve`).  A verdict
    must depend neither on what the process asked before nor on the machine's load:

    * the shared solver's speed depends on its history (the same attention query took
      0.6 s alone and 1.6 s after 2,700 others; under CI it ran out of its 3 s), so a
      query it does not decide in time is asked again of a fresh one-shot solver;
    * a query that ran out of time while the process got less than half of that time on
      a CPU (the timeout is wall-clock) is asked once more with three times the time."""
    s.set("timeout", max(1, int(first_ms or timeout_ms)))
    for c in constraints:
        s.add(c)
    cpu = time.process_time()
    r, used = _check(s), s
    if r == z3.unknown and (_ran_out(s) or (first_ms is not None and timeout_ms > first_ms)):
        used, r, cpu = _one_shot(constraints, timeout_ms)
    if r == z3.unknown and _ran_out(used) and _starved(cpu, timeout_ms):
        used, r, _ = _one_shot(constraints, 3 * timeout_ms)
    return r, used


def _ran_out(solver) -> bool:
    return solver.reason_unknown() in ("timeout", "canceled")


def _one_shot(constraints, timeout_ms: int) -> tuple:
    used = quiet(z3.Solver())
    used.set("timeout", max(1, int(timeout_ms)))
    used.add(*_Shared.facts, *constraints)
    cpu = time.process_time()
    return used, _check(used), cpu


def _starved(cpu_start: float, timeout_ms: int) -> bool:
    """Did the query get less than half its time on a CPU (the rest went to others)?"""
    return (time.process_time() - cpu_start) * 1000 < 0.5 * timeout_ms


def _check(solver):
    """``solver.check()``; a Ctrl-C before or during it raises KeyboardInterrupt (an
    interrupted query answers "unknown", never a verdict)."""
    raise_if_interrupted()
    with running(solver):
        r = solver.check()
    raise_if_interrupted()
    return r


def _answer(r, used) -> Result:
    if r == z3.sat:
        return Result(SAT, used.model())
    if r == z3.unsat:
        return Result(UNSAT)
    return Result(UNKNOWN, reason=used.reason_unknown())


@contextmanager
def pushed(facts):
    """Keep ``facts`` on the shared solver for the queries of the ``with`` block."""
    s = shared_solver()
    s.push()
    n = len(_Shared.facts)
    try:
        for f in facts:
            s.add(f)
        _Shared.facts.extend(facts)
        yield
    finally:
        del _Shared.facts[n:]
        s.pop()


__all__ = ["SAT", "UNSAT", "UNKNOWN", "DEFAULT_TIMEOUT_MS", "Result", "shared_solver",
           "queries", "solve", "pushed"]
