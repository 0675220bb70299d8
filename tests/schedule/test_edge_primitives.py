"""The primitives that let a tiled kernel clip its edges the way a Hopper main loop does
(docs/hopper.md, "Edges"): ``stage_mem(..., zeros=True)`` (a staged tile reads zeros
past the array's edge), ``make_tma`` of such a copy (a TMA box zero-fills there),
``remove_guard`` (the rows past the edge are computed and dropped) and
``reorder_loops`` through a chain of guards.  Each keeps the meaning (the interpreter
agrees before and after) and refuses what it cannot prove."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import SchedulingError, proc_from_source
from gpudsl.ir.nodes import If
from gpudsl.ir.types import SHARED
from gpudsl.schedule import remove_guard, reorder_loops, stage_mem

ROWS = '''
@proc
def rows(m: size, x: f32[m, 8], y: f32[m]):
    for bi in par(0, (m + 3) // 4) @ BLOCKS:
        acc: f32[4] @ REGISTER
        for t in par(0, 4) @ THREADS:
            if 4 * bi + t < m:
                acc[t] = 0.0
        for t in par(0, 4) @ THREADS:
            if 4 * bi + t < m:
                for j in seq(0, 8):
                    acc[t] += x[4 * bi + t, j] * 2.0
        for t in par(0, 4) @ THREADS:
            if 4 * bi + t < m:
                y[4 * bi + t] = acc[t]
'''


def _run(p, **arrays):
    out = {k: v.copy() for k, v in arrays.items()}
    gpudsl.interpret(p, **out)
    return out


def _args(m, seed=0):
    rng = np.random.default_rng(seed)
    return dict(x=rng.integers(-4, 5, (m, 8)).astype(np.float32), y=np.zeros(m, np.float32))


def _staged():
    p = proc_from_source(ROWS)
    return stage_mem(p, p.find_loop("t #1"), "x[4 * bi:4 * bi + 4, 0:8]", "xs", SHARED,
                     zeros=True)


def test_stage_mem_zeros_writes_zero_past_the_edge_and_keeps_the_meaning():
    q = _staged()
    text = str(q)
    assert "else:\n" in text and "xs[xs_in0, xs_in1] = 0.0" in text
    for m in (1, 5, 8):
        assert np.array_equal(_run(q, **_args(m))["y"], _run(proc_from_source(ROWS), **_args(m))["y"])


def test_remove_guard_drops_the_edge_guards_of_values_nobody_reads():
    q = _staged()
    q = remove_guard(q, q.find("acc[_] = 0.0").parent())
    q = remove_guard(q, q.find_loop("j").parent())
    text = str(q)
    assert text.count("if 4 * bi + t < m") == 1      # only the store keeps its guard
    for m in (1, 3, 4, 7, 12):
        assert np.array_equal(_run(q, **_args(m, m))["y"],
                              _run(proc_from_source(ROWS), **_args(m, m))["y"])


def test_remove_guard_refuses_an_access_that_leaves_its_array():
    p = proc_from_source(ROWS)     # x read directly: past the edge without the guard
    p = remove_guard(p, p.find("acc[_] = 0.0").parent())
    with pytest.raises(SchedulingError, match="may leave its array"):
        remove_guard(p, p.find_loop("j").parent())


def test_remove_guard_refuses_values_a_live_read_sees():
    # the store is not guarded: it reads what the unguarded product computes past m
    src = ROWS.replace("            if 4 * bi + t < m:\n                y[4 * bi + t] = acc[t]",
                       "            y[(4 * bi + t) % m] = acc[t]")
    q = proc_from_source(src)
    q = stage_mem(q, q.find_loop("t #1"), "x[4 * bi:4 * bi + 4, 0:8]", "xs", SHARED, zeros=True)
    with pytest.raises(SchedulingError, match="reads") as e:
        remove_guard(q, q.find_loop("j").parent())
    assert e.value.witness is not None


def test_remove_guard_refuses_the_initialization_once_the_product_reads_it():
    q = _staged()
    q = remove_guard(q, q.find_loop("j").parent())   # the product first: it reads acc
    with pytest.raises(SchedulingError, match="reads"):
        remove_guard(q, q.find("acc[_] = 0.0").parent())


def test_remove_guard_refuses_writes_to_a_parameter_and_shared_memory():
    p = proc_from_source(ROWS)
    with pytest.raises(SchedulingError, match="not allocated around it"):
        remove_guard(p, p.find("y[_] = _").parent())
    shared = ROWS.replace("acc: f32[4] @ REGISTER", "acc: f32[4] @ SHARED")
    q = proc_from_source(shared)
    with pytest.raises(SchedulingError, match="REGISTER"):
        remove_guard(q, q.find("acc[_] = 0.0").parent())


def test_reorder_loops_moves_a_chain_of_guards_inwards():
    src = '''
@proc
def two(m: size, n: size, x: f32[m, n]):
    for i in seq(0, (m + 1) // 2):
        for r in seq(0, 2):
            if 2 * i + r < m:
                if r < n:
                    for j in seq(0, n):
                        x[2 * i + r, j] = 1.0
'''
    p = proc_from_source(src)
    q = reorder_loops(p, "r")
    outer = q.find_loop("j").node()
    assert isinstance(outer.body[0].body[0], If)       # for j: for r: if: if:
    rng = np.random.default_rng(1)
    x = rng.standard_normal((5, 3)).astype(np.float32)
    assert np.array_equal(_run(q, x=x)["x"], _run(p, x=x)["x"])


def test_make_tma_takes_a_zero_filled_copy_as_a_clipped_box():
    from gpudsl.stdlib.matmul_sm90 import sm90_kernel
    text = str(sm90_kernel("f16", bn=64, wgs=1, bk=32, stages=2, clip=True))
    assert "tma_load(As[po % 2, 0:64, 0:32], a[64 * bi:64 * bi + 64, 32 * po:32 * po + 32]" in text
    assert "if 64 * bi" in text and "= 0.0" not in text.split("for po")[1].split("sync()")[0]


def test_differential_edge_family():
    """A short run of the differential test on the edge family (the long one:
    ``GPUDSL_DIFF_FAMILY=edge python -m tests.schedule.differential --seconds 1200``)."""
    from tests.schedule.differential.run import Runner

    r = Runner(seed=0, family="edge")
    r.run(120, max_cases=60)
    assert not r.failures, r.failures[0].repro()
    assert r.stats.accepted["remove_guard"] > 0, r.stats.table()
    assert r.stats.refused["remove_guard"] > 0, r.stats.table()   # live reads are seen
