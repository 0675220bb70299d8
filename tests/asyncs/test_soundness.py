"""check() against the interpreter and its race detector on random kernels with async
copies (docs/async_copies.md): whenever the interpreter stops on an access in flight, or the
detector finds a race, for some sizes, check() with those sizes and with the sizes
symbolic is not ok.

Blocks of 64 threads; copies of one or four elements of a row of ``x`` into
``s[row]``, ``async_commit()``, ``async_wait(0..2)``, ``sync()``, thread loops that
read or write ``s`` (over the block or one half), block-level ``seq`` loops and uniform
``if``s, and (in some) a split barrier's arrive/wait pairs, with copies that complete on it
(``async_copy(..., bar=bar)``, issue 35) and arrives of one elected thread standing for
many (``count=``).

``GPUDSL_ASYNC_EXAMPLES`` sets the number of examples (default 100 for CI);
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

N_EXAMPLES = int(os.environ.get("GPUDSL_ASYNC_EXAMPLES", "100"))
# thread ranges of the loops: with split barriers between two halves of the block,
# the copies and their uses are ordered by arrive/wait pairs (issue 35)
RANGES = [(0, 64), (0, 64), (0, 32), (32, 64)]
STATS: Counter = Counter()


@st.composite
def copy_loop(draw, tv, kv, arrive=None):
    bar = ", bar=bar" if arrive and draw(st.integers(0, 2)) == 0 else ""
    row = draw(st.sampled_from(["0", "1"] + ([f"{kv} % 2", f"({kv} + 1) % 2"] if kv else [])))
    src = draw(st.sampled_from(["0", "n - 1"] + ([f"{kv} % n"] if kv else [])))
    if draw(st.booleans()):
        return [f"for {tv} in par(0, 16) @ THREADS:",
                f"    async_copy(s[{row}, 4 * {tv}:4 * {tv} + 4], "
                f"x[{src}, 4 * {tv}:4 * {tv} + 4]{bar})"]
    col = draw(st.sampled_from([tv, f"63 - {tv}", f"({tv} + 32) % 64"]))
    body = [f"    async_copy(s[{row}, {col}], x[{src}, {tv}]{bar})"]
    if draw(st.integers(0, 3)) == 0:   # committed and waited for in the thread loop
        body += draw(st.sampled_from([
            ["    async_commit()", "    async_wait(0)"],
            ["    async_commit()", "    async_wait(0)", f"    y[{tv}] += s[{row}, {col}]"],
            ["    async_commit()", f"    y[{tv}] += s[{row}, {col}]", "    async_wait(0)"],
            ["    async_commit()", "    async_wait(1)"], ["    async_wait(0)"]]))
    lo, hi = draw(st.sampled_from(RANGES))
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:"] + body


@st.composite
def use_loop(draw, tv, kv):
    row = draw(st.sampled_from(["0", "1"] + ([f"{kv} % 2"] if kv else [])))
    i = draw(st.sampled_from([tv, f"63 - {tv}", f"({tv} + 1) % 64", f"{tv} // 2"]))
    op = draw(st.sampled_from([f"y[{tv}] += s[{row}, {i}]", f"y[{tv}] += s[{row}, {i}]",
                               f"s[{row}, {i}] = 1.0"]))
    lo, hi = draw(st.sampled_from(RANGES))
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:", "    " + op]


@st.composite
def items(draw, depth, kv, counter, arrive=None):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        kinds = ["copy", "copy", "commit", "commit", "wait", "wait", "sync", "use", "use"] + \
            (["seq", "if"] if depth < 2 else []) + (["split", "split"] if arrive else [])
        kind = draw(st.sampled_from(kinds))
        counter[0] += 1
        tv = f"t{counter[0]}"
        if kind == "copy":
            out += draw(copy_loop(tv, kv, arrive))
        elif kind == "use":
            out += draw(use_loop(tv, kv))
        elif kind == "commit":
            out.append("async_commit()")
        elif kind == "wait":
            out.append(f"async_wait({draw(st.sampled_from([0, 0, 1, 2]))})")
        elif kind == "sync":
            out.append("sync()")
        elif kind == "split":
            lo, hi = draw(st.sampled_from(RANGES[1:]))
            c = f", count={arrive[2]}" if arrive[2] != 1 else ""
            out += [f"arrive(bar, {arrive[0]}, {arrive[1]}{c})", f"wait(bar, {lo}, {hi})"]
        elif kind == "seq":
            k = f"k{counter[0]}"
            trips = draw(st.sampled_from(["2", "n"]))
            inner = draw(items(depth + 1, k, counter, arrive))
            out += [f"for {k} in seq(0, {trips}):"] + ["    " + ln for ln in inner]
        else:
            cond = draw(st.sampled_from(["n > 1"] + ([f"{kv} > 0", f"{kv} + 1 < n"]
                                                     if kv else [])))
            inner = draw(items(depth + 1, kv, counter, arrive))
            out += [f"if {cond}:"] + ["    " + ln for ln in inner]
    return out


@st.composite
def async_proc(draw):
    arrive = draw(st.sampled_from([None, None, (0, 32, 1), (32, 64, 1), (0, 64, 1),
                                   (0, 1, 64), (32, 33, 32)]))
    body = draw(items(0, None, [0], arrive))
    lines = ["@proc", "def rand(n: size, x: f32[n, 64], y: f32[64]):", "    assert n <= 3",
             "    for b in par(0, 1) @ BLOCKS:", "        s: f32[2, 64] @ SHARED"] + \
        (["        bar: barrier @ SHARED"] if arrive else [])
    return "\n".join(lines + ["        " + ln for ln in body]) + "\n"


def _run(p, n):
    try:
        gpudsl.interpret(p, detect_races=True, n=n,
                         x=np.arange(n * 64, dtype=np.float32).reshape(n, 64),
                         y=np.zeros(64, np.float32))
    except (gpudsl.RaceError, gpudsl.InterpError) as e:
        return e
    return None


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(async_proc(), st.integers(1, 3))
def test_interpreter_finding_implies_check_fails(src, n):
    p = proc_from_source(src, file="<random proc>")
    STATS["procs"] += 1
    err = _run(p, n)
    rep = p.check(n=n)
    if "unknown" in rep.kinds():
        STATS["unknown"] += 1
    if err is not None:
        STATS["race" if isinstance(err, gpudsl.RaceError) else "in flight or fault"] += 1
        assert not rep.ok, f"check() proved what the interpreter refutes, n={n}:\n{src}\n{err}"
        assert not p.check().ok, f"missed with n symbolic:\n{src}\n{err}"
        return
    if rep.ok:
        STATS["proved"] += 1
        return
    STATS["check fails, interpreter clean for this n"] += 1
    for d in rep.of_kind("race"):
        STATS["race witnesses"] += 1
        if _run(p, d.witness["sizes"].get("n", n)) is not None:
            STATS["race witnesses replayed"] += 1
        break


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\nasync soundness:", dict(STATS))
