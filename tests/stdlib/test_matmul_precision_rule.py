"""``precision="tf32"`` on float16/bfloat16 operands: one rule (``node_shapes.
matmul_precision_problem``) read by ``ops.matmul`` and the graph's ``MatMulNode``, which
both refuse it (an explicit tf32 request on half data is most likely a mistake: the half
kernels use the tensor cores and sum in float32 already).  ``ops.matmul`` ignored it."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import graph, ops
from gpudsl.stdlib import node_shapes

HALVES = [np.float16, ml_dtypes.bfloat16]


@pytest.mark.parametrize("dt", HALVES, ids=["float16", "bfloat16"])
def test_ops_matmul_refuses_tf32_on_halves(dt):
    a = np.ones((64, 64), dt)
    with pytest.raises(gpudsl.Error, match="precision=tf32 reads float32 operands"):
        ops.matmul(a, a, precision="tf32")
    assert ops.matmul(a, a, precision="fp32").dtype == dt    # the default still runs


@pytest.mark.parametrize("dt", ["float16", "bfloat16"])
def test_the_graph_refuses_the_same_with_the_same_words(dt):
    x = graph.InputTensor("x", dt, [64, 64])
    with pytest.raises(gpudsl.GraphError, match="precision=tf32 reads float32 operands"):
        graph.MatMulNode(x, x, precision="tf32")
    with pytest.raises(gpudsl.GraphError, match="precision=tf32 reads float32 operands"):
        graph.parse(f"$1 = InputTensor(x, {dt}, [64, 64]);\n"
                    "$2 = MatMulNode($1, $1, precision=tf32);\nresult = $2;\n")


def test_one_rule_for_both():
    assert node_shapes.matmul_precision_problem("tf32", "float32") is None
    assert node_shapes.matmul_precision_problem("fp32", "float16") is None
    for dt in ("float16", "bfloat16", "f16", "bf16"):
        assert "half kernels" in node_shapes.matmul_precision_problem("tf32", dt)
    assert "fp32 or tf32" in node_shapes.matmul_precision_problem("fp16", "float32")
    with pytest.raises(gpudsl.Error, match="fp32 or tf32"):
        ops.matmul(np.ones((4, 4), np.float32), np.ones((4, 4), np.float32), precision="x")


def test_float32_tf32_still_runs():
    a = np.ones((128, 64), np.float32)
    b = np.ones((64, 128), np.float32)
    assert (ops.matmul(a, b, precision="tf32") == 64).all()
