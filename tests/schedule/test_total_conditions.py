"""Issue 28: a primitive's user-given conditions must be defined wherever they are
evaluated (``specialize(p, block, ["n // 0 == 1"])`` was accepted and the result
faulted at run time)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import SchedulingError
from gpudsl.schedule import specialize

NS = vars(gpudsl)

P = gpudsl.proc_from_source('''
def f(n: size, x: f32[n], y: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, n) @ THREADS:
            y[t] = x[t]
''', namespace=NS)


@pytest.mark.parametrize("conds, why", [
    (["n // 0 == 1"], "divisor 0"),
    (["n % (n - 1) == 0"], "divisor n - 1"),
    (["x[n] > 0.0"], r"read x\[n\]"),
    (["n > 3", "x[n - 4 + n] > 0.0"], r"read x\[n - 4 \+ n\]"),
])
def test_partial_conditions_are_refused(conds, why):
    with pytest.raises(SchedulingError, match=why):
        specialize(P, P.find_loop("t"), conds)


@pytest.mark.parametrize("conds", [
    ["n % 4 == 0"],
    ["n > 1 and n % (n - 1) == 0"],              # guarded by `and`
    ["select(n > 1, n // (n - 1), 0) == 1"],     # guarded by select
    ["x[0] > 0.0", "x[n - 1] > 1.0"],
    ["n < 2", "x[1] > 0.0"],                     # x[1] only where n >= 2
])
def test_total_conditions_are_accepted(conds):
    q = specialize(P, P.find_loop("t"), conds)
    x = np.arange(1, 6, dtype=np.float32)
    y1, y2 = np.zeros(5, np.float32), np.zeros(5, np.float32)
    gpudsl.interpret(P, x=x, y=y1)
    gpudsl.interpret(q, x=x, y=y2)
    np.testing.assert_array_equal(y1, y2)
    assert q.check(n=5).ok


def test_condition_reading_what_parallel_iterations_write_is_refused():
    # differential seed 3002, case 7374: `if x[0] > 0.0` around `x[k] = ...` in a
    # par loop: iteration 1 reads x[0] while iteration 0 writes it (check() proved the
    # proc before and found a race after)
    import gpudsl
    from gpudsl import SchedulingError
    from gpudsl.schedule import specialize

    p = gpudsl.proc_from_source('''@proc
def racy_cond(n: size, a: f32, x: f32[n], w: f32[4]):
    assert n >= 4
    for k in par(0, 2):
        x[k] = w[k // 2] - a
''', {})
    assert p.check().ok
    with pytest.raises(SchedulingError) as e:
        specialize(p, "x[k] = _", ["x[0] > 0.0"])
    assert "another iteration" in str(e.value)
    q = specialize(p, "x[k] = _", ["w[0] > 0.0"])  # w is only read: accepted
    assert q.check().ok
