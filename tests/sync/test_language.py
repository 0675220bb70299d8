"""docs/language.md (synchronization) statements in the language: parsing with locations, printing that parses
back, errors, and the interpreter (sequential meaning and the race detector)."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import InterpError, ProcError, RaceError, interpret, proc_from_source
from gpudsl.ir.nodes import Arrive, Sync, Wait
from gpudsl.ir.visitor import rename, walk

from .cases import EXPECT, PROCS


def _args(p, n=5, seed=0):
    rng = np.random.default_rng(seed)
    out = {}
    for q in p.ir.params[1:]:
        shape = (n, q.shape[1].val)
        out[q.name] = rng.integers(-8, 8, shape).astype(np.float32) if q.name == "x" \
            else np.zeros(shape, np.float32)
    return out


@pytest.mark.parametrize("name", sorted(PROCS))
def test_round_trip(name):
    p = PROCS[name]
    q = proc_from_source(str(p))
    assert q == p and str(q) == str(p)


def test_nodes_and_locations():
    p = PROCS["pc_split"]
    nodes = [n for n in walk(p.ir.body) if isinstance(n, (Sync, Arrive, Wait))]
    assert [type(n).__name__ for n in nodes] == ["Arrive", "Wait", "Arrive", "Wait", "Arrive"]
    assert all(n.loc is not None and n.loc.line > 0 for n in nodes)
    r = rename(p.ir.body, {"full": "f2"})
    assert {n.name for n in walk(r) if isinstance(n, (Arrive, Wait))} == {"f2", "empty"}
    s = [n for n in walk(PROCS["pc_sync"].ir.body) if isinstance(n, Sync)][0]
    assert s.ranged and (s.lo.val, s.hi.val) == (0, 64)


BAD = {
    "sync(0)": "or a thread range",
    "sync(4, 4)": "empty",
    "sync(0, n)": "integer constant",
    "arrive(s, 0, 32)": "not a split barrier",
    "wait(0, 32)": "names a split barrier",
}


@pytest.mark.parametrize("stmt", sorted(BAD))
def test_parse_errors(stmt):
    src = f"""
@proc
def bad(n: size, x: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[4] @ SHARED
        {stmt}
"""
    with pytest.raises(ProcError, match=BAD[stmt]):
        proc_from_source(src)


def test_barrier_allocation_rules():
    src = """
@proc
def bad(n: size, x: f32[n]):
    bar: barrier @ SHARED
"""
    with pytest.raises(ProcError, match="belongs to a block"):
        proc_from_source(src)
    for alloc, why in [("bar: barrier[2, 2] @ SHARED", "alone or as a ring"),
                       ("bar: barrier @ REGISTER", "alone or as a ring"),
                       ("bar: barrier[n] @ SHARED", "constant number of elements"),
                       ("bar: barrier[0] @ SHARED", "constant number of elements"),
                       ("bar: barrier[33] @ SHARED", "1 to 32")]:
        with pytest.raises(ProcError, match=why):
            proc_from_source(src.replace("bar: barrier @ SHARED", f"""for b in par(0, 1) @ BLOCKS:
        {alloc}"""))
    ring = src.replace("bar: barrier @ SHARED", """for b in par(0, 1) @ BLOCKS:
        bar: barrier[2] @ SHARED
        one: barrier @ SHARED
        STMT""")
    for stmt, why in [("arrive(bar, 0, 32)", "ring of 2 split barriers: name one"),
                      ("wait(one[0], 0, 32)", "single split barrier, not a ring"),
                      ("arrive(bar[0, 1], 0, 32)", "one dimension"),
                      ("arrive(bar[x[0]], 0, 32)", "ring")]:
        with pytest.raises(ProcError, match=why):
            proc_from_source(ring.replace("STMT", stmt))


@pytest.mark.parametrize("name", sorted(PROCS))
def test_interpreter_and_detector(name):
    p, want = PROCS[name], EXPECT[name]
    for race in (False, True):
        args = _args(p)
        if want == "divergence" and (race or name in ("wait_never", "ring4_wrong_element")):
            # a wait for a phase nobody completes is wrong in the sequential meaning
            # too; a phase parity overrun only in the parallel one
            with pytest.raises(InterpError, match="deadlock"):
                interpret(p, detect_races=race, **args)
            continue
        if want in ("race", "divergence") and race:
            with pytest.raises(RaceError):
                interpret(p, detect_races=True, **args)
            continue
        interpret(p, detect_races=race, **args)
        x = args["x"]
        if "y" in args and name.startswith(("pc", "ring")):
            assert np.array_equal(args["y"], 2 * x)


def test_ranged_barrier_past_the_block_is_a_deadlock():
    src = """
@proc
def wide(n: size, x: f32[n]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = 1.0
        sync(0, 64)
"""
    p = proc_from_source(src)
    interpret(p, x=np.zeros(3, np.float32))
    with pytest.raises(InterpError, match="deadlock"):
        interpret(p, detect_races=True, x=np.zeros(3, np.float32))
