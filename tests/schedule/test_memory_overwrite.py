"""stage_mem skips the copy-in of a window that the block's first loop overwrites."""
from __future__ import annotations

import numpy as np

import gpudsl
from gpudsl import REGISTER, f32, proc, seq, size
from gpudsl.ir.nodes import Assign
from gpudsl.ir.visitor import walk
from gpudsl.schedule import divide_loop, stage_mem


@proc
def scale(n: size, x: f32[n], y: f32[n]):
    assert n % 4 == 0
    for i in seq(0, n):
        y[i] = 2.0 * x[i]


@proc
def accumulate(n: size, x: f32[n], y: f32[n]):
    assert n % 4 == 0
    for i in seq(0, n):
        y[i] += x[i]


def _copies_from(p, buf):
    return [s for s in walk(p.ir.body) if isinstance(s, Assign)
            and any(getattr(r, "name", None) == buf for r in walk(s.rhs))
            and s.name.endswith("_r")]


def _staged(p):
    p = divide_loop(p, "i", 4, ["io", "v"], tail="perfect")
    return stage_mem(p, p.find_loop("v"), "y[4 * io:4 * io + 4]", "y_r", REGISTER)


def test_overwritten_window_is_not_copied_in():
    p = _staged(scale)
    assert not _copies_from(p, "y")
    x = np.random.rand(8).astype(np.float32)
    y = np.zeros(8, np.float32)
    gpudsl.interpret(p, x=x, y=y)
    np.testing.assert_allclose(y, 2 * x)


def test_window_read_before_written_is_copied_in():
    p = _staged(accumulate)
    assert _copies_from(p, "y")
    x = np.random.rand(8).astype(np.float32)
    y = np.ones(8, np.float32)
    gpudsl.interpret(p, x=x, y=y)
    np.testing.assert_allclose(y, 1 + x)
