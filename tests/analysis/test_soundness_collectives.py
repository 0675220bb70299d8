"""Soundness of check() on warp collectives (docs/language.md (synchronization)): random small kernels with
shuffles, votes and warp reductions in thread loops of whole or partial warps, under
uniform, lane-dependent or data-dependent conditions and loops, next to SHARED
exchanges with and without barriers.  Whenever the interpreter (with the race
detector) faults for some size (a race, a collective some lanes of a warp miss, a lane
argument out of range, an access out of bounds), check() with that size, and with the
size symbolic, is not ok.  Divergence witnesses that do not depend on data replay.

``GPUDSL_HYPOTHESIS_EXAMPLES`` sets the number of examples (default 100 for CI);
``GPUDSL_HYPOTHESIS_STATS=1`` prints what was found.
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudsl
from gpudsl import InterpError, RaceError, proc_from_source

N_EXAMPLES = int(os.environ.get("GPUDSL_HYPOTHESIS_EXAMPLES", "100"))
STATS: Counter = Counter()
G = 256  # global extent

COLLS = ["shfl({v}, {l})", "shfl_xor({v}, {m})", "shfl_down({v}, {d})", "shfl_up({v}, {d})",
         "warp_sum({v})", "warp_max({v})", "warp_min({v})",
         "select(any_lanes({v} > 20.0), {v}, 1.0)", "select(all_lanes({v} > 3.0), {v}, 2.0)",
         "f32(ballot({v} > 30.0) % 5)"]
LANES = ["0", "31", "({t} + 1) % 32", "{t} % 32", "31 - {t} % 32", "{t} // 4", "n",
         "{t}", "{t} % 40"]
MASKS = ["1", "16", "{t} % 4", "n", "32"]
DISTS = ["1", "5", "{t} % 8", "n - 1", "33"]
GUARDS = [None] * 8 + ["b == 0", "n > 1", "any_lanes({v} > 10.0)", "{t} >= 0",
                       "{t} // 32 == 1", "{t} < 32", "{t} < 48", "{t} % 2 == 0",
                       "x[{t} % 64] > 30.0"]
TRIPS = [None] * 4 + ["2", "n", "1 + {t} // 32", "{t} % 3"]


@st.composite
def thread_loop(draw, tv, uid):
    lo, hi = draw(st.sampled_from([(0, "64")] * 3 + [(0, "32"), (32, "64"), (0, "32 * n"),
                                                      (0, "48"), (0, "16"), (16, "48")]))
    v = f"v{uid}"
    coll = draw(st.sampled_from(COLLS)).format(
        v=v, l=draw(st.sampled_from(LANES)), m=draw(st.sampled_from(MASKS)),
        d=draw(st.sampled_from(DISTS)), t="{t}").format(t=tv)
    src = draw(st.sampled_from([f"x[{tv} % 64]", f"s[{tv} % 64]", f"s[({tv} + 1) % 64]",
                                f"y[(b * 64 + {tv}) % {G}]"]))
    dst = draw(st.sampled_from([f"y[(b * 64 + {tv}) % {G}]", f"s[{tv} % 64]",
                                f"y[{tv} % {G}]", f"s[({tv} + 32) % 64]"]))
    body = [f"{v}: f32", f"{v} = {src}"]
    inner = [f"{dst} = {coll}"]
    trips = draw(st.sampled_from(TRIPS))
    if trips:
        inner = [f"for k{uid} in seq(0, {trips.format(t=tv)}):"] + ["    " + l for l in inner]
    guard = draw(st.sampled_from(GUARDS))
    if guard:
        inner = [f"if {guard.format(t=tv, v=v)}:"] + ["    " + l for l in inner]
    body += inner
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:"] + ["    " + l for l in body]


@st.composite
def warp_proc(draw):
    nb = draw(st.sampled_from(["1", "2", "n"]))
    items = []
    for k in range(draw(st.integers(1, 2))):
        items += draw(thread_loop(f"t{k}", k))
        if draw(st.sampled_from([True, True, True, False])):
            items.append("sync()")
    lines = [f"def rand(n: size, x: f32[64], y: f32[{G}]):",
             "    assert n <= 2",
             f"    for b in par(0, {nb}) @ BLOCKS:",
             "        s: f32[64] @ SHARED"]
    lines += ["        " + l for l in items]
    return "\n".join(lines) + "\n"


def _run(p, n):
    x = (np.arange(64) % 41).astype(np.float32)
    try:
        gpudsl.interpret(p, detect_races=True, n=n, x=x, y=np.zeros(G, np.float32))
    except (RaceError, InterpError) as e:
        return e
    return None


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(warp_proc(), st.integers(1, 2))
def test_dynamic_fault_implies_check_fails(src, n):
    try:
        p = proc_from_source(src, vars(gpudsl), file="<random proc>")
    except gpudsl.ProcError:
        STATS["frontend refused"] += 1
        return
    STATS["procs"] += 1
    err = _run(p, n)
    rep = p.check(n=n)
    if "unknown" in rep.kinds():
        STATS["unknown"] += 1
    if err is not None:
        kind = "race" if isinstance(err, RaceError) else \
            "divergence" if "divergence" in str(err) else "other fault"
        STATS[f"dynamic {kind}"] += 1
        assert not rep.ok, f"missed a {kind} for n={n}:\n{src}\n{err}"
        assert not p.check().ok, f"missed a {kind} with n symbolic:\n{src}\n{err}"
        return
    if rep.ok:
        STATS["proved"] += 1
        return
    STATS["check fails, no dynamic fault for this n"] += 1
    for d in rep.of_kind("divergence"):
        w = d.witness
        if w.get("data_dependent") or "sizes" not in w:
            continue
        m = w["sizes"].get("n", n)
        if m is None or not 1 <= m <= 2:
            continue
        STATS["divergence witnesses"] += 1
        replayed = _run(p, m) is not None
        STATS["divergence witnesses replayed" if replayed
              else "divergence witnesses not replayed"] += 1
        if not replayed and os.environ.get("GPUDSL_HYPOTHESIS_SHOW"):
            print("NOT REPLAYED\n", src, d)
        break


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\ncollective soundness stats:", dict(STATS))
