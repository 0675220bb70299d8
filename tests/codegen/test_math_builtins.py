"""Issue 40: sin, cos, erf, rsqrt and ``**``/pow in every evaluator.  The interpreter
(numpy, or C's erf in double rounded to the type) and the generated C (libm on the
emulator, CUDA's intrinsics on the GPU) agree within the documented 2 ulp (exactly on
NaN, infinities and signed zeros); NVRTC builds them for sm_80 and sm_90; check() treats
their values as unknown floats (a proc using them is proved as before)."""
from __future__ import annotations

import shutil

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import proc_from_source
from gpudsl.runtime.nvrtc import compile_cubin

NS = vars(gpudsl)
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
FUNCS = ["sin(x[i])", "cos(x[i])", "erf(x[i])", "rsqrt(y[i])", "x[i] ** 2.0",
         "pow(y[i], x[i])", "y[i] ** 0.5"]
EDGES = [0.0, -0.0, 0.5, -1.5, 3.0, np.inf, -np.inf, np.nan, 1e-30, 100.0, -7.25, 1e30]


def _proc(T: str):
    body = "\n".join(f"            o[{k}, i] = {f}" for k, f in enumerate(FUNCS))
    return proc_from_source(f"""
def math_fns(x: {T}[64], y: {T}[64], o: {T}[{len(FUNCS)}, 64]):
    for b in par(0, 1) @ BLOCKS:
        for i in par(0, 64) @ THREADS:
{body}
""", NS)


def _inputs(np_t, seed=40):
    rng = np.random.default_rng(seed)
    with np.errstate(over="ignore"):   # 1e30 is inf in the halves
        x = np.concatenate([EDGES, rng.normal(0, 4, 52)]).astype(np_t)
        y = np.concatenate([EDGES[::-1], np.abs(rng.normal(0, 100, 52))]).astype(np_t)
    return x, y


def _ulps(a, b, np_t):
    """Distance in units in the last place of type ``np_t`` (0 where both are the same
    NaN or the same infinity)."""
    a64, b64 = a.astype(np.float64), b.astype(np.float64)
    same = (a64 == b64) | (np.isnan(a64) & np.isnan(b64))
    with np.errstate(invalid="ignore", over="ignore"):   # inf - inf where they differ
        spacing = np.abs(np.spacing(np.maximum(np.abs(a64), np.abs(b64)).astype(np_t))
                         .astype(np.float64))
        d = np.abs(a64 - b64) / np.where(spacing > 0, spacing, 1)
    return np.where(same, 0, np.where(np.isnan(d), np.inf, d))


@needs_gxx
@pytest.mark.parametrize("T,np_t", [("f32", np.float32), ("f64", np.float64),
                                    ("f16", np.float16), ("bf16", ml_dtypes.bfloat16)])
def test_interpreter_and_generated_c_agree_within_two_ulp(T, np_t):
    p = _proc(T)
    assert p.check().ok
    x, y = _inputs(np_t)
    want = np.zeros((len(FUNCS), len(x)), np_t)
    p.interpret(x=x, y=y, o=want)
    got = np.zeros_like(want)
    p.compile("emulator")(x=x, y=y, o=got)
    for k, f in enumerate(FUNCS):
        u = _ulps(want[k], got[k], np_t)
        assert u.max() <= 2, (f, x[u.argmax()], y[u.argmax()], want[k][u.argmax()],
                              got[k][u.argmax()])
        # NaN where the interpreter has NaN; infinities and signed zeros exactly
        w, g = want[k].astype(np.float64), got[k].astype(np.float64)
        assert np.array_equal(np.isnan(w), np.isnan(g)), f
        exact = np.isinf(w) | (w == 0)
        assert np.array_equal(w[exact], g[exact]), f
        assert np.array_equal(np.signbit(w[exact]), np.signbit(g[exact])), f


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("T", ["f32", "f64", "f16", "bf16"])
def test_nvrtc_builds_them(T, arch):
    assert compile_cubin(_proc(T).cuda_source(), arch).cubin[:4] == b"\x7fELF"


def test_integer_powers_are_refused_with_a_hint():
    with pytest.raises(gpudsl.ProcError, match=r"'\*\*' is for floats") as e:
        proc_from_source("def f(n: size, x: i32[n]):\n    for i in seq(0, n):\n"
                         "        x[i] = x[i] ** 2\n", NS)
    assert "product" in str(e.value)


def test_powers_print_as_pow_and_parse_back():
    p = proc_from_source("def f(x: f32[2]):\n    x[0] = x[1] ** 3.0\n", NS)
    assert "pow(x[1], 3.0)" in str(p)
    assert str(proc_from_source(str(p), NS)) == str(p)
