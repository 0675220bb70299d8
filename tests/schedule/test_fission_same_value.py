"""fission across writes that every iteration makes alike, inside inner loops (issue 28:
Exo's test_stage_mem_twice shape, after bind_expr / expand_dim / lift_alloc, was
refused: the exemption took only writes directly in the split loop's body)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.schedule import bind_expr, expand_dim, fission, lift_alloc, stage_mem

from .helpers import random_args

NS = vars(gpudsl)

SQMAT = '''
def sqmat(n: size, A: f32[n, n], B: f32[n, n]):
    assert n % 4 == 0
    for i in seq(0, n // 4):
        for j in seq(0, n // 4):
            for k in seq(0, n // 4):
                for ii in seq(0, 4):
                    for jj in seq(0, 4):
                        for kk in seq(0, 4):
                            A[4 * i + ii, 4 * j + jj] += B[4 * i + ii, 4 * k + kk] * B[4 * k + kk, 4 * j + jj]
'''


def _run(p, args):
    args = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    gpudsl.interpret(p, **args)
    return args


def _staged():
    p = gpudsl.proc_from_source(SQMAT, namespace=NS)
    q = bind_expr(p, "B[4 * i + ii, 4 * k + kk]", "B1")
    q = expand_dim(q, "B1", "4", "kk")
    q = expand_dim(q, "B1", "4", "ii")
    q = lift_alloc(q, "B1", n_lifts=3)
    return p, q


def test_stage_mem_twice_shape():
    p, q = _staged()
    q = fission(q, q.find("B1[_] = _").after(), n_lifts=3)
    assert len(q.find_loop("jj", many=True)) == 2
    q = stage_mem(q, q.find_loop("ii #1"), "B[4 * k:4 * k + 4, 4 * j:4 * j + 4]", "B2")
    args = random_args(p, {"n": 8}, seed=3)
    np.testing.assert_allclose(_run(q, args)["A"], _run(p, args)["A"], rtol=1e-6)


def test_write_depending_on_the_split_loop_still_refused():
    # B1[kk] = B[jj, kk]: the value changes with jj, so a later jj's write would
    # overwrite what an earlier jj's read saw
    p = gpudsl.proc_from_source('''
def f(A: f32[4, 4], B: f32[4, 4]):
    B1: f32[4] @ GLOBAL
    for jj in seq(0, 4):
        for kk in seq(0, 4):
            B1[kk] = B[jj, kk]
        for kk in seq(0, 4):
            A[jj, kk] = B1[kk]
''', namespace=NS)
    with pytest.raises(gpudsl.SchedulingError, match="later iteration"):
        fission(p, p.find_loop("kk").after())


def test_inner_bound_depending_on_the_split_loop_still_refused():
    # the writes are the same place and value, but how many there are depends on jj
    p = gpudsl.proc_from_source('''
def f(A: f32[4, 4], B: f32[4]):
    B1: f32[4] @ GLOBAL
    for kk in seq(0, 4):
        B1[kk] = 0.0
    for jj in seq(0, 4):
        for kk in seq(0, jj):
            B1[kk] = B[kk]
        for kk in seq(0, 4):
            A[jj, kk] = B1[kk]
''', namespace=NS)
    with pytest.raises(gpudsl.SchedulingError, match="later iteration"):
        fission(p, p.find_loop("kk #1").after())
