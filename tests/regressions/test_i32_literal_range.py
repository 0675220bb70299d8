"""Regression: a literal outside i32's range in i32 arithmetic had two meanings.  The
interpreter and check() wrapped it to i32 (``i32(n) - 2147483648`` with n = 2147483653
indexes element 5) while the generated CUDA wrote ``(int)n - 2147483648LL``, computed
in 64 bits (element -4294967291): check() proved a kernel that writes out of bounds on
a GPU.  Such a literal is now refused where it is typed."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import ProcError

NS = vars(gpudsl)


def test_out_of_range_literal_in_i32_arithmetic_is_refused():
    with pytest.raises(ProcError, match="2147483648 does not fit in i32"):
        gpudsl.proc_from_source('''
def f(n: size, a: f32[16]):
    assert n == 2147483653
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[i32(n) - 2147483648] = 1.0
''', namespace=NS)


def test_in_range_literals_and_i64_arithmetic_still_parse():
    p = gpudsl.proc_from_source('''
def g(n: size, a: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[i32(n) - 2147483647 + 2147483647] = 1.0
            a[i64(n) - 2147483648 + 2147483648] = 2.0
''', namespace=NS)
    assert "2147483648LL" in p.cuda_source()


def test_i32_cast_of_a_wider_value_wraps_in_check():
    # i32(6442450944) == -2147483648: the write is a[-1].  check() computed with the
    # unwrapped value (element 7) and proved it; the interpreter wrote out of bounds
    import numpy as np

    from gpudsl import InterpError, check, interpret

    p = gpudsl.proc_from_source('''
def h(n: size, a: f32[16]):
    assert n == 6442450944
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            a[i32(n) // 1073741824 + 1] = 1.0
''', namespace=NS)
    r = check(p)
    assert not r.ok and "a[-1]" in str(r)
    with pytest.raises(InterpError, match="out-of-bounds"):
        interpret(p, n=6442450944, a=np.zeros(16, np.float32))

