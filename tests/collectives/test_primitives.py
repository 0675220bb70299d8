"""Rewrite primitives around warp collectives: they keep working, and refuse what would
change which lanes evaluate a collective together."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import SchedulingError, interpret, proc_from_source
from gpudsl.schedule import cut_loop, fission, rename, simplify, specialize, unroll_loop

from . import procs as P


def _same(p, p2, **args):
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    b = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    interpret(p, **a)
    interpret(p2, **b)
    for k in a:
        if isinstance(a[k], np.ndarray):
            np.testing.assert_array_equal(a[k], b[k])
    assert proc_from_source(str(p2), vars(gpudsl)) == p2


def test_unroll_the_butterfly():
    q = unroll_loop(P.butterfly, "k")
    assert q.check().ok
    x = np.arange(64, dtype=np.float32) - 20
    _same(P.butterfly, q, n=64, x=x, y=np.zeros(64, np.float32))


def test_rename_and_simplify_keep_working():
    q = simplify(rename(P.block_sum, "block_sum2"))
    assert q.check().ok
    x = np.random.default_rng(3).standard_normal((2, 256)).astype(np.float32)
    _same(P.block_sum, q, n=2, x=x, out=np.zeros(2, np.float32))


def test_fission_keeps_the_lanes():
    q = fission(P.reductions, P.reductions.find("y[t, 2] = _").after())
    assert str(q).count("@ THREADS") == 2
    assert q.check().ok
    rng = np.random.default_rng(5)
    _same(P.reductions, q, x=rng.standard_normal(64).astype(np.float32),
          q=rng.integers(-99, 99, 64).astype(np.int32), y=np.zeros((64, 3), np.float32),
          r=np.zeros((64, 3), np.int32))


def test_specialize_on_a_lane_condition_is_refused():
    with pytest.raises(SchedulingError, match="some lanes of a warp may not reach"):
        specialize(P.shuffles, "y[t, 0] = _", "t < 16")


def test_specialize_on_a_uniform_condition_is_accepted():
    q = specialize(P.shuffles, "y[t, 0] = _", "b == 0")
    assert q.check().ok
    x = np.arange(64, dtype=np.float32)
    _same(P.shuffles, q, x=x, y=np.zeros((64, 4), np.float32))


def test_cutting_a_warp_loop_is_refused():
    with pytest.raises(SchedulingError, match="thread loop holding a warp collective"):
        cut_loop(P.shuffles, "t", 16)
