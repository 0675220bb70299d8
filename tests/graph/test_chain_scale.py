"""A long chain of pointwise nodes fuses into one kernel in about N log N (issue 28:
graph.compile of N chained nodes grew as N**2, one primitive call per node on the whole
chain; N = 1,000 did not finish).  Halves are fused on their own, then joined."""
from __future__ import annotations

import time

import numpy as np

from gpudsl import graph
from gpudsl.graph.fusion import ChainOp
from gpudsl.graph.kernels import CHAIN_LEAF, pointwise_proc


def _steps(n):
    # relu(x0), then + x1 and relu alternately on the chain's value
    return (ChainOp("relu", (0,)),) + tuple(ChainOp("add", (None, 1)) if i % 2 else
                                         ChainOp("relu", (None,)) for i in range(1, n))


def test_a_long_chain_is_one_kernel_and_computes_the_chain():
    n = 5 * CHAIN_LEAF + 3
    x = graph.InputTensor("x", "float32", [8, 64])
    y = x
    for i in range(n):
        y = (y + x) if i % 2 else y.relu()
    model = graph.compile(y)
    xv = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    want = xv.copy()
    for i in range(n):
        want = (want + xv) if i % 2 else np.maximum(want, 0)
    np.testing.assert_allclose(model.evaluate({"x": xv}), want, rtol=1e-6, atol=1e-6)
    p = pointwise_proc(_steps(n), ((True,), (True,)), 4)
    assert p.check(d0=512).ok
    assert len(p.ir.body) == 1                       # one nest: one kernel


def _build(n):
    t = time.perf_counter()
    pointwise_proc.__wrapped__(_steps(n), ((True,), (True,)), 4)
    return time.perf_counter() - t


def test_building_the_chain_grows_about_linearly():
    short, long_ = _build(16), _build(256)
    # 16 times the steps: 9-17 times the time measured here (N log N); 61 times
    # before (quadratic: 1.5 s and 92 s)
    assert long_ / short < 32, (short, long_)
