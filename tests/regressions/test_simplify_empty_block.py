"""Regression (long differential run, seed 53, case 21732): ``simplify`` removed an
``if`` whose condition is false in its loop (``k14 == 0`` with k14 in [1, 4)) and left
the loop's body empty; printed as ``pass``, it parsed back to a different proc."""
from __future__ import annotations

import random

import gpudsl
from gpudsl.schedule import simplify
from tests.schedule.differential.oracle import Oracle

SRC = '''@proc
def p21732(n: size, a: f32, x: f32[n], y: f32[n], z: f32[n, 4], w: f32[4]):
    assert n >= 4
    if n % 2 == 0:
        pass
    else:
        for k14 in seq(1, 4):
            if k14 == 0:
                pass
'''


def test_simplify_leaves_no_empty_block():
    p = gpudsl.proc_from_source(SRC, {})
    q = simplify(p)
    assert "k14 == 0" not in str(q)
    assert Oracle().judge(p, q, [{"n": 4}], random.Random(0)) == []


def test_simplify_keeps_other_statements_without_a_pass():
    p = gpudsl.proc_from_source('''@proc
def f(n: size, x: f32[n]):
    for i in seq(1, n):
        x[i] = 1.0
        if i == 0:
            x[i] = 2.0
''', {})
    q = simplify(p)
    assert "pass" not in str(q) and "2.0" not in str(q)
    assert Oracle().judge(p, q, [{"n": 4}], random.Random(0)) == []
