"""gpudsl.torch.ops: the standard library's nodes as torch operators gpudsl::NAME:
opcheck on every one, gradients equal to torch's own, bfloat16 through, a model of
them in torch.compile(fullgraph=True) (issue 38)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
go = pytest.importorskip("gpudsl.torch.ops")

F = torch.nn.functional


def _rms(x, w):  # torch's own
    return F.rms_norm(x, (x.shape[-1],), w, eps=1e-5)


def _sliced(x, prefix):
    out = x.clone()
    out[..., :prefix] = torch.softmax(x[..., :prefix], -1)
    return out


def _attention(q, k, v):
    return F.scaled_dot_product_attention(q, k, v)


def _causal_attention(q, k, v):  # row i attends the keys j <= i + N - M
    m, n = q.shape[1], k.shape[1]
    mask = torch.ones(m, n, dtype=torch.bool).tril(n - m)
    return F.scaled_dot_product_attention(q, k, v, attn_mask=mask)


def _cases():
    g = torch.Generator().manual_seed(0)
    a, b, w = (torch.randn(*s, generator=g) for s in ((8, 16), (8, 16), (16,)))
    m3 = torch.randn(2, 8, 16, generator=g)
    c = torch.randn(4, 6, 2, generator=g)
    return {
        "add": (go.add, torch.add, (a, b)),
        "add_broadcast": (go.add, torch.add, (a, b[:1])),
        "mul": (go.mul, torch.mul, (a, b)),
        "mul_broadcast": (go.mul, torch.mul, (a[:, :1], b)),
        "relu": (go.relu, torch.relu, (a,)),
        "silu": (go.silu, F.silu, (a,)),
        "matmul": (go.matmul, torch.matmul, (a, b.T.contiguous())),
        "matmul_vector": (go.matmul, torch.matmul, (a[0], b.T.contiguous())),
        "matmul_batched": (go.matmul, torch.matmul, (m3, m3.transpose(1, 2).contiguous())),
        "permute": (go.permute, lambda x, p: x.permute(*p), (m3, [2, 0, 1])),
        "rms_norm": (go.rms_norm, _rms, (a, w)),
        "softmax": (go.softmax, lambda x: torch.softmax(x, -1), (a,)),
        "sliced_softmax": (go.sliced_softmax, _sliced, (a, 5)),
        "complex_hadamard_product": (go.complex_hadamard_product, _complex,
                                     (c, c.flip(0))),
        "complex_broadcast": (go.complex_hadamard_product, _complex, (c, c[:1])),
        "attention": (go.attention, _attention, tuple(
            torch.randn(2, s, 32, generator=g) for s in (4, 16, 16))),
        "attention_causal": (lambda q, k, v: go.attention(q, k, v, causal=True),
                             _causal_attention, tuple(
            torch.randn(2, s, 32, generator=g) for s in (4, 16, 16))),
    }


def _complex(a, b):
    re = a[..., 0] * b[..., 0] - a[..., 1] * b[..., 1]
    im = a[..., 0] * b[..., 1] + a[..., 1] * b[..., 0]
    return torch.stack((re, im), -1)





CASES = _cases()


def test_every_operator_has_a_case():
    names = {f._qualname.split("::")[1] for f, _, _ in CASES.values()
             if hasattr(f, "_qualname")}
    assert names == set(go.OPERATORS)


@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name):
    op, _, args = CASES[name]
    if name == "attention_causal":
        op, kwargs = go.attention, {"causal": True}
    else:
        kwargs = {}
    torch.library.opcheck(op, args, kwargs)


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_equal_torch(name):
    op, ref, args = CASES[name]
    mine = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    theirs = [a.clone().requires_grad_() if isinstance(a, torch.Tensor) else a for a in args]
    out, want = op(*mine), ref(*theirs)
    torch.testing.assert_close(out, want, rtol=1e-5, atol=1e-5)
    g = torch.randn_like(want)
    leaves = [a for a in mine if isinstance(a, torch.Tensor)]
    got = torch.autograd.grad(out, leaves, g)
    expected = torch.autograd.grad(want, [a for a in theirs if isinstance(a, torch.Tensor)], g)
    for x, y in zip(got, expected):
        torch.testing.assert_close(x, y, rtol=1e-4, atol=1e-4)


def test_bfloat16_through_the_operators():
    x = torch.randn(8, 16).bfloat16()
    for op, ref in ((go.add, torch.add), (go.mul, torch.mul)):
        out = op(x, x)
        assert out.dtype == torch.bfloat16
        torch.testing.assert_close(out, ref(x, x))
    out = go.silu(x.requires_grad_())
    assert out.dtype == torch.bfloat16
    out.float().sum().backward()
    assert x.grad.dtype == torch.bfloat16


class _Block(torch.nn.Module):
    def __init__(self):
        super().__init__()
        g = torch.Generator().manual_seed(1)
        self.w = torch.nn.Parameter(torch.randn(16, 16, generator=g) / 4)
        self.g = torch.nn.Parameter(torch.ones(16))

    def forward(self, x):
        h = go.silu(go.matmul(x, self.w))
        return go.softmax(go.rms_norm(go.add(h, x), self.g)) * 2


def test_a_model_in_torch_compile_fullgraph_with_gradients():
    x = torch.randn(8, 16)
    model = _Block()
    compiled = torch.compile(model, fullgraph=True, backend="aot_eager")
    y = compiled(x)
    torch.testing.assert_close(y, model(x))
    y.square().sum().backward()
    got = model.w.grad.clone()
    model.zero_grad()
    model(x).square().sum().backward()
    torch.testing.assert_close(got, model.w.grad)


def test_refusals_are_gpudsl_errors():
    import gpudsl

    with pytest.raises(gpudsl.Error, match="must equal a's or be 1"):
        go.add(torch.randn(2, 1), torch.randn(1, 3))   # both operands would broadcast
    torch.testing.assert_close(go.add(torch.ones(3), torch.ones(2, 3)), torch.full((2, 3), 2.0))
    with pytest.raises(gpudsl.Error, match="inner dimensions differ"):
        go.matmul(torch.randn(3, 4), torch.randn(5, 6))
    with pytest.raises(gpudsl.Error, match="mixed precisions"):
        go.mul(torch.randn(3), torch.randn(3).bfloat16())


@pytest.mark.parametrize("name", ["add", "mul", "relu", "silu", "rms_norm", "softmax"])
def test_bfloat16_gradients_near_torch(name):
    op, ref, args = CASES[name]
    mine = [a.bfloat16().requires_grad_() for a in args]
    theirs = [a.clone().requires_grad_() for a in args]  # torch in float32, rounded once
    out, want = op(*mine), ref(*theirs)
    assert out.dtype == torch.bfloat16
    g = torch.randn_like(want).bfloat16()
    got = torch.autograd.grad(out, mine, g)
    expected = torch.autograd.grad(want, theirs, g.float())
    for x, y in zip(got, expected):
        assert x.dtype == torch.bfloat16
        torch.testing.assert_close(x.float(), y, rtol=5e-2, atol=5e-2)
