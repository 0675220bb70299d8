"""``arrive(bar, lo, hi, count=c)`` and ``async_copy(dst, src, bar=b)`` (issue 35, docs/hopper.md
"Copies and arrivals on a barrier"): parser and printer, the interpreter and its race
detector, check(), codegen (NVRTC sm_80 / sm_90) and the emulator."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import InterpError, ProcError, RaceError, SchedulingError, proc_from_source
from gpudsl.codegen import generate
from gpudsl.runtime.nvrtc import compile_cubin
from gpudsl.schedule import fission, set_unroll

# a two-slot ring: 16 producer threads copy a row with cp.async completing on full[i % 2];
# 64 consumers read it, meet at a ranged barrier, and thread 32 alone hands the slot back
# for all 64 of them (count=64)
RING = """
@proc
def ring_copy(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        full: barrier[2] @ SHARED
        empty: barrier[2] @ SHARED
        s: f32[2, 64] @ SHARED
        for j in seq(0, 2):
            arrive(empty[j], 32, 33, count=64)
        for i in seq(0, n):
            wait(empty[i % 2], 0, 16)
            for t in par(0, 16) @ THREADS:
                async_copy(s[i % 2, 4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4], bar=full[i % 2])
            arrive(full[i % 2], 0, 16)
            wait(full[i % 2], 32, 96)
            for t in par(32, 96) @ THREADS:
                y[i, t - 32] = s[i % 2, t - 32] * 2.0
            sync(32, 96)
            arrive(empty[i % 2], 32, 33, count=64)
"""

TWINS = {   # name: (text replaced, replacement, the kind check() gives)
    # the other consumers' reads are ordered before nobody's arrive: the next copy races
    "no_ranged_barrier": ("            sync(32, 96)\n", "", "race"),
    # the consumers read the slot while the copy may be in flight
    "no_wait_for_the_copy": ("            wait(full[i % 2], 32, 96)\n", "", "race"),
    # the copy's thread is outside the arrive range: nothing completes it
    "issuer_never_arrives": ("arrive(full[i % 2], 0, 16)", "arrive(full[i % 2], 16, 32)",
                             "race"),
    # one arrive stands for 64 arrivals, the other for 1: phases of different sizes
    "counts_differ": ("            arrive(empty[i % 2], 32, 33, count=64)",
                      "            arrive(empty[i % 2], 32, 33)", "divergence"),
}


def _twin(name):
    old, new, _ = TWINS[name]
    assert old in RING
    return proc_from_source(RING.replace(old, new))


def _args(n, seed=0):
    rng = np.random.default_rng(seed)
    return {"x": rng.standard_normal((n, 64)).astype(np.float32),
            "y": np.zeros((n, 64), np.float32)}


def test_round_trip():
    p = proc_from_source(RING)
    text = str(p)
    assert "arrive(empty[i % 2], 32, 33, count=64)" in text
    assert "bar=full[i % 2])" in text
    assert proc_from_source(text) == p
    assert "count=1" not in str(_twin("counts_differ"))


@pytest.mark.parametrize("bad, why", [
    ("arrive(done, 0, 1, count=0)", "count= of an arrive is an integer constant"),
    ("arrive(done, 0, 1, count=n)", "count= of an arrive is an integer constant"),
    ("arrive(done, 0, 1, count=1048576)", "1 to 1048575"),
    ("arrive(done, 0, 1, tx=4)", "takes only count="),
    ("wait(done, 0, 64, count=2)", "takes no keyword"),
])
def test_malformed_arrives_are_refused_by_the_parser(bad, why):
    src = f"""
@proc
def p(n: size, x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        done: barrier @ SHARED
        {bad}
"""
    with pytest.raises(ProcError, match=why):
        proc_from_source(src)


@pytest.mark.parametrize("bad, why", [
    ("async_copy(s[t], x[t], bar=s)", "bar= names a split barrier"),
    ("async_copy(s[t], x[t], bar=ring)", "is a ring of 2"),
    ("async_copy(s[t], x[t], bar=done[0])", "single split barrier, not a ring"),
    ("async_copy(s[t], x[t], group=done)", "takes only bar="),
])
def test_malformed_barrier_copies_are_refused_by_the_parser(bad, why):
    src = f"""
@proc
def p(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        done: barrier @ SHARED
        ring: barrier[2] @ SHARED
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            {bad}
"""
    with pytest.raises(ProcError, match=why):
        proc_from_source(src)


def test_the_ring_is_proved_for_every_size_and_equals_numpy():
    p = proc_from_source(RING)
    rep = p.check()
    assert rep.ok, str(rep)
    for n in (1, 2, 5):
        a = _args(n, n)
        gpudsl.interpret(p, detect_races=True, **a)
        assert np.array_equal(a["y"], 2 * a["x"])


@pytest.mark.parametrize("name", sorted(TWINS))
def test_twins_are_refused_and_the_detector_agrees(name):
    p = _twin(name)
    rep = p.check()
    assert TWINS[name][2] in rep.kinds(), str(rep)
    sizes = [d.witness.get("sizes", {}).get("n") for d in rep.diagnostics if d.witness]
    for n in {s for s in sizes if s is not None and s <= 8} or {3}:
        with pytest.raises((RaceError, InterpError)):
            gpudsl.interpret(p, detect_races=True, n=n, **{k: v for k, v in _args(n).items()})


def test_a_copy_whose_thread_never_arrives_is_in_flight_at_the_end():
    p = proc_from_source("""
@proc
def p(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        done: barrier @ SHARED
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[t], x[t], bar=done)
""")
    assert "race" in p.check().kinds()
    with pytest.raises(InterpError, match="async copy .* still in flight"):
        gpudsl.interpret(p, x=np.ones(64, np.float32), y=np.zeros(64, np.float32))


def test_a_copy_on_a_barrier_nobody_arrives_on_has_a_witness_that_replays():
    """Found by the async soundness generator: "never lands" had no witness (no sizes)."""
    p = proc_from_source("""
@proc
def p(n: size, x: f32[n, 64], y: f32[64]):
    assert n <= 3
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        bar: barrier @ SHARED
        if n > 1:
            for t in par(0, 16) @ THREADS:
                async_copy(s[0, 4 * t:4 * t + 4], x[0, 4 * t:4 * t + 4], bar=bar)
""")
    d = next(d for d in p.check().diagnostics if "never lands" in d.message)
    n = d.witness["sizes"]["n"]
    assert n > 1 and d.witness["thread1"]
    with pytest.raises(InterpError, match="still in flight"):
        gpudsl.interpret(p, n=n, x=np.ones((n, 64), np.float32), y=np.zeros(64, np.float32))
    # the copy never runs: nothing to land, nothing refused
    q = proc_from_source(str(p).replace("if n > 1:", "if n > 3:"))
    assert not any("never lands" in d.message for d in q.check().diagnostics)


def test_a_misaligned_barrier_copy_is_refused():
    p = proc_from_source(RING.replace("s[i % 2, 4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4]",
                                      "s[i % 2, 4 * t:4 * t + 4], x[i, 4 * t + 1:4 * t + 5]")
                         .replace("x: f32[n, 64]", "x: f32[n, 65]"))
    assert "bounds" in p.check().kinds()


def test_a_barrier_copy_joins_no_group():
    """async_wait does not land a copy with bar=: reading after it alone is a race."""
    p = proc_from_source("""
@proc
def p(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        done: barrier @ SHARED
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[t], x[t], bar=done)
            async_commit()
            async_wait(0)
            y[t] = s[t]
        arrive(done, 0, 64)
        wait(done, 0, 64)
""")
    assert "race" in p.check().kinds()
    with pytest.raises((RaceError, InterpError)):
        gpudsl.interpret(p, x=np.ones(64, np.float32), y=np.zeros(64, np.float32),
                         detect_races=True)


def test_codegen_text():
    src = generate(proc_from_source(RING), {}).source
    assert "gpudsl_mbar_init(&empty[gpudsl_j], 64);" in src   # 1 thread x count=64
    assert "gpudsl_mbar_init(&full[gpudsl_j], 16);" in src
    assert "gpudsl_mbar_arrive_n(&empty[gpudsl_e], 64u);" in src
    assert "gpudsl_cp_async_mbar_arrive(&full[(unsigned)(i % 2)]);" in src
    assert "mbarrier.arrive.release.cta.shared::cta.b64 st, [%0], %1;" in src
    assert "for (unsigned k = 0; k < count; ++k) gpudsl_mbar_arrive(bar);" in src   # sm_80
    assert "cp.async.mbarrier.arrive.shared.b64 [%0];" in src
    # the copy's barrier arrive follows the copy, in the thread's code
    lines = [ln for ln in src.splitlines() if not ln.startswith("#line")]
    k = next(i for i, ln in enumerate(lines) if "gpudsl_cp_async<16>(&s[" in ln)
    assert "gpudsl_cp_async_mbar_arrive" in lines[k + 1]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles(arch):
    m = generate(proc_from_source(RING), {})
    r = compile_cubin(m.source, arch)
    assert r.cubin and set(r.resources) == set(m.kernels)


def test_sass_has_the_copy_and_its_barrier_arrive():
    from gpudsl.perf import sass
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    m = generate(proc_from_source(RING), {})
    for arch in ("sm_80", "sm_90"):
        text = sass.disassemble(compile_cubin(m.source, arch).cubin)
        assert "LDGSTS" in text and "ARRIVES.LDGSTSBAR" in text, arch
        # count=64 on sm_80 is a loop of arrives, not 64 copies of one
        n = sum("ARRIVE" in ln and "ARRIVES" not in ln for ln in text.splitlines())
        assert n < 12, (arch, n)


@pytest.mark.parametrize("n", [1, 2, 7])
def test_the_emulator_equals_numpy(n):
    p = proc_from_source(RING)
    a = _args(n, 10 + n)
    p.compile("emulator", check=False)(n=n, **a)
    assert np.array_equal(a["y"], 2 * a["x"])


def test_the_emulator_reports_a_phase_that_never_completes():
    """count=1 where 64 arrivals are expected by the other arrive: the run deadlocks."""
    p = _twin("counts_differ")
    with pytest.raises(Exception, match="(?i)deadlock|arrive"):
        p.compile("emulator", check=False)(n=3, **_args(3))


def test_primitives_keep_or_refuse():
    p = proc_from_source(RING)
    q = set_unroll(p, "i", True)
    assert q.check().ok and "count=64" in str(q) and "bar=full[i % 2]" in str(q)
    with pytest.raises(SchedulingError):
        fission(p, p.find("arrive(full[i % 2], 0, 16)").after())
