"""issue 15: the performance report's figures for each standard-library default kernel
(per access: sectors vs the minimum, bank-conflict degree, vector width; per kernel:
no ptxas spills, FLOPs / bytes, the roofline bound).  Where an access is above its
minimum the reason is the shape (rows of an odd length start off sector boundaries),
not the schedule: such figures are asserted as they are."""
from __future__ import annotations

import pytest

from gpudsl.stdlib import matmul, permute, pointwise, slices

OK_TILE = [("a", "16 sectors (min 16)", 4), ("As", "no bank conflict", 1),
           ("b", "16 sectors (min 16)", 4), ("Bs", "no bank conflict", 4),
           ("As", "no bank conflict", 4), ("Bs", "no bank conflict", 4),
           ("c", "16 sectors (min 16)", 4)]


def _figs(k):
    return [(a.buffer, a.figure(), a.vector_width) for a in k.accesses]


def _no_spills(k):
    if k.registers is not None:  # NVRTC present
        assert k.spills == 0, k.name
        assert k.registers <= 128, k.name


@pytest.mark.parametrize("a_shape,b_shape,flops", [
    ((1024, 1024), (1024, 1024), 2 * 1024 ** 3),
    ((4, 256, 256), (4, 256, 256), 2 * 4 * 256 ** 3),
], ids=["matmul_big", "bmatmul_big"])
def test_matmul_big_tile(a_shape, b_shape, flops):
    p, b = matmul.matmul_kernel(a_shape, b_shape)
    (k,) = p.perf(**b).kernels
    # the 2-D default has two stages: the tile copies and the compute stand twice (the
    # prologue's copy, the loop, the epilogue's compute), each access at its minimum
    assert set(_figs(k)) == set(OK_TILE)
    assert all(a.ok for a in k.accesses)
    assert k.flops == flops and k.bound == "compute"
    _no_spills(k)


def test_matmul_cut_float4():
    # the cut variant (matmul_kernel picks the one-kernel tiles for this shape since
    # issue 17; its figures: tests/stdlib/test_matmul_one_kernel.py)
    p, b = matmul.cut_kernel(False, 4), dict(m=1000, n=1000, k=1000)
    k0, k1, k2 = p.perf(**b).kernels
    assert _figs(k0) == OK_TILE
    for k in (k1, k2):  # edge kernels: one row per block, threads over columns
        assert _figs(k) == [("a", "1 sectors (min 1)", 1), ("b", "4 sectors (min 4)", 1),
                            ("c", "4 sectors (min 4)", 1)]
    for k in (k0, k1, k2):
        assert all(a.ok for a in k.accesses)
        _no_spills(k)
    assert k0.flops == 2 * 896 * 896 * 1000  # the tiled part: 7 x 7 tiles of 128


def test_matmul_cut_scalar_odd_shape():
    # 999: rows of a, b and c start off sector boundaries (the extra sectors); no
    # bank conflict anywhere, the A tile included (padded transposed layout)
    p, b = matmul.cut_kernel(False, 1), dict(m=999, n=999, k=999)  # as above
    k0 = p.perf(**b).kernels[0]
    shared = [(a.buffer, a.kind, a.bank_conflict) for a in k0.accesses if a.memory == "SHARED"]
    assert shared == [("As", "write", 1), ("Bs", "write", 1), ("As", "read", 1),
                      ("Bs", "read", 1)]
    glob = [(a.buffer, a.sectors, a.min_sectors) for a in k0.accesses if a.memory == "GLOBAL"]
    assert glob == [("a", 7, 4), ("b", 5, 4), ("a", 2, 1), ("b", 2, 2), ("c", 6, 4)]
    _no_spills(k0)


def test_matmul_guarded_and_vecmat():
    p, b = matmul.matmul_kernel((64, 128), (128, 128))
    (k,) = p.perf(**b).kernels
    assert _figs(k) == [("a", "1 sectors (min 1)", 1), ("b", "4 sectors (min 4)", 1),
                        ("c", "4 sectors (min 4)", 1)]
    assert k.bound == "memory"
    _no_spills(k)
    p, b = matmul.matmul_kernel((1024,), (1024, 1024))
    (k,) = p.perf(**b).kernels
    assert _figs(k) == [("a", "1 sectors (min 1)", 1), ("b", "4 sectors (min 4)", 1),
                        ("c", "4 sectors (min 4)", 1)]
    assert k.flops == 2 * 1024 * 1024 and k.bound == "memory"
    _no_spills(k)


