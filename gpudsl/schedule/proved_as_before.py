"""The legality of the primitives whose proof is check() itself (``make_async`` /
``pipeline_loop``, ``warp_specialize``'s producers, ``pipeline_wgmma``,
``persist_blocks``): the rewritten proc may not have more findings of any kind that
matters (a race, a divergence, an out-of-bounds access, an unknown) than the proc it
came from; a rewrite that adds one is refused with the first new finding's message,
place and witness.

check() gives each solver query 3 s by default; a rewrite whose only new findings are
unknowns (an obligation the solver did not decide in that time: the persistent GEMM's
ring orderings take about that long) is checked once more with ``RETRY_S`` for the whole
check, each query up to what is left of it, before it is refused: a derivation's verdict
should not depend on how loaded the machine is (an H200's pytest run in 12 processes
refused ``persist_blocks`` on the clipped GEMM that an idle run proves)."""
from __future__ import annotations

from .primitive import fail

KINDS = ("race", "divergence", "bounds", "unknown")
RETRY_S = 120   # check()'s budget for the second look at a rewrite with new unknowns


def refuse_new_findings(old_ir, new_ir, loc, what: str, hint: str, target=None):
    """Raise a SchedulingError ("``what`` is not proved: ...", ``hint``) when check() of
    ``new_ir`` finds more of some kind than check() of ``old_ir`` (on ``target``)."""
    from ..analysis.check import check
    opts = {} if target is None else {"_target": target}
    before = check(old_ir, **opts)
    new = _first_new(before, check(new_ir, **opts))
    if new is not None and new.kind == "unknown":
        new = _first_new(before, check(new_ir, **opts, _timeout=RETRY_S))
    if new is not None:
        raise fail(f"{what} is not proved: {new.message}",
                   new.locations[0] if new.locations else loc, hint, new.witness or None)


def _first_new(before, after):
    """The first finding of a kind ``after`` has more of than ``before``, or None."""
    for kind in KINDS:
        if len(after.of_kind(kind)) > len(before.of_kind(kind)):
            return after.of_kind(kind)[0]
    return None


__all__ = ["refuse_new_findings", "RETRY_S"]
