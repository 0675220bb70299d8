"""4 * (n // 4) must not be emitted as 4 * n / 4 (C evaluates that as n)."""
from __future__ import annotations

import numpy as np

from gpudsl import BLOCKS, THREADS, f32, par, proc, seq, size


@proc
def tail_copy(n: size, x: f32[n], y: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            for v in seq(0, n % 4):
                y[4 * (n // 4) + v] = x[4 * (n // 4) + v]


def test_product_of_a_quotient_keeps_its_parentheses():
    src = tail_copy.cuda_source()
    assert "4 * n / 4" not in src
    k = tail_copy.compile("emulator")
    x = np.arange(7, dtype=np.float32)
    y = np.zeros(7, dtype=np.float32)
    k(x=x, y=y)
    assert list(y) == [0, 0, 0, 0, 4, 5, 6]
