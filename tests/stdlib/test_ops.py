"""``gpudsl.ops`` end to end against numpy: on the GPU where there is one (numpy
arrays copied to the device and back), else on the emulator (in CI); and, marked
``gpu``, on PyTorch device tensors (in place, no host copies)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ops

RNG = np.random.default_rng(2026)


def _r(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


@pytest.mark.gpu
def test_ops_run_on_the_gpu():
    assert ops.backend() == "cuda"


@pytest.mark.parametrize("sa, sb", [((512, 256), (256, 384)), ((300, 77), (77, 260)),
                                    ((4, 256, 64), (4, 64, 128)), ((3, 130, 9), (3, 9, 131)),
                                    ((1000,), (1000, 333)), ((5, 7), (7, 3))], ids=str)
def test_matmul(sa, sb):
    a, b = _r(*sa), _r(*sb)
    np.testing.assert_allclose(ops.matmul(a, b), a @ b, rtol=2e-4, atol=2e-4)


@pytest.mark.parametrize("shape, perm", [((1024, 768), (1, 0)), ((33, 65), (1, 0)),
                                         ((8, 96, 160), (0, 2, 1)), ((7, 45, 70), (2, 0, 1)),
                                         ((16, 64, 32), (1, 0, 2)), ((3, 70000), (1, 0))],
                         ids=str)
def test_permute(shape, perm):
    x = _r(*shape)
    np.testing.assert_array_equal(ops.permute(x, perm), np.transpose(x, perm))


@pytest.mark.parametrize("sa, sb", [((1024, 1024), (1024, 1024)), ((1023, 77), (1023, 1)),
                                    ((5, 300, 8), (1, 300, 1)), ((70000, 3), (70000, 1))],
                         ids=str)
def test_pointwise(sa, sb):
    a, b = _r(*sa), _r(*sb)
    np.testing.assert_allclose(ops.add(a, b), a + b, rtol=1e-6, atol=1e-6)
    np.testing.assert_allclose(ops.mul(a, b), a * b, rtol=1e-6, atol=1e-6)
    np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))
    np.testing.assert_allclose(ops.silu(a), a / (1 + np.exp(-a)), rtol=2e-6, atol=1e-6)


def test_slice_and_replace_slice():
    x = _r(1000, 129)
    np.testing.assert_array_equal(ops.slice(x, 17, 900), x[17:900])
    r = _r(100, 129)
    want = x.copy()
    want[200:300] = r
    ops.replace_slice(x, r, np.array([200], np.int64), np.array([300], np.int64))
    np.testing.assert_array_equal(x, want)
    before = x.copy()
    with pytest.raises(gpudsl.Error):
        ops.replace_slice(x, r, np.array([950], np.int64), np.array([1050], np.int64))
    np.testing.assert_array_equal(x, before)


@pytest.mark.gpu
def test_torch_device_tensors():
    torch = pytest.importorskip("torch")
    torch.backends.cuda.matmul.allow_tf32 = False
    dev = dict(device="cuda", dtype=torch.float32)
    a, b = torch.randn(300, 200, **dev), torch.randn(200, 260, **dev)
    c = ops.matmul(a, b)
    assert isinstance(c, torch.Tensor) and c.is_cuda
    torch.testing.assert_close(c, a @ b, rtol=2e-4, atol=2e-4)
    x = torch.randn(64, 1, 96, **dev)
    y = torch.randn(64, 50, 96, **dev)
    torch.testing.assert_close(ops.add(y, x), y + x)
    torch.testing.assert_close(ops.permute(y, (2, 0, 1)), y.permute(2, 0, 1))
    torch.testing.assert_close(ops.silu(y), torch.nn.functional.silu(y), rtol=2e-6,
                               atol=1e-6)
    r = torch.randn(10, 50, 96, **dev)
    want = y.clone()
    want[5:15] = r
    ops.replace_slice(y, r, torch.tensor([5], device="cuda"), torch.tensor([15], device="cuda"))
    torch.testing.assert_close(y, want)


def test_permute_every_permutation_through_ops():
    import itertools

    for shape in [(5, 33), (1, 40), (3, 1, 35), (2, 33, 4), (34, 3, 1)]:
        x = _r(*shape)
        for perm in itertools.permutations(range(len(shape))):
            np.testing.assert_array_equal(ops.permute(x, perm), np.transpose(x, perm),
                                          err_msg=f"{shape} {perm}")


def test_inputs_that_are_not_contiguous():
    a = _r(40, 30).T  # a transposed view
    b = _r(40, 20)
    np.testing.assert_allclose(ops.matmul(a, b), a @ b, rtol=2e-4, atol=2e-4)
    np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))
    np.testing.assert_array_equal(ops.permute(a, (1, 0)), a.T)


def test_host_int_indices_are_checked_on_the_host_and_never_read_back(monkeypatch):
    """An int prefix / range is checked before the launch, so the kernel's fault flag
    cannot be set and is not read back: on a GPU that read waits for the kernel (the
    first campaign: sliced_softmax and attention synchronized on every call).  A
    tensor the kernel reads at run time is still read back."""
    from gpudsl.stdlib import array_ops as stdlib_ops

    reads = []
    real = stdlib_ops._raise_on_fault
    monkeypatch.setattr(stdlib_ops, "_raise_on_fault", lambda err, msg: reads.append(msg) or
                        real(err, msg))
    x = np.random.default_rng(0).standard_normal((4, 8)).astype(np.float32)
    ops.sliced_softmax(x, 3)
    ops.replace_slice(x.copy(), x[:2], 1, 3)
    q = np.ones((1, 1, 32), np.float32)
    ops.attention(q, q, q, prefix=1)
    assert reads == []
    ops.sliced_softmax(x, np.array([3]))
    ops.replace_slice(x.copy(), x[:2], np.array([1]), np.array([3]))
    ops.attention(q, q, q, prefix=np.array([1]))
    assert len(reads) == 3
    with pytest.raises(gpudsl.Error, match=r"range \[3, 5\) is outside x"):
        ops.replace_slice(x.copy(), x[:2], 3, 5)


def test_matmul_async_stages_equal_numpy_and_refuse_bad_values():
    rng = np.random.default_rng(3)
    a = rng.standard_normal((128, 16)).astype(np.float32)
    b = rng.standard_normal((16, 128)).astype(np.float32)
    for k in (2, 3):
        np.testing.assert_allclose(ops.matmul(a, b, async_stages=k), a @ b, rtol=1e-4,
                                   atol=1e-4)
    with pytest.raises(gpudsl.Error, match="async_stages must be"):
        ops.matmul(a, b, async_stages=5)
    with pytest.raises(gpudsl.Error, match="with stages=2"):
        ops.matmul(a, b, stages=2, async_stages=2)


def test_the_attention_docstring_names_the_head_dims_it_takes():
    # issue 40: the docstring said 32/64/96/128 where the docs and the error say 48 too
    from gpudsl.stdlib.attention import HEAD_DIMS

    text = " ".join(ops.attention.__doc__.split())
    assert "one of " + ", ".join(map(str, HEAD_DIMS)) + "." in text
