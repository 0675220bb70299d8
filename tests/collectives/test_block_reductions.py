"""Issue 40: block reductions in one line (``gpudsl.stdlib.block_sum`` and co.): procs
called at block level on one value per thread, proved inlined, equal to numpy, the
emulator equal to the interpreter bit for bit (the same shuffle butterfly)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, REGISTER, THREADS, f32, f64, i32, i64, par, proc, size
from gpudsl.stdlib import block_argmax, block_max, block_min, block_sum, reduction


@proc
def row_stats(r: size, x: f32[r, 128], s: f32[r], lo: f32[r], hi: f32[r], am: i64[r]):
    for i in par(0, r) @ BLOCKS:
        v: f32[128] @ REGISTER
        ix: i64[128] @ REGISTER
        tot: f32[128] @ REGISTER
        mn: f32[128] @ REGISTER
        mx: f32[128] @ REGISTER
        bv: f32[128] @ REGISTER
        bi: i64[128] @ REGISTER
        for t in par(0, 128) @ THREADS:
            v[t] = x[i, t]
            ix[t] = t
        block_sum(128, v, tot)
        block_min(128, v, mn)
        block_max(128, v, mx)
        block_argmax(128, v, ix, bv, bi)
        for t in par(0, 128) @ THREADS:
            if t == 0:
                s[i] = tot[t]
                lo[i] = mn[t]
                hi[i] = mx[t]
                am[i] = bi[t]


def _data():
    rng = np.random.default_rng(4)
    x = rng.standard_normal((6, 128)).astype(np.float32)
    x[2, 7] = np.nan                   # numpy's argmax: the first NaN
    x[3, 10] = x[3, 90] = 50.0         # a tie: the first index
    x[4, 100] = x[4, 5] = np.nan
    return x


def _outs(r):
    return dict(s=np.zeros(r, np.float32), lo=np.zeros(r, np.float32),
                hi=np.zeros(r, np.float32), am=np.zeros(r, np.int64))


def test_one_line_reductions_prove_and_equal_numpy():
    assert row_stats.check().ok
    x = _data()
    out = _outs(6)
    gpudsl.interpret(row_stats, x=x, **out)
    np.testing.assert_array_equal(out["am"], np.argmax(x, axis=1))
    ok = ~np.isnan(x).any(axis=1)
    np.testing.assert_allclose(out["s"][ok], x[ok].sum(axis=1), rtol=1e-5, atol=1e-4)
    np.testing.assert_array_equal(out["hi"][ok], x[ok].max(axis=1))
    np.testing.assert_array_equal(out["lo"][ok], x[ok].min(axis=1))


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_emulator_equals_the_interpreter_bit_for_bit():
    x = _data()
    a, b = _outs(6), _outs(6)
    gpudsl.interpret(row_stats, x=x, **a)
    row_stats.compile("emulator")(x=x, **b)
    for k in a:
        assert np.array_equal(a[k], b[k], equal_nan=True), k


@pytest.mark.parametrize("T, np_t", [(f64, np.float64), (i32, np.int32), (i64, np.int64)])
def test_other_dtypes(T, np_t):
    red = reduction("sum", T)
    assert red.name == f"block_sum_{T.name}"

    def make(T, red):
        @proc
        def sums(r: size, x: T[r, 64], s: T[r]):
            for i in par(0, r) @ BLOCKS:
                v: T[64] @ REGISTER
                tot: T[64] @ REGISTER
                for t in par(0, 64) @ THREADS:
                    v[t] = x[i, t]
                red(64, v, tot)
                for t in par(0, 64) @ THREADS:
                    if t == 0:
                        s[i] = tot[t]
        return sums
    p = make(T, red)
    assert p.check().ok
    x = np.random.default_rng(1).integers(-50, 50, (3, 64)).astype(np_t)
    s = np.zeros(3, np_t)
    gpudsl.interpret(p, x=x, s=s)
    np.testing.assert_array_equal(s, x.sum(axis=1))


def test_a_thread_count_that_is_not_whole_warps_is_refused():
    @proc
    def ragged(x: f32[48], s: f32[1]):
        for i in par(0, 1) @ BLOCKS:
            v: f32[48] @ REGISTER
            tot: f32[48] @ REGISTER
            for t in par(0, 48) @ THREADS:
                v[t] = x[t]
            block_sum(48, v, tot)
            for t in par(0, 48) @ THREADS:
                if t == 0:
                    s[0] = tot[t]
    r = ragged.check()
    assert not r.ok and "n % 32 == 0" in str(r)
