"""Regression (long differential run, seed 41, case 1778): ``specialize(p, block, ["n >
0.5"])`` made a race-free kernel "racy" to check(): an integer compared with a float
constant became a fresh unknown boolean per thread, so two threads of one block could
take different branches of a uniform ``if``.  Integers converted to float are now exact
up to 2^24 and an uninterpreted (deterministic) function beyond."""
from __future__ import annotations

import gpudsl
from gpudsl import check
from gpudsl.schedule import sink_alloc, specialize
from gpudsl.schedule.cursors import Cursor

NS = vars(gpudsl)

TWO_BRANCHES = '''
def f(n: size, x: f32[n, 8], y: f32[n, 8]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        s: f32[8] @ SHARED
        if n > 0.5:
            for t in par(0, 8) @ THREADS:
                s[t] = x[b, t]
            sync()
            for t in par(0, 8) @ THREADS:
                y[b, t] = s[(t + 1) % 8]
            sync()
        else:
            for t in par(0, 8) @ THREADS:
                s[t] = x[b, t]
            sync()
            for t in par(0, 8) @ THREADS:
                y[b, t] = s[(t + 1) % 8]
            sync()
'''


def test_uniform_float_comparison_keeps_the_proof():
    assert check(gpudsl.proc_from_source(TWO_BRANCHES, namespace=NS)).ok


def test_specialize_on_a_float_comparison_keeps_the_proof():
    p = gpudsl.proc_from_source('''
def p1778(n: size, a: f32, x: f32[n, 8], y: f32[n, 8]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        s: f32[8] @ SHARED
        reg: f32[8] @ REGISTER
        for rr in seq(0, 2):
            for t in par(0, 8) @ THREADS:
                s[t] = x[b, t] + y[b, t]
            sync()
            for t in par(0, 8) @ THREADS:
                acc: f32 @ REGISTER
                for k in seq(0, 3):
                    acc += s[(t + k) % 8]
            sync()
''', namespace=NS)
    assert check(p).ok
    p = sink_alloc(p, Cursor(p, "stmt", (0, "body", 1), None))
    p = specialize(p, Cursor(p, "stmt", (0, "body", 1), None), ["n > 0.5"])
    assert check(p).ok


def test_thread_dependent_float_comparison_still_races():
    p = gpudsl.proc_from_source('''
def g(x: f32[8]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            if t > 3.5:
                x[t - 4] = 1.0
            else:
                x[t] = 2.0
''', namespace=NS)
    r = check(p)
    assert not r.ok and "race" in str(r)


def test_rounding_beyond_2_24_is_not_assumed_exact():
    # f32(16777217) == 16777216.0: on the GPU the comparison is false and every
    # thread writes x[0]; check() must not prove the else branch unreachable
    p = gpudsl.proc_from_source('''
def h(n: size, x: f32[8]):
    assert n == 16777217
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 8) @ THREADS:
            if n > 16777216.5:
                x[t] = 1.0
            else:
                x[0] = 1.0
''', namespace=NS)
    r = check(p)
    assert not r.ok and "race" in str(r)
