"""``gpudsl::attention`` takes ``ops.attention``'s options (issue 37): ``window=``,
``softcap=``, ``alibi_slopes=`` and grouped-query heads by shape, ``[H, M, D]`` or
``[B, H, M, D]``; its schema names them, its fake kernel gives the shape (opcheck), its
values and gradients equal a float64 reference and torch's SDPA given the same meaning
as an explicit mask (CPU tensors: the emulator)."""
from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")
go = pytest.importorskip("gpudsl.torch.ops")

import gpudsl  # noqa: E402

F = torch.nn.functional


def bias_and_mask(m, n, causal=False, window=None, alibi=None):
    """The additive bias ``[H or 1, M, N]`` (ALiBi, float64) and the attended keys
    ``[M, N]`` (row ``i`` at position ``i + n - m``)."""
    i = torch.arange(m).reshape(m, 1) + (n - m)
    j = torch.arange(n).reshape(1, n)
    keep = torch.ones(m, n, dtype=torch.bool)
    if causal:
        keep &= j <= i
    if window:
        keep &= j > i - window
    bias = torch.zeros(1, m, n, dtype=torch.float64)
    if alibi is not None:
        bias = -alibi.double().reshape(-1, 1, 1) * (i - j).abs()
    return bias, keep


def reference(q, k, v, causal=False, window=None, softcap=None, alibi_slopes=None):
    """The meaning in float64 torch (differentiable)."""
    q, k, v = (x.double() for x in (q, k, v))
    group = q.shape[-3] // k.shape[-3]
    k, v = k.repeat_interleave(group, -3), v.repeat_interleave(group, -3)
    s = q @ k.transpose(-1, -2) / q.shape[-1] ** 0.5
    if softcap:
        s = softcap * torch.tanh(s / softcap)
    bias, keep = bias_and_mask(q.shape[-2], k.shape[-2], causal, window, alibi_slopes)
    return torch.softmax((s + bias).masked_fill(~keep, float("-inf")), -1) @ v


SLOPES = torch.tensor([0.5, 0.25, 0.125, 0.0625])
# (q shape, k shape, options)
CASES = {
    "gqa_window_softcap": ((4, 6, 32), (2, 16, 32), dict(causal=True, window=5, softcap=3.0)),
    "alibi": ((4, 6, 32), (4, 16, 32), dict(alibi_slopes=SLOPES)),
    "alibi_causal_decode_gqa": ((4, 1, 64), (1, 40, 64), dict(causal=True, alibi_slopes=SLOPES)),
    "batch_gqa_all": ((2, 4, 6, 32), (2, 2, 16, 32),
                      dict(causal=True, window=7, softcap=2.0, alibi_slopes=SLOPES)),
    "prefill_tiled_alibi_window": ((2, 9, 32), (2, 20, 32),
                                   dict(causal=True, window=6, alibi_slopes=SLOPES[:2])),
}


def _inputs(qs, ks, seed=0):
    g = torch.Generator().manual_seed(seed)
    return tuple(torch.randn(*s, generator=g) for s in (qs, ks, ks))


@pytest.mark.parametrize("name", sorted(CASES))
def test_values_and_gradients_equal_the_float64_reference(name):
    qs, ks, kw = CASES[name]
    q, k, v = (x.requires_grad_() for x in _inputs(qs, ks))
    out = go.attention(q, k, v, **kw)
    q64, k64, v64 = (x.detach().double().requires_grad_() for x in (q, k, v))
    want = reference(q64, k64, v64, **kw)
    torch.testing.assert_close(out.double(), want, rtol=1e-4, atol=2e-5)
    g = torch.randn_like(out)
    got = torch.autograd.grad(out, (q, k, v), g)
    expected = torch.autograd.grad(want, (q64, k64, v64), g.double())
    for a, b in zip(got, expected):
        torch.testing.assert_close(a.double(), b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("name", sorted(CASES))
def test_opcheck(name):
    qs, ks, kw = CASES[name]
    torch.library.opcheck(go.attention, _inputs(qs, ks), kw)


def test_the_options_equal_sdpa_with_an_explicit_mask():
    """SDPA has no window, softcap-free ALiBi or GQA options of these forms: the same
    meaning as its float mask (``enable_gqa`` for the heads)."""
    q, k, v = _inputs((4, 8, 32), (2, 24, 32), seed=3)
    for kw in (dict(causal=True, window=4), dict(alibi_slopes=SLOPES),
               dict(causal=True, window=9, alibi_slopes=SLOPES)):
        bias, keep = bias_and_mask(8, 24, kw.get("causal", False), kw.get("window"),
                                   kw.get("alibi_slopes"))
        mask = (bias.float() + torch.zeros(1, 8, 24)).masked_fill(~keep, float("-inf"))
        want = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, enable_gqa=True)
        torch.testing.assert_close(go.attention(q, k, v, **kw), want, rtol=1e-4, atol=2e-5)


def test_the_options_change_the_result():
    q, k, v = _inputs((4, 6, 32), (4, 16, 32), seed=1)
    plain = go.attention(q, k, v, causal=True)
    for kw in (dict(window=3), dict(softcap=0.5), dict(alibi_slopes=SLOPES)):
        assert not torch.allclose(plain, go.attention(q, k, v, causal=True, **kw), atol=1e-3)


def test_the_schema_names_the_options():
    schema = str(torch.ops.gpudsl.attention.default._schema)
    for arg in ("int? window=None", "float? softcap=None", "Tensor? alibi_slopes=None"):
        assert arg in schema, schema


def test_bad_slopes_are_a_gpudsl_error():
    q, k, v = _inputs((4, 6, 32), (4, 16, 32))
    with pytest.raises(gpudsl.Error, match=r"alibi_slopes has shape \(3,\)"):
        go.attention(q, k, v, alibi_slopes=SLOPES[:3])
    with pytest.raises(gpudsl.Error, match="alibi_slopes"):
        go.attention(q, k, v, alibi_slopes=SLOPES.double())
    with pytest.raises(gpudsl.Error, match="causal"):
        go.attention(q, k, v, window=3)


def test_compiles_fullgraph_with_the_options():
    q, k, v = _inputs((4, 6, 32), (2, 16, 32), seed=2)

    @torch.compile(fullgraph=True, backend="eager")
    def f(q, k, v, s):
        return go.attention(q, k, v, causal=True, window=4, softcap=5.0, alibi_slopes=s) * 2

    kw = dict(causal=True, window=4, softcap=5.0, alibi_slopes=SLOPES)
    torch.testing.assert_close(f(q, k, v, SLOPES).double(), 2 * reference(q, k, v, **kw),
                               rtol=1e-4, atol=4e-5)
