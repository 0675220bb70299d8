"""The interpreter runs thread loops holding collectives warp-synchronously (docs/language.md (synchronization)),
with CUDA's meaning; divergence and lanes out of range are run-time errors; the race
detector still watches those loops."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import InterpError, RaceError, interpret

from . import procs as P
from . import reference as R

RNG = np.random.default_rng(7)


@pytest.mark.parametrize("race", [False, True])
def test_shuffles(race):
    x = RNG.random(64, dtype=np.float32)
    y = np.zeros((64, 4), np.float32)
    interpret(P.shuffles, detect_races=race, x=x, y=y)
    np.testing.assert_array_equal(y, R.shuffles(x))


@pytest.mark.parametrize("race", [False, True])
def test_reductions(race):
    x = RNG.standard_normal(64).astype(np.float32)
    q = RNG.integers(-2 ** 31, 2 ** 31, 64).astype(np.int32)
    y = np.zeros((64, 3), np.float32)
    r = np.zeros((64, 3), np.int32)
    interpret(P.reductions, detect_races=race, x=x, q=q, y=y, r=r)
    ry, rr = R.reductions(x, q)
    np.testing.assert_array_equal(y, ry)
    np.testing.assert_array_equal(r, rr)


def test_votes():
    x = RNG.random(64, dtype=np.float32)
    m = np.zeros(64, np.int64)
    c = np.zeros((64, 2), np.int32)
    interpret(P.votes, x=x, m=m, c=c)
    rm, rc = R.votes(x)
    np.testing.assert_array_equal(m, rm)
    np.testing.assert_array_equal(c, rc)
    assert m.min() >= 0 and m.max() < 2 ** 32


def test_wide_types():
    a = RNG.standard_normal(32)
    b = RNG.integers(-10 ** 12, 10 ** 12, 32)
    y, z = np.zeros(32), np.zeros(32, np.int64)
    interpret(P.wide_types, a=a, b=b, y=y, z=z)
    np.testing.assert_array_equal(y, R.butterfly(a, "sum") + a[np.arange(32) ^ 16])
    np.testing.assert_array_equal(z, b.max() + b[31 - np.arange(32)] + sum(range(32)))


@pytest.mark.parametrize("race", [False, True])
def test_block_sum(race):
    x = RNG.standard_normal((3, 256)).astype(np.float32)
    out = np.zeros(3, np.float32)
    interpret(P.block_sum, detect_races=race, n=3, x=x, out=out)
    np.testing.assert_array_equal(out, R.block_sum(x))
    np.testing.assert_allclose(out, x.sum(axis=1), rtol=1e-5, atol=1e-5)


def test_nested_thread_loops():
    x = RNG.random((4, 32), dtype=np.float32)
    y = np.zeros((4, 32), np.float32)
    interpret(P.nested, x=x, y=y)
    for w in range(4):
        want = R.butterfly(x[w], "sum") + x[w][(np.arange(32) + w) % 32]
        np.testing.assert_array_equal(y[w], want)


@pytest.mark.parametrize("p, args, text", [
    (P.lane_if, {}, "divergence"),
    (P.lane_loop, {}, "divergence"),
    (P.lane_out, {}, "outside [0, 32)"),
    (P.nested_bad, {}, "not a multiple of 32"),
])
def test_run_time_errors(p, args, text):
    shape = (4, 16) if p is P.nested_bad else (64,)
    x = np.ones(shape, np.float32)
    with pytest.raises(InterpError, match=text.replace("[", r"\[").replace(")", r"\)")):
        interpret(p, x=x, y=np.zeros(shape, np.float32))


def test_part_of_a_warp_is_an_error():
    with pytest.raises(InterpError, match="covers only lanes 0..19"):
        interpret(P.part_warp, n=20, x=np.ones(20, np.float32), y=np.zeros(20, np.float32))
    y = np.zeros(64, np.float32)
    interpret(P.part_warp, n=64, x=np.ones(64, np.float32), y=y)
    assert (y == 32).all()


def test_collective_outside_thread_loop():
    p = gpudsl.proc_from_source(
        "def f(x: f32[4]):\n    for i in seq(0, 4):\n        x[i] = warp_sum(x[i])\n",
        vars(gpudsl))
    with pytest.raises(InterpError, match="outside any @ THREADS loop"):
        interpret(p, x=np.ones(4, np.float32))


def test_race_detector_sees_warp_loops():
    with pytest.raises(RaceError):
        interpret(P.racy, detect_races=True, x=np.ones(64, np.float32),
                  y=np.zeros(64, np.float32))


def test_callee_with_a_collective():
    src = '''
def red(v: f32, out: f32[1]):
    out[0] = warp_sum(v)

def caller(x: f32[32], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            red(x[t], y[t:t + 1])
'''
    ns = dict(vars(gpudsl))
    red = gpudsl.proc_from_source(src.split("\ndef caller")[0], ns)
    ns["red"] = red
    caller = gpudsl.proc_from_source("def caller" + src.split("\ndef caller")[1], ns)
    x = RNG.random(32, dtype=np.float32)
    y = np.zeros(32, np.float32)
    interpret(caller, x=x, y=y)
    np.testing.assert_array_equal(y, R.butterfly(x, "sum"))
    assert caller.check().ok
