"""gpudsl.torch.op: a proc or Kernel as a torch operator (schema and fake
implementation from the proc's parameters and shapes), in torch.compile, under
torch.library.opcheck, with a gradient from gpudsl.torch.backward (issue 38)."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, bf16, f32, par, proc, size

torch = pytest.importorskip("torch")
gt = pytest.importorskip("gpudsl.torch")


@proc
def scale(n: size, alpha: f32, x: f32[n], y: f32[n]):
    assert n % 4 == 0
    for b in par(0, n // 4) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[4 * b + t] = alpha * x[4 * b + t]


@proc
def accumulate(n: size, x: f32[n], y: f32[n]):
    assert n % 4 == 0
    for b in par(0, n // 4) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[4 * b + t] += x[4 * b + t]


@proc
def split(n: size, x: bf16[2 * n], lo: bf16[n], hi: bf16[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            lo[b + t] = x[b + t]
            hi[b + t] = x[n + b + t]


@proc
def fill(n: size, v: f32, y: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[b + t] = v


SCALE = gt.op("gpudsl_test::scale", scale)
ACCUMULATE = gt.op("gpudsl_test::accumulate", accumulate)
SPLIT = gt.op("gpudsl_test::split", split)
FILL = gt.op("gpudsl_test::fill", fill)


@gt.backward(SCALE)
def _scale_backward(ctx, g):
    return {"x": SCALE(ctx.alpha, g)}


def test_schemas_follow_the_proc():
    assert str(SCALE._opoverload._schema) == \
        "gpudsl_test::scale(float alpha, Tensor x) -> Tensor"
    assert str(ACCUMULATE._opoverload._schema) == \
        "gpudsl_test::accumulate(Tensor x, Tensor(a1!) y) -> ()"
    assert str(SPLIT._opoverload._schema) == \
        "gpudsl_test::split(Tensor x) -> (Tensor, Tensor)"
    # no input's shape gives n: it is an argument
    assert str(FILL._opoverload._schema) == "gpudsl_test::fill(int n, float v) -> Tensor"


def test_calls_run_the_kernel():
    x = torch.randn(16)
    torch.testing.assert_close(SCALE(2.0, x), 2 * x)
    y = torch.ones(16)
    assert ACCUMULATE(x, y) is None
    torch.testing.assert_close(y, x + 1)
    xb = torch.randn(10).bfloat16()
    lo, hi = SPLIT(xb)
    assert lo.dtype == torch.bfloat16 and torch.equal(lo, xb[:5]) and torch.equal(hi, xb[5:])
    torch.testing.assert_close(FILL(3, 1.5), torch.full((3,), 1.5))
    torch.testing.assert_close(torch.ops.gpudsl_test.scale(3.0, x), 3 * x)


@pytest.mark.parametrize("name", ["scale", "accumulate", "split", "fill"])
def test_opcheck(name):
    x = torch.randn(16)
    args = {"scale": (SCALE, (2.0, x)), "accumulate": (ACCUMULATE, (x, torch.ones(16))),
            "split": (SPLIT, (torch.randn(16).bfloat16(),)), "fill": (FILL, (3, 1.5))}[name]
    torch.library.opcheck(*args)


def test_opcheck_with_gradient():
    torch.library.opcheck(SCALE, (2.0, torch.randn(16, requires_grad=True)))


def test_gradient():
    x = torch.randn(16, requires_grad=True)
    SCALE(3.0, x).pow(2).sum().backward()
    torch.testing.assert_close(x.grad, 18 * x.detach())


def test_torch_compile_fullgraph_no_graph_break():
    def f(x):
        return torch.relu(SCALE(2.0, x)) + SPLIT(x.bfloat16())[0].float().repeat(2)

    x = torch.randn(16)
    compiled = torch.compile(f, fullgraph=True, backend="aot_eager")
    torch.testing.assert_close(compiled(x), f(x))
    explained = torch._dynamo.explain(f)(x)
    assert explained.graph_break_count == 0


def test_a_compiled_kernel_registers_too():
    k = scale.compile("emulator")
    op = gt.op("gpudsl_test::scale_kernel", k)
    x = torch.randn(8)
    torch.testing.assert_close(op(0.5, x), 0.5 * x)


def test_a_cuda_kernel_runs_cpu_tensors_on_the_emulator():
    k = scale.compile("cuda")  # NVRTC needs no GPU; CPU tensors recompile it, bindings kept
    op = gt.op("gpudsl_test::scale_cuda_kernel", k)
    x = torch.randn(8)
    torch.testing.assert_close(op(0.5, x), 0.5 * x)


def test_refusals_are_gpudsl_errors():
    with pytest.raises(gpudsl.Error, match="namespace::name"):
        gt.op("noscope", scale)
    with pytest.raises(gpudsl.Error, match="no parameter 'z'"):
        gt.op("gpudsl_test::bad", scale, outputs=("z",))
    with pytest.raises(gpudsl.Error, match="mutates its arguments"):
        gt.backward(ACCUMULATE)(lambda ctx, g: None)
    with pytest.raises(gpudsl.Error, match="takes a @proc or a Kernel"):
        gt.op("gpudsl_test::nothing", 3)
    with pytest.raises(gpudsl.Error, match="precondition of scale fails"):
        SCALE(2.0, torch.randn(6))
    with pytest.raises(gpudsl.Error, match="holds f32"):
        SCALE(2.0, torch.randn(8, dtype=torch.float64))
    with pytest.raises(gpudsl.Error, match="shape"):
        SPLIT(torch.randn(7).bfloat16())


def test_torch_compile_dynamic_shapes():
    def f(x):
        lo, hi = SPLIT(x)
        return SCALE(2.0, lo.float()) + hi.float()

    compiled = torch.compile(f, fullgraph=True, dynamic=True, backend="aot_eager")
    for n in (16, 24, 40):
        x = torch.randn(n).bfloat16()
        torch.testing.assert_close(compiled(x), f(x))


@proc
def cube(n: size, x: f32[n], y: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[b + t] = x[b + t] * x[b + t] * x[b + t]


@proc
def cube_backward(n: size, x: f32[n], grad_y: f32[n], grad_x: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            grad_x[b + t] = 3.0 * x[b + t] * x[b + t] * grad_y[b + t]


@proc
def wrong_backward(n: size, z: f32[n], grad_x: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            grad_x[b + t] = z[b + t]


def test_a_backward_proc():
    op = gt.op("gpudsl_test::cube", cube)
    gt.backward(op)(cube_backward)
    with pytest.raises(gpudsl.Error, match=r"takes \['z'\]"):  # refused before registering
        gt.backward(op)(wrong_backward)
    x = torch.randn(8, requires_grad=True)
    op(x).sum().backward()
    torch.testing.assert_close(x.grad, 3 * x.detach() ** 2)
    torch.library.opcheck(op, (torch.randn(8, requires_grad=True),))
