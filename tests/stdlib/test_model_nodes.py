"""The whole-model nodes (issue 17): rms_norm, complex_hadamard_product, sliced_softmax.
Each default kernel proved by check(); the interpreter (with the dynamic race detector)
and the emulator through gpudsl.ops equal numpy on odd sizes and size-1 axes; bad
arguments refused."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.stdlib.common import make_proc
from gpudsl.stdlib.complex import complex_mul, plan_complex_mul
from gpudsl.stdlib.rms_norm import plan_rms_norm, rms_norm_kernel, rms_norm_rows
from gpudsl.stdlib.softmax import (plan_sliced_softmax, sliced_softmax_kernel,
                                   sliced_softmax_rows)

RNG = np.random.default_rng(17)


def rand(*shape):
    return RNG.standard_normal(shape).astype(np.float32)


def ref_rms_norm(x, w):
    x64 = x.astype(np.float64)
    return (w * x64 / np.sqrt((x64 * x64).mean(-1, keepdims=True) + 1e-5)).astype(np.float32)


def ref_complex(a, b):
    z = (a[..., 0] + 1j * a[..., 1]) * (b[..., 0] + 1j * b[..., 1])
    return np.stack([z.real, z.imag], -1).astype(np.float32)


def ref_softmax(x, p):
    out = x.copy()
    if p:
        z = x[..., :p].astype(np.float64)
        e = np.exp(z - z.max(-1, keepdims=True))
        out[..., :p] = e / e.sum(-1, keepdims=True)
    return out


# ------------------------------------------------------------------ proofs


@pytest.mark.parametrize("threads", [32, 64, 128, 256, 1024])
def test_rms_norm_kernels_are_proved(threads):
    assert rms_norm_kernel(threads).check().ok
    assert rms_norm_kernel(threads).check(r=3, n=288).ok


@pytest.mark.parametrize("threads", [32, 256])
def test_sliced_softmax_kernels_are_proved(threads):
    assert sliced_softmax_kernel(threads).check().ok
    assert sliced_softmax_kernel(threads).check(r=6, n=256).ok


@pytest.mark.parametrize("a, b", [((6, 24, 2), (1, 24, 2)), ((2,), (2,)), ((5, 3, 2), (5, 1, 2)),
                                  ((4, 2), (1, 2)), ((3, 4, 2), (1, 4, 2))])
def test_complex_kernels_are_proved(a, b):
    p, _, _ = plan_complex_mul(a, b)
    assert p.check().ok


def test_the_block_reduction_without_its_barrier_is_a_race():
    # the barrier between the warps' partial sums and their reduction is what makes
    # the block reduction (warp_sum + one SHARED exchange) correct: check() must see it
    p = rms_norm_kernel(64)
    text = str(p).replace("@proc\n", "")
    assert text.count("        sync()\n") == 1 and "warp_sum(" in text
    bad = make_proc("bad", text.replace("        sync()\n", ""))
    report = bad.check()
    assert not report.ok and any(d.kind == "race" for d in report.diagnostics)


def test_softmax_without_the_barrier_before_the_sum_is_a_race():
    # (with one warp, lane 0 writes part2[0] and only lane 0 reads it: no race)
    p = sliced_softmax_kernel(64)
    text = str(p).replace("@proc\n", "")
    marker = "                part2[t // 32] = acc2_w\n        sync()\n"
    assert marker in text
    bad = make_proc("bad", text.replace(marker, "                part2[t // 32] = acc2_w\n"))
    report = bad.check()
    assert not report.ok and any(d.kind == "race" for d in report.diagnostics)


def test_block_reduction_under_a_lane_condition_is_divergence():
    p = rms_norm_kernel(64)
    text = str(p).replace("@proc\n", "")
    old = "            acc_w = warp_sum(acc)\n"
    assert old in text
    bad = make_proc("bad", text.replace(old, "            if t < 48:\n    " + old))
    assert "divergence" in bad.check().kinds()


# ------------------------------------------------------------------ interpreter


@pytest.mark.parametrize("r, n", [(1, 1), (3, 37), (2, 64), (1, 300)])
def test_rms_norm_algorithm_and_kernel_equal_numpy(r, n):
    x, w = rand(r, n), rand(n)
    for p in (rms_norm_rows(), plan_rms_norm(n)):
        out = np.zeros_like(x)
        p.interpret(detect_races=p is not rms_norm_rows(), x=x, w=w, out=out)
        np.testing.assert_allclose(out, ref_rms_norm(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("r, n, prefix", [(1, 1, 1), (1, 1, 0), (3, 37, 20), (2, 40, 40),
                                          (2, 40, 0)])
def test_sliced_softmax_algorithm_and_kernel_equal_numpy(r, n, prefix):
    x = rand(r, n)
    for p in (sliced_softmax_rows(), plan_sliced_softmax(n)):
        out, err = np.zeros_like(x), np.zeros(1, np.int32)
        p.interpret(detect_races=p is not sliced_softmax_rows(), x=x,
                    prefix=np.array([prefix], np.int64), out=out, err=err)
        assert err[0] == 0
        np.testing.assert_allclose(out, ref_softmax(x, prefix), rtol=1e-5, atol=1e-6)


def test_complex_algorithm_equals_numpy():
    a, b = rand(3, 5, 2), rand(3, 1, 2)
    out = np.zeros_like(a)
    complex_mul((True, False)).interpret(a=a, b=b, out=out)
    np.testing.assert_allclose(out, ref_complex(a, b), rtol=1e-5, atol=1e-6)


# ------------------------------------------------------------------ ops (emulator)


@pytest.mark.parametrize("shape", [(1,), (37,), (288,), (3, 37), (1, 1), (2, 1, 5), (2, 3, 64)])
def test_ops_rms_norm(shape):
    x, w = rand(*shape), rand(shape[-1])
    np.testing.assert_allclose(ops.rms_norm(x, w), ref_rms_norm(x, w), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("a, b", [((2,), (2,)), ((24, 2), (24, 2)), ((6, 24, 2), (1, 24, 2)),
                                  ((5, 3, 2), (5, 1, 2)), ((1, 2), (1, 2)), ((7, 2), (1, 2)),
                                  ((3, 1, 2), (1, 1, 2)), ((4, 5, 2), (4, 5, 2))])
def test_ops_complex_hadamard_product(a, b):
    x, y = rand(*a), rand(*b)
    np.testing.assert_allclose(ops.complex_hadamard_product(x, y), ref_complex(x, y),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, prefix", [((1,), 1), ((37,), 0), ((37,), 37), ((6, 256), 5),
                                           ((3, 1), 1), ((2, 1, 33), 17)])
def test_ops_sliced_softmax(shape, prefix):
    x = rand(*shape)
    want = ref_softmax(x, prefix)
    np.testing.assert_allclose(ops.sliced_softmax(x, prefix), want, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(ops.sliced_softmax(x, np.array([prefix], np.int64)), want,
                               rtol=1e-5, atol=1e-6)


def test_ops_sliced_softmax_of_large_values_is_stable():
    x = np.array([[1000.0, 1001.0, 999.0, 5.0]], np.float32)
    out = ops.sliced_softmax(x, 3)
    assert np.isfinite(out).all()
    np.testing.assert_allclose(out, ref_softmax(x, 3), rtol=1e-5)


# ------------------------------------------------------------------ refusals


@pytest.mark.parametrize("call, text", [
    (lambda: ops.rms_norm(rand(3, 4), rand(3)), "rms_norm: the weights"),
    (lambda: ops.rms_norm(rand(3, 4), rand(3, 4)), "rms_norm: the weights"),
    (lambda: ops.rms_norm(rand(3, 4).astype(np.float64), rand(4)), "float32"),
    (lambda: ops.complex_hadamard_product(rand(3, 3), rand(3, 3)), "size 2"),
    (lambda: ops.complex_hadamard_product(rand(3, 2), rand(2)), "ranks"),
    (lambda: ops.complex_hadamard_product(rand(3, 2), rand(2, 2)), "axis 0"),
    (lambda: ops.sliced_softmax(rand(3, 4), 5), "prefix 5 is outside [0, 4]"),
    (lambda: ops.sliced_softmax(rand(3, 4), -1), "prefix -1 is outside"),
    (lambda: ops.sliced_softmax(rand(3, 4), 2.0), "integer"),
    (lambda: ops.sliced_softmax(rand(3, 4), np.array([1, 2], np.int64)), "one element"),
    (lambda: ops.sliced_softmax(rand(3, 4), np.array([1], np.int32)), "int64"),
])
def test_bad_arguments_are_refused(call, text):
    with pytest.raises(gpudsl.Error) as e:
        call()
    assert text in str(e.value)


def test_prefix_tensor_out_of_range_is_refused_by_the_kernel():
    # the prefix is read on the device: the kernel's fault flag becomes the error
    with pytest.raises(gpudsl.Error, match="outside \\[0, 4\\]"):
        ops.sliced_softmax(rand(3, 4), np.array([5], np.int64))
