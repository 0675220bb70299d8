"""The machine-code report (gpudsl/perf/sass.py, sass_report.py) and the model's
issue-slot and loads-in-flight terms (perf/perf_model.py).

The parser and the counts are tested on a fixed nvdisasm text; the end-to-end tests
need the disassembler (``pip install 'gpudsl[sass]'``, part of the ``test`` extra) and
skip cleanly without it."""
from __future__ import annotations

import pytest

from gpudsl.errors import Error
from gpudsl.perf import sass as sass_mod
from gpudsl.perf.sass import hot_loop, kernel_figures, parse_sass

needs_tool = pytest.mark.skipif(not sass_mod.have_disassembler(),
                                reason="nvdisasm absent: pip install 'gpudsl[sass]'")

TEXT = """
//--------------------- .text.k0   --------------------------
\t.section\t.text.k0,"ax",@progbits
k0:
\t//## File "/x/gpudsl.cu", line 7
        /*0000*/                   LDC R1, c[0x0][0x28] ;
\t//## File "<gpudsl.stdlib.t>", line 3
        /*0010*/                   S2R R8, SR_CTAID.Y ;
.L_x_0:
        /*0020*/                   IMAD.WIDE R6, R7, 0x4, R2 ;
        /*0030*/                   LDG.E.128.CONSTANT R12, desc[UR6][R6.64] ;
        /*0040*/                   LDG.E.CONSTANT R16, desc[UR6][R6.64+0x800] ;
\t//## File "<gpudsl.stdlib.t>", line 5
        /*0050*/                   IADD3 R0, R19, R0, RZ ;
        /*0060*/                   STS [R10], R14 ;
        /*0070*/                   FFMA R20, R16, R16, R20 ;
        /*0080*/                   BAR.SYNC.DEFER_BLOCKING 0x0 ;
        /*0090*/                   STG.E.64 desc[UR6][R8.64], R20 ;
        /*00a0*/              @!P0 BRA `(.L_x_0) ;
        /*00b0*/                   EXIT ;
.L_x_1:
        /*00c0*/                   BRA `(.L_x_1);
        /*00d0*/                   NOP;
"""


def test_parse_counts_loops_and_loads_in_flight():
    funcs = parse_sass(TEXT)
    assert list(funcs) == ["k0"]
    figs = kernel_figures(funcs["k0"])
    kernel, loop = figs
    assert kernel.depth == -1 and loop.depth == 0
    assert (loop.start, loop.end, loop.instructions) == (0x20, 0xa0, 9)
    c = loop.counts
    assert (c["LDG.128"], c["LDG"], c["STS"], c["STG.64"], c["BAR"], c["FFMA"]) == \
        (1, 1, 1, 1, 1, 1)
    assert c["int"] == 2 and c["branch"] == 1
    # the 128-bit load is first read by the STS (R14), 2 instructions after the second
    # load; the second load (R16) by the FFMA
    assert [u.distance for u in loop.loads] == [2, 2]
    assert (loop.loads_in_flight, loop.bytes_in_flight) == (2, 20)
    assert loop.global_bytes == 16 + 4 + 8 and loop.flops == 2
    assert loop.source == "<gpudsl.stdlib.t>:3-5"
    assert hot_loop(figs) is loop
    # the trap loop (a branch to itself) and NOPs are no loops, no instructions
    assert kernel.instructions == 12


def test_missing_tool_names_the_extra(monkeypatch):
    monkeypatch.setattr(sass_mod, "nvdisasm_path", lambda: None)
    with pytest.raises(Error) as e:
        sass_mod.disassemble(b"")
    assert "gpudsl[sass]" in str(e.value)


def _permute_kernel(shape):
    from gpudsl.stdlib.permute import permute_kernel

    p, binds, _ = permute_kernel(shape, (1, 0))
    return p, binds


