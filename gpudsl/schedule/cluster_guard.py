"""Rewrites of kernels whose blocks meet at ``sync_cluster()`` or at arrives on every block
of the cluster (``cluster=True``) (docs/hopper.md (clusters)).

Every primitive's legality rule reasons about one block's code run in order, other blocks
being independent.  Blocks of a cluster that meet at ``sync_cluster()`` are not: a block
reads what another wrote before the barrier, so moving, splitting, staging or reordering
its accesses (fission, stage_mem, cut_loop, ...) can change what it reads although no
dependence inside the block says so.  Until the rules reason about the cluster, a
rewrite that changes a CLUSTERS loop holding ``sync_cluster()`` is refused, except by
the primitives that keep every block's accesses and their order (``SAFE``: renaming,
simplifying expressions, hints, a block barrier more, asserts).  The differential test's
``clusters`` family (tests/schedule/differential) found the broken rewrites."""
from __future__ import annotations

from ..ir.nodes import Arrive, Const, For, SyncCluster
from ..ir.types import MAX_CLUSTER
from ..ir.visitor import walk

SAFE = frozenset({"rename", "simplify", "insert_sync", "set_unroll", "set_blocks_per_sm",
                  "add_assert", "specialize"})


def _meeting_clusters(pdef) -> list:
    return [s for s in walk(pdef.body) if isinstance(s, For) and s.cluster
            and any(isinstance(n, SyncCluster) or (isinstance(n, Arrive) and n.cluster)
                    for n in walk(s.body))]


def broken_clusters(old, new, name: str):
    """``(message, loc, hint)`` when the rewrite ``old`` -> ``new`` changes a CLUSTERS loop
    whose blocks meet at ``sync_cluster()`` and ``name`` is not one of ``SAFE``; else None."""
    for s in walk(new.body):
        if isinstance(s, For) and s.cluster and not (
                isinstance(s.lo, Const) and isinstance(s.hi, Const)
                and 1 <= s.hi.val - s.lo.val <= MAX_CLUSTER):
            return (f"{name} would make the CLUSTERS loop '{s.iter}' run other than a constant "
                    f"1 to {MAX_CLUSTER} blocks", s.loc, "leave the CLUSTERS loop whole")
    if name in SAFE:
        return None
    before = _meeting_clusters(old)
    if not before or before == _meeting_clusters(new):
        return None
    return (f"{name} reasons about one block's code, but the blocks of this cluster meet "
            "at sync_cluster() (or arrive on each other's barriers) and read each other's writes: the rewrite of their code is "
            "not proved (docs/decisions.md)", before[0].loc,
            "schedule the kernel before adding the CLUSTERS loop and sync_cluster(), or "
            "edit the proc and check() it")
