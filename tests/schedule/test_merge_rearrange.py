"""merge_loops and rearrange_dim (issue 15: a transposed A tile in shared memory,
and tile copies spread over every thread of a block)."""
from __future__ import annotations

import pytest

from gpudsl import SHARED, THREADS, SchedulingError, proc
from gpudsl.schedule import (divide_loop, merge_loops, parallelize_loop, rearrange_dim,
                             stage_mem, vectorize)

from . import procs as P
from .helpers import assert_refused, assert_same_meaning


@proc
def tile_copy(n: size, x: f32[n, 8], y: f32[8, n]):
    assert n % 16 == 0
    for b in par(0, n // 16) @ BLOCKS:
        for t in par(0, 16) @ THREADS:
            for i in seq(0, 8):
                y[i, 16 * b + t] = x[16 * b + t, i]


def _roundtrip(q):
    from gpudsl import proc_from_source

    back = proc_from_source(str(q), {})
    assert back == q and str(back) == str(q)


def test_merge_loops_keeps_order_and_meaning():
    src = P.transpose
    q = divide_loop(src, "j", 3, ["jo", "ji"], tail="guard")
    q2 = merge_loops(q, "jo", "jj")
    text = str(q2)
    assert "for jj in seq(0, (m + 2) // 3 * 3)" in text or "for jj in seq(0, 3 * ((m + 2) // 3))" in text, text
    assert "jj // 3" in text and "jj % 3" in text
    assert_same_meaning(src, q2, n=3, m=5)
    assert_same_meaning(src, q2, n=2, m=6)
    _roundtrip(q2)


def test_merge_loops_refusals():
    with pytest.raises(SchedulingError) as e:
        merge_loops(P.transpose, "i", "ij")  # inner extent m: not a constant
    assert_refused(e, "merge_loops", "procs.py")
    with pytest.raises(SchedulingError) as e:
        merge_loops(P.rowsum, "i", "ij")  # body is not one loop
    assert_refused(e, "merge_loops", "procs.py")
    q = divide_loop(P.transpose, "j", 2, ["jo", "ji"], tail="guard")
    with pytest.raises(SchedulingError):
        merge_loops(q, "jo", "i")  # name taken


def test_merge_loops_refuses_mapped_loops():
    with pytest.raises(SchedulingError) as e:
        merge_loops(tile_copy, "t", "tt")  # mapped, and body not one loop of const extent
    assert "merge_loops" in str(e.value)


def test_rearrange_dim_transposes_a_staged_tile():
    q = stage_mem(P.transpose, P.transpose.find_loop("i"), "x[0:n, 0:m]", "tile", SHARED)
    q2 = rearrange_dim(q, "tile", [1, 0])
    text = str(q2)
    assert "tile: f32[m, n] @ SHARED" in text
    assert "y[j, i] = tile[j, i]" in text
    assert_same_meaning(P.transpose, q2, n=3, m=4)
    _roundtrip(q2)
    # identity permutation: unchanged text
    assert str(rearrange_dim(q, "tile", [0, 1])) == str(q)


def test_rearrange_dim_refusals():
    q = stage_mem(P.transpose, P.transpose.find_loop("i"), "x[0:n, 0:m]", "tile", SHARED)
    for bad in ([0], [0, 0], [1, 2], "10", [True, False], 3):
        with pytest.raises(SchedulingError) as e:
            rearrange_dim(q, "tile", bad)
        assert_refused(e, "rearrange_dim", "procs.py")


def test_rearrange_dim_refuses_windows_passed_to_calls():
    q = stage_mem(tile_copy, tile_copy.find_loop("t"), "x[16 * b:16 * b + 16, 0:8]", "xs",
                  SHARED)
    q = divide_loop(q, "xs_in1", 4, ["i1o", "i1v"], tail="perfect")
    q = vectorize(q, "i1v", 4)
    with pytest.raises(SchedulingError) as e:
        rearrange_dim(q, "xs", [1, 0])
    assert "window" in str(e.value)
