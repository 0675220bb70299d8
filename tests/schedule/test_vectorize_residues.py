"""The alignment obligation of ``vectorize`` is decided by residues before any solver
query (issue 28): with z3-solver 4.13 / 4.15 the nonlinear query "i * m + 4 * j is a
multiple of 4 when m is" timed out and every vectorized kernel of the standard
library was refused.  A proof must not depend on the solver's version or speed."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import SchedulingError
from gpudsl.schedule import call_primitives as calls, vectorize

NS = vars(gpudsl)

SRC = '''
def copy(n: size, m: size, x: f32[n, m], y: f32[n, m]):
    assert m % 4 == 0
    for b in par(0, n) @ BLOCKS:
        for t in par(0, m // 4) @ THREADS:
            for v in seq(0, 4):
                y[b, 4 * t + v] = x[b, t * 4 + v]
'''


def _no_solver(*a, **k):
    raise AssertionError("the alignment needed a solver query")


def test_alignment_is_decided_without_the_nonlinear_query(monkeypatch):
    p = gpudsl.proc_from_source(SRC, namespace=NS)
    monkeypatch.setattr(calls, "prove", _no_solver)
    q = vectorize(p, "v", 4)
    x = np.arange(24, dtype=np.float32).reshape(3, 8)
    y = np.zeros_like(x)
    gpudsl.interpret(q, x=x, y=y)
    np.testing.assert_array_equal(y, x)


def test_misaligned_accesses_are_still_refused():
    p = gpudsl.proc_from_source(SRC.replace("assert m % 4 == 0", "assert m % 2 == 0")
                                .replace("m // 4", "m // 4"), namespace=NS)
    with pytest.raises(SchedulingError, match="aligned to 4 elements"):
        vectorize(p, "v", 4)
    p2 = gpudsl.proc_from_source(SRC.replace("x[b, t * 4 + v]", "x[b, t * 4 + 1 + v]")
                                 .replace("par(0, m // 4)", "par(0, m // 4 - 1)"),
                                 namespace=NS)
    with pytest.raises(SchedulingError, match="aligned to 4 elements"):
        vectorize(p2, "v", 4)


def test_every_stdlib_vector_copy_is_decided_by_residues(monkeypatch):
    from gpudsl import ops
    from gpudsl.stdlib import matmul, matmul_tiles

    for builder in (matmul.big_kernel, matmul.cut_kernel, matmul_tiles.guarded_tiles_kernel):
        builder.cache_clear()   # derived here (not read back from the derivation cache)
    monkeypatch.setattr(calls, "prove", _no_solver)
    a = np.ones((64, 64), np.float32)
    np.testing.assert_array_equal(ops.add(a, a), 2 * a)
    np.testing.assert_allclose(ops.matmul(a, a), a @ a)
