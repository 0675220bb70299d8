"""A written window past the array's edge (issue 36): ``stage_mem`` copies it out under
the array's bounds, and ``make_tma_store`` takes that guarded copy as a clipped box after
proving the guard holds exactly inside the array; the refusal twins of each rule."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.ir.types import SHARED, THREADS
from gpudsl.schedule import (divide_loop, insert_sync, make_tma_store, parallelize_loop,
                             stage_mem)

EDGE = '''
@proc
def scale(m: size, x: f32[m, 32], y: f32[m, 32]):
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m:
                    y[16 * b + r, t] = 2.0 * x[16 * b + r, t]
'''


def _staged(src=EDGE):
    p = gpudsl.proc_from_source(src)
    return stage_mem(p, p.find_loop("t"), "y[16 * b:16 * b + 16, 0:32]", "s", SHARED)


def _one_thread(p):
    p = divide_loop(p, "s_out0", 16, ["s_o", "s_r"], tail="perfect")
    p = parallelize_loop(p, "s_o", THREADS)
    return insert_sync(p, p.find_loop("s_o").before())


def _run(p, m, seed=0):
    x = np.random.default_rng(seed).integers(-4, 5, (m, 32)).astype(np.float32)
    y = np.full_like(x, 7.0)
    p.compile("emulator")(x=x, y=y)
    return x, y


def test_stage_mem_copies_a_written_window_past_the_edge_out_under_the_bounds():
    """The compute's writes stay guarded; the copy out writes only rows inside; no copy
    in (every element the copy out reads was written by the block)."""
    p = _staged()
    text = str(p)
    assert "if 16 * b + r < m:\n                    s[r, t] = " in text
    assert "if 16 * b + s_out0 < m:\n                    y[16 * b + s_out0, s_out1] = " \
           "s[s_out0, s_out1]" in text
    assert "s_in0" not in text
    p = _one_thread(p)
    for m in (1, 17, 40):
        x, y = _run(p, m)
        assert (y == 2 * x).all()


def test_stage_mem_fills_the_tile_first_where_the_block_leaves_an_inside_element():
    """The block skips the array's last row: the copy out would write garbage there, so the
    tile is first filled from the array (guarded too) and the row keeps its value."""
    p = _staged(EDGE.replace("if 16 * b + r < m:", "if 16 * b + r < m - 1:"))
    assert "s_in0" in str(p)
    p = parallelize_loop(p, "s_in0", THREADS)    # one thread a row, either way
    p = insert_sync(p, p.find_loop("t").before())
    p = insert_sync(p, p.find_loop("t").after())
    p = parallelize_loop(p, "s_out0", THREADS)
    for m in (1, 17, 40):
        x, y = _run(p, m)
        assert (y[:m - 1] == 2 * x[:m - 1]).all() and (y[m - 1] == 7.0).all()


def test_make_tma_store_takes_the_guarded_copy_out_as_a_clipped_box():
    q = make_tma_store(_one_thread(_staged()), "s_o")
    text = str(q)
    assert "tma_store(y[16 * b:16 * b + 16, 0:32], s[0:16, 0:32])" in text
    assert "if 16 * b" not in text.split("sync()")[-1]
    assert q.check(target="sm_90a").ok
    for m in (1, 16, 17, 40):
        x, y = _run(q, m)
        assert (y == 2 * x).all()


@pytest.mark.parametrize("old, new", [
    # the guard drops the last row inside the array: the box would write it
    ("if 16 * b + 16 * s_o + s_r < m:", "if 16 * b + 16 * s_o + s_r < m - 1:"),
    # the guard ignores the columns (always true here), but drops an inside column
    ("if 16 * b + 16 * s_o + s_r < m:", "if 16 * b + 16 * s_o + s_r < m and s_out1 < 31:"),
])
def test_make_tma_store_refuses_a_guard_that_is_not_exactly_inside(old, new):
    text = str(_one_thread(_staged())).replace(old, new)
    assert new in text
    with pytest.raises(gpudsl.SchedulingError, match="holds exactly where it writes inside"):
        make_tma_store(gpudsl.proc_from_source(text), "s_o")


def test_make_tma_store_refuses_a_guarded_copy_with_an_else():
    text = str(_one_thread(_staged())).replace(
        "y[16 * b + 16 * s_o + s_r, s_out1] = s[16 * s_o + s_r, s_out1]",
        "y[16 * b + 16 * s_o + s_r, s_out1] = s[16 * s_o + s_r, s_out1]\n"
        "                    else:\n                        s[16 * s_o + s_r, s_out1] = 0.0")
    with pytest.raises(gpudsl.SchedulingError, match="not a nest of seq loops"):
        make_tma_store(gpudsl.proc_from_source(text), "s_o")
