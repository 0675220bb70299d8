"""Issue 25: stage_mem stages a window with a stepped range (``lo:hi:step``), the
coalescing-friendly thread layout of a register fragment (``As[ti:ti + 49:16, ki]``):
an access is covered only where it is proved on the step; the rest is refused or left
alone as for other windows. Each accepted form keeps the interpreter's result, prints
and parses back, and check() still proves it."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, REGISTER, THREADS, f32, par, proc, proc_from_source, seq
from gpudsl.schedule import stage_mem


@proc
def frag(A: f32[64, 8], y: f32[16, 8]):
    for b in par(0, 1) @ BLOCKS:
        for ti in par(0, 16) @ THREADS:
            for ki in seq(0, 8):
                y[ti, ki] = A[ti, ki] + A[ti + 16, ki] + A[ti + 32, ki] + 2.0 * A[ti + 48, ki]


@proc
def off_stride(A: f32[64, 8], y: f32[16, 8]):
    for b in par(0, 1) @ BLOCKS:
        for ti in par(0, 16) @ THREADS:
            for ki in seq(0, 8):
                y[ti, ki] = A[ti, ki] + A[ti + 8, ki]


@proc
def scale_rows(A: f32[64, 8]):
    for b in par(0, 1) @ BLOCKS:
        for ti in par(0, 16) @ THREADS:
            for k in seq(0, 4):
                A[ti + 16 * k, 0] = 2.0 * A[ti + 16 * k, 0]


def _same(p, q, seed=0):
    rng = np.random.default_rng(seed)
    args = {prm.name: rng.integers(-4, 4, tuple(int(x.val) for x in prm.shape)).astype(
        np.float32) for prm in p.ir.params}
    a1 = {k: v.copy() for k, v in args.items()}
    a2 = {k: v.copy() for k, v in args.items()}
    gpudsl.interpret(p, **a1)
    gpudsl.interpret(q, **a2)
    for k in a1:
        np.testing.assert_array_equal(a1[k], a2[k])


def _accepted(p, q):
    _same(p, q)
    assert proc_from_source(str(q)) == q
    assert q.check().ok


def test_a_strided_register_fragment():
    q = stage_mem(frag, frag.find("y[_] = _"), "A[ti:ti + 49:16, ki]", "a_frag", REGISTER)
    text = str(q)
    assert "a_frag: f32[4] @ REGISTER" in text
    assert "a_frag[a_frag_in0] = A[ti + 16 * a_frag_in0, ki]" in text
    assert "a_frag[0] + a_frag[1] + a_frag[2] + 2.0 * a_frag[3]" in text
    _accepted(frag, q)


def test_accesses_off_the_step_are_not_covered():
    with pytest.raises(gpudsl.SchedulingError, match="misses"):
        stage_mem(off_stride, off_stride.find("y[_] = _"), "A[ti + 4:ti + 49:16, ki]",
                  "a_frag", REGISTER)
    # read-only accesses off the step are left alone
    q = stage_mem(off_stride, off_stride.find("y[_] = _"), "A[ti:ti + 49:16, ki]",
                  "a_frag", REGISTER)
    assert "A[ti + 8, ki]" in str(q) and "a_frag[0]" in str(q)
    _accepted(off_stride, q)


def test_a_written_strided_window_is_copied_back():
    q = stage_mem(scale_rows, scale_rows.find_loop("k"), "A[ti:ti + 64:16, 0]", "r",
                  REGISTER)
    text = str(q)
    assert "r: f32[4] @ REGISTER" in text and "A[ti + 16 * r_out0, 0] = r[r_out0]" in text
    _accepted(scale_rows, q)


def test_a_bad_step_is_refused():
    block = frag.find("y[_] = _")
    for window, words in (("A[ti:ti + 49:0, ki]", "positive integer literal"),
                          ("A[ti:ti + 49:ti, ki]", "positive integer literal"),
                          ("A[ti + 1:ti + 49:16, ki]", "misses")):
        with pytest.raises(gpudsl.SchedulingError, match=words):
            stage_mem(frag, block, window, "a_frag", REGISTER)
