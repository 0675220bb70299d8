"""Issue 40: Python constants and generic procs (``gpudsl.constexpr``; closure variables of a
proc factory), ``inf``/``nan`` literals that print and parse back."""
from __future__ import annotations

import math
import shutil

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, THREADS, bf16, constexpr, f16, f32, inf, nan, par, proc,
                    proc_from_source, seq, size)

BLOCK = constexpr(32)
NEG: constexpr = -3e38
PLAIN = 7
NS = vars(gpudsl)


@proc
def floor_at(n: size, x: f32[n]):
    assert n % BLOCK == 0
    for b in par(0, n // BLOCK) @ BLOCKS:
        for t in par(0, BLOCK) @ THREADS:
            x[BLOCK * b + t] = max(x[BLOCK * b + t], NEG)


def scaled(T, W):
    @proc
    def scale(n: size, a: T, x: T[n]):
        assert n % W == 0
        for b in par(0, n // W) @ BLOCKS:
            for t in par(0, W) @ THREADS:
                x[W * b + t] = a * x[W * b + t] + T(1.0)
    return scale


def test_declared_globals_are_constants_of_the_proc():
    text = str(floor_at)
    assert "n % 32 == 0" in text and "par(0, n // 32)" in text and "-3e+38" in text
    assert floor_at.check().ok
    x = np.array([-np.inf, 2.0] * 16, np.float32)
    floor_at.interpret(x=x)
    assert x[0] == np.float32(-3e38) and x[1] == 2.0


@pytest.mark.parametrize("T,np_t", [(f32, np.float32), (f16, np.float16)])
def test_a_factory_makes_one_proc_per_dtype(T, np_t):
    p = scaled(T, 16)
    assert f"x: {T.name}[n]" in str(p) and f"a: {T.name}" in str(p)
    assert p.check().ok
    x = np.ones(32, np_t)
    p.interpret(a=2.0, x=x)
    assert x.dtype == np_t and (x == 3).all()


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_a_generic_proc_runs_on_the_emulator():
    x = np.arange(32, dtype=np.float32)
    scaled(f32, 16).compile("emulator")(a=0.5, x=x)
    assert np.array_equal(x, np.arange(32, dtype=np.float32) * 0.5 + 1)


def test_a_plain_global_is_refused_with_how_to_declare_it():
    with pytest.raises(gpudsl.ProcError, match="unknown name 'PLAIN'") as e:
        @proc
        def uses_plain(x: f32[1]):
            x[0] = f32(PLAIN)
    assert "gpudsl.constexpr(7)" in str(e.value)


def test_an_unknown_name_hint_mentions_constants():
    with pytest.raises(gpudsl.ProcError, match="unknown name 'NOWHERE'") as e:
        proc_from_source("def f(x: f32[1]):\n    x[0] = NOWHERE\n", NS)
    assert "constexpr" in str(e.value)


def test_a_constant_names_no_value_it_cannot_hold():
    with pytest.raises(gpudsl.ProcError, match="not a number or a bool"):
        proc_from_source("def f(x: f32[1]):\n    x[0] = T\n", dict(NS, T=constexpr(bf16)))


def test_module_attributes_and_infinities_print_and_parse_back():
    @proc
    def edges(x: f32[4]):
        x[0] = inf
        x[1] = -inf
        x[2] = nan
        x[3] = math.pi

    text = str(edges)
    assert "x[0] = inf" in text and "x[1] = -inf" in text and "x[2] = nan" in text
    again = proc_from_source(text, NS)
    assert str(again) == text
    x = np.zeros(4, np.float32)
    again.interpret(x=x)
    assert x[0] == np.inf and x[1] == -np.inf and np.isnan(x[2])
    assert x[3] == np.float32(math.pi)


def test_constexpr_values_work_in_host_code():
    assert int(BLOCK) == 32 and BLOCK * 2 == 64 and -BLOCK == -32
    assert np.zeros(BLOCK).shape == (32,) and list(range(BLOCK))[-1] == 31
    assert float(-inf) == -math.inf


def test_a_dtype_named_only_in_annotations_is_the_factorys():
    # issue 40: `T` only in annotations is no closure cell of the proc's function (the
    # annotations are strings); the factory's local variables are read instead
    def copier(T):
        @proc
        def copy(n: size, x: T[n], y: T[n]):
            for i in seq(0, n):
                y[i] = x[i]
        return copy

    assert "x: f16[n]" in str(copier(f16)) and "x: bf16[n]" in str(copier(bf16))
