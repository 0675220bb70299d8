"""check() on wgmma (docs/hopper.md): the GEMMs prove for sm_90a; other targets refuse them;
their broken twins are refused with a witness that replays in the interpreter or the race
detector; partial or diverging warpgroups and lane-dependent operands are refused."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import InterpError, RaceError

from .cases import gemm, operands, twin

WAITS = "                wgmma_commit()\n                wgmma_wait(0)\n"
BLOCK_WAITS = "            wgmma_commit()\n            wgmma_wait(0)\n"
CALL = "wgmma(acc[t, 0:32], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:64, 0:8])"


@pytest.mark.parametrize("n, form", [(8, "local"), (64, "local"), (64, "block"),
                                     (256, "block")])
def test_gemm_proves_for_sm90a(n, form):
    r = gemm(n, form).check(target="sm_90a")
    assert r.ok, r


@pytest.mark.parametrize("tgt", ["sm_90", "sm_80"])
def test_targets_without_wgmma_refuse_it(tgt):
    r = gemm(64).check(target=tgt)
    assert [d.kind for d in r.diagnostics] == ["target"]
    assert "sm_90a" in r.diagnostics[0].message and "sm_90a" in r.diagnostics[0].hint


def _replay(p, d, n=64):
    """The twin run at the witness's sizes stops in the interpreter or the detector."""
    k = d.witness["sizes"]["k"]
    with pytest.raises((InterpError, RaceError)):
        gpudsl.interpret(p, detect_races=True, **operands(n, k))


TWINS = {
    "acc read before the wait": (
        "local", WAITS, "                wgmma_commit()\n                c[t // 2, 0] = acc[t, 0]\n"
                        "                wgmma_wait(0)\n", "acc", "same thread reads acc"),
    "no wait": ("block", BLOCK_WAITS, "            wgmma_commit()\n", "a_s", "thread writes"),
    "wait(1) leaves it in flight": ("block", BLOCK_WAITS, "            wgmma_commit()\n"
                                    "            wgmma_wait(1)\n", "a_s", "thread writes"),
    "no barrier after the wait": ("block", BLOCK_WAITS + "            sync()\n", BLOCK_WAITS,
                                  "a_s", "read of a_s by the wgmma"),
}


@pytest.mark.parametrize("name", sorted(TWINS))
def test_race_twins_are_refused_with_a_witness(name):
    form, old, new, array, why = TWINS[name]
    p = twin(gemm(64, form), old, new)
    r = p.check(target="sm_90a")
    races = [d for d in r.diagnostics if d.kind == "race"]
    assert races, r
    d = next((d for d in races if d.witness.get("array") == array), races[0])
    assert d.witness.get("array") == array and why in d.message, d
    _replay(p, d)


def test_partial_warpgroup_is_refused():
    p = twin(gemm(64), "for t in par(0, 128) @ THREADS:\n                wgmma",
             "for t in par(0, 96) @ THREADS:\n                wgmma")
    d = p.check(target="sm_90a").diagnostics[0]
    assert d.kind == "divergence" and "part of a warpgroup" in d.message


def test_a_lane_dependent_if_is_refused():
    p = twin(gemm(64), f"                {CALL}\n",
             f"                if t < 64:\n                    {CALL}\n")
    d = p.check(target="sm_90a").diagnostics[0]
    assert d.kind == "divergence" and "some lanes of a warpgroup" in d.message
    assert len(d.witness["lanes"]) == 2


def test_lanes_naming_different_operands_are_refused():
    p = twin(twin(gemm(64), "a_s: f16[2, 64, 8] @ SHARED", "a_s: f16[3, 64, 8] @ SHARED"),
             "a_s[0:2, 0:64, 0:8], b_s", "a_s[t % 2:t % 2 + 2, 0:64, 0:8], b_s")
    ds = p.check(target="sm_90a").diagnostics
    assert any(d.kind == "divergence" and "different A or B windows" in d.message for d in ds)


def test_two_warpgroups_with_their_own_rows_prove():
    """Two warpgroups, each on its 64 rows of a 128 x 8 tile."""
    src = """\
@proc
def two(a: f16[128, 16], bt: f16[8, 16], c: f32[128, 8]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[256, 4] @ REGISTER
        a_s: f16[2, 128, 8] @ SHARED
        b_s: f16[2, 8, 8] @ SHARED
        for t in par(0, 256) @ THREADS:
            for i in seq(0, 4):
                acc[t, i] = 0.0
            for j in seq(0, 8):
                a_s[t % 2, t // 2, j] = a[t // 2, 8 * (t % 2) + j]
            if t < 16:
                for j in seq(0, 8):
                    b_s[t % 2, t // 2, j] = bt[t // 2, 8 * (t % 2) + j]
        sync()
        for t in par(0, 256) @ THREADS:
            wgmma(acc[t, 0:4], a_s[0:2, 64 * (t // 128):64 * (t // 128) + 64, 0:8], b_s)
        wgmma_commit()
        wgmma_wait(0)
        for t in par(0, 256) @ THREADS:
            for i in seq(0, 4):
                c[64 * (t // 128) + 16 * (t % 128 // 32) + t % 32 // 4 + 8 * (i // 2 % 2),
                  8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
"""
    import numpy as np
    p = gpudsl.proc_from_source(src)
    assert p.check(target="sm_90a").ok
    rng = np.random.default_rng(0)
    a = rng.integers(-3, 4, (128, 16)).astype(np.float16)
    bt = rng.integers(-3, 4, (8, 16)).astype(np.float16)
    for run in (lambda **k: gpudsl.interpret(p, detect_races=True, **k),
                p.compile("emulator")):
        c = np.zeros((128, 8), np.float32)
        run(a=a, bt=bt, c=c)
        assert np.array_equal(c, a.astype(np.float64) @ bt.astype(np.float64).T)


def test_check_agrees_with_the_detector_on_random_kernels():
    """The differential generator's wgmma kernels (some broken on purpose): a proved one
    runs clean in the race detector at every size; a race's witness replays."""
    import random

    from tests.schedule.differential.oracle import make_args
    from tests.schedule.differential.procgen_wgmma import wgmma_program

    proved = refused = 0
    for case in range(14):
        r = random.Random(case)
        prog = wgmma_program(r, f"p{case}")
        p = gpudsl.proc_from_source("@proc\n" + prog.source)
        rep = p.check(target="sm_90a")
        if rep.ok:
            proved += 1
            for sizes in prog.sizes:
                gpudsl.interpret(p, detect_races=True, **make_args(p.ir, sizes, r))
            continue
        d = next(d for d in rep.diagnostics if d.kind == "race")
        refused += 1
        with pytest.raises((InterpError, RaceError)):
            gpudsl.interpret(p, detect_races=True,
                             **make_args(p.ir, d.witness["sizes"], r))
    assert proved and refused, (proved, refused)
