"""Regression (long differential run, seed 202, case 53): ``simplify`` normalised
fixed-width integer expressions (``i64``, ``i32``) as polynomials of control integers and
gave their constants the ``index`` type (``q[t] % 7`` with ``q: i64``), so the result
printed and parsed back to a different proc.  Only ``index`` expressions are polynomials
now (fixed-width ones wrap)."""
from __future__ import annotations

import numpy as np

import gpudsl
from gpudsl.schedule import simplify

SRC = '''@proc
def p(n: size, q: i64[n], r: i32[n], y: f32[n]):
    for t in seq(0, n):
        y[t] = f32(q[t] % 7) + f32(r[t] * 2 + 3 - 1)
'''


def test_fixed_width_constants_keep_their_type():
    p = gpudsl.proc_from_source(SRC, {})
    q = simplify(p)
    assert gpudsl.proc_from_source(str(q), {}) == q
    args = dict(q=np.arange(5, dtype=np.int64) * 3, r=np.arange(5, dtype=np.int32))
    y1, y2 = np.zeros(5, np.float32), np.zeros(5, np.float32)
    gpudsl.interpret(p, y=y1, **args)
    gpudsl.interpret(q, y=y2, **args)
    assert (y1 == y2).all()


def test_a_ballot_modulo_simplifies_and_parses_back():
    p = gpudsl.proc_from_source('''@proc
def p53(n: size, y: f32[n, 32]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[b, t] = f32(ballot(y[b, t] > 1.0) % 7)
''', {})
    q = simplify(p)
    assert gpudsl.proc_from_source(str(q), {}) == q
