"""Rewrite primitives on procs holding wgmma (docs/hopper.md): each keeps the meaning and the
proof, or refuses.  A wgmma's meaning for a thread depends on its lane and on when its
group completes, which the primitives' own legality does not see: every result is
compared with its input through check()'s async and warpgroup obligations and its
wgmma mapping rules (schedule/async_guard.py), and the thread loops holding a wgmma
keep their bounds and nest (schedule/warp_rewrites.py)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import SHARED, REGISTER, SchedulingError
from gpudsl import schedule as S

from .cases import expected, gemm, operands

BLOCK = "            wgmma_commit()\n            wgmma_wait(0)\n"


def _same(q, n=8):
    """``q`` prints and parses back, proves, and computes the GEMM."""
    assert gpudsl.proc_from_source(str(q)).ir == q.ir
    r = q.check(target="sm_90a")
    assert r.ok, r
    for k in (32, 96):
        args = operands(n, k, seed=k)
        gpudsl.interpret(q, detect_races=True, **args)
        assert np.array_equal(args["c"], expected(args))


KEPT = {
    "unroll_loop": lambda p: S.unroll_loop(p, "j"),
    "expand_dim": lambda p: S.expand_dim(p, "a_s", 2, "ks % 2"),
    "simplify": lambda p: S.simplify(p),
    "unroll the wgmma loop": lambda p: S.unroll_loop(p, "s"),
    "divide_loop (perfect)": lambda p: S.divide_loop(p, "i #0", 2, ["io", "ii"],
                                                     tail="perfect"),
}


@pytest.mark.parametrize("name", sorted(KEPT))
def test_kept(name):
    p = gemm(8, "ktile")
    _same(KEPT[name](p))


REFUSED = {
    # the accumulator and the operands keep their memories
    "set_memory acc": (lambda p: S.set_memory(p, "acc", SHARED), "REGISTER"),
    "set_memory a_s": (lambda p: S.set_memory(p, "a_s", REGISTER), "SHARED"),
    # the warpgroup's thread loop keeps its bounds: the lanes would change
    "cut the warpgroup": (lambda p: S.cut_loop(p, "t #2", 64), "issue the wgmma"),
    # a guarded tail puts the commit under an if: it no longer lands provably
    "divide_loop ks (guard)": (lambda p: S.divide_loop(p, "ks", 2, ["ko", "ki"],
                                                       tail="guard"), "wgmma"),
    # staging what a wgmma reads or writes
    "stage_mem": (lambda p: S.stage_mem(p, p.find("wgmma(_, _, _)").parent(),
                                        "a_s[0:2, 0:64, 0:8]", "a_r"), "wgmma"),
    # the layout the hardware reads
    "rearrange_dim": (lambda p: S.rearrange_dim(p, "a_s", [1, 0, 2]), "a_s"),
    # the barrier after the wait orders the operands' next writes
    "delete_sync": (lambda p: S.delete_sync(p, "sync() #1"), "a_s"),
}


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused(name):
    f, words = REFUSED[name]
    with pytest.raises(SchedulingError, match=words):
        f(gemm(8, "block"))


def test_moving_the_wait_after_the_epilogue_is_refused():
    """reorder_stmts of the wait past the next statement (a barrier) keeps the plain
    meaning but leaves the wgmma in flight across it: refused by the async guard."""
    p = gemm(8, "block")
    with pytest.raises(SchedulingError):
        S.reorder_stmts(p, "wgmma_wait(0)")


def test_an_unproved_input_is_refused():
    p = gpudsl.proc_from_source(str(gemm(8, "block")).replace(BLOCK,
                                                              "            wgmma_commit()\n"))
    with pytest.raises(SchedulingError, match="not proved"):
        S.unroll_loop(p, "j")


def test_differential_wgmma_family():
    """A short run of the differential test on the wgmma family (the long one:
    ``GPUDSL_DIFF_FAMILY=wgmma python -m tests.schedule.differential --seconds 1200``)."""
    from tests.schedule.differential.run import Runner

    # seed 2: since half the ring programs stand in a pair of BLOCKS loops (session 15),
    # seed 0's 16 cases drew persist_blocks where they drew pipeline_wgmma before
    r = Runner(seed=2, family="wgmma")
    r.run(120, max_cases=24)
    assert not r.failures, r.failures[0].repro()
    assert sum(r.stats.accepted.values()) > 0, r.stats.table()
    assert r.stats.accepted["make_wgmma"] > 0, r.stats.table()   # the family's plain nests
    assert r.stats.accepted["pipeline_wgmma"] > 0, r.stats.table()   # and its ring loops
    assert r.stats.tried["persist_blocks"] > 0, r.stats.table()   # in a pair of BLOCKS loops
