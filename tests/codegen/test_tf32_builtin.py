"""``tf32(x)``: an f32 read as TF32 (its low 13 mantissa bits cleared) in every layer:
parser and printer, check(), the interpreter, generated C (emulator, NVRTC)."""
from __future__ import annotations

import shutil

import numpy as np
import pytest

import gpudsl
from gpudsl import proc_from_source
from gpudsl.ir.wgmma_meaning import tf32_truncate
from gpudsl.runtime.nvrtc import compile_cubin

NS = vars(gpudsl)
SRC = """
def to_tf32(n: size, x: f32[n], y: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            for i in seq(0, n):
                if i % 64 == t:
                    y[i] = tf32(x[i]) * tf32(3.0) + tf32(x[i] * 0.1)
"""
EDGES = [0.0, -0.0, 1 + 2 ** -10, 1 + 2 ** -11, -(1 + 2 ** -12), np.inf, -np.inf, np.nan,
         1e-40, 3.4e38, 0.1, -7.25]


def _inputs():
    rng = np.random.default_rng(5)
    return np.concatenate([EDGES, rng.normal(0, 50, 116)]).astype(np.float32)


def _want(x):
    with np.errstate(over="ignore", invalid="ignore"):
        return tf32_truncate(x) * np.float32(3.0) + tf32_truncate(x * np.float32(0.1))


def test_the_interpreter_truncates_as_tf32_truncate():
    p = proc_from_source(SRC, NS)
    assert p.check().ok
    x = _inputs()
    y = np.zeros_like(x)
    with np.errstate(over="ignore", invalid="ignore"):
        p.interpret(x=x, y=y)
    np.testing.assert_array_equal(y, _want(x))
    assert tf32_truncate(np.float32(1 + 2 ** -11)) == 1.0   # dropped, not rounded


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_the_emulator_equals_the_interpreter_bit_for_bit():
    p = proc_from_source(SRC, NS)
    x = _inputs()
    y = np.zeros_like(x)
    p.compile("emulator")(x=x, y=y)
    w = _want(x)
    assert np.array_equal(y.view(np.uint32)[~np.isnan(w)], w.view(np.uint32)[~np.isnan(w)])
    assert np.isnan(y[np.isnan(w)]).all()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90a"])
def test_nvrtc_builds_it(arch):
    src = proc_from_source(SRC, NS).cuda_source()
    assert "gpudsl_tf32(" in src and "0xffffe000u" in src
    assert compile_cubin(src, arch).cubin[:4] == b"\x7fELF"


def test_it_prints_and_parses_back():
    p = proc_from_source(SRC, NS)
    assert "tf32(x[i])" in str(p)
    assert str(proc_from_source(str(p), NS)) == str(p)


def test_a_non_f32_argument_is_refused_with_a_hint():
    with pytest.raises(gpudsl.ProcError, match=r"tf32\(\) reads an f32, got f16") as e:
        proc_from_source("def f(x: f16[2], y: f32[2]):\n    y[0] = tf32(x[0])\n", NS)
    assert "tf32(f32(" in str(e.value)


def test_it_is_not_counted_as_a_flop():
    """A GEMM's tf32 algorithm has the f32 one's 2 flops per product (the truncation is a
    mask of the operand's bits)."""
    from gpudsl.perf.counts import flops_of
    p = proc_from_source("def f(x: f32[2], y: f32[2]):\n    y[0] += tf32(x[0]) * tf32(x[1])\n",
                         NS)
    (st,) = p.ir.body
    assert flops_of(st.rhs) == 1
