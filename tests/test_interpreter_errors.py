"""Run-time faults and bad arguments: InterpError naming the file and line."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from gpudsl import (BLOCKS, SHARED, THREADS, InterpError, f32, f64, i32, index, interpret,
                    par, proc, seq, size)  # noqa: F401

FILE = inspect.getsourcefile(lambda: None)
_LINES = open(FILE).read().splitlines()


def line_of(marker: str) -> int:
    hits = [k + 1 for k, text in enumerate(_LINES) if text.rstrip().endswith("# " + marker)]
    assert len(hits) == 1, marker
    return hits[0]


def expect(p, marker, *words, **args):
    with pytest.raises(InterpError) as info:
        interpret(p, **args)
    msg = str(info.value)
    if marker:
        assert f"{FILE}:{line_of(marker)}:" in msg, msg
    for w in words:
        assert w in msg, msg
    return msg


@proc
def shift_left(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = x[i - 1]  # e1


@proc
def two_d(n: size, m: size, x: f32[n, m]):
    for i in seq(0, n):
        for j in seq(0, m + 1):
            x[i, j] = 0.0  # e2


@proc
def with_asserts(n: size, k: index, x: f32[n]):
    assert n % 4 == 0  # e3
    assert k >= 0 and k < n  # e4
    x[k] = 1.0


@proc
def divide(n: size, k: index, q: i32[n]):
    for i in seq(0, n):
        q[i] = i // k  # e5


@proc
def sub4(w: [f32][4] @ SHARED):
    for i in seq(0, 4):
        w[i] = 0.0


@proc
def bad_window(n: size):
    for b in par(0, n) @ BLOCKS:
        s: f32[8] @ SHARED
        for t in par(0, 2) @ THREADS:
            sub4(s[4 * t + 2:4 * t + 6])  # e6


@proc
def sub_n(m: size, w: [f32][m] @ SHARED):
    assert m % 2 == 0  # e7a
    for i in seq(0, m):
        w[i] = 0.0


@proc
def callee_assert(n: size):
    for b in par(0, n) @ BLOCKS:
        s: f32[8] @ SHARED
        sub_n(3, s[0:3])  # e7


@proc
def affine_shape(sz: size, x: f32[100 * sz + 64], y: f32[sz]):
    for i in seq(0, sz):
        y[i] = x[100 * i + 64]


@proc
def floor_shape(n: size, x: f32[n // 64]):
    pass


@proc
def uninitialised(n: size, y: f32[n]):
    tmp: f32[n]
    for i in seq(0, n):
        if i % 2 == 0:
            tmp[i] = 1.0
    for i in seq(0, n):
        y[i] = tmp[i]


@proc
def per_block_shared(y: f32[4]):
    for b in par(0, 4) @ BLOCKS:
        s: f32[1] @ SHARED
        if b == 0:
            s[0] = 5.0
        y[b] = s[0]


@proc
def float_to_int(n: size, x: f32[n], q: i32[n]):
    for i in seq(0, n):
        q[i] = i32(x[i])


def test_out_of_bounds_never_wraps_around():
    msg = expect(shift_left, "e1", "out-of-bounds read of x[-1]", "index 0 is -1",
                 x=np.ones(4, np.float32), y=np.zeros(4, np.float32))
    assert "x[i - 1]" in msg


def test_out_of_bounds_write_in_the_last_dimension():
    x = np.ones((2, 3), np.float32)
    expect(two_d, "e2", "out-of-bounds write of x[0, 3]", "index 1 is 3", "shape (2, 3)", x=x)
    assert x[0].tolist() == [0, 0, 0] and x[1].tolist() == [1, 1, 1]  # ran until the fault


def test_failed_asserts_name_their_line_and_run_nothing():
    x = np.zeros(6, np.float32)
    expect(with_asserts, "e3", "n % 4 == 0", "n=6", k=0, x=x)
    x = np.zeros(8, np.float32)
    expect(with_asserts, "e4", "k=8", k=8, x=x)
    expect(with_asserts, "e4", k=-1, x=x)
    assert not x.any()
    interpret(with_asserts, k=7, x=x)
    assert x[7] == 1


def test_division_by_zero_names_the_statement():
    expect(divide, "e5", "division or modulo by zero", k=0, q=np.zeros(3, np.int32))
    q = np.zeros(3, np.int32)
    interpret(divide, k=-2, q=q)
    np.testing.assert_array_equal(q, [0, -1, -1])


def test_windows_outside_their_array():
    expect(bad_window, "e6", "window s[6:10]", "outside s", n=1)


def test_callee_preconditions_are_checked_at_the_call():
    msg = expect(callee_assert, "e7", "assert m % 2 == 0", "m=3", n=1)
    assert f"{FILE}:{line_of('e7a')}" in msg


def test_size_inference():
    x = np.arange(364, dtype=np.float32)
    y = np.zeros(3, np.float32)
    interpret(affine_shape, x=x, y=y)  # sz = 3 solved from 100 * sz + 64 = 364
    np.testing.assert_array_equal(y, [64, 164, 264])
    expect(affine_shape, None, "shape", x=np.zeros(365, np.float32), y=y)
    expect(floor_shape, None, "cannot be inferred", "pass n=", x=np.zeros(2, np.float32))
    interpret(floor_shape, n=128, x=np.zeros(2, np.float32))
    expect(floor_shape, None, "must have shape", "n=64", n=64, x=np.zeros(2, np.float32))


def test_argument_checks():
    x4 = np.zeros(4, np.float32)
    expect(shift_left, None, "dtype is float64", x=np.zeros(4), y=x4)
    expect(shift_left, None, "must have shape", x=np.zeros(5, np.float32), y=x4)
    expect(shift_left, None, "has no parameter 'z'", x=x4, y=x4.copy(), z=1)
    expect(shift_left, None, "missing array argument 'y'", x=x4)
    expect(shift_left, None, "1 dimension(s), the array has 2", x=x4, y=np.zeros((2, 2),
                                                                                  np.float32))
    expect(shift_left, None, "must be a numpy array", x=[0.0] * 4, y=x4)
    expect(shift_left, None, "overlap", x=x4, y=x4)
    expect(with_asserts, None, "index 'k' of with_asserts is not given", x=x4)
    expect(with_asserts, None, "must be an integer", k=1.5, x=x4)
    expect(shift_left, None, "must be positive", x=np.zeros(0, np.float32),
           y=np.zeros(0, np.float32))
    expect(divide, None, "must have shape", n=5, k=1, q=np.zeros(3, np.int32))


def test_fresh_float_memory_is_nan():
    y = np.zeros(4, np.float32)
    interpret(uninitialised, y=y)
    assert y[0] == 1 and y[2] == 1 and np.isnan(y[1]) and np.isnan(y[3])


def test_shared_memory_is_one_per_block():
    y = np.zeros(4, np.float32)
    interpret(per_block_shared, y=y)
    assert y[0] == 5 and np.isnan(y[1:]).all()


def test_float_to_int_casts_saturate_and_nan_is_zero():
    # issue 39: no longer a fault, the GPU's conversion (cvt.rzi) everywhere
    q = np.zeros(5, np.int32)
    interpret(float_to_int, x=np.array([-1.5, np.nan, 3e9, -np.inf, np.inf], np.float32), q=q)
    assert q.tolist() == [-1, 0, 2 ** 31 - 1, -2 ** 31, 2 ** 31 - 1]


def test_interpret_needs_a_proc():
    with pytest.raises(InterpError):
        interpret(lambda: None)
