"""Issue 14: gpudsl.ops feels like numpy: scalars as operands, the same array twice
when only read, ints for replace_slice, dtype/rank checks on every node (reshape too),
numpy's axes conventions, no silent coercion; every refusal a gpudsl.Error naming the
op and the argument."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ops

F = np.arange(6, dtype=np.float32).reshape(2, 3)
X3 = np.arange(24, dtype=np.float32).reshape(2, 3, 4)


@pytest.mark.parametrize("call, want", [
    (lambda: ops.add(F, F), F + F),
    (lambda: ops.mul(F, F), F * F),
    (lambda: ops.add(F, 1.0), F + 1),
    (lambda: ops.add(F, 2), F + 2),
    (lambda: ops.mul(np.float32(3), F), 3 * F),
    (lambda: ops.mul(F, np.float64(0.5)), F * 0.5),
    (lambda: ops.add(np.ones((1, 3), np.float32), F), F + 1),  # a broadcasts against b
    (lambda: ops.matmul(F.T.copy(), F.T.copy().T.copy()), F.T @ F),
    (lambda: ops.permute(X3, (-1, 0, 1)), np.transpose(X3, (-1, 0, 1))),
    (lambda: ops.permute(X3), np.transpose(X3)),
    (lambda: ops.permute(X3, (np.int64(2), 1, 0)), np.transpose(X3, (2, 1, 0))),
    (lambda: ops.reshape(F, (-1,)), F.reshape(-1)),
    (lambda: ops.reshape(F, [3, -1]), F.reshape(3, -1)),
    (lambda: ops.reshape(F, 6), F.reshape(6)),
    (lambda: ops.slice(F, -1, 2), F[-1:2]),
    (lambda: ops.slice(F, np.int32(0), 1), F[0:1]),
], ids=lambda x: "" if callable(x) else None)
def test_ordinary_calls(call, want):
    got = call()
    assert got.shape == want.shape
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_same_square_matrix_twice():
    a = np.arange(16, dtype=np.float32).reshape(4, 4)
    np.testing.assert_allclose(ops.matmul(a, a), a @ a, rtol=1e-6)


def test_replace_slice_with_ints():
    x, r = np.ones((5, 3), np.float32), np.zeros((2, 3), np.float32)
    assert ops.replace_slice(x, r, 2, 4) is x
    np.testing.assert_array_equal(x[:, 0], [1, 1, 0, 0, 1])
    x2 = np.ones((5, 3), np.float32)
    ops.replace_slice(x2, r, np.int64(0), np.array([2], np.int64))
    np.testing.assert_array_equal(x2[:, 0], [0, 0, 1, 1, 1])


@pytest.mark.parametrize("call, op, words", [
    (lambda: ops.reshape(F, [-1, -1]), "reshape", "more than one -1"),
    (lambda: ops.reshape(F.astype(np.int64), (6,)), "reshape", "x is int64"),
    (lambda: ops.reshape(F.astype(np.float64), (6,)), "reshape", "x is float64"),
    (lambda: ops.reshape(np.zeros((1, 1, 1, 2), np.float32), (2,)), "reshape",
     "4 dimension(s)"),
    (lambda: ops.reshape(F, (1, 1, 2, 3)), "reshape", "1 to 3"),
    (lambda: ops.reshape(F, (2.0, 3)), "reshape", "shape[0] must be an integer"),
    (lambda: ops.reshape(F, (4, 2)), "reshape", "cannot reshape"),
    (lambda: ops.reshape(F, (0, -1)), "reshape", "neither positive nor -1"),
    (lambda: ops.permute(X3, (2.7, 1.2, 0.1)), "permute", "perm[0] must be an integer"),
    (lambda: ops.permute(X3, "210"), "permute", "not str"),
    (lambda: ops.permute(X3, (True, 0, 2)), "permute", "not a bool"),
    (lambda: ops.permute(X3, (0, 0, 1)), "permute", "not a permutation"),
    (lambda: ops.permute(X3, (3, 0, 1)), "permute", "out of range"),
    (lambda: ops.slice(F, 1.7, 3.2), "slice", "begin must be an integer"),
    (lambda: ops.slice(F, 0, 5), "slice", "inside the first axis"),
    (lambda: ops.replace_slice(np.ones((5, 3), np.float32), np.zeros((2, 3), np.float32),
                               2.0, 4), "replace_slice", "begin must be an integer"),
    (lambda: ops.replace_slice(np.ones((5, 3), np.float32), np.zeros((2, 3), np.float32),
                               4, 6), "replace_slice", "nothing was written"),
    (lambda: ops.add(1, 2), "add", "both scalars"),
    (lambda: ops.add(F, "a"), "add", "b must be an array"),
    (lambda: ops.add(F, True), "add", "b must be an array"),
    (lambda: ops.mul([1.0, 2.0], F), "mul", "a must be an array"),
    (lambda: ops.add(F, np.ones((3, 2), np.float32)), "add", "axis 0"),
    # ranks differ and both operands would broadcast ((6, 1) + (1, 3)): numpy's rule lifts
    # the rank (issue 40), a kernel gives one operand the result's shape
    (lambda: ops.add(F.reshape(6, 1), np.ones(3, np.float32)), "add", "must equal a's"),
    (lambda: ops.matmul(F, F), "matmul", "differ"),
    (lambda: ops.relu(F.astype(np.float64)), "relu", "x is float64"),
    (lambda: ops.silu(np.float32(1)), "silu", "x must be an array"),
])
def test_refusals_are_gpudsl_errors_naming_the_op(call, op, words):
    with pytest.raises(gpudsl.Error) as e:
        call()
    msg = str(e.value)
    assert msg.startswith(f"{op}: "), msg
    assert words in msg, msg
    for internal in ("_kernel", "stream_", "overlap"):
        assert internal not in msg, msg


def test_written_argument_may_still_not_alias():
    from gpudsl import THREADS, f32, par, proc, size

    @proc
    def copy(n: size, x: f32[n], y: f32[n]):
        for i in par(0, n) @ THREADS:
            y[i] = x[i]

    a = np.zeros(8, np.float32)
    with pytest.raises(gpudsl.Error, match="overlap"):
        gpudsl.interpret(copy, x=a, y=a)
