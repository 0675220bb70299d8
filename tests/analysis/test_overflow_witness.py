"""Issue 40: a witness that exists only because a guard's fixed-width arithmetic wraps
(``begin[0] + 4 <= 64`` holds for ``begin[0]`` near the largest i64) says so, and the
hint shows the guard written without the overflow."""
from __future__ import annotations

from gpudsl import BLOCKS, THREADS, f32, i32, i64, par, proc


@proc
def window(begin: i64[1], x: f32[64, 8], y: f32[64, 8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            if begin[0] >= 0 and begin[0] + 4 <= 64:
                y[begin[0] + t, 0] = x[t, 0]


@proc
def window_fixed(begin: i64[1], x: f32[64, 8], y: f32[64, 8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            if begin[0] >= 0 and begin[0] <= 60:
                y[begin[0] + t, 0] = x[t, 0]


@proc
def offset32(k: i32, x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if k >= 0 and k + 32 <= 64:
                x[k + t] = 1.0


@proc
def plain_miss(begin: i64[1], y: f32[64, 8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            if begin[0] >= 0:
                y[begin[0] + t, 0] = 1.0


def test_the_wrapped_guard_is_named_with_the_guard_to_write():
    d = window.check().diagnostics[0]
    assert d.kind == "bounds"
    assert "`begin[0] + 4` overflows i64" in d.message
    assert "wraps to -9223372036854775808, so the guard holds" in d.message
    assert "`begin[0] <= 60`" in d.hint
    assert "overflows i64" in str(window.check())


def test_the_guard_written_without_overflow_proves():
    assert window_fixed.check().ok


def test_i32_arithmetic_too():
    d = offset32.check().diagnostics[0]
    assert "`k + 32` overflows i32" in d.message and "`k <= 32`" in d.hint


def test_no_overflow_no_note():
    d = plain_miss.check().diagnostics[0]
    assert d.kind == "bounds" and "overflow" not in d.message
    assert d.hint.startswith("guard the access")
