"""set_unroll and set_blocks_per_sm: hints for the CUDA compiler that keep the
meaning, print and parse back, and reach the generated code."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, SchedulingError
from gpudsl.proc import proc_from_source
from gpudsl.schedule import divide_loop, parallelize_loop, set_blocks_per_sm, set_unroll

from . import procs as P
from .helpers import assert_refused, assert_same_meaning


def _mapped():
    q = divide_loop(P.rowsum, "j", 4, ["jo", "ji"], tail="guard")
    return parallelize_loop(q, "i", BLOCKS)


def _divided():
    return divide_loop(P.rowsum, "j", 4, ["jo", "ji"], tail="guard")


def _round_trip(p):
    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    q = proc_from_source(str(p), ns)
    assert q == p and str(q) == str(p)


def test_set_unroll_keeps_meaning_and_emits_a_pragma():
    q = set_unroll(_divided(), "ji")
    assert "seq(0, 4, unroll=True)" in str(q)
    assert_same_meaning(P.rowsum, q, n=3, m=10)
    _round_trip(q)
    src = q.cuda_source()
    assert src.count("#pragma unroll") == 1
    assert "#pragma unroll" not in set_unroll(q, "ji", False).cuda_source()


def test_set_blocks_per_sm_reaches_launch_bounds():
    p = divide_loop(P.saxpy, "i", 128, ["bi", "ti"], tail="guard")
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "ti", THREADS)
    q = set_blocks_per_sm(p, "bi", 4)
    assert "blocks_per_sm=4" in str(q)
    _round_trip(q)
    assert q.check().ok
    assert "__launch_bounds__(128, 4)" in q.cuda_source()
    assert_same_meaning(P.saxpy, q, n=256)


def test_hints_are_refused_where_they_mean_nothing():
    q = _mapped()
    with pytest.raises(SchedulingError) as e:
        set_blocks_per_sm(q, "jo", 2)  # not a BLOCKS loop
    assert_refused(e, "set_blocks_per_sm", "procs")
    with pytest.raises(SchedulingError) as e:
        set_unroll(q, "i")  # a par loop
    assert_refused(e, "set_unroll", "procs")
    with pytest.raises(SchedulingError):
        set_blocks_per_sm(q, "i", -1)


def test_blocks_per_sm_only_on_blocks_loops_in_source():
    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    with pytest.raises(gpudsl.ProcError, match="blocks_per_sm"):
        proc_from_source("def f(n: size, x: f32[n]):\n"
                         "    for i in seq(0, n, blocks_per_sm=2):\n"
                         "        x[i] = 0.0\n", ns)
    with pytest.raises(gpudsl.ProcError, match="outermost BLOCKS"):  # codegen reads it there
        proc_from_source("def f(n: size, x: f32[n, 32]):\n"
                         "    for i in par(0, n) @ BLOCKS:\n"
                         "        for j in par(0, 1, blocks_per_sm=2) @ BLOCKS:\n"
                         "            for t in par(0, 32) @ THREADS:\n"
                         "                x[i, t] = 0.0\n", ns)
