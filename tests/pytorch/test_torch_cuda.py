"""The CUDA side of issue 38 (GPU only): CUDA tensors in, CUDA tensors out, on
torch's current stream, bfloat16 included; gpudsl.torch operators on CUDA tensors."""
from __future__ import annotations

import pytest

from gpudsl import graph as G
from gpudsl import ops

torch = pytest.importorskip("torch")
pytestmark = pytest.mark.gpu


def _cuda(*shape, dtype=torch.float32):
    g = torch.Generator(device="cuda").manual_seed(0)
    return torch.randn(*shape, device="cuda", generator=g).to(dtype)


def test_ops_bf16_cuda_on_a_side_stream():
    x = _cuda(64, 96, dtype=torch.bfloat16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = ops.add(x, x)
        z = ops.silu(y)
    side.synchronize()
    assert y.is_cuda and y.dtype == torch.bfloat16
    torch.testing.assert_close(y, x + x)
    torch.testing.assert_close(z.float(), torch.nn.functional.silu(y.float()),
                               rtol=1e-2, atol=1e-2)


def test_evaluate_cuda_tensors_gives_a_cuda_tensor():
    x = G.InputTensor("x", "bfloat16", (8, 32))
    m = G.compile(G.ReLUNode(x))
    xt = _cuda(8, 32, dtype=torch.bfloat16)
    out = m.evaluate({"x": xt})
    assert isinstance(out, torch.Tensor) and out.is_cuda and out.dtype == torch.bfloat16
    torch.testing.assert_close(out, torch.relu(xt))
    m32 = G.compile(G.ReLUNode(G.InputTensor("x", "float32", (8, 32))))
    out = m32.evaluate({"x": xt.float()})
    assert out.is_cuda and out.dtype == torch.float32
    torch.testing.assert_close(out, torch.relu(xt.float()))


def test_gpudsl_torch_ops_on_cuda_with_gradients():
    go = pytest.importorskip("gpudsl.torch.ops")
    torch.backends.cuda.matmul.allow_tf32 = False
    a = _cuda(64, 64).requires_grad_()
    b = _cuda(64, 64).flip(0).contiguous().requires_grad_()
    out = go.softmax(go.matmul(a, b))
    want = torch.softmax(a @ b, -1)
    torch.testing.assert_close(out, want, rtol=2e-4, atol=2e-4)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (a, b), g)
    expected = torch.autograd.grad(want, (a, b), g)
    for x, y in zip(got, expected):
        torch.testing.assert_close(x, y, rtol=2e-3, atol=2e-3)
    torch.library.opcheck(go.add, (a.detach(), b.detach()))


def test_custom_op_on_cuda_on_a_side_stream():
    pytest.importorskip("gpudsl.torch")
    from tests.pytorch.test_custom_op import ACCUMULATE, SCALE

    x = _cuda(16)
    side = torch.cuda.Stream()
    with torch.cuda.stream(side):
        y = SCALE(2.0, x)
        acc = torch.ones(16, device="cuda")
        ACCUMULATE(y, acc)
    side.synchronize()
    assert y.is_cuda
    torch.testing.assert_close(y, 2 * x)
    torch.testing.assert_close(acc, 2 * x + 1)
    torch.library.opcheck(SCALE, (2.0, x))


def test_cuda_tensors_that_require_grad_are_clean_errors():
    import gpudsl

    x = _cuda(8, 32).requires_grad_()
    m = G.compile(G.ReLUNode(G.InputTensor("x", "float32", (8, 32))))
    with pytest.raises(gpudsl.GraphError, match="requires grad"):
        m.evaluate({"x": x})
    with pytest.raises(gpudsl.Error, match="requires grad"):
        ops.relu(x)
    with torch.no_grad():
        torch.testing.assert_close(m.evaluate({"x": x}), torch.relu(x))
        torch.testing.assert_close(ops.relu(x), torch.relu(x))
