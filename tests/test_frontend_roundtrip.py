"""The printer round trip: str(p) parsed again with proc_from_source equals p,
for every proc of the interpreter tests and for printer corner cases."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

from gpudsl import (BLOCKS, GLOBAL, REGISTER, SHARED, THREADS, Proc, atomic_add, bool_,  # noqa
                    exp, f16, f32, f64, i32, i64, index, instr, interpret, par, proc,
                    proc_from_source, select, seq, size, sqrt, sync)

MODULES = ["test_interpreter_semantics", "test_interpreter_races", "test_interpreter_errors"]


def _procs():
    out = {}
    for m in MODULES:
        mod = importlib.import_module(m)
        for name, v in vars(mod).items():
            if isinstance(v, Proc):
                out[f"{m}.{name}"] = v
    return out


@proc
def precedence(n: size, k: index, x: f32[n], q: i64[n]):
    for i in seq(0, n):
        x[i] = (x[i] - 1.0) * -(x[i] + 2.0) / (3.0 - x[i] * x[i])
        q[i] = (i - k) // (2 + k) % 5 - (i << 1 >> 2) + (i & 3 | 4) ^ 7
        q[i] = -(i - 4) - -3 + (-(k * 2))


@proc
def conditions(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n, unroll=True):
        if 0 < i < n - 1 and not (x[i] > 0.0 or x[i] == -1.0):
            y[i] = select(x[i] != 0.0, x[i], 1e-30)
        elif i == 0:
            y[i] = f32(i) + f32(n)
        else:
            if x[i] >= 2.5:
                pass
            else:
                y[i] = sqrt(abs(x[i]))


@proc
def types(n: size, a: f64[n], b: i32[n], c: bool_[n], h: f16[n]):
    t: f64 = 0.5
    for i in seq(0, n):
        a[i] = a[i] * t + f64(b[i]) + 1e100
        c[i] = (b[i] > 3) == (a[i] < 0.0)
        h[i] = h[i] * 2.0
        b[i] = i32(i) - b[i] * 2


@proc
def windows(s: [f32][8, 4] @ SHARED, r: [f32][4] @ REGISTER, g: [f32][2, 2]):
    for i in seq(0, 4):
        r[i] = s[2 * i, i] + g[i % 2, i // 2]


@proc
def uses_windows(n: size, x: f32[n, 2]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16, 4] @ SHARED
        gm: f32[4, 4] @ GLOBAL
        for t in par(0, 2) @ THREADS:
            r: f32[4] @ REGISTER
            windows(s[8 * t:8 * t + 8, 0:4], r[0:4], gm[t:t + 2, 1:3])


EXTRA = [precedence, conditions, types, windows, uses_windows]


@pytest.mark.parametrize("item", sorted(_procs().items()), ids=lambda kv: kv[0])
def test_round_trip_of_every_test_proc(item):
    _, p = item
    ns = {q.name: q for q in _procs().values()}
    q = proc_from_source(str(p), ns)
    assert q == p
    assert str(q) == str(p)


@pytest.mark.parametrize("p", EXTRA, ids=lambda p: p.name)
def test_round_trip_corner_cases(p):
    ns = {q.name: q for q in EXTRA}
    q = proc_from_source(str(p), ns)
    assert q == p
    assert str(q) == str(p)
    assert hash(q) == hash(p)


def test_round_trip_keeps_meaning():
    x = np.linspace(-3, 3, 9).astype(np.float32)
    y1 = np.zeros(9, np.float32)
    y2 = np.zeros(9, np.float32)
    interpret(conditions, x=x, y=y1)
    interpret(proc_from_source(str(conditions), {}), x=x, y=y2)
    np.testing.assert_array_equal(y1, y2)


def test_printed_text_is_source():
    text = str(conditions)
    assert text.startswith("@proc\ndef conditions(n: size, x: f32[n], y: f32[n]):")
    assert "seq(0, n, unroll=True)" in text
    assert "```python" in conditions._repr_markdown_()
    printed_instr = str(importlib.import_module("test_interpreter_semantics").add4)
    assert printed_instr.startswith("@instr(")


def test_bool_f16_f64_arrays_through_the_interpreter():
    a = np.linspace(-2, 2, 6)
    b = np.arange(6, dtype=np.int32)
    c = np.zeros(6, bool)
    h = np.full(6, 1.5, np.float16)
    a0, b0 = a.copy(), b.copy()
    interpret(types, a=a, b=b, c=c, h=h)
    np.testing.assert_array_equal(a, a0 * 0.5 + b0 + 1e100)
    np.testing.assert_array_equal(c, (b0 > 3) == (a < 0))
    assert h.dtype == np.float16 and (h == 3).all()
    np.testing.assert_array_equal(b, np.arange(6) - b0 * 2)
