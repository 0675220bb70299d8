"""``fuse`` does not ask the solver about accesses that can meet only in the same
iteration (a subscript of both is the fused loop's variable, or it plus the same
constant): fusing a chain of N in-place nests asked 2-3 questions per nest (issue 28,
graph.compile of 1,000 pointwise nodes); a shifted subscript is still asked and
refused."""
from __future__ import annotations

import pytest

import gpudsl.ir.smt_scope as smt_scope
from gpudsl import SchedulingError, f32, proc, seq, size
from gpudsl.graph.fusion import ChainOp
from gpudsl.stdlib.fused import _chain
from gpudsl.schedule import fuse


@pytest.fixture
def solver_calls(monkeypatch):
    calls = []
    real = smt_scope.solve
    monkeypatch.setattr(smt_scope, "solve", lambda *a, **k: (calls.append(1), real(*a, **k))[1])
    return calls


def test_fusing_a_chain_of_in_place_nests_asks_the_solver_nothing(solver_calls):
    steps = (ChainOp("relu", (0,)),) + tuple(ChainOp("add", (None, 1)) if i % 2 else
                                         ChainOp("relu", (None,)) for i in range(1, 16))
    p = _chain("chain16", steps, ("d0: size", "x0: f32[d0]", "x1: f32[d0]",
                                  "out: f32[d0]"), ["d0"], ["x0", "x1"], ((True,), (True,)), 1)
    assert len(p.ir.body) == 1
    assert solver_calls == []           # 44 questions before


@proc
def same_row(n: size, m: size, a: f32[n, m], b: f32[n, m]):
    for i in seq(0, n):
        for j in seq(0, m):
            a[i, j] = b[i, j] * 2.0
    for k in seq(0, n):
        for j in seq(0, m):
            b[k, m - 1 - j] = a[k, j] + 1.0


@proc
def shifted(n: size, a: f32[n + 1], b: f32[n]):
    for i in seq(0, n):
        a[i] = b[i]
    for k in seq(0, n):
        b[k] = a[k + 1]


@proc
def shifted_alike(n: size, a: f32[n + 1], b: f32[n]):
    for i in seq(0, n):
        a[i + 1] = b[i]
    for k in seq(0, n):
        b[k] = a[k + 1]


def test_a_shared_row_subscript_is_enough(solver_calls):
    p = fuse(same_row, "i", "k")
    assert len(p.ir.body) == 1 and solver_calls == []


def test_the_same_shift_is_enough(solver_calls):
    p = fuse(shifted_alike, "i", "k")
    assert len(p.ir.body) == 1 and solver_calls == []


def test_a_shifted_read_is_still_asked_and_refused(solver_calls):
    with pytest.raises(SchedulingError, match="backward dependence"):
        fuse(shifted, "i", "k")
    assert solver_calls
