"""``setmaxnreg(n, lo, hi)`` (docs/hopper.md) through every layer: parser and printer,
interpreter and race detector (no meaning), check() (each refusal and its corrected
twin), codegen (inc or dec from the launch's registers), the emulator, NVRTC for sm_90a
and its SASS, and the primitives."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ProcError, SchedulingError, proc_from_source
from gpudsl.ir.nodes import SetMaxNReg
from gpudsl.ir.visitor import walk
from gpudsl.perf import sass as sass_mod
from gpudsl.runtime.nvrtc import compile_cubin
from gpudsl.schedule import delete_sync, insert_sync, reorder_stmts, set_blocks_per_sm

from .cases import NS, roles

SM90A = dict(target="sm_90a")


def _run(p, **kw):
    x = np.arange(384, dtype=np.float32)
    y = np.zeros(384, np.float32)
    gpudsl.interpret(p, x=x, y=y, **kw)
    return y


def test_prints_and_parses_back():
    p = roles()
    assert "setmaxnreg(40, 0, 128)" in str(p) and "setmaxnreg(232, 128, 384)" in str(p)
    assert proc_from_source(str(p), NS) == p
    s = [n for n in walk(p.ir.body) if isinstance(n, SetMaxNReg)]
    assert [(n.regs, n.lo.val, n.hi.val) for n in s] == [(40, 0, 128), (232, 128, 384)]


@pytest.mark.parametrize("stmt, msg", [
    ("setmaxnreg(40)", "takes the registers per thread and a thread range"),
    ("setmaxnreg(n, 0, 128)", "must be an integer constant"),
    ("setmaxnreg(0, 0, 128)", "asks for no registers"),
    ("setmaxnreg(40, 128, 0)", "empty or negative"),
    ("setmaxnreg(40, 0, 128, lo=1)", "takes the registers"),
])
def test_parser_refusals(stmt, msg):
    src = f'''
@proc
def k(n: size, x: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        {stmt}
        for t in par(0, 128) @ THREADS:
            x[t] = 1.0
'''
    with pytest.raises(ProcError, match=msg):
        proc_from_source(src, NS)


def test_no_meaning_in_the_interpreter_and_the_detector():
    with_regs, without = roles(), roles(regs=())
    assert np.array_equal(_run(with_regs), _run(without))
    assert np.array_equal(_run(with_regs, detect_races=True), _run(without))
    racy = roles(between=())   # the sync is what orders; setmaxnreg orders nothing
    src = str(racy).replace("        sync()\n", "")
    with pytest.raises(gpudsl.RaceError):
        _run(proc_from_source(src, NS), detect_races=True)
    assert proc_from_source(src, NS).check(**SM90A).kinds() == {"race"}


def test_the_canonical_configurations_prove():
    assert roles().check(**SM90A).ok                                    # 40 + 232 + 232
    assert roles(("setmaxnreg(24, 0, 128)", "setmaxnreg(240, 128, 384)")).check(**SM90A).ok
    assert roles(("setmaxnreg(232, 128, 384)", "setmaxnreg(40, 0, 128)")).check(**SM90A).ok
    assert roles(("setmaxnreg(40, 0, 128)",)).check(**SM90A).ok          # only giving back


@pytest.mark.parametrize("regs, kind, fixed", [
    (("setmaxnreg(44, 0, 128)",), "resource", ("setmaxnreg(40, 0, 128)",)),
    (("setmaxnreg(16, 0, 128)",), "resource", ("setmaxnreg(24, 0, 128)",)),
    (("setmaxnreg(264, 128, 256)",), "resource", ("setmaxnreg(256, 128, 256)",
                                                  "setmaxnreg(80, 0, 128)")),
    (("setmaxnreg(40, 0, 64)",), "divergence", ("setmaxnreg(40, 0, 128)",)),
    (("setmaxnreg(40, 64, 192)",), "divergence", ("setmaxnreg(40, 128, 256)",)),
    (("setmaxnreg(40, 0, 512)",), "divergence", ("setmaxnreg(40, 0, 384)",)),
    (("setmaxnreg(40, 0, 128)", "setmaxnreg(240, 128, 384)"), "resource",
     ("setmaxnreg(24, 0, 128)", "setmaxnreg(240, 128, 384)")),
])
def test_refusals_and_their_twins(regs, kind, fixed):
    rep = roles(regs).check(**SM90A)
    assert not rep.ok and kind in rep.kinds(), str(rep)
    assert roles(fixed).check(**SM90A).ok


def test_the_register_total_witness():
    rep = roles(("setmaxnreg(40, 0, 128)", "setmaxnreg(240, 128, 384)")).check(**SM90A)
    w = rep.of_kind("resource")[0].witness
    assert w == {"per_warpgroup": [40, 240, 240], "registers": 520 * 128,
                 "pool": 168 * 3 * 128, "launch_registers": 168}


def test_a_block_of_partial_warpgroups_is_refused():
    p = proc_from_source('''
@proc
def k(x: f32[320]):
    for b in par(0, 1) @ BLOCKS:
        setmaxnreg(40, 0, 128)
        for t in par(0, 320) @ THREADS:
            x[t] = 1.0
''', NS)
    assert p.check(**SM90A).kinds() == {"resource"}


def test_a_raise_waiting_behind_a_barrier_for_a_lowering_is_a_deadlock():
    bad = roles(("setmaxnreg(232, 128, 384)",), between=("sync()", "setmaxnreg(40, 0, 128)"))
    rep = bad.check(**SM90A)
    assert rep.kinds() == {"divergence"} and "deadlock" in rep.diagnostics[0].message
    assert len(rep.diagnostics[0].locations) == 3
    ok = roles(("setmaxnreg(40, 0, 128)",), between=("sync()", "setmaxnreg(232, 128, 384)"))
    assert ok.check(**SM90A).ok


def test_what_the_proof_does_not_cover_is_unknown():
    twice = roles(("setmaxnreg(40, 0, 128)", "setmaxnreg(32, 0, 128)"))
    assert twice.check(**SM90A).kinds() == {"unknown"}
    looped = roles(("setmaxnreg(40, 0, 128)",), loop="for i in seq(0, 2):")
    assert looped.check(**SM90A).kinds() == {"unknown"}


def test_a_setmaxnreg_in_a_thread_loop_breaks_a_mapping_rule():
    p = proc_from_source('''
@proc
def k(x: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            setmaxnreg(40, 0, 128)
            x[t] = 1.0
''', NS)
    assert "mapping" in p.check(**SM90A).kinds()
    with pytest.raises(gpudsl.CompileError, match="block level"):
        p.compile("emulator", check=False)


def test_codegen_chooses_inc_or_dec_from_the_launch_registers():
    cu = roles().cuda_source()
    assert "__launch_bounds__(384, 1)" in cu   # ptxas fixes 168 registers a thread
    assert "if (threadIdx.x < 128) gpudsl_setmaxnreg_dec<40>();" in cu
    assert "if (128 <= threadIdx.x) gpudsl_setmaxnreg_inc<232>();" in cu
    cu2 = roles(("setmaxnreg(160, 128, 384)",)).cuda_source()
    assert "gpudsl_setmaxnreg_dec<160>" in cu2   # 160 < 168: giving back
    assert "setmaxnreg" not in roles(regs=()).cuda_source()


def test_blocks_per_sm_sets_the_launch_registers():
    p = set_blocks_per_sm(roles(("setmaxnreg(40, 0, 128)",)), "b", 2)
    assert "__launch_bounds__(384, 2)" in p.cuda_source()   # 80 registers a thread
    assert "gpudsl_setmaxnreg_dec<40>" in p.cuda_source()
    assert p.check(**SM90A).ok
    over = set_blocks_per_sm(roles(("setmaxnreg(88, 0, 384)",)), "b", 1)
    assert over.check(**SM90A).ok
    with pytest.raises(SchedulingError, match="registers"):   # 88 > 80 for all of them
        set_blocks_per_sm(over, "b", 2)


def test_the_emulator_runs_it_as_nothing():
    p = roles()
    y = np.zeros(384, np.float32)
    p.compile("emulator")(x=np.arange(384, dtype=np.float32), y=y)
    assert np.array_equal(y, _run(p))


@pytest.mark.skipif(not sass_mod.have_disassembler(),
                    reason="nvdisasm absent: pip install 'gpudsl[sass]'")
def test_sass_holds_usetmaxreg():
    r = compile_cubin(roles().cuda_source(), "sm_90a", use_cache=False)
    lines = [ln for ln in sass_mod.disassemble(r.cubin).splitlines() if "USETMAXREG" in ln]
    assert len(lines) == 2
    assert any("DEALLOC" in ln and "0x28" in ln for ln in lines)      # 40
    assert any("ALLOC" in ln and "DEALLOC" not in ln and "0xe8" in ln for ln in lines)  # 232


def test_primitives_keep_it_or_refuse():
    p = roles()
    q = insert_sync(p, p.find("setmaxnreg(232, _, _)").after())
    assert sum(isinstance(n, SetMaxNReg) for n in walk(q.ir.body)) == 2
    assert q.check(**SM90A).ok   # a barrier after the raise and no lowering behind it
    with pytest.raises(SchedulingError, match="synchronizing statement stays"):
        reorder_stmts(p, p.find("setmaxnreg(40, _, _)").expand(0, 1))
    # a barrier between a raise and a lowering: refused, not made into a deadlock
    r = roles(("setmaxnreg(232, 128, 384)", "setmaxnreg(40, 0, 128)"))
    assert r.check(**SM90A).ok
    with pytest.raises(SchedulingError, match="deadlock"):
        insert_sync(r, r.find("setmaxnreg(232, _, _)").after())
    assert delete_sync(q, q.find("sync() #0")).check(**SM90A).ok


def test_reports_build_the_code_for_an_architecture_that_has_it():
    """The generated module says which features its code needs; the resources, the
    performance report and the machine-code report build sm_90 code holding setmaxnreg
    for sm_90a (NVRTC refuses it for sm_90)."""
    from gpudsl.codegen import generate
    from gpudsl.targets import SETMAXNREG, arch_with

    assert generate(roles().ir).features == {SETMAXNREG}
    assert generate(roles(regs=()).ir).features == frozenset()
    assert arch_with("sm_90", {SETMAXNREG}) == "sm_90a" and arch_with("sm_90") == "sm_90"
    assert arch_with("sm_80", {SETMAXNREG}) == "sm_80"     # none of 8.0 has it
    k = roles().compile("emulator")
    assert k.resources["roles_k0"].registers == 168
    assert roles().perf(sass=False).kernels[0].registers == 168
    if sass_mod.have_disassembler():
        assert k.sass().arch == "sm_90a"