TILE_FIGS = [("x", "4 sectors (min 4)", 1), ("tile", "no bank conflict", 1),
             ("tile", "no bank conflict", 1), ("out", "4 sectors (min 4)", 1)]


@pytest.mark.parametrize("shape,perm", [((1024, 1024), (1, 0)), ((64, 128, 256), (2, 1, 0)),
                                        ((64, 128, 256), (0, 2, 1))])
def test_permute_transposes(shape, perm):
    p, b, _ = permute.permute_kernel(shape, perm)
    (k,) = p.perf(**b).kernels
    assert _figs(k) == TILE_FIGS
    n = 1
    for d in shape:
        n *= d
    assert k.bytes == 2 * 4 * n and k.flops == 0 and k.bound == "memory"
    _no_spills(k)


def test_permute_copy():
    p, b, _ = permute.permute_kernel((64, 128, 256), (1, 0, 2))
    (k,) = p.perf(**b).kernels
    assert all(a.ok for a in k.accesses) and all(a.vector_width == 4 for a in k.accesses)
    assert [(a.sectors, a.min_sectors) for a in k.accesses] == [(16, 16)] * 2
    _no_spills(k)


def _stream_ok(k, n_access):
    assert len(k.accesses) == n_access, _figs(k)
    for a in k.accesses:
        assert a.memory == "GLOBAL" and a.ok, a.figure()
    _no_spills(k)
    assert k.bound == "memory"


def _bind(p, dims):
    sizes = [prm.name for prm in p.ir.params if prm.kind == "size"]
    return dict(zip(sizes, dims))


@pytest.mark.parametrize("a_shape,b_shape", [((1024, 1024), (1024, 1024)),
                                             ((1024, 1024), (1, 1024)),
                                             ((1024, 1024), (1024, 1)),
                                             ((64, 32, 256), (64, 1, 256))])
def test_pointwise_binary_broadcasting(a_shape, b_shape):
    p, dims, _ = pointwise.plan_binary("add", a_shape, b_shape)
    (k,) = p.perf(**_bind(p, dims)).kernels
    _stream_ok(k, 3)
    vw = [a.vector_width for a in k.accesses]
    assert vw[0] == 4 and vw[-1] == 4  # a and out with float4


def test_pointwise_unary():
    p = pointwise.plan_unary("relu" if "relu" in pointwise.UNARY_OPS else
                             sorted(pointwise.UNARY_OPS)[0], 1 << 20)
    (k,) = p.perf(**_bind(p, [1 << 20])).kernels
    _stream_ok(k, 2)
    assert [(a.vector_width, a.sectors, a.min_sectors) for a in k.accesses] == [(4, 16, 16)] * 2


def test_slice_and_replace_slice():
    p = slices.plan_slice(1024)
    (k,) = p.perf(n=2048, c=1024, m=512, begin=256).kernels
    _stream_ok(k, 2)
    assert [(a.vector_width, a.sectors, a.min_sectors) for a in k.accesses] == [(4, 16, 16)] * 2


def test_replace_slice():
    # the write sits under the data-dependent guard `begin[0] >= 0 and ...`: the report
    # walks each side as if the warp took it, marks those figures and says so in a note
    # (it used to crash evaluating the guard: TypeError in ir/control.py)
    p = slices.plan_replace_slice(1024)
    r = p.perf(n=2048, c=1024, m=512)
    (k,) = r.kernels
    _stream_ok(k, 6)
    figs = [(a.buffer, a.kind, a.figure(), a.vector_width, bool(a.assumes))
            for a in k.accesses]
    assert figs == [("r", "read", "16 sectors (min 16)", 4, False),
                    ("begin", "read", "1 sectors (min 1)", 1, False),
                    ("end", "read", "1 sectors (min 1)", 1, False),
                    ("begin", "read", "1 sectors (min 1)", 1, True),
                    ("x", "write", "data-dependent index", 1, True),
                    ("err", "write", "1 sectors (min 1)", 1, True)]
    assert k.accesses[4].assumes.startswith("begin[0] >= 0 and end[0] <= n")
    assert k.accesses[5].assumes.startswith("not (begin[0] >= 0")
    assert sum("data-dependent guard `begin[0] >= 0" in n for n in r.notes) == 1
    assert "(if taken)" in str(r)
    # bytes: r read and x written once each (the guarded then-block), begin/end/err tiny
    assert 2 * 4 * 512 * 1024 <= k.bytes <= 2 * 4 * 512 * 1024 + 64
    assert k.flops == 0
