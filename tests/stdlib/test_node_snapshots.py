"""The CUDA of every graph node's default kernel, kept as reviewable .cu snapshots."""
from __future__ import annotations

import pytest

from gpudsl.stdlib.matmul import big_kernel, cut_kernel, vecmat_kernel
from gpudsl.stdlib.permute import permute_kernel
from gpudsl.stdlib.pointwise import binary_kernel, unary_kernel
from gpudsl.stdlib.slices import replace_slice_kernel, slice_kernel
from gpudsl.stdlib.complex import complex_mul_kernel
from gpudsl.stdlib.rms_norm import rms_norm_kernel
from gpudsl.stdlib.softmax import sliced_softmax_kernel
from gpudsl.stdlib.attention import attention_kernel

NODES = {
    "add_bcast_rows": lambda: binary_kernel("add", (True, False), 4),
    "mul": lambda: binary_kernel("mul", (True,), 4),
    "relu": lambda: unary_kernel("relu", 4),
    "silu": lambda: unary_kernel("silu", 4),
    "slice": lambda: slice_kernel(4),
    "replace_slice": lambda: replace_slice_kernel(4),
    "matmul": lambda: big_kernel(False),
    "matmul_batched": lambda: big_kernel(True),
    "matmul_any_shape": lambda: cut_kernel(False, 4),
    "vecmat": lambda: vecmat_kernel(),
    "permute_2d": lambda: permute_kernel((64, 96), (1, 0))[0],
    "permute_3d_021": lambda: permute_kernel((4, 64, 96), (0, 2, 1))[0],
    "rms_norm": lambda: rms_norm_kernel(256),
    "sliced_softmax": lambda: sliced_softmax_kernel(256),
    "complex_hadamard_rope": lambda: complex_mul_kernel((False, True)),
    "attention_causal": lambda: attention_kernel(128, True, 4),
}


@pytest.mark.parametrize("node", sorted(NODES))
def test_node_cuda(node, cuda_snapshot):
    assert cuda_snapshot == NODES[node]().cuda_source()
