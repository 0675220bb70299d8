"""A barrier under a block-level ``if`` whose condition reads a SHARED or GLOBAL element
(every thread reads it at the same place: uniform when no thread writes it in the same
phase).  Issue 28: check() placed the condition's read in no phase at all, so a write
after the barrier inside the ``if`` was reported as racing with it."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl

NS = vars(gpudsl)


def _proc(cond: str, first_in_if: str):
    return gpudsl.proc_from_source(f'''
def f(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[t]
        sync()
        if {cond}:
{first_in_if}
            for t in par(0, 64) @ THREADS:
                s[t] = s[t] * 2.0
                x[t] = 0.0
            sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[(t + 1) % 64]
''', namespace=NS)


def _detector_race(p) -> bool:
    try:
        gpudsl.interpret(p, detect_races=True, x=np.ones(64, np.float32),
                         y=np.zeros(64, np.float32))
    except gpudsl.RaceError:
        return True
    return False


@pytest.mark.parametrize("cond", ["s[0] > 0.0", "x[0] > 0.0"])
def test_condition_read_before_the_barrier_in_the_if_is_proved(cond):
    p = _proc(cond, "            sync()")
    assert not _detector_race(p)
    rep = p.check()
    assert rep.ok, str(rep)


@pytest.mark.parametrize("cond", ["s[0] > 0.0", "x[0] > 0.0"])
def test_condition_read_in_the_phase_of_a_write_races(cond):
    # no barrier between every thread's read of the condition and thread 0's write
    p = _proc(cond, "            pass")
    assert _detector_race(p)
    assert "race" in p.check().kinds()
