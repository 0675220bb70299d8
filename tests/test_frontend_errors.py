"""Bad procs: each raises gpudsl.ProcError naming the file and the right line.

Every bad proc marks its offending line with a trailing ``# ERR`` comment; the
test finds that line in this file and checks that the error names it.
"""
from __future__ import annotations

import inspect

import pytest

from gpudsl import (BLOCKS, GLOBAL, REGISTER, SHARED, THREADS, ProcError, f32, f64, i32,
                    index, par, proc, seq, size, sync)  # noqa: F401

FILE = inspect.getsourcefile(lambda: None)


def _expect_error(build, *words):
    """Run ``build`` (which defines a bad proc) and check the ProcError."""
    lines, first = inspect.getsourcelines(build)
    marked = [first + k for k, text in enumerate(lines) if "# ERR" in text]
    assert len(marked) == 1, "each bad proc marks exactly one line"
    with pytest.raises(ProcError) as info:
        build()
    msg = str(info.value)
    assert f"{FILE}:{marked[0]}:" in msg, msg
    assert info.value.loc.line == marked[0]
    for w in words:
        assert w in msg, msg
    # The message quotes the source line and says what to do.
    assert "hint:" in msg or "\n    " in msg
    return msg


@proc
def sub2(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = x[i]


@proc
def shared_sub(w: [f32][16] @ SHARED):
    for i in seq(0, 16):
        w[i] = 0.0


def test_index_into_a_float():
    def build():
        @proc
        def p(n: size, a: f32, y: f32[n]):
            for i in seq(0, n):
                y[i] = a[0]  # ERR
    _expect_error(build, "cannot be indexed")


def test_wrong_number_of_indices():
    def build():
        @proc
        def p(n: size, x: f32[n], y: f32[n]):
            for i in seq(0, n):
                y[i] = x[i, 0]  # ERR
    _expect_error(build, "1 dimension(s) but 2 index(es)")


def test_unknown_name():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            for i in seq(0, n):
                y[i] = zz  # ERR # noqa: F821
    _expect_error(build, "unknown name 'zz'")


def test_undeclared_size_in_shape():
    def build():
        @proc
        def p(n: size, x: f32[m]):  # ERR # noqa: F821
            pass
    _expect_error(build, "'m'", "not declared")


def test_unknown_memory():
    def build():
        @proc
        def p(n: size):
            for b in par(0, n) @ BLOCKS:
                s: f32[4] @ TEXTURE  # ERR # noqa: F821
    _expect_error(build, "unknown memory 'TEXTURE'")


def test_unknown_loop_annotation():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            for i in par(0, n) @ WARPS:  # ERR # noqa: F821
                y[i] = 0.0
    _expect_error(build, "unknown loop annotation 'WARPS'")


def test_return():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            y[0] = 1.0
            return y  # ERR
    _expect_error(build, "'return' is not allowed")


def test_while():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            while n > 0:  # ERR
                pass
    _expect_error(build, "'while' loops are not allowed")


def test_assign_to_a_size():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            n = 3  # ERR
    _expect_error(build, "'n' is a size parameter and cannot be assigned")


def test_true_division_on_integers():
    def build():
        @proc
        def p(n: size, y: i32[n]):
            for i in seq(0, n):
                y[i] = i / 2  # ERR
    _expect_error(build, "'/' on integers", "//")


def test_mixing_f32_and_f64():
    def build():
        @proc
        def p(n: size, x: f32[n], z: f64[n], y: f32[n]):
            for i in seq(0, n):
                y[i] = x[i] + z[i]  # ERR
    _expect_error(build, "mixes f32 and f64")


def test_storing_f64_into_f32_needs_a_cast():
    def build():
        @proc
        def p(n: size, z: f64[n], y: f32[n]):
            for i in seq(0, n):
                y[i] = z[i]  # ERR
    _expect_error(build, "f64 value cannot be stored in 'y'", "f32(...)")


def test_bad_call_arity():
    def build():
        @proc
        def p(n: size, x: f32[n]):
            sub2(n, x)  # ERR
    _expect_error(build, "sub2 takes 3 argument(s)")


def test_window_of_the_wrong_memory():
    def build():
        @proc
        def p(x: f32[16]):
            shared_sub(x[0:16])  # ERR
    _expect_error(build, "SHARED memory", "GLOBAL")


def test_shadowing():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            for n in seq(0, 4):  # ERR
                pass
    _expect_error(build, "'n' is already defined", "shadowing")


def test_assert_after_statements():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            y[0] = 0.0
            assert n > 4  # ERR
    _expect_error(build, "asserts (preconditions) must come first")


def test_float_index():
    def build():
        @proc
        def p(n: size, a: f32, y: f32[n]):
            y[a] = 1.0  # ERR
    _expect_error(build, "an index of 'y' must be an integer")


def test_bitwise_on_floats():
    def build():
        @proc
        def p(n: size, x: f32[n], y: f32[n]):
            for i in seq(0, n):
                y[i] = x[i] & 1  # ERR
    _expect_error(build, "'&' is for integers")


def test_unknown_callee():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            nosuchproc(n, y)  # ERR # noqa: F821
    _expect_error(build, "unknown proc 'nosuchproc'")


def test_atomic_on_a_register_array():
    def build():
        @proc
        def p(n: size):
            for b in par(0, n) @ BLOCKS:
                r: f32[4] @ REGISTER
                for t in par(0, 4) @ THREADS:
                    atomic_add(r[t], 1.0)  # ERR # noqa: F821
    _expect_error(build, "GLOBAL or SHARED")


def test_window_extent_mismatch():
    def build():
        @proc
        def p(s: f32[32] @ SHARED):
            shared_sub(s[0:8])  # ERR
    _expect_error(build, "extent 16", "extent 8")


def test_break():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            for i in seq(0, n):
                break  # ERR
    _expect_error(build, "'break' is not allowed")


def test_parameter_without_type():
    def build():
        @proc
        def p(n: size, y):  # ERR
            pass
    _expect_error(build, "needs a type")


def test_assign_to_whole_array():
    def build():
        @proc
        def p(n: size, y: f32[n]):
            y = 0.0  # ERR
    _expect_error(build, "'y' is an array")


def test_sync_with_arguments():
    def build():
        @proc
        def p(n: size):
            for b in par(0, n) @ BLOCKS:
                sync(1)  # ERR
    _expect_error(build, "sync() takes no arguments (the whole block) or a thread range")


def test_store_float_into_int_needs_a_cast():
    def build():
        @proc
        def p(n: size, x: f32[n], y: i32[n]):
            for i in seq(0, n):
                y[i] = x[i]  # ERR
    _expect_error(build, "cannot be stored in 'y'", "i32(...)")


def test_builtin_arity():
    def build():
        @proc
        def p(n: size, x: f32[n], y: f32[n]):
            for i in seq(0, n):
                y[i] = max(x[i])  # ERR
    _expect_error(build, "max() takes 2 argument(s)")


def test_condition_must_be_boolean():
    def build():
        @proc
        def p(n: size, x: f32[n]):
            for i in seq(0, n):
                if x[i]:  # ERR
                    x[i] = 0.0
    _expect_error(build, "must be a condition")
