"""PyTorch CPU tensors through gpudsl.ops, graphs and kernel calls: every dtype gpudsl
holds (bfloat16 included), torch in -> torch out, and tensors that require grad or
have no axis refused with a gpudsl.Error (issue 38)."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, bf16, f32, ops, par, proc, size
from gpudsl import graph as G

torch = pytest.importorskip("torch")


def _bf16(*shape):
    return torch.randn(*shape, generator=torch.Generator().manual_seed(0)).bfloat16()


@pytest.mark.parametrize("dtype", ["float32", "float16", "bfloat16"])
def test_ops_torch_in_torch_out(dtype):
    dt = getattr(torch, dtype)
    a, b = _bf16(4, 8).to(dt), _bf16(4, 8).to(dt).flip(0)
    for got, want in ((ops.add(a, b), a + b), (ops.mul(a, b), a * b),
                      (ops.relu(a), torch.relu(a)), (ops.add(a, 2.0), a + 2)):
        assert isinstance(got, torch.Tensor) and got.dtype == dt and got.device == a.device
        torch.testing.assert_close(got, want)
    got = ops.silu(a)
    assert isinstance(got, torch.Tensor) and got.dtype == dt
    torch.testing.assert_close(got.float(), torch.nn.functional.silu(a.float()),
                               rtol=1e-2, atol=1e-2)


def test_ops_bf16_matmul_and_rows():
    a, b = _bf16(16, 16), _bf16(16, 16).T.contiguous()
    c = ops.matmul(a, b)
    assert c.dtype == torch.bfloat16
    torch.testing.assert_close(c.float(), a.float() @ b.float(), rtol=2e-2, atol=2e-2)
    w = _bf16(16)
    r = ops.rms_norm(a, w)
    assert r.dtype == torch.bfloat16
    ref = w.float() * a.float() * torch.rsqrt((a.float() ** 2).mean(-1, keepdim=True) + 1e-5)
    torch.testing.assert_close(r.float(), ref, rtol=2e-2, atol=2e-2)


def test_in_place_op_returns_the_tensor_given():
    x, r = torch.zeros(6, 4), torch.ones(2, 4)
    assert ops.replace_slice(x, r, 1, 3) is x
    assert x[1:3].eq(1).all() and x[0].eq(0).all() and x[3:].eq(0).all()
    y = ops.reshape(x, (4, 6))
    assert isinstance(y, torch.Tensor) and y.data_ptr() == x.data_ptr()


def test_ops_refuse_grad_under_grad_mode_and_take_it_without():
    a = torch.randn(4, 8, requires_grad=True)
    with pytest.raises(gpudsl.Error, match="a requires grad"):
        ops.add(a, a)
    with torch.no_grad():
        torch.testing.assert_close(ops.add(a, a), a.detach() * 2)


def test_zero_dim_tensors():
    x = torch.randn(4, 8)
    torch.testing.assert_close(ops.add(torch.tensor(1.5), x), x + 1.5)
    torch.testing.assert_close(ops.mul(x, torch.tensor(2.0)), x * 2)
    with pytest.raises(gpudsl.Error, match="x must be an array"):
        ops.relu(torch.tensor(1.0))


def test_unsupported_dtype_is_an_error():
    with pytest.raises(gpudsl.Error, match="a is complex64"):
        ops.add(torch.zeros(4, dtype=torch.complex64), torch.zeros(4, dtype=torch.complex64))
    f8 = torch.zeros(4, dtype=torch.float8_e4m3fn)  # numpy has no such dtype at all
    with pytest.raises(gpudsl.Error, match="cannot be read as an array"):
        ops.add(f8, f8)
    with pytest.raises(gpudsl.Error, match="cannot be read as an array"):
        G.compile(G.ReLUNode(G.InputTensor("x", "float32", (4,)))).evaluate({"x": f8})
    with pytest.raises(gpudsl.Error, match="a sparse|torch.sparse_coo"):
        ops.relu(torch.eye(4).to_sparse())


def test_graph_constant_and_evaluate_bf16():
    x = G.InputTensor("x", torch.bfloat16, (4, 8))
    c = _bf16(4, 8)
    m = G.compile(G.SumNode(x, G.ConstantTensor(c)))
    xb = _bf16(4, 8).flip(1)
    out = m.evaluate({"x": xb})
    assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
    torch.testing.assert_close(out, xb + c)
    host = m.evaluate({"x": xb.float().numpy().astype(ml_dtypes.bfloat16)})
    assert isinstance(host, np.ndarray)  # numpy in: numpy out, as before


def test_graph_constant_takes_a_parameter_detached():
    w = torch.nn.Parameter(torch.ones(4, 8))
    x = G.InputTensor("x", "float32", (4, 8))
    m = G.compile(G.HadamardProductNode(x, G.ConstantTensor(w)))
    torch.testing.assert_close(m.evaluate({"x": torch.full((4, 8), 3.0)}),
                               torch.full((4, 8), 3.0))


def test_evaluate_refuses_grad_and_bad_shapes_cleanly():
    m = G.compile(G.ReLUNode(G.InputTensor("x", "float32", (4, 8))))
    with pytest.raises(gpudsl.GraphError, match="requires grad"):
        m.evaluate({"x": torch.randn(4, 8, requires_grad=True)})
    with torch.no_grad():
        x = torch.randn(4, 8, requires_grad=True)
        torch.testing.assert_close(m.evaluate({"x": x}), torch.relu(x))
    with pytest.raises(gpudsl.GraphError, match="shape"):
        m.evaluate({"x": torch.tensor(1.0)})


@proc
def _double(n: size, x: bf16[n], y: bf16[n]):
    assert n % 4 == 0
    for b in par(0, n // 4) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[4 * b + t] = bf16(f32(x[4 * b + t]) * 2.0)


def test_kernel_call_bf16_and_grad():
    k = _double.compile("emulator")
    x, y = _bf16(8), torch.empty(8, dtype=torch.bfloat16)
    k(x=x, y=y)
    assert torch.equal(y, x * 2)
    with pytest.raises(gpudsl.LaunchError, match="'x' of _double requires grad"):
        k(x=x.clone().requires_grad_(), y=y)
    with pytest.raises(gpudsl.LaunchError, match="dtype is complex64"):
        k(x=torch.zeros(8, dtype=torch.complex64), y=y)


def test_without_torch_gpudsl_torch_is_an_import_error_and_ops_run():
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "import numpy as np\n"
            "from gpudsl import ops\n"
            "assert (ops.relu(np.ones(4, np.float32)) == 1).all()\n"
            "try:\n"
            "    import gpudsl.torch\n"
            "except ImportError as e:\n"
            "    assert 'gpudsl[torch]' in str(e)\n"
            "else:\n"
            "    raise AssertionError('imported')\n")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=300)
    assert r.returncode == 0, r.stderr
