"""The legality of the primitives whose proof is check() itself (``make_async`` /
``pipeline_loop``, ``warp_specialize``'s producers, ``pipeline_wgmma``,
``persist_blocks``): the rewritten proc may not have more findings of any kind that
matters (a race, a divergence, an out-of-bounds access, an unknown) than the proc it
came from; a rewrite that adds one is refused with the first new finding's message,
place and witness."""
from __future__ import annotations

from .primitive import fail

KINDS = ("race", "divergence", "bounds", "unknown")


def refuse_new_findings(old_ir, new_ir, loc, what: str, hint: str, target=None):
    """Raise a SchedulingError ("``what`` is not proved: ...", ``hint``) when check() of
    ``new_ir`` finds more of some kind than check() of ``old_ir`` (on ``target``)."""
    from ..analysis.check import check
    opts = {} if target is None else {"target": target}
    before = check(old_ir, **opts)
    after = check(new_ir, **opts)
    for kind in KINDS:
        if len(after.of_kind(kind)) > len(before.of_kind(kind)):
            d = after.of_kind(kind)[0]
            raise fail(f"{what} is not proved: {d.message}",
                       d.locations[0] if d.locations else loc, hint, d.witness or None)


__all__ = ["refuse_new_findings"]
