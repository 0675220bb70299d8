"""gpudsl.torch.model: a compiled graph as a torch operator (issue 38)."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import graph as G

torch = pytest.importorskip("torch")
gt = pytest.importorskip("gpudsl.torch")


def _mlp():
    x = G.InputTensor("x", "float32", (8, 16))
    w = G.ConstantTensor(torch.randn(16, 4, generator=torch.Generator().manual_seed(0)))
    return G.compile(G.ReLUNode(G.MatMulNode(x, w))), w.value


def test_a_graph_as_an_operator_in_torch_compile():
    model, w = _mlp()
    op = gt.model("gpudsl_test::mlp", model)
    assert str(op._opoverload._schema) == "gpudsl_test::mlp(Tensor x) -> Tensor"
    x = torch.randn(8, 16)
    want = torch.relu(x @ torch.from_numpy(w))
    torch.testing.assert_close(op(x), want, rtol=1e-4, atol=1e-4)
    torch.library.opcheck(op, (x,))
    f = torch.compile(lambda x: op(x).sum(-1), fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(f(x), want.sum(-1), rtol=1e-4, atol=1e-4)


def test_bf16_graph_operator():
    x = G.InputTensor("x", "bfloat16", (4, 8))
    op = gt.model("gpudsl_test::twice", G.compile(G.SumNode(x, x)))
    xb = torch.randn(4, 8).bfloat16()
    out = op(xb)
    assert out.dtype == torch.bfloat16 and torch.equal(out, xb + xb)


def test_refusals():
    buf = G.BufferTensor("float32", (4,))
    stateful = G.compile(G.SumNode(buf, G.InputTensor("x", "float32", (4,))))
    with pytest.raises(gpudsl.Error, match="BufferTensors"):
        gt.model("gpudsl_test::stateful", stateful)
    with pytest.raises(gpudsl.Error, match="compiled graph"):
        gt.model("gpudsl_test::nothing", object())
