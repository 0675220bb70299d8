"""Index shifts by a non-constant amount compute in 64 bits even in a 32-bit
translation unit: the interpreter and check() compute ``1 << s`` exactly, and in a C
``int`` it overflowed at s = 31 (issue 28: 32 in the interpreter, 23 on the emulator;
a proved ping-pong scan crashed the emulator)."""
from __future__ import annotations

import numpy as np

import gpudsl

NS = vars(gpudsl)


def test_shift_beyond_31_bits_counts_as_in_the_interpreter():
    p = gpudsl.proc_from_source('''
def f(y: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            for s in seq(0, 40):
                if (1 << s) >= 256:
                    y[t] += 1.0
''', namespace=NS)
    assert p.check().ok
    ref, emu = np.zeros(4, np.float32), np.zeros(4, np.float32)
    gpudsl.interpret(p, y=ref)
    p.compile("emulator")(y=emu)
    assert list(ref) == [32.0] * 4
    np.testing.assert_array_equal(emu, ref)


def test_ping_pong_scan_over_32_levels():
    p = gpudsl.proc_from_source('''
def scan(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 64] @ SHARED
        for t in par(0, 64) @ THREADS:
            buf[0, t] = x[t]
        sync()
        for lvl in seq(0, 32):
            for t in par(0, 64) @ THREADS:
                if t >= (1 << lvl):
                    buf[(lvl + 1) % 2, t] = buf[lvl % 2, t] + buf[lvl % 2, t - (1 << lvl)]
                else:
                    buf[(lvl + 1) % 2, t] = buf[lvl % 2, t]
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = buf[0, t]
''', namespace=NS)
    x = np.arange(64, dtype=np.float32) % 5
    ref, emu = np.zeros(64, np.float32), np.zeros(64, np.float32)
    gpudsl.interpret(p, x=x, y=ref)
    np.testing.assert_array_equal(ref, np.cumsum(x))
    p.compile("emulator")(x=x, y=emu)
    np.testing.assert_array_equal(emu, ref)
