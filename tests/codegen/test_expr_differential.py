"""The three evaluators of an expression agree: the interpreter, the generated C on the
emulator and check()'s SMT encoding (see :mod:`tests.codegen.expr_differential`; its
long mode is ``python -m tests.codegen.expr_differential --seconds N``).  Each test
below is a disagreement the differential test found (issue 28)."""
from __future__ import annotations

import numpy as np
import pytest
import z3

import gpudsl
from gpudsl.ir.smt import Encoder
from gpudsl.ir.smt_ints import floordiv, floormod

from . import expr_differential as diff

NS = vars(gpudsl)


@pytest.mark.parametrize("seed", range(6))
def test_random_expressions_agree(seed):
    case = diff.make_case(1000 + seed)
    out = diff.run_case(case)
    assert out.mismatches == [], (case.values, out.mismatches)
    assert out.smt_determined > 0


@pytest.mark.parametrize("seed", [2077, 2154, 2312, 2598])
def test_random_index_terms_beyond_32_bits_agree(seed):
    # index terms leave 32 bits while the parameters fit: the width comes from the
    # terms' ranges (issue 28; each of these cases disagreed before: the 32-bit unit
    # computed (31 * 65535) * (c & b) * -1000 in int)
    case = diff.make_case(seed, wide=True)
    out = diff.run_case(case)
    assert out.mismatches == [], (case.values, out.mismatches)


def test_the_c_type_of_a_shift_is_its_left_operands():
    # found by the long mode (seed 28): (16 & c) >> s is an int in C even where s is a
    # long long, and gpudsl_floormod(that, (long long)1) was an ambiguous overload
    case = diff.make_case(28000142)
    assert diff.run_case(case).mismatches == []


def _idx_proc(expr: str, pre: str = "n >= 1"):
    return gpudsl.proc_from_source(f'''
def f(n: size, a: f32[16]):
    assert {pre}
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[{expr}] = 1.0
''', namespace=NS)


def test_interpreter_wrapping_cast_is_one_operand():
    # the Python of i32(n) was not parenthesized: i32(n) * i32(n) became
    # ((n + 2^31) & M) - 2^31 * ((n + 2^31) & M) - 2^31, element 3 instead of 9
    p = _idx_proc("i32(n) * i32(n) % 16")
    for run in (lambda a: gpudsl.interpret(p, n=3, a=a),
                lambda a: p.compile("emulator")(n=3, a=a)):
        a = np.zeros(16, np.float32)
        run(a)
        assert list(np.nonzero(a)[0]) == [9]


def test_smt_floor_division_by_a_negative_divisor():
    # Z3's quotient is Euclidean: 2 / -3 is 0 there, 2 // -3 is -1 in Python; the
    # encoding added one instead of subtracting it
    a, b = z3.Ints("a b")
    for x in range(-7, 8):
        for y in (-4, -3, -2, -1, 1, 2, 3):
            sub = [(a, z3.IntVal(x)), (b, z3.IntVal(y))]
            assert z3.simplify(z3.substitute(floordiv(a, b), *sub)).as_long() == x // y
            assert z3.simplify(z3.substitute(floormod(a, b), *sub)).as_long() == x % y


def test_check_refutes_a_write_through_floor_division_by_a_negative():
    # n // -3 + 1 is -1 at n = 4 (Python floors); the old encoding computed 1 there
    # (and in bounds for every n <= 5) and proved the write
    p = _idx_proc("n // (0 - 3) + 1", "n <= 5")
    r = gpudsl.check(p)
    assert not r.ok and "a[-1]" in str(r)


def test_bitwise_operations_on_negative_values_in_check():
    # x & y on negatives is two's complement (Python's, the interpreter's); the SMT
    # encoding read the result as a 32-bit unsigned value (-3 & -4 was 2^32 - 4 > 0)
    # and proved this write of a[3], which is a write of a[20]
    p = _idx_proc("select(((0 - n) & (0 - n - 1)) > 0, 3, 20)", "n <= 3")
    a = np.zeros(16, np.float32)
    with pytest.raises(gpudsl.InterpError, match="out-of-bounds"):
        gpudsl.interpret(p, n=3, a=a)
    assert not gpudsl.check(p).ok
    enc = Encoder(p.ir)
    idx = enc.thread("t").expr(diff._assigns(p.ir)[0].idx[0])
    s = z3.Solver()
    s.add(enc.params["n"] == 3, idx == 3)
    assert s.check() == z3.unsat  # the index is 20, never 3


def test_i32_negation_and_abs_wrap_in_check():
    # abs(i32(n)) and -i32(n) at n = 2^31 (i32: -2^31) stay -2^31: a[-2^31 % 16 ...]
    p = gpudsl.proc_from_source('''
def f(n: size, a: f32[16]):
    assert n == 2147483648
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[select(abs(i32(n)) < 0 and -i32(n) < 0, 20, 3)] = 1.0
''', namespace=NS)
    r = gpudsl.check(p)
    assert not r.ok and "a[20]" in str(r)


def test_i64_arithmetic_wraps_in_check():
    p = gpudsl.proc_from_source('''
def f(n: size, a: f32[16]):
    assert n == 4611686018427387904
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[select(i64(n) * i64(2) < 0, 20, 3)] = 1.0
''', namespace=NS)
    r = gpudsl.check(p)
    assert not r.ok and "a[20]" in str(r)


# ------------------------------------------------------------------ 64-bit index paths

SURFACE = [2 ** 31 - 3, 2 ** 31 - 1, 2 ** 31, 2 ** 31 + 5, 2 ** 32 + 7, 2 ** 62 + 1,
           2 ** 63 - 1 - 255, -(2 ** 31) - 5, -(2 ** 32) - 7, -(2 ** 62) - 1, -7]


def test_64_bit_floor_division_and_modulo_compile_and_run():
    # (k + t) % 256 at k >= 2^31: the 64-bit specialization called
    # gpudsl_floormod(long long, int), an ambiguous overload (CompileError)
    q = gpudsl.proc_from_source('''
def g(k: index, x: f32[256], y: f32[256], z: f32[256], w: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[t] = x[(k + t) % 256]
            z[t] = x[(k - t) // 256 % 256]
            w[t] = x[(min(k, 7) + max(k, 9) // 3 + abs(k) % 5 + select(k > 0, 1, 2)) % 256]
''', namespace=NS)
    assert q.check().ok
    x = np.arange(256, dtype=np.float32)
    kern = q.compile("emulator")
    for k in SURFACE:
        outs = [np.zeros(256, np.float32) for _ in range(3)]
        ref = [np.zeros(256, np.float32) for _ in range(3)]
        kern(k=k, x=x, y=outs[0], z=outs[1], w=outs[2])
        gpudsl.interpret(q, k=k, x=x, y=ref[0], z=ref[1], w=ref[2])
        t = np.arange(256)
        np.testing.assert_array_equal(ref[0], x[(k + t) % 256])
        for o, r in zip(outs, ref):
            np.testing.assert_array_equal(o, r, err_msg=f"k={k}")
