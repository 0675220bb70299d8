"""Rewrites around asynchronous copies (docs/async_copies.md) and warpgroup MMAs (docs/hopper.md).

A rewrite primitive keeps the sequential meaning by its own legality rule, which sees
an async copy as a plain copy where it stands.  Its real meaning also depends on where
the copy stands relative to the ``async_commit`` / ``async_wait`` that complete it and to
the barriers after them.  For a proc that holds async statements, every primitive's
result is compared with its input through check()'s own async obligations
(:mod:`gpudsl.analysis.obligations.async_copy_obligations`): the result may have no in-flight access,
misaligned copy or unproved copy that the input does not have.  The wgmmas are asked the
same (the async obligations of their family) and, besides, check()'s warpgroup
obligations (whole, converged warpgroups naming one pair of operands) and its mapping
rules about them (memories, the operands' layout), for the sm_90a target.
"""
from __future__ import annotations

from ..analysis.proc_effects import collect
from ..analysis.obligations import Ctx
from ..analysis.obligations.async_copy_obligations import check_asyncs
from ..analysis.obligations.wgmma_obligations import check_wgmma
from ..analysis.obligations.tma_obligations import check_tma
from ..ir.tma_meaning import uses_tma
from ..ir.async_copy_meaning import uses_async
from ..ir.smt import DEFAULT_TIMEOUT_MS
from ..ir.wgmma_meaning import uses_wgmma
from .memo import recall


def async_issues(pdef) -> list:
    """The diagnostics of check()'s async and wgmma obligations on ``pdef`` (and its
    mapping issues about async statements and wgmmas).  Asked once per IR object
    (:mod:`.memo`): a schedule's result is asked as the next primitive's input, and a
    result whose answer is not empty is refused, so only empty answers pass to the
    stamped proc (:func:`.memo.alias`: the same statements, new locations and hints,
    which add no async issue)."""
    return list(recall(pdef, "async issues", _async_issues))


def _async_issues(pdef) -> list:
    eff = collect(pdef)
    ctx = Ctx(eff, {}, DEFAULT_TIMEOUT_MS, 30.0, "sm_90a")
    check_asyncs(ctx)
    check_wgmma(ctx)
    check_tma(ctx)
    out = list(ctx.diagnostics)
    for i in eff.issues:
        msg = i.message.lower()
        if i.kind == "mapping" and ("async" in msg or "wgmma" in msg or "tma" in msg):
            out.append(i)
    return out


def broken_async(old, new):
    """None, or ``(message, loc, hint, witness)`` when ``new`` has an async-copy problem,
    or ``old`` has one: a primitive keeps the meaning of plain copies, which is the
    meaning of async copies only where every copy provably lands before it is used."""
    if old is new or not any(f(p) for f in (uses_async, uses_wgmma, uses_tma)
                             for p in (old, new) if p is not None):
        return None
    for which, p in (("input", old), ("result", new)):
        issues = async_issues(p) if p is not None else []
        if issues:
            d = issues[0]
            locs = getattr(d, "locations", None) or getattr(d, "locs", None) or [None]
            if which == "input":
                msg = ("the async copies or wgmmas of the proc are not proved, so no rewrite "
                       f"can be shown to keep when they land: {d.message}")
                hint = "fix them first (check(target='sm_90a') shows how)"
            else:
                msg = f"the rewrite breaks an async copy or a wgmma: {d.message}"
                hint = ("keep async copies and wgmmas, their commits and waits and the "
                        "barriers after them in their order")
            return (msg, locs[0], hint, getattr(d, "witness", None) or None)
    return None


__all__ = ["async_issues", "broken_async"]
