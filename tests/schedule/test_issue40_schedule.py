"""Issue 40's scheduling papercuts: ``stage_mem``'s copy loops have distinct names
derived from the staged array (the copy in and the copy back of one window were both
``i0``, and a second staging made ``i0_1``, ``i0_2``); a write-only output is not
copied in (an extra global read); ``add_assert`` adds a precondition."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, REGISTER, SHARED, THREADS, SchedulingError, f32, par, proc,
                    proc_from_source, seq, size)
from gpudsl.schedule import add_assert, divide_loop, parallelize_loop, stage_mem


@proc
def scale_rows(n: size, x: f32[n, 8], out: f32[n, 8]):
    for i in seq(0, n):
        for j in seq(0, 8):
            out[i, j] = 2.0 * x[i, j] + out[i, j]


@proc
def interleave(n: size, x: f32[n, 8], out: f32[n, 8]):
    for i in seq(0, n):
        for j in seq(0, 4):
            out[i, 2 * j] = x[i, j]
            out[i, 2 * j + 1] = x[i, j + 4]


@proc
def half_row(n: size, x: f32[n, 8], out: f32[n, 8]):
    for i in seq(0, n):
        for j in seq(0, 4):
            out[i, j] = x[i, j]


def _same(p, q, n=3):
    rng = np.random.default_rng(0)
    x = rng.integers(-4, 5, (n, 8)).astype(np.float32)
    o1, o2 = rng.integers(-4, 5, (2, n, 8)).astype(np.float32)
    o2[...] = o1
    gpudsl.interpret(p, x=x, out=o1)
    gpudsl.interpret(q, x=x, out=o2)
    assert (o1 == o2).all()
    assert proc_from_source(str(q)) == q


def test_copy_loops_are_named_after_the_staged_array_in_and_out():
    q = stage_mem(scale_rows, scale_rows.find_loop("j"), "out[i, 0:8]", "row", REGISTER)
    text = str(q)
    assert "for row_in0 in seq(0, 8):" in text and "for row_out0 in seq(0, 8):" in text
    assert "i0" not in text
    q = stage_mem(q, q.find_loop("j"), "x[i, 0:8]", "xs", REGISTER)
    assert "for xs_in0 in seq(0, 8):" in str(q)
    # each found by its own name, also after the other was rewritten
    q = divide_loop(q, "row_in0", 4, ["a", "b"], tail="perfect")
    q = divide_loop(q, "row_out0", 2, ["c", "d"], tail="perfect")
    _same(scale_rows, q)


def test_a_taken_name_gets_a_suffix():
    @proc
    def taken(n: size, x: f32[n, 8], out: f32[n, 8]):
        for i in seq(0, n):
            for row_in0 in seq(0, 8):
                out[i, row_in0] = x[i, row_in0] + out[i, row_in0]
    q = stage_mem(taken, taken.find_loop("row_in0"), "out[i, 0:8]", "row", REGISTER)
    assert "for row_in0_1 in seq(0, 8):" in str(q)


def test_a_write_only_window_is_not_copied_in():
    # two statements write the row between them: no syntactic "first loop overwrites"
    q = stage_mem(interleave, interleave.find_loop("j"), "out[i, 0:8]", "row", REGISTER)
    text = str(q)
    assert "row_in0" not in text and "= out[" not in text, text
    assert "out[i, row_out0] = row[row_out0]" in text
    _same(interleave, q)


def test_a_window_written_in_part_is_still_copied_in():
    q = stage_mem(half_row, half_row.find_loop("j"), "out[i, 0:8]", "row", REGISTER)
    assert "row[row_in0] = out[i, row_in0]" in str(q)
    _same(half_row, q)


def test_a_read_before_the_write_keeps_the_copy_in():
    q = stage_mem(scale_rows, scale_rows.find_loop("j"), "out[i, 0:8]", "row", REGISTER)
    assert "row[row_in0] = out[i, row_in0]" in str(q)


@proc
def blocks_of_four(n: size, x: f32[n]):
    for i in seq(0, n):
        x[i] = 2.0 * x[i]


def test_add_assert_narrows_the_domain():
    q = add_assert(blocks_of_four, "n % 4 == 0")
    assert "assert n % 4 == 0" in str(q) and proc_from_source(str(q)) == q
    # what it buys: a perfect divide
    with pytest.raises(SchedulingError):
        divide_loop(blocks_of_four, "i", 4, ["o", "v"], tail="perfect")
    r = divide_loop(q, "i", 4, ["o", "v"], tail="perfect")
    x = np.arange(8, dtype=np.float32)
    gpudsl.interpret(r, x=x)
    assert (x == 2 * np.arange(8)).all()
    with pytest.raises(gpudsl.InterpError, match="precondition"):
        gpudsl.interpret(q, x=np.zeros(6, np.float32))


def test_add_assert_of_an_implied_condition_changes_nothing():
    q = add_assert(blocks_of_four, "n % 4 == 0")
    assert add_assert(q, "n % 2 == 0") == q


@pytest.mark.parametrize("cond, words", [
    ("n % 4 == 1 and n % 2 == 0", "domain would be empty"),
    ("x[0] > 0.0", "reads the array 'x'"),
    ("n + 1", "must be a condition"),
    ("i > 0", "unknown name 'i'"),
])
def test_add_assert_refusals(cond, words):
    with pytest.raises(SchedulingError, match="add_assert") as e:
        add_assert(blocks_of_four, cond)
    assert words in str(e.value)


def test_a_staged_kernel_with_an_added_assert_proves():
    p = add_assert(blocks_of_four, "n % 256 == 0")
    p = divide_loop(p, "i", 256, ["b", "t"], tail="perfect")
    p = parallelize_loop(p, "b", BLOCKS)
    p = parallelize_loop(p, "t", THREADS)
    p = stage_mem(p, p.find_loop("t"), "x[256 * b:256 * b + 256]", "xs", SHARED)
    p = parallelize_loop(p, "xs_in0", THREADS)
    p = parallelize_loop(p, "xs_out0", THREADS)
    from gpudsl.schedule import insert_sync
    p = insert_sync(p, p.find_loop("t").before())
    p = insert_sync(p, p.find_loop("t").after())
    assert p.check().ok
