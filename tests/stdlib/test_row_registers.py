"""The row kernels with the row in registers (stdlib/row_registers.py, issue 24):
rms_norm and sliced_softmax read x once with vector loads and use at most 2 barriers
per row.  Each layout proved by check(); the interpreter (race detector on) and the
emulator equal numpy for odd and even rows; the machine code (when the disassembler
is installed) has the loads, barriers and no spills the design says."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import ops
from gpudsl.perf import sass as sass_mod
from gpudsl.stdlib.common import make_proc
from gpudsl.stdlib.rms_norm import plan_rms_norm, rms_norm_kernel, rms_norm_registers
from gpudsl.stdlib.row_registers import RowShape, plan_row
from gpudsl.stdlib.softmax import plan_sliced_softmax, sliced_softmax_registers

from .test_model_nodes import rand, ref_rms_norm, ref_softmax

needs_tool = pytest.mark.skipif(not sass_mod.have_disassembler(),
                                reason="nvdisasm absent: pip install 'gpudsl[sass]'")

SHAPES = [RowShape(32, 1, 1), RowShape(64, 3, 2), RowShape(128, 2, 4), RowShape(256, 8, 4)]


def test_plan_row():
    assert plan_row(8192) == RowShape(256, 8, 4)
    assert plan_row(8191) == RowShape(256, 32, 1)
    assert plan_row(4098) == RowShape(256, 9, 2)
    assert plan_row(16384) == RowShape(512, 8, 4)
    assert plan_row(32768) == RowShape(1024, 8, 4)
    assert plan_row(37) == RowShape(64, 1, 1)
    assert plan_row(1) == RowShape(32, 1, 1)
    assert plan_row(32772) is None  # past 32 entries per thread at 1024 threads
    assert plan_rms_norm(32772) is rms_norm_kernel(256, "f32")  # the streaming kernel


@pytest.mark.parametrize("rs", SHAPES, ids=lambda rs: rs.tag)
def test_register_kernels_are_proved(rs):
    for p in (rms_norm_registers(rs), sliced_softmax_registers(rs)):
        assert p.check().ok, p.check()
        n = rs.threads * rs.chunks * rs.vec - rs.vec  # the last vector absent
        assert p.check(r=2, n=n).ok


def test_softmax_without_its_second_barrier_is_a_race():
    text = str(sliced_softmax_registers(RowShape(64, 1, 1))).replace("@proc\n", "")
    marker = "                part2[t // 32] = acc2_w\n        sync()\n"
    assert marker in text
    bad = make_proc("bad", text.replace(marker, "                part2[t // 32] = acc2_w\n"))
    report = bad.check()
    assert not report.ok and "race" in report.kinds()


def test_registers_read_in_the_wrong_thread_are_refused():
    """Each thread holds its own vectors: phase 2 reading another thread's ``xr`` row
    is not what the block-level REGISTER array means, and check() says so."""
    text = str(rms_norm_registers(RowShape(32, 2, 1))).replace("@proc\n", "")
    old = "o[v] = wr[v] * (xr[t, c, v] * scale)"
    assert old in text
    bad = make_proc("bad", text.replace(old, "o[v] = wr[v] * (xr[(t + 1) % 32, c, v] * scale)"))
    assert "mapping" in bad.check().kinds()


@pytest.mark.parametrize("r, n", [(2, 1), (3, 37), (2, 64), (1, 300), (2, 258)])
def test_interpreter_with_race_detector_equals_numpy(r, n):
    x, w = rand(r, n), rand(n)
    p = plan_rms_norm(n)
    assert "_v" in p.name  # the register kernel
    out = np.zeros_like(x)
    p.interpret(detect_races=True, x=x, w=w, out=out)
    np.testing.assert_allclose(out, ref_rms_norm(x, w), rtol=1e-5, atol=1e-5)
    q = plan_sliced_softmax(n)
    for prefix in sorted({0, 1, n // 2, n}):
        out, err = np.zeros_like(x), np.zeros(1, np.int32)
        q.interpret(detect_races=True, x=x, prefix=np.array([prefix], np.int64), out=out,
                    err=err)
        assert err[0] == 0
        np.testing.assert_allclose(out, ref_softmax(x, prefix), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("n", [1, 2, 3, 6, 37, 64, 288, 1026, 4098, 8191, 8192, 20480, 32772])
def test_emulator_equals_numpy_odd_and_even(n):
    r = 2
    x, w = rand(r, n), rand(n)
    np.testing.assert_allclose(ops.rms_norm(x, w), ref_rms_norm(x, w), rtol=1e-5, atol=1e-5)
    for prefix in sorted({0, 1, n // 2 + 1, n} - {n + 1}):
        got = ops.sliced_softmax(x, np.array([prefix], np.int64))
        np.testing.assert_allclose(got, ref_softmax(x, prefix), rtol=1e-5, atol=1e-6)


def test_softmax_keeps_nan_and_huge_entries_past_the_prefix():
    """Entries past the prefix are copied exactly, even where ``exp(x - max)`` would
    overflow (the kernel takes ``exp(0)`` there), and a NaN in the prefix stays NaN."""
    x = np.array([[0.0, 1.0, 3e38, -3e38, np.inf, 2.0, 5.0, 7.0]], np.float32)
    got = ops.sliced_softmax(x, np.array([2], np.int64))
    np.testing.assert_array_equal(got[0, 2:], x[0, 2:])
    np.testing.assert_allclose(got[0, :2], ref_softmax(x, 2)[0, :2], rtol=1e-6)
    y = x.copy()
    y[0, 1] = np.nan
    got = ops.sliced_softmax(y, np.array([2], np.int64))
    assert np.isnan(got[0, 1]) and (got[0, 2:] == y[0, 2:]).all()


def _kernel_sass(p, arch):
    return p.compile("emulator", check=False).sass(arch).kernels[0]


@needs_tool
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_machine_code_at_the_bench_row(arch):
    """8192 entries, 256 threads: x read once (8 128-bit loads per thread, all issued
    before the first use), at most 2 barriers per row, no loop at all (so no load of
    ``prefix`` in a loop), no spills."""
    n, threads = 8192, 256
    per_thread = n * 4 // threads  # bytes of the row each thread reads
    ks = _kernel_sass(plan_rms_norm(n), arch)
    whole = ks.figures[0]
    assert ks.spill_bytes == 0 and ks.threads == threads
    assert len(ks.figures) == 1  # the kernel, no loop
    # x once and w once, 128-bit loads
    assert whole.counts.get("LDG.128", 0) * 16 == 2 * per_thread
    assert whole.count("LDG") == 0 and whole.counts.get("LDG.64", 0) == 0
    assert whole.count("BAR") <= 2 and whole.loads_in_flight >= 8
    ks = _kernel_sass(plan_sliced_softmax(n), arch)
    whole = ks.figures[0]
    assert ks.spill_bytes == 0 and len(ks.figures) == 1
    assert whole.counts.get("LDG.128", 0) * 16 == per_thread  # x once
    assert whole.counts.get("LDG.64", 0) == 1  # prefix[0], once
    assert whole.count("LDG") == 1  # x[i, 0], the maximum's seed (an L1 hit)
    assert whole.count("BAR") <= 2 and whole.loads_in_flight >= 8
