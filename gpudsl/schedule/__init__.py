"""Scheduling: rewrite primitives that turn a simple proc into a fast GPU kernel.

Every primitive is a free function ``proc -> proc`` declared once with
``gpudsl.schedule.primitive.primitive`` (its name and argument kinds); a
loop, statement, allocation, block or gap is named by a pattern string or a
cursor (see ``gpudsl.schedule.cursors``).  Each either preserves the proc's
meaning (what the sequential interpreter computes) or raises
``gpudsl.SchedulingError`` naming the primitive, the statement and the
reason (with a witness for conflicts).  The returned proc forwards cursors of
the old one: ``new.forward(cursor)``.  ``docs/primitives.md`` lists them all.
"""
from __future__ import annotations

from . import asserts, async_copy_primitives as asyncs, block_order, call_primitives as calls, hints, loops, fission, memory, merge, persistent, software_pipelining as pipeline, producers, registers, stage, swizzle_tiles, sync, tma_from_copies, tma_store_from_copies, wgmma_from_loops, wgmma_pipeline, dead_guards  # noqa: F401,E501  (declare the primitives)
from .cursors import Cursor, body, find, find_alloc, find_loop, forward
from .primitive import PRIMITIVES
from .simplify import normalize


def diff(p1, p2, left: str | None = None, right: str | None = None):
    """What changed from ``p1`` to ``p2`` (e.g. one primitive's work): displays side by
    side in a notebook, as a unified diff in text."""
    from ..display import Diff
    from ..ir.printer import print_proc

    a, b = (p.ir if hasattr(p, "ir") else p for p in (p1, p2))
    return Diff(print_proc(a), print_proc(b), left or f"before ({a.name})",
                right or f"after ({b.name})")

# the primitives, by name, straight from the registry
globals().update({name: pr.apply for name, pr in PRIMITIVES.items()})

__all__ = sorted(PRIMITIVES) + ["Cursor", "find", "find_loop", "find_alloc", "forward",
                                "body", "normalize", "diff"]