@needs_tool
def test_kernel_sass_of_the_running_permute():
    p, _ = _permute_kernel((8192, 8192))
    k = p.compile("emulator")
    r = k.sass()
    assert r.arch == "sm_90" and len(r.kernels) == 1
    ks = r.kernels[0]
    assert ks.registers and ks.spill_bytes == 0 and ks.occupancy is not None
    loop = ks.loops[0]
    assert loop.count("LDG") >= 1 and loop.count("STG") >= 1 and loop.count("BAR") >= 1
    assert "<gpudsl.stdlib.permute" in loop.source
    text, html = str(r), r._repr_html_()
    assert "loads in flight" in text and "<table" in html


@needs_tool
def test_perf_model_has_machine_terms():
    p, binds = _permute_kernel((4096, 4096))
    k = p.perf("H100", **binds).kernels[0]
    assert k.time_issue_s > 0 and k.time_mlp_s > 0 and k.loads_in_flight >= 1
    assert k.estimate_s >= max(k.time_memory_s, k.time_issue_s, k.time_mlp_s)
    assert k.limiter in ("memory", "issue", "loads in flight")
    assert "model (machine code)" in str(p.perf("H100", **binds))
    off = p.perf("H100", sass=False, **binds).kernels[0]
    assert off.time_issue_s is None and off.estimate_s == off.time_s


@needs_tool
def test_cli_perf_sass(tmp_path, capsys):
    import pathlib

    from gpudsl.cli import main

    f = tmp_path / "k.py"
    f.write_text(pathlib.Path(__file__).with_name("kernels.py").read_text())
    assert main(["perf", f"{f}::saxpy", "--bind", "n=1048576", "--sass"]) == 0
    out = capsys.readouterr().out
    assert "machine code of saxpy (sm_90" in out and "LDG" in out
    assert "model (machine code)" in out
    assert "k.py:" in out  # the loops' source lines, from NVRTC's -lineinfo


@needs_tool
@pytest.mark.parametrize("shape, perm", [((8192, 8192), (1, 0)), ((64, 1024, 1024), (0, 2, 1)),
                                         ((64, 1024, 1024), (2, 1, 0)), ((4000, 4001), (1, 0))])
def test_permute_has_four_loads_in_flight(shape, perm):
    """The tiled transposes ops runs (32x8 threads, 4 elements each): at least 4
    independent global loads in flight per thread in the loop that copies a tile, and
    no spills (issue 24)."""
    from gpudsl.perf.sass import hot_loop
    from gpudsl.stdlib.permute import permute_kernel

    p, _, _ = permute_kernel(shape, perm)
    r = p.compile("emulator", check=False).sass()
    tiled = r.kernels[0]  # the tiled kernel (the edges of other shapes follow)
    assert tiled.threads == 256 and tiled.spill_bytes == 0
    hot = hot_loop(tiled.figures)
    assert hot.count("LDG") == 4 and hot.loads_in_flight >= 4, str(r)
    assert all(u.distance is not None and u.distance >= 3 for u in hot.loads)


@needs_tool
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("shape, perm", [((4001, 4003), (1, 0)), ((37, 100), (1, 0)),
                                         ((64, 1001, 1003), (0, 2, 1)),
                                         ((63, 1001, 1003), (2, 1, 0))])
def test_permute_edge_kernels_have_four_loads_in_flight(shape, perm, arch):
    """Odd shapes: the tiled kernel and both edge kernels keep at least 4 independent
    global loads in flight per thread (the edge over the last < 32 values of the
    input's inner axis had 1: one element per thread), no spills (issue 24)."""
    from gpudsl.stdlib.permute import permute_kernel

    p, _, _ = permute_kernel(shape, perm)
    r = p.compile("emulator", check=False).sass(arch)
    assert len(r.kernels) == 3, str(r)
    for k in r.kernels:
        assert k.spill_bytes == 0
        assert max(f.loads_in_flight for f in k.figures) >= 4, str(r)


def test_perf_analyses_the_running_kernel():
    """perf() reads the kernel ops runs: sizes stay parameters (issue 24: a kernel
    with its sizes bound as constants is another kernel)."""
    from gpudsl.perf import running_module
    from gpudsl.stdlib.permute import permute_kernel

    p, binds, _ = permute_kernel((8192, 8192), (1, 0))
    src = running_module(p.ir, binds).source
    assert "const int d0" in src and "8192" not in src


