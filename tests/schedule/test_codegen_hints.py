"""set_unroll and set_blocks_per_sm: hints for the CUDA compiler that keep the
meaning, print and parse back, and reach the generated code."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, SchedulingError
from gpudsl.proc import proc_from_source
from gpudsl.schedule import (cut_loop, divide_loop, fuse, parallelize_loop, reorder_loops,
                             set_blocks_per_sm, set_unroll)

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


# blocks_per_sm is a launch-bounds fact of the kernel: after any primitive it stands
# on the kernel's outermost BLOCKS loop, where code generation reads it
# (gpudsl/schedule/blocks_per_sm_kept.py).

NS = {k: getattr(gpudsl, k) for k in gpudsl.__all__}

TILES = """
def tiles(m: size, n: size, out: f32[m, n, 32]):
    for z in seq(0, 1):
        for bi in par(0, m, blocks_per_sm=4) @ BLOCKS:
            for bj in par(0, n) @ BLOCKS:
                for t in par(0, 32) @ THREADS:
                    out[bi, bj, t] += 1.0
"""


def _tiles():
    return proc_from_source(TILES.strip() + "\n", NS)


def _hinted_loops(p):
    from gpudsl.ir.visitor import block_stmts
    return [(s.iter, s.blocks_per_sm) for s in block_stmts(p.ir.body)
            if getattr(s, "blocks_per_sm", 0)]


def _launch_bounds(p):
    return [ln for ln in p.cuda_source().splitlines() if "__launch_bounds__" in ln]


def test_blocks_per_sm_follows_reorder_loops_to_the_outermost_blocks_loop():
    q = reorder_loops(_tiles(), "bi")
    assert _hinted_loops(q) == [("bj", 4)]
    assert "par(0, n, blocks_per_sm=4) @ BLOCKS" in str(q)
    _round_trip(q)                       # the parser takes it only on the outermost loop
    assert [("__launch_bounds__(32, 4)" in ln) for ln in _launch_bounds(q)] == [True]
    assert_same_meaning(_tiles(), q, m=3, n=2)


def test_blocks_per_sm_moves_out_when_a_loop_around_the_kernel_is_mapped():
    q = parallelize_loop(_tiles(), "z", BLOCKS)
    assert _hinted_loops(q) == [("z", 4)]
    _round_trip(q)
    assert "__launch_bounds__(32, 4)" in _launch_bounds(q)[0]


def test_blocks_per_sm_stays_on_each_kernel_that_cut_loop_makes():
    q = cut_loop(_tiles(), "bi", "m // 2")
    assert _hinted_loops(q) == [("bi", 4), ("bi", 4)]
    assert [("__launch_bounds__(32, 4)" in ln) for ln in _launch_bounds(q)] == [True, True]
    r = reorder_loops(q, q.find_loop("bi #1"))     # the second kernel's pair swapped
    assert _hinted_loops(r) == [("bi", 4), ("bj", 4)]
    _round_trip(r)


def test_blocks_per_sm_of_the_second_kernel_survives_fuse():
    p = proc_from_source(
        "def two(n: size, x: f32[n, 32], y: f32[n, 32]):\n"
        "    for b in par(0, n) @ BLOCKS:\n"
        "        for t in par(0, 32) @ THREADS:\n"
        "            x[b, t] = 1.0\n"
        "    for c in par(0, n, blocks_per_sm=3) @ BLOCKS:\n"
        "        for u in par(0, 32) @ THREADS:\n"
        "            y[c, u] = 2.0\n", NS)
    q = fuse(p, "b", "c")
    assert _hinted_loops(q) == [("b", 3)]
    assert "__launch_bounds__(32, 3)" in _launch_bounds(q)[0]
