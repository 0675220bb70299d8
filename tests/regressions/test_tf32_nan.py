"""``tf32(x)`` keeps a NaN a NaN (the tensor cores read a NaN operand as a NaN): a NaN
whose payload lies only in the 13 low mantissa bits (bits ``0x7f800001``) turned into
+inf when those bits were cleared, silently wrong.  Through the rule itself, the
interpreter, the emulator (the builtin's helper, the wgmma and mma.sync fallbacks) and
the ops TF32 path."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import gpudsl
from gpudsl import ops, proc_from_source
from gpudsl.ir.wgmma_meaning import tf32_truncate

NS = vars(gpudsl)
LOW_NANS = np.array([0x7f800001, 0xff800001, 0x7f801fff, 0x7fc00000, 0x7f800000, 0x3f800001],
                    np.uint32).view(np.float32)   # low-payload NaNs, a quiet NaN, +inf, 1+ulp
SRC = """
def to_tf32(n: size, x: f32[n], y: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, n):
                if i % 64 == t:
                    y[i] = tf32(x[i])
"""
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def _same_class(got, x):
    """NaN where x is NaN; elsewhere x's low 13 bits cleared."""
    nan = np.isnan(x)
    assert np.isnan(got[nan]).all(), got[nan].view(np.uint32)
    want = (x[~nan].view(np.uint32) & np.uint32(0xFFFFE000)).view(np.float32)
    np.testing.assert_array_equal(got[~nan], want)


def test_the_rule_keeps_nans_and_is_idempotent():
    got = tf32_truncate(LOW_NANS)
    _same_class(got, LOW_NANS)
    assert np.isnan(tf32_truncate(np.float32(LOW_NANS[0])))
    assert (tf32_truncate(got).view(np.uint32) == got.view(np.uint32)).all()
    assert (got.view(np.uint32) & np.uint32(0x1FFF) == 0).all()   # a tf32 value
    assert (np.signbit(got) == np.signbit(LOW_NANS)).all()


def test_the_interpreter_keeps_nans():
    p = proc_from_source(SRC, NS)
    y = np.zeros_like(LOW_NANS)
    p.interpret(x=LOW_NANS.copy(), y=y)
    _same_class(y, LOW_NANS)


@needs_gxx
def test_the_emulator_keeps_nans_bit_for_bit_as_the_interpreter():
    p = proc_from_source(SRC, NS)
    y = np.zeros_like(LOW_NANS)
    p.compile("emulator")(x=LOW_NANS.copy(), y=y)
    _same_class(y, LOW_NANS)
    assert (y.view(np.uint32) == tf32_truncate(LOW_NANS).view(np.uint32)).all()


def _nan_operands(m, n, k):
    a = np.ones((m, k), np.float32)
    bt = np.ones((n, k), np.float32)
    a[3, 5] = np.uint32(0x7f800001).view(np.float32)   # a low-payload NaN
    return a, bt


@needs_gxx
def test_the_tf32_wgmma_fallback_keeps_nans():
    from gpudsl.stdlib.matmul_sm90_tf32 import sm90_tf32_kernel

    a, bt = _nan_operands(64, 64, 32)
    c = np.zeros((64, 64), np.float32)
    sm90_tf32_kernel(bn=64, wgs=1, bk=32, stages=2).compile("emulator")(a=a, bt=bt, c=c)
    assert np.isnan(c[3]).all()             # +inf * 1 summed would be +inf
    assert (np.delete(c, 3, axis=0) == 32).all()


@needs_gxx
@pytest.mark.parametrize("async_stages", [None, 2], ids=["rounded-tiles", "async-unrounded"])
def test_ops_matmul_tf32_keeps_nans(async_stages):
    """The mma.sync TF32 kernel: its staged tiles rounded (cvt.rn keeps NaNs) or, with
    async copies, unrounded, read as tf32 by the mma's CPU body."""
    a, bt = _nan_operands(128, 128, 64)
    opts = {"async_stages": async_stages} if async_stages else {}
    c = ops.matmul(a, np.ascontiguousarray(bt.T), precision="tf32", **opts)
    assert np.isnan(c[3]).all()
    assert (np.delete(c, 3, axis=0) == 64).all()
