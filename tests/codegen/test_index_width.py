"""The width of index arithmetic from the value ranges of every index term (issue 28):
in a 32-bit translation unit ``(n * m + t) % 10`` with ``n = m = 65537`` computed the
product in ``int`` (2**32 + 2**17 + 1 wrapped: index 3 on the emulator, 9 in the
interpreter, for a proc check() proved).  A launch whose index terms may leave 32 bits
now gets the 64-bit unit."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.codegen import generate, index_bits_for
from gpudsl.codegen.ranges import index_terms_fit

NS = vars(gpudsl)

SRC = '''
def f(n: size, m: size, y: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[(n * m + t) % 10] += 1.0
'''


def test_product_of_sizes_beyond_32_bits_runs_as_interpreted():
    p = gpudsl.proc_from_source(SRC, namespace=NS)
    assert p.check().ok
    ref, emu = np.zeros(16, np.float32), np.zeros(16, np.float32)
    gpudsl.interpret(p, n=65537, m=65537, y=ref)
    p.compile("emulator")(n=65537, m=65537, y=emu)
    assert ref[9] == 1.0
    np.testing.assert_array_equal(emu, ref)


def test_width_per_launch():
    p = gpudsl.proc_from_source(SRC, namespace=NS)
    mod = generate(p)
    assert index_bits_for(mod, {"n": 100, "m": 100}) == 32
    assert index_bits_for(mod, {"n": 65537, "m": 65537}) == 64


def _fits(src, **env):
    return index_terms_fit(gpudsl.proc_from_source(src, namespace=NS).ir.body, env)


def test_ranges_of_loop_variables_reads_and_operators():
    loops = '''
def g(n: size, y: f32[16]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[(b * 256 * t) % 16] = 1.0
'''
    assert _fits(loops, n=100)
    assert not _fits(loops, n=40000)          # 39999 * 256 * 255 > 2**31
    reads = '''
def h(x: i32[4], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[(x[t] * 64) % 64] = 1.0
'''
    assert _fits(reads)   # i32 arithmetic wraps alike in C and the interpreter
    mods = '''
def k(n: size, y: f32[64]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[(b % 64 + t) // 2] = 1.0
'''
    assert _fits(mods, n=2 ** 30)


def test_a_term_beyond_64_bits_is_refused_at_launch_with_the_term():
    p = gpudsl.proc_from_source('''
def f(y: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            for s in seq(0, 70):
                if (1 << s) >= 256:
                    y[t] += 1.0
''', namespace=NS)
    ref = np.zeros(4, np.float32)
    gpudsl.interpret(p, y=ref)
    assert list(ref) == [62.0] * 4          # exact in the interpreter
    k = p.compile("emulator")
    with pytest.raises(gpudsl.LaunchError, match=r"1 << s.*2\^69"):
        k(y=np.zeros(4, np.float32))


def test_terms_from_data_are_not_refused():
    p = gpudsl.proc_from_source('''
def g(ix: i64[4], x: f32[8], y: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[t] = x[(ix[t] + 1) % 8]
''', namespace=NS)
    ix = np.array([0, 7, 2 ** 40, -3], np.int64)
    x = np.arange(8, dtype=np.float32)
    ref, emu = np.zeros(4, np.float32), np.zeros(4, np.float32)
    gpudsl.interpret(p, ix=ix, x=x, y=ref)
    p.compile("emulator")(ix=ix, x=x, y=emu)
    np.testing.assert_array_equal(emu, ref)


def test_fixed_width_terms_that_cannot_wrap_keep_their_range():
    # i32(n) * 4 + t with n = 1000 never leaves 32 bits: no 64-bit unit for it
    src = '''
def h(n: size, y: f32[8192]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[i32(n) * 4 + t] = 1.0
'''
    assert _fits(src, n=1000)


def test_casts_carry_their_operands_range():
    # found by the wide differential run (seed 2828, case 8516): i32(...) casts were
    # taken for data, so b * (1 - (b - a)) = -4293853200 was computed in int
    p = gpudsl.proc_from_source('''
def f(a: index, b: index, o64: i64[4]):
    for bb in par(0, 1) @ BLOCKS:
        for tt in par(0, 1) @ THREADS:
            o64[0] = (b * ((i32(65536) + i32(b)) - (b - a)))
''', namespace=NS)
    env = dict(a=-16, b=-65535)
    ref, emu = np.zeros(4, np.int64), np.zeros(4, np.int64)
    gpudsl.interpret(p, **env, o64=ref)
    p.compile("emulator", check=False)(**env, o64=emu)
    assert ref[0] == -4293853200
    np.testing.assert_array_equal(emu, ref)
