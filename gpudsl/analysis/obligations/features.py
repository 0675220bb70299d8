"""What a proc's constructs need of its target (kind ``"target"``, SPEC 2.9): a construct
whose feature ``ctx.target`` lacks (``gpudsl.targets``: ``setmaxnreg`` needs
``SETMAXNREG``, which ``sm_90a`` has and ``sm_90`` does not) is refused where it stands,
with the targets that have it as the hint.  ``USES`` is the one table: a new
architecture-specific construct is one row (the feature, how it is named in the message,
and where the proc's effects hold its uses)."""
from __future__ import annotations

from ...ir.tma_meaning import TmaElement
from ...targets import CLUSTERS, SETMAXNREG, TARGETS, TMA
from .cluster_obligations import cluster_uses
from ..check_report import Diagnostic

# (feature, the construct's name, effects -> locations of its uses)
USES = [
    (SETMAXNREG, "setmaxnreg()", lambda eff: [si.loc for si in eff.setmaxnregs]),
    (TMA, "tma_load/tma_store", lambda eff: list(dict.fromkeys(
        a.stmt.tma.loc for a in eff.accesses if isinstance(a.stmt, TmaElement)))),
    (CLUSTERS, "a thread block cluster (@ CLUSTERS, sync_cluster())", cluster_uses),
]


def _having(feature: str) -> list[str]:
    return [t.name for t in TARGETS.values() if t.has(feature)]


def check_features(ctx) -> None:
    tgt = ctx.target
    for feature, what, uses in USES:
        locs = [loc for loc in uses(ctx.eff) if loc is not None]
        if not locs or tgt.has(feature):
            continue
        having = _having(feature)
        ctx.diagnostics.append(Diagnostic(
            "target", f"{what} needs the '{feature}' feature, which {tgt.name} does not have "
            f"({len(locs)} use{'s' if len(locs) > 1 else ''})", locs,
            {"target": tgt.name, "feature": feature, "targets_with_it": having},
            f"check and compile for {' or '.join(having)} (check(target=\"{having[0]}\"); "
            "compile('cuda') on an H100/H200 does)" if having else
            "no described target has it"))


__all__ = ["USES", "check_features"]
