"""Permute kernels on the emulator against numpy: every permutation of 2 and 3
axes, size-1 axes, multiples and non-multiples of the 32x32 tile; check()
proofs of every default schedule (symbolic over its shape class)."""
import itertools

import numpy as np
import pytest

from gpudsl.stdlib import permute as ps
from gpudsl.stdlib.shapes import NodeError

_KERNELS = {}


def _run(shape, perm, rng):
    p, bind, out_shape = ps.permute_kernel(shape, perm)
    mshape, mout = ps.merged_shapes(shape, perm)
    assert tuple(bind[f"d{i}"] for i in range(len(mshape))) == tuple(mshape)
    if p.name not in _KERNELS:  # one compile per kernel (symbolic sizes)
        _KERNELS[p.name] = p.compile("emulator")
    x = rng.standard_normal(shape).astype(np.float32)
    out = np.zeros(mout, np.float32)
    _KERNELS[p.name](x=x.reshape(mshape), out=out)
    np.testing.assert_array_equal(out.reshape(out_shape), np.transpose(x, perm))


SHAPES = [(64, 32), (5, 7), (1, 9), (33, 1), (32, 64, 3), (3, 64, 32), (2, 3, 5),
          (64, 1, 32), (32, 2, 64), (1, 1, 1), (1, 32, 1), (8,), (7,), (33, 65), (100, 31),
          (65, 40, 2), (3, 45, 70)]


@pytest.mark.parametrize("shape", SHAPES, ids=str)
def test_every_permutation(shape):
    rng = np.random.default_rng(len(shape) * 100 + shape[0])
    for perm in itertools.permutations(range(len(shape))):
        _run(shape, perm, rng)


def test_random_shapes():
    rng = np.random.default_rng(7)
    for _ in range(12):
        rank = int(rng.integers(2, 4))
        shape = tuple(int(rng.choice([1, 2, 3, 5, 32, 33, 64])) for _ in range(rank))
        perm = tuple(int(v) for v in rng.permutation(rank))
        _run(shape, perm, rng)


PERMS = [(0,), (0, 1), (1, 0), (0, 2, 1), (1, 0, 2), (1, 2, 0), (2, 0, 1), (2, 1, 0)]


@pytest.mark.parametrize("perm", PERMS, ids=str)
def test_default_schedules_check(perm):
    kinds = ["tiled", "cut"] if ps.moves_inner(perm) else ["vcopy", "copy"]
    for kind in kinds:
        report = ps._kernel(perm, kind).check()
        assert report.ok, str(report)


def test_tiled_kernel_uses_padded_shared_tile():
    p, bind, _ = ps.permute_kernel((64, 96), (1, 0))
    assert p.check(**bind).ok
    src = p.cuda_source(**bind)
    assert "__shared__" in src and "[33]" in src and "__syncthreads" in src


@pytest.mark.parametrize("shape, perm", [((33, 65), (1, 0)), ((3, 45, 70), (0, 2, 1)),
                                         ((40, 2, 65), (2, 1, 0))])
def test_other_shapes_tile_their_largest_multiple_of_32(shape, perm):
    p, bind, _ = ps.permute_kernel(shape, perm)
    assert p.name.endswith("_cut")
    src = p.cuda_source(**bind)
    assert "__shared__" in src and "[33]" in src
    assert src.count('extern "C" __global__') == 3  # the tiles and two edges


@pytest.mark.parametrize("shape, perm", [((3, 70000), (1, 0)), ((70000, 3), (1, 0)),
                                         ((70000, 3, 5), (0, 2, 1)), ((3, 70000, 8), (1, 0, 2))])
def test_more_rows_than_a_grid_dimension_holds(shape, perm):
    """Outer loops beyond 65535 blocks in blockIdx.y/z (grid-stride loops)."""
    _run(shape, perm, np.random.default_rng(5))


def test_copy_kernel_is_vectorized():
    p, bind, _ = ps.permute_kernel((4, 6, 8), (1, 0, 2))
    assert "float4" in p.cuda_source(**bind)


@pytest.mark.parametrize("shape, perm", [((2, 3), (0, 0)), ((2, 3), (0,)),
                                         ((2, 3, 4, 5), (0, 1, 2, 3)), ((0, 3), (1, 0))])
def test_bad_inputs(shape, perm):
    with pytest.raises(NodeError):
        ps.permute_kernel(shape, perm)