@needs_tool
def test_sass_table_row():
    import importlib.util
    import pathlib

    path = pathlib.Path(__file__).resolve().parents[2] / "benchmarks" / "sass_table.py"
    spec = importlib.util.spec_from_file_location("sass_table", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    (case,) = mod.cases({"permute2d"})
    r, rep = mod.row(*case)
    assert r["loads in flight"].startswith("4 ") and r["spills"] == 0
    assert r["measured"] == "-" and "|" in mod.markdown([r])
    # the committed GPU runs: only those whose repetitions were all timed without host
    # time count (the first H100 run's host-bound 0.28 of copy does not)
    runs = mod.gpu_runs()
    got = mod.measured("permute2d", "8192x8192", runs)
    assert "H200" in got and "H100" in got and "0.28" not in got, got
    # sliced_softmax on an H100: only the third run's (bba143a, every repetition timed
    # without host time), not the earlier host-bound ones
    ss = mod.measured("sliced_softmax", "8192x8192", runs)
    assert ss.count("H100") == 1 and "H100 (bba143a)" in ss, ss


def test_template_reads_of_the_mma_fragments():
    """perf() reads an @instr by the loads of its template's GPU code: the TF32
    fragment loads (two 64-bit loads of the B tile, one of the A tile per lane) are
    free of bank conflicts, where its semantic body (16 + 16 reads per lane) shows
    false conflicts; vector loads count their width."""
    import time

    from gpudsl.perf.templates import lane_env, template_reads
    from gpudsl.stdlib.matmul_tf32 import _MMA_TEMPLATE, matmul_tf32_kernel

    decls, loads = template_reads(_MMA_TEMPLATE, {"a", "b"})
    assert [(ld.param, ld.width) for ld in loads] == [("b", 2), ("b", 2), ("a", 2)]
    env = lane_env(decls, 5, {"a_stride_0": 24, "b_stride_0": 132})  # g = 1, t = 1
    assert [eval(ld.offset, env) for ld in loads] == [2 * 132, 3 * 132, (1 - 2) * 24 + 2]
    assert template_reads("{ *(float4*)&{dst} = *(const float4*)&{src}; }",
                          {"dst", "src"}) is None  # not through pointers: the body
    p, b = matmul_tf32_kernel((4096, 4096), (4096, 4096))
    p.perf("H100", sass=False, **b)  # the first call compiles (ptxas figures)
    t = time.process_time()
    rep = p.perf("H100", sass=False, **b)
    elapsed = time.process_time() - t
    frag = [a for a in rep.accesses if a.statement.startswith("mma_") and a.memory == "SHARED"]
    assert {a.buffer for a in frag} == {"As", "Bs"}
    assert all(a.bank_conflict == 1 and a.vector_width == 2 for a in frag), \
        [a.figure() for a in frag]
    # 9.9 s before issue 24 (0.2 s of CPU here); a loose bound for loaded CI machines
    assert elapsed < 3


TEXT_CALL = """
//--------------------- .text.k1   --------------------------
k1:
        /*0000*/                   LDG.E R2, desc[UR4][R4.64] ;
        /*0010*/                   CALL.REL.NOINC `($__internal_0_$__slowpath) ;
        /*0020*/                   FADD R3, R2, R2 ;
        /*0030*/                   EXIT ;
$__internal_0_$__slowpath:
        /*0040*/                   FFMA R6, R6, R7, R8 ;
.L_x_3:
        /*0050*/                   IADD3 R9, R9, 0x1, RZ ;
        /*0060*/               @P0 BRA `(.L_x_3) ;
        /*0070*/                   RET.REL.NODEC R10 `(k1) ;
"""


def test_subroutines_reached_by_call_are_left_out():
    """The slow paths of division and math functions (reached by CALL, for rare
    operands) count neither in the kernel nor as loops."""
    figs = kernel_figures(parse_sass(TEXT_CALL)["k1"])
    assert len(figs) == 1 and figs[0].instructions == 4
    assert figs[0].count("FFMA") == 0 and figs[0].loads[0].distance == 1
