"""The performance report (docs/performance.md) on kernels with known answers."""
from __future__ import annotations

import pytest

from gpudsl import Error
from gpudsl.perf import DEVICES, occupancy

from . import kernels as K


def _acc(report, buf, kind):
    (k,) = report.kernels
    found = [a for a in k.accesses if a.buffer == buf and a.kind == kind]
    assert len(found) == 1, found
    return found[0]


def test_transpose_tile_without_padding_is_32_way():
    r = K.transpose_naive.perf(n=1024)
    assert _acc(r, "t", "read").bank_conflict == 32
    assert _acc(r, "t", "write").bank_conflict == 1
    x, y = _acc(r, "x", "read"), _acc(r, "y", "write")
    assert (x.sectors, x.min_sectors) == (4, 4)
    assert (y.sectors, y.min_sectors) == (4, 4)
    assert not _acc(r, "t", "read").ok


def test_transpose_tile_with_padding_has_no_conflict():
    r = K.transpose_padded.perf(n=1024)
    assert _acc(r, "t", "read").bank_conflict == 1
    assert _acc(r, "t", "write").bank_conflict == 1
    assert all(a.ok for a in r.accesses)


def test_column_major_read_32_sectors_vs_4():
    r = K.column_read.perf(n=512)
    a = _acc(r, "x", "read")
    assert (a.sectors, a.min_sectors) == (32, 4)
    assert not a.ok
    b = _acc(K.row_read.perf(n=512), "x", "read")
    assert (b.sectors, b.min_sectors) == (4, 4)


def test_kernel_totals_and_roofline():
    r = K.saxpy.perf(n=1 << 20)
    (k,) = r.kernels
    assert k.flops == 2 * (1 << 20)
    assert k.bytes == 3 * 4 * (1 << 20)  # x read, y read, y written
    assert k.bound == "memory"
    assert k.time_memory_s == pytest.approx(k.bytes / DEVICES["H100"].bandwidth)
    assert k.grid == ((1 << 20) // 256, 1, 1) and k.block == (256, 1, 1)


def test_ptxas_resources_and_occupancy():
    r = K.transpose_naive.perf(n=1024)
    (k,) = r.kernels
    if k.registers is None:
        pytest.skip("NVRTC unavailable: " + "; ".join(r.notes))
    assert k.shared_bytes == 32 * 32 * 4
    assert k.spills == 0
    assert 0 < k.registers <= 64
    assert k.occupancy == 1.0  # 1024 threads, 2 blocks/SM


def test_occupancy_table():
    h100 = DEVICES["H100"]
    assert occupancy(h100, 256, 32, 0).fraction == 1.0
    o = occupancy(h100, 256, 128, 0)  # 128*256 = 32768 regs/block: 2 blocks
    assert (o.blocks_per_sm, o.limited_by, o.fraction) == (2, "registers", 0.25)
    o = occupancy(h100, 128, 32, 100 * 1024)  # 101 KiB per block: 2 blocks
    assert (o.blocks_per_sm, o.limited_by) == (2, "shared")
    assert DEVICES["H200"].bandwidth > h100.bandwidth


def test_h200_changes_the_roofline_only():
    a = K.saxpy.perf(n=1 << 20)
    b = K.saxpy.perf("H200", n=1 << 20)
    assert a.kernels[0].bytes == b.kernels[0].bytes
    assert b.kernels[0].time_memory_s < a.kernels[0].time_memory_s


def test_needs_bound_sizes_and_a_known_device():
    with pytest.raises(Error, match="missing: n"):
        K.saxpy.perf()
    with pytest.raises(Error, match="unknown device"):
        K.saxpy.perf("Z80", n=256)


def test_text_and_html():
    r = K.transpose_naive.perf(n=64)
    text = str(r)
    assert "32-way bank conflict" in text and "transpose_naive_k0" in text
    html = r._repr_html_()
    assert "<table" in html and "32-way bank conflict" in html
    assert "t[tx, ty]" in html or "t[tx, ty]".replace(",", "&#x2C;") in html
    loc = _acc(r, "t", "read").location
    assert loc[0].endswith("kernels.py") and loc[1] > 0
