"""Legality checks of the rewrite primitives, decided by the one SMT layer
(:mod:`gpudsl.ir.smt`) on the one effect collector (:mod:`gpudsl.ir.stmt_effects`).

Two kinds of questions:

- *facts*: ``prove(...)``: does an integer property hold at a statement for every
  value of the sizes (under the proc's asserts) and of the enclosing loop
  variables and conditions?  Used for "perfect" divides, cut points, window
  bounds, expand_dim indices, alignment of vector accesses.
- *dependences*: ``find_conflict(...)``: are there two dynamic instances of
  accesses in a region, related by a constraint on their loop variables (e.g.
  ``i1 < i2 and j1 > j2`` for a loop interchange), that touch the same element
  with at least one write?  A model is a witness.

A property is ``prop(sc, env) -> z3 bool`` built with ``sc.int(e, env)`` /
``sc.cond(e, env)`` of a :class:`~gpudsl.ir.smt_scope.Scope`.  The encoding
over-approximates what it cannot express (a data-dependent value is any integer, a
float condition is any boolean); what it cannot encode at all in a goal or an index
makes the proof fail, so "no conflict" and "proved" are proofs, and a solver
timeout or an unsupported expression counts as "not proved".
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.stmt_effects import RegionAccess, collect, conflicts
from ..ir.nodes import ProcDef
from ..ir.residues import residue
from ..ir.smt import SAT, UNSAT, Unsupported
from ..ir.smt_scope import Scope
from .primitive import current


def prove(pdef: ProcDef, addr, prop, what: str, loc, hint=None, *, prim: str | None = None):
    """Prove ``prop(scope, env)`` (a Z3 bool) in the context of ``addr``; raise
    SchedulingError (of ``prim``, by default the running primitive) with a
    witness otherwise."""
    prim = prim or current()
    sc = Scope(pdef, addr)
    try:
        goal = prop(sc, {})
    except Unsupported as e:
        raise SchedulingError(prim, f"could not prove that {what} (cannot be decided: {e})",
                              loc, hint) from None
    r = sc.prove(goal)
    if r.status == UNSAT:
        return
    if r.status == SAT:
        raise SchedulingError(prim, f"needs {what}, which fails for the witness below", loc,
                              hint, witness=sc.witness(r.model))
    raise SchedulingError(prim, f"could not prove that {what} (solver: {r.reason})",
                          loc, hint)


def holds(pdef: ProcDef, addr, prop) -> bool:
    """Whether ``prop`` is proved at ``addr`` (:func:`prove` without the error: a
    witness of the opposite, or an undecided question, is False)."""
    try:
        prove(pdef, addr, prop, "", None)
    except SchedulingError:
        return False
    return True


def find_bad(pdef: ProcDef, addr, access: RegionAccess, bad):
    """A witness of an instance of ``access`` (in the region at ``addr``) where
    ``bad(scope, env)`` holds, None when there is none, "unknown" when undecided."""
    sc = Scope(pdef, addr)
    inst = sc.instance(access.loops, access.guards, "")
    try:
        cond = bad(sc, inst.env)
    except Unsupported:
        return "unknown"
    with sc.session() as check:
        r = check(inst.facts + [cond])
    if r.status == UNSAT:
        return None
    if r.status != SAT:
        return "unknown"
    return sc.witness(r.model, {L.iter: inst[L.iter] for L in access.loops})


def find_conflict(pdef: ProcDef, addr, accs1: list, accs2: list, relate,
                  allow_reduce: bool = True, tags=("_1", "_2"), region_env=None,
                  apart=None):
    """The first pair (a, b, witness) of conflicting instances related by
    ``relate(env1, env2)``, or None; the witness is None when undecided.  ``addr``:
    the region's statement (its enclosing loops and conditions are shared by both
    instances).  ``apart(a, b)``: True for a pair the caller knows never touches one
    element in related instances (not asked)."""
    accs1, accs2 = _representatives(accs1), _representatives(accs2)
    pairs = [(a, b) for a in accs1 for b in accs2
             if conflicts(a, b, allow_reduce) and len(a.idx) == len(b.idx)
             and not (apart is not None and apart(a, b))]
    if not pairs:
        return None
    sc = Scope(pdef, addr)
    with sc.session() as check:
        for a, b in pairs:
            i1 = sc.instance(a.loops, a.guards, tags[0], region_env)
            i2 = sc.instance(b.loops, b.guards, tags[1], region_env)
            try:
                same = [sc.int(i, i1.env) == sc.int(j, i2.env)
                        for i, j in zip(a.idx, b.idx)]
                rel = relate(i1.env, i2.env)
            except Unsupported:
                return a, b, None
            r = check(i1.facts + i2.facts + same + [rel])
            if r.status == SAT:
                names = {f"{L.iter}{tags[0]}": i1[L.iter] for L in a.loops}
                names.update({f"{L.iter}{tags[1]}": i2[L.iter] for L in b.loops})
                return a, b, sc.witness(r.model, names)
            if r.status != UNSAT:
                return a, b, None
    return None


def _representatives(accs: list) -> list:
    """One access per class that a conflict question treats alike (buffer, mode,
    indices, the same loop objects, guards): a fused chain of N pointwise statements
    reusing one buffer asks a few questions, not N**2 (issue 28: graph.compile)."""
    seen: dict = {}
    for a in accs:
        k = (a.buf, a.mode, a.local, repr(a.idx), tuple(id(L) for L in a.loops),
             repr(a.guards))
        seen.setdefault(k, a)
    return list(seen.values())


def describe(a: RegionAccess) -> str:
    from ..ir.printer import print_expr

    kind = {"r": "read", "w": "write", "atomic": "atomic update"}.get(a.mode, "reduction")
    idx = f"[{', '.join(print_expr(i) for i in a.idx)}]" if a.idx else ""
    where = f" at line {a.stmt.loc.line}" if a.stmt.loc else ""
    return f"the {kind} of {a.buf}{idx}{where}"


def raise_conflict(why: str, hit, loc, hint=None, *, prim: str | None = None):
    """Refuse for the conflict ``hit`` (a, b, witness) of :func:`find_conflict`
    (a SchedulingError of ``prim``, by default the running primitive)."""
    prim = prim or current()
    a, b, w = hit
    if w is None:
        raise SchedulingError(prim, f"could not prove that {describe(a)} and {describe(b)} "
                              f"do not conflict ({why})", loc, hint)
    raise SchedulingError(prim, f"{why}: {describe(a)} and {describe(b)} touch the same "
                          "element", loc, hint, w)


__all__ = ["prove", "holds", "find_bad", "collect", "find_conflict", "RegionAccess", "conflicts",
           "raise_conflict", "describe", "z3"]


def divisible(pdef: ProcDef, addr, e, width: int) -> bool:
    """Whether ``e`` (an integer expression at ``addr``) is a multiple of ``width`` in
    every instance, decided without a nonlinear query: the residue modulo ``width`` is
    computed through ``+ - *`` and shifts by constants (``ir.residues``), and asked of
    the solver only for the atoms (variables, ``//`` / ``%`` terms, reads): linear
    questions such as "n % 4 == 0 under assert n % 4 == 0", which every solver version
    decides at once.
    ``i * n + 4 * j`` with ``n % 4 == 0`` needs no product of unknowns.  False when
    undecided (the caller may still ask the solver)."""
    sc = Scope(pdef, addr)
    memo: dict = {}

    def atom(x):
        key = id(x)
        if key not in memo:
            memo[key] = None
            try:
                v = sc.int(x, {})
            except Unsupported:
                return None
            for r in range(width):
                if sc.prove(v % width == r).status == UNSAT:
                    memo[key] = r
                    break
        return memo[key]

    return residue(e, width, atom) == 0
