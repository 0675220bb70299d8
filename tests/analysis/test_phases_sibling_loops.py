"""Barrier phases across two sibling loops (issue 28, differential seed 505, case
28192): after ``cut_loop(p, "i", "min(n, 3)")`` of a double-buffered loop, a read in
the first loop and a write in the second are separated by the barriers of the
second loop's earlier iterations; check() forgot the iterations of the loops the
two accesses lie in and reported a race the uncut proc was proved free of."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.schedule import cut_loop

NS = vars(gpudsl)

SRC = '''
def f(n: size, x: f32[n, 64], y: f32[n, 64]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, 3):
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[b, t]
            sync()
            for u in par(32, 64) @ THREADS:
                y[b, u] += buf[i % 2, u - 32] * 2.0
'''


def test_cut_double_buffered_loop_stays_proved():
    p = gpudsl.proc_from_source(SRC, namespace=NS)
    assert p.check().ok
    q = cut_loop(p, "i", "min(n, 3)")
    assert q.check().ok
    for n in (1, 2, 3):
        assert q.check(n=n).ok


RACY = '''
def g(n: size, x: f32[64], y: f32[64]):
    assert n >= 1 and n <= 3
    for b in par(0, 1) @ BLOCKS:
        buf: f32[32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[t] = x[t]
            sync()
            for u in par(32, 64) @ THREADS:
                y[u] += buf[u - 32]
        for i in seq(0, 2):
            for t in par(0, 32) @ THREADS:
                buf[t] = x[t + 32]
            sync()
'''


@pytest.mark.parametrize("n", [1, 2, 3])
def test_read_in_the_last_iteration_then_write_in_the_next_loop_races(n):
    # no barrier between the first loop's last read and the second loop's first write
    p = gpudsl.proc_from_source(RACY, namespace=NS)
    with pytest.raises(gpudsl.RaceError):
        gpudsl.interpret(p, detect_races=True, n=n, x=np.zeros(64, np.float32),
                         y=np.zeros(64, np.float32))
    rep = p.check(n=n)
    assert "race" in rep.kinds()
    assert "race" in p.check().kinds()
