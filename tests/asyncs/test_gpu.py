"""Async copies on a GPU (cp.async, sm_80+): the staged copy, the double-buffered loop
and the pipelined fp32 matmuls equal the interpreter / numpy."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl

from .cases import PROCS
from .test_language import _args

pytestmark = pytest.mark.gpu


@pytest.mark.parametrize("name", ["staged", "double_buffered", "thread_level"])
def test_cuda_equals_interpreter(name):
    p = PROCS[name]
    for n in (1, 5):
        a, b = _args(p, n=n, seed=n), _args(p, n=n, seed=n)
        gpudsl.interpret(p, **a)
        p.compile("cuda", check=False)(**b)
        assert np.array_equal(a["y"], b["y"])


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipelined_matmul(stages):
    from gpudsl.stdlib.matmul import big_kernel
    k = big_kernel(False, async_stages=stages).compile("cuda")
    rng = np.random.default_rng(stages)
    for m, n, kk in ((128, 8, 128), (256, 40, 384), (512, 512, 512)):
        a = rng.standard_normal((m, n)).astype(np.float32)
        b = rng.standard_normal((n, kk)).astype(np.float32)
        c = np.zeros((m, kk), np.float32)
        k(a=a, b=b, c=c)
        assert np.allclose(c, a @ b, rtol=1e-4, atol=1e-3)
