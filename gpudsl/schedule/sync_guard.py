"""Rewrites around ranged and split barriers (docs/language.md (synchronization)).

A rewrite primitive keeps the sequential meaning by its own legality rule, but the
orderings of ``sync(lo, hi)``, ``arrive`` and ``wait`` depend on where accesses stand
relative to them (and the phases of a split barrier on how many arrives and waits run
before each other).  For a proc that uses them, every primitive's result is compared
with its input through check()'s own obligations: the result may have no race between
threads of one block and no barrier divergence that the input does not have.  Nothing
is moved across such a barrier without that proof.
"""
from __future__ import annotations

from ..analysis.obligations.barriers import barrier_issues
from ..analysis.obligations.race_obligations import added_races
from ..ir.sync_meaning import uses_partial_sync
from .memo import recall


def broken_sync_orderings(old, new):
    """None, or ``(message, loc, hint, witness)`` when ``new`` breaks an ordering or a
    phase of a ranged or split barrier that ``old`` has."""
    if old is new or not (uses_partial_sync(old) or uses_partial_sync(new)):
        return None
    before = {(str(d.kind), d.message) for d in _barrier_issues(old)}
    for d in _barrier_issues(new):
        if (str(d.kind), d.message) not in before:
            return (f"the rewrite breaks a ranged or split barrier: {d.message}",
                    d.locations[0] if d.locations else None,
                    "keep the barriers where they order the accesses", d.witness or None)
    for d in added_races(old, new, partial=True):
        what = "orders" if str(d.kind) == "race" else "may order"
        return (f"a ranged or split barrier {what} accesses that the rewrite would leave "
                f"unordered: {d.message}", d.locations[0] if d.locations else None,
                "keep the accesses on their side of the barriers", d.witness or None)
    return None


def _barrier_issues(ir) -> list:
    """:func:`barrier_issues` of ``ir``; that it has none is remembered (:mod:`.memo`:
    a schedule's result is asked again as the next primitive's input, stamped with new
    locations and hints, which add no barrier issue); issues are always asked afresh,
    so their messages and locations are those of ``ir`` itself."""
    found: list = []

    def none(q) -> bool:
        found.extend(barrier_issues(q))
        return not found

    if recall(ir, "no barrier issues", none):
        return []
    return found or barrier_issues(ir)
