"""check() of warp collectives (docs/language.md (synchronization)): reached by whole warps, no lane-dependent
control around them ("divergence"), lane arguments in [0, 32) ("bounds"); each
witness replays in the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import InterpError, interpret

from . import procs as P


@pytest.mark.parametrize("p", P.GOOD, ids=lambda p: p.name)
def test_good_procs_are_proved(p):
    rep = p.check()
    assert rep.ok, str(rep)


def test_shuffle_under_a_lane_dependent_if_is_divergence():
    rep = P.lane_if.check()
    assert rep.kinds() == {"divergence"}, str(rep)
    d = rep.of_kind("divergence")[0]
    lanes = [w["thread"]["t"] for w in d.witness["lanes"]]
    assert lanes[0] // 32 == lanes[1] // 32 and lanes[0] % 2 != lanes[1] % 2
    with pytest.raises(InterpError, match="divergence"):
        interpret(P.lane_if, x=np.ones(64, np.float32), y=np.zeros(64, np.float32))


def test_lane_dependent_loop_is_divergence():
    assert P.lane_loop.check().kinds() == {"divergence"}


def test_part_of_a_warp_is_divergence_with_a_witness_that_replays():
    rep = P.part_warp.check()
    assert rep.kinds() == {"divergence"}, str(rep)
    n = rep.of_kind("divergence")[0].witness["sizes"]["n"]
    assert n % 32 != 0
    with pytest.raises(InterpError, match="divergence"):
        interpret(P.part_warp, n=n, x=np.ones(n, np.float32), y=np.zeros(n, np.float32))
    assert P.part_warp.check(n=64).ok


def test_lane_out_of_range_is_bounds():
    rep = P.lane_out.check()
    assert rep.kinds() == {"bounds"}, str(rep)
    w = rep.of_kind("bounds")[0].witness
    assert not 0 <= w["lane_argument"] < 32
    with pytest.raises(InterpError, match="outside"):
        interpret(P.lane_out, x=np.ones(64, np.float32), y=np.zeros(64, np.float32))


def test_nested_rows_not_whole_warps():
    rep = P.nested_bad.check()
    assert "divergence" in rep.kinds(), str(rep)
    assert "x extent is 16" in str(rep)


def test_race_next_to_a_collective_is_found():
    assert "race" in P.racy.check().kinds()


def test_data_dependent_condition_is_refused():
    from gpudsl import proc_from_source
    import gpudsl
    src = ("def f(x: f32[32], y: f32[32]):\n    for b in par(0, 1) @ BLOCKS:\n"
           "        for t in par(0, 32) @ THREADS:\n            if x[t] > 0.0:\n"
           "                y[t] = warp_sum(x[t])\n")
    rep = proc_from_source(src, vars(gpudsl)).check()
    assert not rep.ok and "divergence" in rep.kinds()


def test_warp_uniform_condition_is_proved():
    assert P.butterfly.check().ok


def test_collective_at_block_level_is_mapping():
    from gpudsl import proc_from_source
    import gpudsl
    src = ("def f(x: f32[32]):\n    for b in par(0, 1) @ BLOCKS:\n"
           "        for i in seq(0, warp_sum(3)):\n            pass\n")
    rep = proc_from_source(src, vars(gpudsl)).check()
    assert "mapping" in rep.kinds()


def test_only_warps_that_reach_it_must_be_whole():
    from gpudsl import proc_from_source
    import gpudsl
    src = ("def f(x: f32[64], y: f32[64]):\n    for b in par(0, 1) @ BLOCKS:\n"
           "        for t in par(0, 48) @ THREADS:\n            if t < 32:\n"
           "                y[t] = warp_sum(x[t])\n")
    p = proc_from_source(src, vars(gpudsl))
    assert p.check().ok, str(p.check())
    interpret(p, x=np.ones(64, np.float32), y=np.zeros(64, np.float32))
    bad = proc_from_source(src.replace("t < 32", "t < 40"), vars(gpudsl))
    assert "divergence" in bad.check().kinds()
    with pytest.raises(InterpError, match="divergence"):
        interpret(bad, x=np.ones(64, np.float32), y=np.zeros(64, np.float32))
