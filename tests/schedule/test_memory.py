"""Memory primitives keep the meaning, and refuse what would change it."""
from __future__ import annotations

import pytest

from gpudsl import BLOCKS, REGISTER, SHARED, THREADS, SchedulingError
from gpudsl.schedule import (bind_expr, divide_loop, expand_dim, lift_alloc, pad_dim,
                             parallelize_loop, set_memory, sink_alloc, stage_mem)

from . import procs as P
from .helpers import assert_refused, assert_same_meaning


def _tiled_transpose():
    q = divide_loop(P.transpose, "i", 4, ["io", "ii"], tail="perfect") \
        if False else P.transpose
    return q


def test_stage_mem_read_tile():
    q = stage_mem(P.transpose, P.transpose.find_loop("j"), "x[i, 0:m]", "row", SHARED)
    assert "row: f32[m] @ SHARED" in str(q)
    assert "y[j, i] = row[j]" in str(q)
    assert_same_meaning(P.transpose, q, n=3, m=4)


def test_stage_mem_accumulator_into_register():
    body = P.rowsum.find_loop("i").body()
    q = stage_mem(P.rowsum, body, "s[i]", "acc", REGISTER)
    text = str(q)
    assert "acc: f32 @ REGISTER" in text and "acc += x[i, j]" in text
    assert "acc = s[i]" not in text  # overwritten first: no copy-in
    assert "s[i] = acc" in text
    assert_same_meaning(P.rowsum, q, n=3, m=5)


def test_stage_mem_reduction_copies_in_and_out():
    q = stage_mem(P.total, "i", "s[0]", "acc", REGISTER)
    assert "acc = s[0]" in str(q) and "s[0] = acc" in str(q)
    assert_same_meaning(P.total, q, n=6)


def test_stage_mem_window_misses_access():
    with pytest.raises(SchedulingError) as e:
        stage_mem(P.prefix, "i", "y[1:n]", "t", SHARED)  # y[i - 1] reaches y[0]
    text = assert_refused(e, "stage_mem", "procs.py")
    assert "misses" in text and e.value.witness is not None


def test_stage_mem_window_out_of_bounds():
    # issue 11: a window partly outside the array is staged with guarded copies
    q = stage_mem(P.transpose, P.transpose.find_loop("j"), "x[i, 0:m + 1]", "row", SHARED)
    assert "if row_in0 < m:" in str(q)
    assert_same_meaning(P.transpose, q, n=2, m=3)


def test_set_memory_pad_dim():
    q = stage_mem(P.transpose, P.transpose.find_loop("j"), "x[i, 0:m]", "row", SHARED)
    q = set_memory(q, "row", REGISTER)
    assert "row: f32[m] @ REGISTER" in str(q)
    q = pad_dim(q, "row", 0, "m + 1")
    assert "row: f32[m + 1] @ REGISTER" in str(q)
    assert_same_meaning(P.transpose, q, n=2, m=3)
    with pytest.raises(SchedulingError) as e:
        pad_dim(q, "row", 0, "m - 1")
    assert_refused(e, "pad_dim", "procs.py")


def test_expand_lift_sink():
    body = P.rowsum.find_loop("i").body()
    q = stage_mem(P.rowsum, body, "s[i]", "acc", REGISTER)
    q = divide_loop(q, "i", 4, ["io", "ii"], tail="perfect") if False else q
    q2 = expand_dim(q, "acc", "n", "i")
    assert "acc: f32[n] @ REGISTER" in str(q2) and "acc[i] += x[i, j]" in str(q2)
    q3 = lift_alloc(q2, "acc")
    assert str(q3).index("acc: f32[n]") < str(q3).index("for i")
    assert_same_meaning(P.rowsum, q3, n=3, m=4)
    q4 = sink_alloc(q3, "acc")
    assert_same_meaning(P.rowsum, q4, n=3, m=4)
    with pytest.raises(SchedulingError) as e:
        expand_dim(q, "acc", 4, "i")  # i reaches n - 1 >= 4
    assert_refused(e, "expand_dim", "procs.py")


def test_lift_out_of_parallel_loop_needs_expansion():
    body = P.rowsum.find_loop("i").body()
    q = stage_mem(P.rowsum, body, "s[i]", "acc", REGISTER)
    q = parallelize_loop(q, "i")
    with pytest.raises(SchedulingError) as e:
        lift_alloc(q, "acc")
    assert_refused(e, "lift_alloc", "procs.py")
    q = lift_alloc(expand_dim(q, "acc", "n", "i"), "acc")
    assert_same_meaning(P.rowsum, q, n=3, m=2)


def test_bind_expr():
    q = bind_expr(P.scale2, "x[_] * a", "xa")
    text = str(q)
    assert "xa = x[i] * a" in text and "y[i] = xa + xa" in text
    assert_same_meaning(P.scale2, q)
    with pytest.raises(SchedulingError) as e:
        bind_expr(P.scale2, "x[_] * a", "y")
    assert_refused(e, "bind_expr", "procs.py")
