"""Rewrites around warp collectives (docs/language.md (synchronization)) and wgmmas (docs/hopper.md):
no primitive may change which lanes evaluate a collective, or issue a wgmma, together (a
wgmma's meaning for a thread depends on its lane, the innermost thread loop's variable).

The interpreter groups the iterations of a thread loop holding a collective (a warp
loop) into warps of 32 consecutive values; check() proves that every lane of such a
warp reaches each collective.  Within one lane, a collective's operand is computed
by that lane's own statements (another lane's write it could see would be a race),
so the primitives' own legality covers moves of statements inside a warp loop.  What
it does not see is the grouping itself.  :func:`keep_warps` runs after every
primitive on a proc holding collectives and refuses the result unless

* every warp loop of the result has the bounds of a warp loop of the input, in the
  same nest of thread loops (no split, strided or re-nested thread loop, no new
  warp loop); and
* check()'s collective obligations (whole warps, no lane-dependent condition or loop
  around a collective, lanes in range) find no more problems in the result than in
  the input (no collective wrapped in a lane-dependent ``if``).
"""
from __future__ import annotations

from collections import Counter

from ..ir.nodes import Collective, For, If, Wgmma
from ..ir.printer import print_expr
from ..ir.types import THREADS
from ..ir.visitor import kinds
from .memo import recall


def _has_collective(ir) -> bool:
    return any(issubclass(k, (Collective, Wgmma)) for k in kinds(ir.body))


def _holds(body) -> bool:
    """A warp collective or a wgmma (whose lane is the thread loop's) in ``body``."""
    from ..interpreter.warp_execution import holds_collective

    return holds_collective(body) or any(isinstance(n, Wgmma) for n in _outside_threads(body))


def _outside_threads(stmts):
    """The statements of ``stmts`` outside nested thread loops."""
    for s in stmts:
        yield s
        if isinstance(s, For) and s.mapping != THREADS:
            yield from _outside_threads(s.body)
        elif isinstance(s, If):
            yield from _outside_threads(s.body)
            yield from _outside_threads(s.orelse)


def _signatures(ir) -> Counter:
    """The bounds of each warp loop (holding a collective or a wgmma) and of the thread
    loops around it."""
    out: Counter = Counter()

    def block(stmts, nest):
        for s in stmts:
            if isinstance(s, For):
                inner = nest
                if s.mapping == THREADS:
                    inner = nest + ((print_expr(s.lo), print_expr(s.hi)),)
                    if _holds(s.body):
                        out[inner] += 1
                block(s.body, inner)
            elif isinstance(s, If):
                block(s.body, nest)
                block(s.orelse, nest)

    block(ir.body, ())
    return out


def _problems(ir) -> int:
    from ..analysis.proc_effects import collect
    from ..analysis.obligations import Ctx
    from ..analysis.obligations.collective_obligations import check_collectives
    from ..ir.smt import DEFAULT_TIMEOUT_MS

    ctx = Ctx(collect(ir), {}, DEFAULT_TIMEOUT_MS)
    check_collectives(ctx)
    return len(ctx.diagnostics)


def keep_warps(old, new):
    """Why ``new`` (the result of a primitive on ``old``) may change which lanes
    evaluate a collective together (see the module docstring): ``(message, hint)``,
    or None when it keeps them."""
    if old is new or not recall(old, "has collectives", _has_collective):
        return None
    before = recall(old, "warp loops", _signatures)
    after = recall(new, "warp loops", _signatures)
    moved = [sig for sig in after if sig not in before]
    if moved:
        return ("the result changes a thread loop holding a warp collective or a wgmma (its "
                "bounds or its nest): the lanes that evaluate the collective, or issue the "
                "wgmma, together would change",
                "schedule the thread loops before adding collectives and wgmmas, or leave "
                "this loop as it is")
    if recall(new, "collective problems", _problems) > recall(old, "collective problems",
                                                              _problems):
        return ("the result puts a warp collective where some lanes of a warp may not "
                "reach it (a lane-dependent condition or loop, or part of a warp)",
                "keep collectives out of lane-dependent ifs and loops")
    return None


__all__ = ["keep_warps"]
