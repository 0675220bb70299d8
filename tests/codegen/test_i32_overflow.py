"""Signed overflow (issue 28): C's ``int`` overflow is undefined while the interpreter
and check() wrap, so check() proved ``a[i32(n) * i32(n) + 3]`` at n = 65536 as a
write of a[3] while the C was undefined.  The generated code now wraps as the
interpreter does (unsigned arithmetic), in expressions and in ``+=``."""
from __future__ import annotations

import numpy as np

import gpudsl

NS = vars(gpudsl)

SRC = '''
def f(n: size, a: f32[16], c: i32[3], d: i64[1]):
    assert n == 65536
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[i32(n) * i32(n) + 3] = 1.0
            c[0] += i32(n) * i32(n) - 1
            c[1] = c[1] * 65536
            c[2] += 2147483647
            d[0] = -(i64(n) * i64(n) * i64(n) * i64(n) * i64(n - 1) * i64(2))
'''


def test_i32_overflow_wraps_in_every_evaluator():
    p = gpudsl.proc_from_source(SRC, namespace=NS)
    assert p.check().ok
    src = p.cuda_source()
    assert "gpudsl_mul_i32((int)n, (int)n)" in src and "c[2] = gpudsl_add_i32(" in src
    outs = []
    for run in (lambda **k: gpudsl.interpret(p, **k), p.compile("emulator")):
        a = np.zeros(16, np.float32)
        c = np.array([5, 65536, 2], np.int32)
        d = np.zeros(1, np.int64)
        run(n=65536, a=a, c=c, d=d)
        outs.append((list(np.nonzero(a)[0]), list(c), int(d[0])))
    want_d = -((65536 ** 4 * 65535 * 2 + 2 ** 63) % 2 ** 64 - 2 ** 63)
    want_d = (want_d + 2 ** 63) % 2 ** 64 - 2 ** 63
    assert outs[0] == ([3], [4, 0, -2147483647], want_d)
    assert outs[1] == outs[0]
