"""The CUDA of every graph node's default kernel, kept as reviewable .cu snapshots: the
kernels each node's declaration in the node table names (``Node.snapshots``)."""
from __future__ import annotations

import pytest

from gpudsl.stdlib.node_table import all_nodes

NODES = {name: build for n in all_nodes() for name, build in n.snapshots}


def test_every_kernel_family_has_a_snapshot():
    # the list is derived from the declarations: each node with a kernel names one
    assert len(NODES) == 18
    assert {n.name for n in all_nodes() if n.launch is not None and not n.snapshots} == set()


@pytest.mark.parametrize("node", sorted(NODES))
def test_node_cuda(node, cuda_snapshot):
    assert cuda_snapshot == NODES[node]().cuda_source()
