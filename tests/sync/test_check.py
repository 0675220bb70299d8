"""check() on docs/language.md (synchronization) programs (issue 22): the design's producer/consumer loops are
proved, their broken twins flagged with witnesses that replay in the interpreter's
race detector, and what check() cannot count is "unknown", never "ok"."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import InterpError, RaceError, check, interpret, proc_from_source

from .cases import EXPECT, PROCS
from .test_language import _args


def _kinds(rep):
    return {str(getattr(d.kind, "value", d.kind)) for d in rep.diagnostics}


@pytest.mark.parametrize("name", sorted(PROCS))
def test_verdicts(name):
    p, want = PROCS[name], EXPECT[name]
    rep = check(p)
    if want == "ok":
        assert rep.ok, str(rep)
        return
    assert not rep.ok
    if want == "unknown":
        assert _kinds(rep) == {"unknown"}, str(rep)
    else:
        assert want in _kinds(rep), str(rep)


@pytest.mark.parametrize("name", [n for n, v in sorted(EXPECT.items())
                                  if v in ("race", "divergence")])
def test_witnesses_replay(name):
    """With sizes bound, the witness names the sizes; the detector, run at them, sees
    the race or the deadlock."""
    p, want = PROCS[name], EXPECT[name]
    rep = check(p, n=4)
    d = [d for d in rep.diagnostics if str(getattr(d.kind, "value", d.kind)) == want][0]
    assert d.witness and d.witness.get("thread1"), str(rep)
    assert d.witness["sizes"].get("n", 4) == 4
    err = RaceError if want == "race" else InterpError
    with pytest.raises(err):
        interpret(p, detect_races=True, **_args(p, n=4))


def test_race_witness_names_both_threads():
    rep = check(PROCS["pc_wrong_range"], n=3)
    d = rep.diagnostics[0]
    t1, t2 = d.witness["thread1"]["threadIdx"], d.witness["thread2"]["threadIdx"]
    # the producer (x < 32) and a consumer (x >= 32): the range [0, 32) misses it
    assert sorted([t1[0] < 32, t2[0] < 32]) == [False, True]


def _proc(body: str, params="n: size, x: f32[n, 64], y: f32[n, 64]"):
    return proc_from_source(f"""
@proc
def p({params}):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
{body}""")


def test_range_past_the_block_is_divergence():
    p = _proc("""        for t in par(0, 32) @ THREADS:
            s[t] = x[0, t]
        sync(0, 64)
        for t in par(0, 32) @ THREADS:
            y[0, t] = s[31 - t]
""")
    rep = check(p)
    assert "divergence" in _kinds(rep) and not rep.ok


def test_ranged_barrier_of_part_of_a_warp_is_refused():
    p = _proc("""        for t in par(0, 64) @ THREADS:
            s[t] = x[0, t]
        sync(0, 16)
        for t in par(0, 16) @ THREADS:
            y[0, t] = s[15 - t]
""")
    rep = check(p)
    assert "mapping" in _kinds(rep)


def test_arrives_of_different_ranges_are_divergence():
    p = _proc("""        bar: barrier @ SHARED
        arrive(bar, 0, 32)
        arrive(bar, 0, 64)
        wait(bar, 0, 64)
""")
    assert "divergence" in _kinds(check(p))


def test_wait_after_two_phases_is_divergence():
    p = _proc("""        bar: barrier @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[0, t]
        arrive(bar, 0, 64)
        arrive(bar, 0, 64)
        wait(bar, 0, 64)
        for t in par(0, 64) @ THREADS:
            y[0, t] = s[63 - t]
""")
    rep = check(p)
    assert "divergence" in _kinds(rep)
    assert any("parity" in d.message for d in rep.diagnostics)
    with pytest.raises(InterpError, match="parity"):
        interpret(p, x=np.zeros((1, 64), np.float32), y=np.zeros((1, 64), np.float32))


def test_barrier_allocated_in_a_loop_is_unknown():
    p = _proc("""        for i in seq(0, n):
            bar: barrier @ SHARED
            for t in par(0, 64) @ THREADS:
                s[t] = x[i, t]
            arrive(bar, 0, 64)
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[63 - t]
            sync()
""")
    rep = check(p)
    assert not rep.ok and "unknown" in _kinds(rep)


def test_ranged_barrier_orders_only_its_threads():
    """Threads 0-63 exchange through s behind sync(0, 64); threads 64-127 touch
    other elements: proved; with the second group reading s too: a race."""
    ok = proc_from_source("""
@proc
def p(x: f32[128], y: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 128) @ THREADS:
            if t < 64:
                s[t] = x[t]
        sync(0, 64)
        for t in par(0, 128) @ THREADS:
            if t < 64:
                y[t] = s[63 - t]
            else:
                y[t] = x[t]
""")
    assert check(ok).ok
    bad = proc_from_source(str(ok).replace("y[t] = x[t]", "y[t] = s[t - 64]"))
    rep = check(bad)
    assert "race" in _kinds(rep)
    with pytest.raises(RaceError):
        interpret(bad, detect_races=True, x=np.ones(128, np.float32),
                  y=np.zeros(128, np.float32))
