"""add, mul, relu, silu, slice, replace_slice, reshape on the emulator against
numpy; check() proofs of their default schedules; bad inputs refused."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.stdlib.pointwise import binary_kernel, unary_kernel
from gpudsl.stdlib.slices import replace_slice_kernel, slice_kernel

RNG = np.random.default_rng(20261122)


def _rand(*shape):
    return RNG.standard_normal(shape, dtype=np.float32)


# every broadcast pattern of ranks 1-3, with odd sizes and size-1 axes of a
SHAPES = [(5,), (8,), (1,), (3, 7), (4, 8), (1, 6), (6, 1), (2, 3, 5), (2, 1, 4), (3, 4, 8)]
CASES = [(s, tuple(d if keep else 1 for d, keep in zip(s, mask)))
         for s in SHAPES for mask in itertools.product((True, False), repeat=len(s))]


@pytest.mark.parametrize("op", ["add", "mul"])
@pytest.mark.parametrize("a_shape,b_shape", CASES, ids=str)
def test_binary_with_broadcasting(op, a_shape, b_shape):
    a, b = _rand(*a_shape), _rand(*b_shape)
    got = getattr(ops, op)(a, b)
    want = a + b if op == "add" else a * b
    assert got.shape == a.shape
    np.testing.assert_allclose(got, want, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("shape", [(1,), (7,), (1024,), (3, 5), (2, 3, 4), (4099,)])
def test_unary(shape):
    x = _rand(*shape) * 4
    np.testing.assert_array_equal(ops.relu(x), np.maximum(x, 0))
    np.testing.assert_allclose(ops.silu(x), x / (1 + np.exp(-x)), rtol=2e-6, atol=1e-6)


@pytest.mark.parametrize("shape,begin,end", [((5,), 0, 5), ((5,), 2, 3), ((6, 3), 1, 4),
                                             ((4, 8), 0, 2), ((3, 2, 4), 1, 3),
                                             ((1, 1), 0, 1)])
def test_slice(shape, begin, end):
    x = _rand(*shape)
    np.testing.assert_array_equal(ops.slice(x, begin, end), x[begin:end])


@pytest.mark.parametrize("shape,begin,end", [((5,), 1, 3), ((6, 3), 0, 6), ((4, 8), 3, 4),
                                             ((3, 2, 4), 1, 3)])
def test_replace_slice(shape, begin, end):
    x = _rand(*shape)
    r = _rand(end - begin, *shape[1:])
    want = x.copy()
    want[begin:end] = r
    got = ops.replace_slice(x, r, np.array([begin], np.int64), np.array([end], np.int64))
    assert got is x
    np.testing.assert_array_equal(x, want)


@pytest.mark.parametrize("begin,end", [(3, 5), (-1, 1), (0, 3), (2, 3)])
def test_replace_slice_refuses_bad_ranges_and_writes_nothing(begin, end):
    x = _rand(4, 8)
    before = x.copy()
    r = _rand(2, 8)
    with pytest.raises(gpudsl.Error, match="nothing was written"):
        ops.replace_slice(x, r, np.array([begin], np.int64), np.array([end], np.int64))
    np.testing.assert_array_equal(x, before)


def test_reshape_is_a_view():
    x = _rand(2, 3, 4)
    y = ops.reshape(x, (6, 4))
    y[0, 0] = 42.0
    assert x[0, 0, 0] == 42.0
    with pytest.raises(gpudsl.Error):
        ops.reshape(x, (5, 5))


@pytest.mark.parametrize("call", [
    lambda: ops.add(_rand(2, 3), _rand(3, 2)),                 # b axis neither equal nor 1
    lambda: ops.add(_rand(2, 1), _rand(3)),                    # (2, 1) + (1, 3): both
    lambda: ops.relu(_rand(1, 1, 2, 2, 2, 2, 2)),              # rank 7 (6 allowed)
    lambda: ops.relu(np.zeros((3, 0), np.float32)),            # empty dimension
    lambda: ops.silu(np.zeros(4, np.float64)),                 # not float32
    lambda: ops.slice(_rand(4, 2), 3, 3),                      # empty range
    lambda: ops.slice(_rand(4, 2), 1, 5),                      # past the end
    lambda: ops.replace_slice(_rand(4, 2), _rand(1, 3), np.array([0]), np.array([1])),
    lambda: ops.replace_slice(_rand(4, 2), _rand(1, 2), np.array([0], np.int32),
                              np.array([1], np.int32)),        # not int64
], ids=["bcast-axis", "both-broadcast", "rank7", "empty", "float64", "empty-slice",
        "slice-past-end", "replace-row-shape", "replace-int32"])
def test_bad_inputs_are_refused(call):
    with pytest.raises(gpudsl.Error):
        call()


# ------------------------------------------------------------ proofs


FULLS = [f for r in (1, 2, 3) for f in itertools.product((True, False), repeat=r)
         if all(x != y for x, y in zip(f, f[1:]))]  # canonical patterns alternate


@pytest.mark.parametrize("full", FULLS, ids=str)
@pytest.mark.parametrize("vec", [1, 2, 4])
def test_binary_schedules_are_proved_for_every_size(full, vec):
    p = binary_kernel("add", full, vec)
    report = p.check()
    assert report.ok, str(report)


@pytest.mark.parametrize("vec", [1, 2, 4])
def test_row_schedules_are_proved_for_every_size(vec):
    for p in (slice_kernel(vec), replace_slice_kernel(vec)):
        report = p.check()
        assert report.ok, str(report)
    report = unary_kernel("silu", vec).check()
    assert report.ok, str(report)


def test_vectorized_schedule_emits_float4():
    src = binary_kernel("add", (True,), 4).cuda_source()
    assert "float4" in src and "__launch_bounds__(256)" in src


@pytest.mark.parametrize("a_shape, b_shape", [((70000, 3), (70000, 1)), ((3, 70000, 2), (3, 1, 2))])
def test_more_rows_than_a_grid_dimension_holds(a_shape, b_shape):
    """Row loops beyond 65535 blocks in blockIdx.y/z (grid-stride loops)."""
    rng = np.random.default_rng(9)
    a = rng.standard_normal(a_shape).astype(np.float32)
    b = rng.standard_normal(b_shape).astype(np.float32)
    np.testing.assert_array_equal(ops.add(a, b), a + b)
    x = rng.standard_normal((70000, 3)).astype(np.float32)
    np.testing.assert_array_equal(ops.slice(x, 1, 69999), x[1:69999])


def test_random_shapes_and_ranges():
    """Random ranks, odd sizes, size-1 axes and broadcast masks; random slices."""
    rng = np.random.default_rng(61)
    sizes = [1, 2, 3, 5, 7, 8, 13, 64, 100, 257]
    for _ in range(30):
        rank = int(rng.integers(1, 4))
        shape = tuple(int(rng.choice(sizes)) for _ in range(rank))
        mask = rng.integers(0, 2, rank).astype(bool)
        a = rng.standard_normal(shape).astype(np.float32)
        b = rng.standard_normal(tuple(d if k else 1 for d, k in zip(shape, mask))
                                ).astype(np.float32)
        np.testing.assert_allclose(ops.add(a, b), a + b, rtol=1e-6, atol=1e-6)
        np.testing.assert_allclose(ops.mul(a, b), a * b, rtol=1e-6, atol=1e-6)
        np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))
        begin = int(rng.integers(0, shape[0]))
        end = int(rng.integers(begin + 1, shape[0] + 1))
        np.testing.assert_array_equal(ops.slice(a, begin, end), a[begin:end])
        r = rng.standard_normal((end - begin, *shape[1:])).astype(np.float32)
        want = a.copy()
        want[begin:end] = r
        ops.replace_slice(a, r, np.array([begin], np.int64), np.array([end], np.int64))
        np.testing.assert_array_equal(a, want)


@pytest.mark.parametrize("sa,sb", [((2, 3), (3,)), ((3,), (2, 3)), ((4, 2, 3), (3,)),
                                   ((4, 2, 3), (2, 1)), ((1, 3), (4, 2, 3))])
def test_operands_of_different_ranks_broadcast_as_numpy(sa, sb):
    # issue 40: add(x[r, n], w[n]) was refused ("broadcasting here needs equal ranks")
    a, b = _rand(*sa), _rand(*sb)
    np.testing.assert_array_equal(ops.add(a, b), a + b)
    np.testing.assert_array_equal(ops.mul(a, b), a * b)
