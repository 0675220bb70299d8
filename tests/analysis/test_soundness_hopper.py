"""Soundness of check() with setmaxnreg and swizzled tiles (docs/hopper.md): random
kernels of two warpgroups (256 threads) exchanging through a swizzled SHARED tile,
behind whole-block or per-warpgroup barriers (some missing), with setmaxnreg statements
placed well and badly.  Whenever the interpreter's race detector finds a race, check()
(for sm_90a) is not ok; neither setmaxnreg nor the swizzle changes a race's verdict
(check() on the twin without them finds the same races); and the interpreter computes
the same with and without them.

``GPUDSL_HYPOTHESIS_EXAMPLES`` sets the number of examples (default 120 for CI)."""
from __future__ import annotations

import os
import re
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudsl
from gpudsl import proc_from_source

N_EXAMPLES = int(os.environ.get("GPUDSL_HYPOTHESIS_EXAMPLES", "120"))
STATS: Counter = Counter()
NS = vars(gpudsl)
REGS = ["setmaxnreg(40, 0, 128)", "setmaxnreg(232, 128, 256)", "setmaxnreg(24, 0, 256)",
        "setmaxnreg(256, 0, 256)", "setmaxnreg(40, 0, 64)", "setmaxnreg(120, 128, 256)"]
RANGES = [(0, 256), (0, 128), (128, 256)]


@st.composite
def thread_loop(draw, k):
    lo, hi = draw(st.sampled_from(RANGES))
    tv = f"t{k}"
    r = f"{tv} - {lo}" if lo else tv
    # mostly one element per thread ((r) // 32, (r) % 32), sometimes shared ones
    row, col = draw(st.sampled_from([(f"({r}) // 32", f"({r}) % 32")] * 3 + [
        (f"({r}) // 32", f"31 - ({r}) % 32"), (f"({r}) % 8", f"({r}) // 8 % 32"),
        (f"({r}) % 8", f"({r}) % 32"), ("i % 8", f"({r}) % 32"), ("0", "1")]))
    op = draw(st.sampled_from([f"s[{row}, {col}] = x[{tv}] + 1.0",
                               f"y[{tv}] = s[{row}, {col}]",
                               f"y[{tv}] += s[{row}, {col}] * 2.0",
                               f"s[{row}, {col}] += 1.0"]))
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:", f"    {op}"]


@st.composite
def hopper_proc(draw):
    lay = draw(st.sampled_from(["", "(swizzle=32)", "(swizzle=64)", "(swizzle=128)"]))
    regs = draw(st.lists(st.sampled_from(REGS), max_size=2, unique=True))
    in_loop = draw(st.booleans()) and draw(st.booleans())
    items = ["for tz in par(0, 256) @ THREADS:", "    y[tz] += 1.0"]   # the block: 256
    for k in range(draw(st.integers(2, 4))):
        items += draw(thread_loop(k))
        items += draw(st.sampled_from([["sync()"], ["sync()"], ["sync()"], ["sync(0, 128)"],
                                       ["sync(128, 256)"], []]))
    lines = ["def rand(n: size, x: f32[256], y: f32[256]):", "    assert n <= 2",
             "    for b in par(0, 1) @ BLOCKS:", f"        s: f32[8, 32] @ SHARED{lay}"]
    lines += [] if in_loop else ["        " + r for r in regs]
    lines.append("        for i in seq(0, n):")
    lines += ["            " + r for r in regs] if in_loop else []
    lines += ["            " + ln for ln in items]
    return "\n".join(lines) + "\n"


def _plain(src: str) -> str:
    """The twin without setmaxnreg and swizzle (``pass`` in its place: same lines)."""
    src = re.sub(r"setmaxnreg\([^)]*\)", "pass", src)
    return re.sub(r"\(swizzle=\d+\)", "", src)


def _races(rep) -> set:
    """The pairs of statements check() finds racing (the witness element may differ)."""
    return {tuple((l.line, l.col) for l in d.locations) for d in rep.of_kind("race")}


def _run(p, n, races):
    x = np.arange(256, dtype=np.float32)
    y = np.zeros(256, dtype=np.float32)
    try:
        gpudsl.interpret(p, detect_races=races, n=n, x=x, y=y)
    except gpudsl.RaceError as e:
        return e
    return y


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(hopper_proc(), st.integers(1, 2))
def test_dynamic_race_implies_check_fails(src, n):
    p = proc_from_source(src, NS, file="<random proc>")
    twin = proc_from_source(_plain(src), NS, file="<random proc>")
    STATS["procs"] += 1
    got = _run(p, n, True)
    rep = p.check(n=n, target="sm_90a")
    races = _races(rep)
    assert races == _races(twin.check(n=n, target="sm_90a")), src
    assert np.array_equal(_run(p, n, False), _run(twin, n, False), equal_nan=True)
    if isinstance(got, gpudsl.RaceError):
        STATS["dynamic races"] += 1
        assert not rep.ok and races, f"missed race for n={n}:\n{src}\n{got}"
        return
    STATS["proved safe" if rep.ok else "refused, no dynamic race"] += 1
    if rep.ok:
        assert "setmaxnreg" not in src or p.check(n=n).kinds() == {"target"}


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\nsoundness stats:", dict(STATS))
