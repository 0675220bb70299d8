"""The performance report on the standard library's kernels, and ``gpudsl perf``."""
from __future__ import annotations

import pathlib

from gpudsl.cli import main
from gpudsl.stdlib import matmul


def _matmul_report(**opts):
    if opts:
        p = matmul.schedule_matmul(matmul.matmul_algorithm(False, (128, 128, 8)), **opts)
    else:
        p = matmul.big_kernel(False)
    return p.perf(m=1024, n=1024, k=1024)


def test_matmul_old_layout_has_the_known_2_way_conflict():
    # issue 15: the two ti rows of a warp read As 64 floats apart (same bank); the
    # layout is still there behind options, and the report still sees it
    (k,) = _matmul_report(a_transposed=False, strided_cols=False).kernels
    reads = [a for a in k.accesses if a.buffer == "As" and a.kind == "read"]
    assert [a.bank_conflict for a in reads] == [2]


def test_matmul_default_has_no_a_tile_conflict():
    (k,) = _matmul_report().kernels
    reads = [a for a in k.accesses if a.buffer == "As" and a.kind == "read"]
    # (two stages: the compute of the loop and of the epilogue read the A tile)
    assert {(a.bank_conflict, a.vector_width) for a in reads} == {(1, 4)} and reads
    assert k.flops == 2 * 1024 ** 3
    assert k.bound == "compute"
    if k.registers is not None:
        assert k.spills == 0


def test_cli_perf(tmp_path, capsys):
    src = pathlib.Path(__file__).with_name("kernels.py").read_text()
    f = tmp_path / "k.py"
    f.write_text(src)
    assert main(["perf", f"{f}::transpose_naive", "--bind", "n=256"]) == 0
    out = capsys.readouterr().out
    assert "32-way bank conflict" in out and "H100" in out
    assert main(["perf", f"{f}::saxpy", "--bind", "n=256", "--device", "H200"]) == 0
    assert "H200" in capsys.readouterr().out


def test_permute_defaults_are_conflict_free_and_coalesced():
    from gpudsl.stdlib import permute

    p, b, _ = permute.permute_kernel((1024, 1024), (1, 0))
    (k,) = p.perf(**b).kernels
    assert all(a.ok for a in k.accesses), [a.figure() for a in k.accesses]
    assert sorted(a.memory for a in k.accesses) == ["GLOBAL", "GLOBAL", "SHARED", "SHARED"]
    p, b, _ = permute.permute_kernel((1024, 1024), (0, 1))
    (k,) = p.perf(**b).kernels
    assert [(a.vector_width, a.sectors, a.min_sectors) for a in k.accesses] == [(4, 16, 16)] * 2
