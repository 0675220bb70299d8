"""wgmma on an H100/H200 (sm_90a): the GEMMs equal numpy (exactly on small integers, within
the f32 summation bound on random halves), so the fragment layout, the descriptors and
the fences are the hardware's."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl

from .cases import expected, gemm, operands

pytestmark = pytest.mark.gpu


def _sm90a():
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("wgmma needs an H100/H200 (sm_90a)")


@pytest.mark.parametrize("n, form", [(8, "local"), (64, "block"), (64, "ktile"),
                                     (128, "local"), (256, "ktile")])
def test_cuda_equals_numpy(n, form):
    _sm90a()
    k = gemm(n, form).compile("cuda")
    for kk in (32, 256):
        args = operands(n, kk, seed=kk + n)
        k(**args)
        assert np.array_equal(args["c"], expected(args)), (n, form, kk)


def test_cuda_bf16_and_random_halves():
    _sm90a()
    k = gemm(64, "ktile", "bf16").compile("cuda")
    args = operands(64, 128, seed=2, dt=gpudsl.bf16.numpy)
    k(**args)
    assert np.array_equal(args["c"], expected(args))
    rng = np.random.default_rng(3)
    a = rng.standard_normal((64, 512)).astype(np.float16)
    bt = rng.standard_normal((64, 512)).astype(np.float16)
    c = np.zeros((64, 64), np.float32)
    gemm(64, "ktile").compile("cuda")(a=a, bt=bt, c=c)
    want = a.astype(np.float64) @ bt.astype(np.float64).T
    bound = 512 * 2.0 ** -22 * (np.abs(a).astype(np.float64) @ np.abs(bt).astype(np.float64).T)
    assert np.all(np.abs(c - want) <= bound + 1e-6)
