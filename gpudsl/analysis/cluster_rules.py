"""The structural rules of ``par(0, c) @ CLUSTERS`` (docs/hopper.md (clusters)), found while
collecting effects (kind ``"mapping"``): a CLUSTERS loop is the innermost loop of its kernel's
BLOCKS nest (the BLOCKS loops around it count clusters, its ``c`` iterations are the blocks
of one cluster), runs a constant 1 to 8 blocks, and takes no block-order hint around it.
``sync_cluster()`` outside a CLUSTERS loop is reported where it stands (:mod:`.proc_effects`)."""
from __future__ import annotations

from ..ir.nests import direct_nest
from ..ir.nodes import Const, For
from ..ir.types import BLOCKS, MAX_CLUSTER


def cluster_rules(col, s: For, st) -> None:
    """Report what makes the CLUSTERS loop ``s`` (entered in state ``st``) ill-formed."""
    if not (isinstance(s.lo, Const) and isinstance(s.hi, Const)) or \
            not 1 <= s.hi.val - s.lo.val <= MAX_CLUSTER:
        col.issue("mapping", f"the CLUSTERS loop '{s.iter}' must run a constant number of "
                  f"blocks from 1 to {MAX_CLUSTER} (the portable cluster size)", [s.loc],
                  "write par(0, c) @ CLUSTERS with c a constant")
    if s.kind != "par" or s.mapping != BLOCKS:
        col.issue("mapping", f"the CLUSTERS loop '{s.iter}' is not a par loop over blocks",
                  [s.loc])
    if len(direct_nest(s)) > 1:
        col.issue("mapping", f"the CLUSTERS loop '{s.iter}' must be the innermost loop of its "
                  "BLOCKS nest (its iterations are the blocks of one cluster)", [s.loc],
                  "put the BLOCKS loops that count clusters around it")
    outer = [l for l in st["loops"] if l.mapping == BLOCKS]
    if any(l.cluster for l in outer):
        col.issue("mapping", f"the CLUSTERS loop '{s.iter}' stands inside another CLUSTERS "
                  "loop", [s.loc])
    inside = st.get("inside", ())
    if inside and isinstance(inside[-1], For) and inside[-1].group:
        col.issue("mapping", f"the CLUSTERS loop '{s.iter}' under a grouped block order "
                  "(group=): the cluster's blocks must be consecutive along x", [s.loc],
                  "drop group= (set_block_order) on the loop around it")
