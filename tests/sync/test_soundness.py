"""check() against the dynamic race detector on random kernels with ranged barriers,
split barriers and block barriers (issue 22): whenever the detector finds a race or
a deadlock for some sizes (or the interpreter a fault), check() with those sizes and
with the sizes symbolic is not ok.

Blocks of 64 threads (two warps); thread loops over the whole block or one warp;
barriers ``sync()``, ``sync(0, 32)``, ``sync(32, 64)``, ``sync(0, 64)``; one or two split
barriers and a ring of two (``rg[k % 2]``) whose arrive ranges are drawn once per proc
(several: chains through relay threads), with arrive/wait pairs (work in
between) and lone arrives or waits; block-level ``seq`` loops and uniform ``if``s.  An
arrive range may be one elected thread standing for a warp or the block
(``arrive(bar, 32, 33, count=32)``); a lone arrive now and then gives another count
(a phase of another size: refused).

``GPUDSL_SYNC_EXAMPLES`` sets the number of examples (default 100 for CI);
``GPUDSL_HYPOTHESIS_STATS=1`` prints what was found.
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudsl
from gpudsl import proc_from_source

N_EXAMPLES = int(os.environ.get("GPUDSL_SYNC_EXAMPLES", "100"))
STATS: Counter = Counter()
RANGES = [(0, 64), (0, 32), (32, 64)]
# arrive ranges (lo, hi, count): whole ranges, or one thread arriving for many (issue 35)
ARRIVES = [(0, 64, 1), (0, 32, 1), (32, 64, 1), (0, 1, 32), (32, 33, 32), (0, 1, 64)]


def _arrive(el, r, count=None) -> str:
    c = r[2] if count is None else count
    return f"arrive({el}, {r[0]}, {r[1]}{f', count={c}' if c != 1 else ''})"


@st.composite
def thread_loop(draw, tv, kv):
    lo, hi = draw(st.sampled_from(RANGES))
    i1 = draw(st.sampled_from([tv, f"({tv} + 32) % 64", f"63 - {tv}", f"{tv} % 32",
                               f"({tv} + 1) % 64"] + ([f"({tv} + {kv}) % 64"] if kv else [])))
    i2 = draw(st.sampled_from([tv, f"63 - {tv}", f"({tv} + 32) % 64", f"{tv} // 2"]))
    row = draw(st.sampled_from(["0", "1"] + ([f"{kv} % 2"] if kv else [])))
    op = draw(st.sampled_from([
        f"s[{row}, {i1}] = x[{tv}]",
        f"s[{row}, {i1}] = s[{row}, {i2}] + 1.0",
        f"y[b, {tv}] += s[{row}, {i2}]",
        f"atomic_add(s[{row}, {i1}], 1.0)",
    ]))
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:", "    " + op]


@st.composite
def element(draw, bar, kv):
    """``bar``, or an element of the ring ``rg`` (two split barriers, issue 35)."""
    if bar != "rg":
        return bar
    return f"rg[{draw(st.sampled_from(['0', '1'] + ([f'{kv} % 2'] * 3 if kv else [])))}]"


@st.composite
def items(draw, depth, kv, counter, arrive):
    out = []
    for _ in range(draw(st.integers(1, 4))):
        kinds = ["threads", "threads", "sync", "split", "split", "lone"] + \
            (["seq", "if"] if depth < 2 else [])
        kind = draw(st.sampled_from(kinds))
        counter[0] += 1
        if kind == "threads":
            out += draw(thread_loop(f"t{counter[0]}", kv))
        elif kind == "sync":
            out.append(draw(st.sampled_from(["sync()", "sync(0, 32)", "sync(32, 64)",
                                             "sync(0, 64)"])))
        elif kind == "split":
            lo, hi = draw(st.sampled_from(RANGES))
            bar = draw(st.sampled_from(sorted(arrive)))
            out.append(_arrive(draw(element(bar, kv)), arrive[bar]))
            if draw(st.booleans()):
                out += draw(thread_loop(f"t{counter[0]}", kv))
            out.append(f"wait({draw(element(bar, kv))}, {lo}, {hi})")
        elif kind == "lone":
            lo, hi = draw(st.sampled_from(RANGES))
            bar = draw(element(draw(st.sampled_from(sorted(arrive))), kv))
            r = arrive[bar.split("[")[0]]
            out.append(draw(st.sampled_from([_arrive(bar, r), f"wait({bar}, {lo}, {hi})",
                                             _arrive(bar, r), f"wait({bar}, {lo}, {hi})",
                                             _arrive(bar, r, r[2] + 1)])))
        elif kind == "seq":
            k = f"k{counter[0]}"
            trips = draw(st.sampled_from(["2", "n"] + ([kv] if kv else [])))
            inner = draw(items(depth + 1, k, counter, arrive))
            out += [f"for {k} in seq(0, {trips}):"] + ["    " + ln for ln in inner]
        else:
            cond = draw(st.sampled_from(["n > 1", "b == 0"] + ([f"{kv} > 0"] if kv else [])))
            inner = draw(items(depth + 1, kv, counter, arrive))
            out += [f"if {cond}:"] + ["    " + ln for ln in inner]
    return out


@st.composite
def sync_proc(draw):
    nb = draw(st.sampled_from(["1", "2"]))
    # one or two split barriers, each with its own arrive range: with two, orderings
    # compose through relay threads (issue 35)
    bars = ["bar"] + (["bar2"] if draw(st.booleans()) else []) + \
        (["rg"] if draw(st.booleans()) else [])
    arrive = {b: draw(st.sampled_from(ARRIVES)) for b in bars}
    body = draw(items(0, None, [0], arrive))
    lines = ["def rand(n: size, x: f32[64], y: f32[2, 64]):", "    assert n <= 3",
             f"    for b in par(0, {nb}) @ BLOCKS:", "        s: f32[2, 64] @ SHARED"] + \
        [f"        {b}: barrier{'[2]' if b == 'rg' else ''} @ SHARED" for b in bars]
    return "\n".join(lines + ["        " + ln for ln in body]) + "\n"


def _run(p, n):
    try:
        gpudsl.interpret(p, detect_races=True, n=n, x=np.arange(64, dtype=np.float32),
                         y=np.zeros((2, 64), np.float32))
    except (gpudsl.RaceError, gpudsl.InterpError) as e:
        return e
    return None


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(sync_proc(), st.integers(1, 3))
def test_detector_finding_implies_check_fails(src, n):
    p = proc_from_source(src, file="<random proc>")
    STATS["procs"] += 1
    err = _run(p, n)
    rep = p.check(n=n)
    if rep.kinds() & {"unknown"}:
        STATS["unknown"] += 1
    if err is not None:
        STATS["race" if isinstance(err, gpudsl.RaceError) else "deadlock or fault"] += 1
        assert not rep.ok, f"check() proved what the detector refutes, n={n}:\n{src}\n{err}"
        assert not p.check().ok, f"missed with n symbolic:\n{src}\n{err}"
        return
    if rep.ok:
        STATS["proved"] += 1
        return
    STATS["check fails, detector clean for this n"] += 1
    if os.environ.get("GPUDSL_HYPOTHESIS_SHOW"):
        print("CHECK FAILS, DETECTOR CLEAN, n =", n, "\n", src, rep)
    for d in rep.of_kind("race"):
        STATS["race witnesses"] += 1
        if _run(p, d.witness["sizes"].get("n", n)) is not None:
            STATS["race witnesses replayed"] += 1
        break


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\nsync soundness stats:", dict(STATS))
