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


ASYNC_INTO_S = '''
@proc
def async_into_s(n: size, x: f32[n, 64], y: f32[n, 64]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[0, t], x[b, t])
        async_commit()
        async_wait(0)
        sync()
        for t in par(0, 64) @ THREADS:
            y[b, t] = s[0, t]
'''


ASYNC_ONLY = '''
@proc
def async_only(n: size, a: f32, x: f32[n, 64], y: f32[n, 64]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        buf: f32[2, 32] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[0, t], x[b, t])
        async_commit()
        async_wait(0)
'''


def test_expand_dim_proves_the_bound_at_an_async_copy():
    """Differential run (sync family, seed 1701, case 866): ``expand_dim(p, "s", "0",
    "t")`` made ``s: f32[0, 2, 64]`` and accepted it: the bounds proof skipped the
    statements it did not know (an async copy's ``dst`` is a name, not a read), and the
    result faulted on the emulator.  Every statement kind is asked now."""
    from gpudsl import proc_from_source

    only = proc_from_source(ASYNC_ONLY, file="<expand_async_only>")   # case 866
    for size in ("0", "32"):
        with pytest.raises(SchedulingError, match="0 <= t <"):
            expand_dim(only, "s", size, "t")
    p = proc_from_source(ASYNC_INTO_S, file="<expand_async>")
    for size in ("0", "32"):
        with pytest.raises(SchedulingError, match="0 <= t <"):
            expand_dim(p, "s", size, "t")
    q = expand_dim(p, "s", "64", "t")    # in bounds: one copy per thread, same values
    assert "s[t, 0, t]" in str(q) and q.check().ok
    assert_same_meaning(p, q, n=2)
