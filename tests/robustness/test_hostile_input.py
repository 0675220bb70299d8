"""Issue 12: hostile input gives gpudsl errors with locations, never a raw Python error."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, f32, i32, index, par, proc, proc_from_source, size
from gpudsl.errors import LaunchError, ProcError
from gpudsl.frontend.source import MAX_EXPR_DEPTH

NS = {k: getattr(gpudsl, k) for k in dir(gpudsl) if not k.startswith("_")}


def _deep(n):
    terms = " + ".join(f"x[{i % 8}]" for i in range(n))
    return f"""
def deep(x: f32[8], y: f32[8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            y[t] = {terms}
"""


@pytest.mark.parametrize("n", [300, 600, 5000])
def test_a_too_deep_expression_is_a_proc_error_at_the_expression(n):
    with pytest.raises(ProcError, match="nested more") as e:
        proc_from_source(_deep(n), NS, file="<deep>")
    assert e.value.loc is not None and e.value.loc.file == "<deep>"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_an_expression_just_inside_the_limit_runs_everywhere():
    n = MAX_EXPR_DEPTH - 2
    p = proc_from_source(_deep(n), NS)
    assert p.check().ok
    y = np.zeros(8, np.float32)
    p.interpret(x=np.ones(8, np.float32), y=y)
    y2 = np.zeros(8, np.float32)
    p.compile("emulator")(x=np.ones(8, np.float32), y=y2)
    assert y[0] == y2[0] == n


@pytest.mark.parametrize("text,kind", [
    ("def f(x: f32[8]):\n    x[0] = (1.0\n", "SyntaxError"),
    ("def f(x: f32[8]):\n\tif True:\n        x[0] = 1.0\n\tx[1] = 2.0\n", "TabError"),
    ("def f(x: f32[8]):\nx[0] = 1.0\n", "IndentationError"),
])
def test_proc_from_source_reports_python_syntax_errors_with_a_location(text, kind):
    with pytest.raises(ProcError, match=kind) as e:
        proc_from_source(text, NS, file="<bad>", first_line=10)
    assert e.value.loc is not None and e.value.loc.file == "<bad>" and e.value.loc.line >= 10


def test_proc_from_source_without_a_function_has_a_location():
    with pytest.raises(ProcError, match="no function definition") as e:
        proc_from_source("x = 1\n", NS, file="<nofn>")
    assert e.value.loc is not None


def test_proc_on_a_class_is_a_proc_error_at_the_class():
    with pytest.raises(ProcError, match="applies to a function") as e:
        @proc
        class K:  # noqa: F841
            pass
    assert e.value.loc is not None and e.value.loc.file == __file__


def test_proc_of_a_number_is_a_proc_error_at_the_call():
    with pytest.raises(ProcError, match="applies to a function") as e:
        proc(3)
    assert e.value.loc is not None and e.value.loc.file == __file__


@proc
def takes_index(n: size, k: index, x: f32[n]):
    assert n >= 8
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            x[t] = 1.0 * k


@proc
def takes_i32(n: size, k: i32, x: f32[n]):
    assert n >= 8
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            x[t] = 1.0 * k


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("v", [2 ** 63, -2 ** 63 - 1, 2 ** 64])
def test_an_index_argument_out_of_64_bits_is_a_launch_error(v):
    k = takes_index.compile("emulator")
    with pytest.raises(LaunchError, match="outside the 64-bit range") as e:
        k(k=v, x=np.zeros(8, np.float32))
    assert e.value.loc is not None


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_an_integer_scalar_out_of_its_type_is_a_launch_error():
    k = takes_i32.compile("emulator")
    with pytest.raises(LaunchError, match="does not fit in i32"):
        k(k=2 ** 31, x=np.zeros(8, np.float32))


@proc
def c_macro_names(M_PI: size, EOF: f32, x: f32[M_PI]):
    assert M_PI <= 1024
    for SIGINT in par(0, 1) @ BLOCKS:
        for INT_MAX in par(0, M_PI) @ THREADS:
            x[INT_MAX] = EOF + 1.0


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_names_that_are_c_macros_compile():
    k = c_macro_names.compile("emulator")
    x = np.zeros(8, np.float32)
    k(EOF=2.0, x=x)
    assert x.tolist() == [3.0] * 8
    assert "M_PI_" in k.source and "EOF_" in k.source


def test_plain_names_are_not_mangled():
    from gpudsl.codegen.cexpr import cname

    for n in ("x", "n", "N", "M", "K", "tile", "acc", "i0", "bi", "eps"):
        assert cname(n) == n
    for n in ("M_PI", "EOF", "INT_MAX", "SIGINT", "EINTR", "_Bool", "gpudsl_emu", "sin",
              "float4", "EPS_"):   # a name ending in _ too: escapes stay apart (issue 39)
        assert cname(n) == n + "_"


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_relu_propagates_nan():
    from gpudsl.stdlib import array_ops as ops

    a = np.array([np.nan, -1, 2, -0.0, np.inf, -np.inf, 0.5, -3], np.float32)
    out = ops.relu(a)
    np.testing.assert_array_equal(out, np.maximum(a, 0))  # NaN == NaN for this assert
    assert np.isnan(out[0])


_HUGE = """
def huge(n: size, x: f32[4]):
    assert n >= 4
    tmp: f32[{shape}] @ GLOBAL
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            tmp[t, 0, 0] = x[t]
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            x[t] = tmp[t, 0, 0] + 1.0
"""


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
@pytest.mark.parametrize("shape,n", [("1000000000000000000000000000 // n, 1, 1", 10), ("n, n, n", 10 ** 9),
                                     ("n, n, n", 2 ** 22)])
def test_a_temporary_no_machine_can_hold_is_a_launch_error_naming_its_size(shape, n):
    # issue 39: refused saying it needs "0 bytes" (64-bit products wrap) or a raw ValueError
    p = proc_from_source(_HUGE.format(shape=shape), NS)
    k = p.compile("emulator", check=False)
    with pytest.raises(LaunchError, match="GLOBAL array 'tmp'") as e:
        k(n=n, x=np.zeros(4, np.float32))
    nbytes = 4 * (10 ** 27 // n if n == 10 else n ** 3)
    assert f"{nbytes:,} bytes" in str(e.value)
