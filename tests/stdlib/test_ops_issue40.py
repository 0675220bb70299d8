"""Issue 40's ``gpudsl.ops`` gaps, each refused or missing before: ``rms_norm(eps=)`` and
weights of another dtype (torch's mixed precision), ``softmax`` with a temperature, an
additive mask and ``causal``, ``argmax`` and ``topk`` over the last axis, ranks up to 6
for the pointwise ops, ``permute`` and the complex product in float16/bfloat16."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import ops

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(40)


def _rms(x, w, eps):
    x = x.astype(np.float64)
    return w.astype(np.float64) * x / np.sqrt((x * x).mean(-1, keepdims=True) + eps)


def _softmax(z):
    z = z - z.max(-1, keepdims=True)
    e = np.exp(z)
    return e / e.sum(-1, keepdims=True)


def test_rms_norm_eps():
    x = RNG.standard_normal((3, 40)).astype(np.float32) * 1e-3
    w = RNG.standard_normal(40).astype(np.float32)
    np.testing.assert_allclose(ops.rms_norm(x, w), _rms(x, w, 1e-5), rtol=1e-5, atol=1e-6)
    got = ops.rms_norm(x, w, eps=1e-2)
    np.testing.assert_allclose(got, _rms(x, w, 1e-2), rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, ops.rms_norm(x, w), rtol=1e-3)
    for bad in (-1.0, float("nan"), "1e-5", np.ones(2)):
        with pytest.raises(gpudsl.Error, match="rms_norm: eps must be"):
            ops.rms_norm(x, w, eps=bad)


def test_rms_norm_of_bf16_rows_with_f32_weights():
    x = RNG.standard_normal((2, 3, 64)).astype(BF16)
    w = RNG.standard_normal(64).astype(np.float32)
    y = ops.rms_norm(x, w, eps=1e-6)
    assert y.dtype == BF16 and y.shape == x.shape
    # computed in f32, rounded once to bf16
    want = _rms(x.astype(np.float32), w, 1e-6).astype(np.float32).astype(BF16)
    assert np.abs(y.astype(np.float32) - want.astype(np.float32)).max() <= \
        2 ** -7 * np.abs(want.astype(np.float32)).max()
    with pytest.raises(gpudsl.Error, match="must be a vector as long as"):
        ops.rms_norm(x, np.ones(63, np.float32))


@pytest.mark.filterwarnings("ignore:Mismatch dtype")
def test_rms_norm_mixed_equals_torch():
    torch = pytest.importorskip("torch")
    F = torch.nn.functional
    x = torch.randn(4, 64, generator=torch.Generator().manual_seed(0)).bfloat16()
    w = torch.randn(64, generator=torch.Generator().manual_seed(1))
    want = F.rms_norm(x, (64,), w, eps=1e-6)
    got = ops.rms_norm(x, w, eps=1e-6)
    assert got.dtype == torch.bfloat16
    torch.testing.assert_close(got, want, rtol=0, atol=0)


def test_softmax_temperature_mask_and_causal():
    x = RNG.standard_normal((2, 5, 70)).astype(np.float32)
    np.testing.assert_allclose(ops.softmax(x, temperature=0.7), _softmax(x / 0.7),
                               rtol=1e-5, atol=1e-7)
    mask = np.where(RNG.random((5, 70)) < 0.3, -np.inf, 0).astype(np.float32)
    np.testing.assert_allclose(ops.softmax(x, mask=mask[None]), _softmax(x + mask),
                               rtol=1e-5, atol=1e-7)
    s = RNG.standard_normal((2, 6, 9)).astype(np.float32)
    causal = np.triu(np.full((6, 9), -np.inf, np.float32), 1 + 9 - 6)
    np.testing.assert_allclose(ops.softmax(s, temperature=2.0, causal=True),
                               _softmax(s / 2 + causal), rtol=1e-5, atol=1e-7)


def test_softmax_in_half_precision():
    x = RNG.standard_normal((3, 50)).astype(np.float16)
    y = ops.softmax(x, temperature=1.5)
    assert y.dtype == np.float16
    np.testing.assert_allclose(y.astype(np.float32), _softmax(x.astype(np.float32) / 1.5),
                               rtol=2 ** -10, atol=2 ** -14)


@pytest.mark.parametrize("call, words", [
    (lambda x: ops.softmax(x, temperature=0), "temperature must be a finite number > 0"),
    (lambda x: ops.softmax(x, causal=1), "causal must be a bool"),
    (lambda x: ops.softmax(x, mask=np.zeros((3, 5), np.float32)), "must broadcast"),
    (lambda x: ops.softmax(x[0, 0], causal=True), "causal needs scores"),
    (lambda x: ops.softmax(x.transpose(0, 2, 1), causal=True), "m <= n"),
    (lambda x: ops.topk(x, 0), "k 0 is outside"),
    (lambda x: ops.topk(x, 8), "k 8 is outside"),
    (lambda x: ops.argmax(x.astype(np.int64)), "x is int64"),
])
def test_refusals(call, words):
    x = np.zeros((2, 4, 7), np.float32)
    with pytest.raises(gpudsl.Error, match=words):
        call(x)


def test_argmax_and_topk_follow_numpy_and_torch():
    x = RNG.standard_normal((2, 5, 70)).astype(np.float32)
    x[0, 1, 3] = np.nan
    x[1, 2, 5] = x[1, 2, 60] = 9.0   # a tie: the first index
    a = ops.argmax(x)
    assert a.dtype == np.int64 and (a == np.argmax(x, -1)).all()
    assert ops.argmax(np.array([1, 3, 3, 2], np.float32)) == 1
    v, i = ops.topk(x, 4)
    order = np.argsort(np.where(np.isnan(x), -np.inf, -x), axis=-1, kind="stable")[..., :4]
    order[0, 1, 0] = 3  # numpy sorts NaN last: the NaN row's first pick is the NaN
    order[0, 1, 1:] = np.argsort(-x[0, 1], kind="stable")[:3]
    np.testing.assert_array_equal(i, order)
    np.testing.assert_array_equal(v, np.take_along_axis(x, order, -1))
    torch = pytest.importorskip("torch")
    tv, ti = torch.topk(torch.from_numpy(x), 4)
    np.testing.assert_array_equal(v, tv.numpy())


def test_argmax_of_bf16_and_a_torch_topk_pair():
    torch = pytest.importorskip("torch")
    x = torch.randn(3, 40, generator=torch.Generator().manual_seed(2)).bfloat16()
    assert (ops.argmax(x) == x.float().argmax(-1)).all()
    v, i = ops.topk(x, 3)
    tv, ti = torch.topk(x, 3)
    assert isinstance(v, torch.Tensor) and v.dtype == torch.bfloat16
    torch.testing.assert_close(v, tv)
    assert (i == ti).all()


@pytest.mark.parametrize("sa, sb", [((2, 3, 4, 5), (2, 1, 4, 1)),
                                    ((2, 2, 3, 2, 2, 3), (2, 1, 3, 1, 2, 1)),
                                    ((2, 1, 3, 4, 2), (3, 1, 2))])
def test_pointwise_ops_up_to_six_axes(sa, sb):
    a = RNG.standard_normal(sa).astype(np.float32)
    b = RNG.standard_normal(sb).astype(np.float32)
    np.testing.assert_array_equal(ops.add(a, b), a + b)
    np.testing.assert_array_equal(ops.mul(a, b), a * b)


def test_unary_ops_up_to_six_axes_and_no_more():
    a = RNG.standard_normal((2, 1, 3, 2, 2, 3)).astype(np.float32)
    np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))
    with pytest.raises(gpudsl.Error, match="7 dimension"):
        ops.relu(a[None])


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_permute_and_the_complex_product_of_halves(dt):
    x = RNG.standard_normal((3, 40, 36)).astype(dt)
    for perm in [(0, 2, 1), (2, 1, 0)]:
        y = ops.permute(x, perm)
        assert y.dtype == dt
        np.testing.assert_array_equal(y.view(np.uint16), np.transpose(x, perm).view(np.uint16))
    a = RNG.standard_normal((4, 8, 2)).astype(dt)
    b = RNG.standard_normal((1, 8, 2)).astype(dt)
    c = ops.complex_hadamard_product(a, b)
    af, bf = a.astype(np.float32), b.astype(np.float32)
    want = np.stack([af[..., 0] * bf[..., 0] - af[..., 1] * bf[..., 1],
                     af[..., 0] * bf[..., 1] + af[..., 1] * bf[..., 0]], -1).astype(dt)
    assert c.dtype == dt
    np.testing.assert_array_equal(c.view(np.uint16), want.view(np.uint16))
    with pytest.raises(gpudsl.Error, match="mixed precisions"):
        ops.complex_hadamard_product(a, b.astype(np.float32))
