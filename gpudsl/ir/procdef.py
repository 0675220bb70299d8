"""``as_procdef``: the IR of a proc given as a :class:`ProcDef` or as anything that
carries one in ``.ir`` (the public ``gpudsl.Proc``).  The layers below ``Proc`` take
either without importing it."""
from __future__ import annotations

from .nodes import ProcDef


def as_procdef(p) -> ProcDef | None:
    """``p`` itself if it is a ProcDef, ``p.ir`` if that is one, else None."""
    if isinstance(p, ProcDef):
        return p
    ir = getattr(p, "ir", None)
    return ir if isinstance(ir, ProcDef) else None


__all__ = ["as_procdef"]
