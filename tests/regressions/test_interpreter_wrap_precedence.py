"""Issue 25 (found by the language reference's examples): the interpreter wrapped a
fixed-width integer result as ``((v + half) & mask) - half`` without outer parentheses,
so a wrapped value used as the left operand of the next operator lost its meaning:
``x * 65536 * 65536`` on i64 gave ``-2^63 + 65536`` and ``(x // 4) * 10 + (x % 4) +
((x & 1) << 8)`` on i32 was off by 2^31. The reference meaning is what check() and the
kernels are compared with, so it must compute these exactly."""
from __future__ import annotations

import numpy as np

import gpudsl
from gpudsl import i32, i64, proc


@proc
def chains(x: i32[1], y: i32[3], w: i64[2]):
    y[0] = (x[0] // 4) * 10 + (x[0] % 4) + ((x[0] & 1) << 8)
    y[1] = x[0] * 3 * 5 - 7
    y[2] = x[0] + x[0] + x[0] - x[0] * 2
    w[0] = w[0] * 65536 * 65536
    w[1] = w[1] + 1 + 2 + 3


def test_chained_wrapping_arithmetic_is_exact():
    y = np.zeros(3, np.int32)
    w = np.array([1, 10], np.int64)
    gpudsl.interpret(chains, x=np.array([5], np.int32), y=y, w=w)
    assert y.tolist() == [267, 68, 5]
    assert w.tolist() == [2 ** 32, 16]


def test_wrap_around_still_wraps():
    y = np.zeros(3, np.int32)
    w = np.array([2 ** 40, 2 ** 63 - 2], np.int64)
    gpudsl.interpret(chains, x=np.array([2 ** 30], np.int32), y=y, w=w)
    want1 = ((2 ** 30 * 15 - 7 + 2 ** 31) % 2 ** 32) - 2 ** 31
    assert y[1] == want1
    assert w[0] == 0  # 2^72 wraps to 0 in 64 bits
    assert w[1] == -2 ** 63 + 4
