"""Matmul kernels on the emulator against numpy (2-D, vector-matrix, batched;
odd sizes, size-1 dimensions, multiples and non-multiples of the tiles), check()
proofs of the default schedules, and the shape of the big-tile CUDA."""
import numpy as np
import pytest

from gpudsl.stdlib import matmul as ms
from gpudsl.stdlib.shapes import NodeError

_KERNELS = {}


def _run(sa, sb, rng):
    p, bind = ms.matmul_kernel(sa, sb)
    if p.name not in _KERNELS:  # one compile per kernel (symbolic sizes)
        _KERNELS[p.name] = p.compile("emulator")
    a = rng.standard_normal(sa).astype(np.float32)
    b = rng.standard_normal(sb).astype(np.float32)
    ref = a @ b
    c = np.zeros(ref.shape, np.float32)
    _KERNELS[p.name](a=a, b=b, c=c)
    np.testing.assert_allclose(c, ref, rtol=1e-4, atol=1e-4)
    return p


CASES = [((3, 5), (5, 7)), ((1, 1), (1, 1)), ((1, 9), (9, 1)), ((17, 1), (1, 33)),
         ((128, 8), (8, 128)), ((128, 24), (24, 256)), ((256, 16), (16, 128)),
         ((128, 12), (12, 128)), ((130, 8), (8, 128)), ((130, 12), (12, 129)),
         ((255, 13), (13, 257)), ((128, 3), (3, 200)), ((129, 1), (1, 131)),
         ((2, 129, 20), (2, 20, 130)), ((1, 256, 9), (1, 9, 140)),
         ((7,), (7, 5)), ((1,), (1, 1)), ((300,), (300, 3)),
         ((2, 128, 16), (2, 16, 128)), ((3, 17, 4), (3, 4, 9)), ((1, 1, 1), (1, 1, 1))]


@pytest.mark.parametrize("sa, sb", CASES, ids=str)
def test_against_numpy(sa, sb):
    _run(sa, sb, np.random.default_rng(sum(sa) + sum(sb)))


def test_random_shapes():
    rng = np.random.default_rng(3)
    for _ in range(8):
        m, n, k = (int(rng.integers(1, 40)) for _ in range(3))
        mode = int(rng.integers(0, 3))
        if mode == 0:
            _run((m, n), (n, k), rng)
        elif mode == 1:
            _run((n,), (n, k), rng)
        else:
            nb = int(rng.integers(1, 4))
            _run((nb, m, n), (nb, n, k), rng)


def test_big_tile_is_chosen_for_divisible_shapes():
    p, bind = ms.matmul_kernel((256, 64), (64, 384))
    assert p.name == "matmul_128x128x8" and bind == dict(m=256, n=64, k=384)
    p, bind = ms.matmul_kernel((2, 128, 8), (2, 8, 128))
    assert p.name == "bmatmul_128x128x8" and bind["nb"] == 2
    assert ms.matmul_kernel((100, 64), (64, 384))[0].name == "matmul"


@pytest.mark.parametrize("sa, sb, name", [  # edges: the one-kernel tiles (issue 17)
    ((130, 12), (12, 129), "matmul_tiles"), ((4095, 4096), (4096, 4096), "matmul_tiles"),
    ((4096, 4097), (4097, 4096), "matmul_cut"), ((2, 200, 64), (2, 64, 200), "bmatmul_tiles")])
def test_tiles_with_edges_for_other_shapes_of_a_tile_or_more(sa, sb, name):
    p, _ = ms.matmul_kernel(sa, sb)
    assert p.name == name
    assert "__shared__" in p.cuda_source()


@pytest.mark.parametrize("batched", [False, True])
@pytest.mark.parametrize("vec", [1, 4])
def test_accumulators_stay_in_registers(batched, vec):
    """ptxas (through NVRTC, no GPU needed): the tiled kernels neither spill nor keep
    the 8x8 accumulator in a local-memory stack frame."""
    kernels = [ms.cut_kernel(batched, vec)] + ([ms.big_kernel(batched)] if vec == 4 else [])
    for p in kernels:
        for name, r in p.compile("emulator").resources.items():
            assert r.stack_bytes == 0 and r.spill_stores_bytes == 0, (name, r)


@pytest.mark.parametrize("kernel", ["big", "big_batched", "cut", "cut_v4", "cut_batched",
                                    "cut_batched_v4", "guarded", "guarded_batched", "vecmat"])
def test_default_schedules_check_symbolically(kernel):
    p = {"big": lambda: ms.big_kernel(False), "big_batched": lambda: ms.big_kernel(True),
         "cut": lambda: ms.cut_kernel(False, 1), "cut_v4": lambda: ms.cut_kernel(False, 4),
         "cut_batched": lambda: ms.cut_kernel(True, 1),
         "cut_batched_v4": lambda: ms.cut_kernel(True, 4),
         "guarded": lambda: ms.guarded_kernel(False),
         "guarded_batched": lambda: ms.guarded_kernel(True),
         "vecmat": ms.vecmat_kernel}[kernel]()
    report = p.check()
    assert report.ok, str(report)


@pytest.mark.parametrize("sa, sb", [((4096, 4096), (4096, 4096)), ((8, 128, 256), (8, 256, 384)),
                                    ((1000, 77), (77, 33)), ((1000, 77), (77, 300)), ((4096,), (4096, 4096))], ids=str)
def test_default_schedules_check_with_bindings(sa, sb):
    p, bind = ms.matmul_kernel(sa, sb)
    report = p.check(**bind)
    assert report.ok, str(report)


def test_big_tile_cuda_has_shared_and_float4():
    p, bind = ms.matmul_kernel((4096, 4096), (4096, 4096))
    src = p.cuda_source(**bind)
    assert "__shared__" in src and "float4" in src and "__syncthreads" in src
    assert "block (16, 16, 1)" in src


def test_schedule_parameters():
    p = ms.schedule_matmul(ms.matmul_algorithm(False, (64, 64, 16)), bm=64, bn=64, bk=16,
                           tm=4, tn=4)
    assert p.check().ok
    k = p.compile("emulator")
    rng = np.random.default_rng(1)
    a = rng.standard_normal((64, 32)).astype(np.float32)
    b = rng.standard_normal((32, 128)).astype(np.float32)
    c = np.zeros((64, 128), np.float32)
    k(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("sa, sb", [((2, 3), (4, 5)), ((2, 3), (3,)), ((2, 2, 3), (3, 3, 4)),
                                    ((2, 3, 4, 5), (2, 3, 5, 4)), ((0, 3), (3, 2)),
                                    ((3,), (3, 2, 2)), ((2, 3), (2, 3, 4))])
def test_bad_shapes(sa, sb):
    with pytest.raises(NodeError):
        ms.matmul_kernel(sa, sb)


def test_bad_dtype():
    with pytest.raises(NodeError):
        ms.matmul_kernel((2, 3), (3, 4), a_dtype=np.float64)


def test_random_shapes_of_a_tile_or_more():
    """The tiled kernel with edges: random sizes around and above one 128x128 tile."""
    rng = np.random.default_rng(11)
    for _ in range(4):
        m, k = (int(rng.integers(128, 280)) for _ in range(2))
        n = int(rng.integers(1, 40))
        if rng.integers(0, 2):
            p = _run((m, n), (n, k), rng)
        else:
            p = _run((2, m, n), (2, n, k), rng)
        assert "cut" in p.name or "128x128" in p.name or "tiles" in p.name
