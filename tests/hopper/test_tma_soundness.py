"""check() against the interpreter and its race detector on random kernels with bulk tensor
copies (``tma_load``, docs/hopper.md): whenever the interpreter stops (a copy in flight, a
deadlock, a copy that never lands) or the detector finds a race, for some sizes, check()
with those sizes and with the sizes symbolic is not ok.

Blocks of 64 threads; copies of one or two rows of ``x`` (clipped past ``n``) into ``s``
issued by one thread (0 or 32) on the split barrier ``bar`` or ``other`` (alone, or as a
phase: the copy by the first thread of the barrier's range, its arrive, a wait); arrives and
waits on both (ranges over the block or one half), stores of a row of ``s`` to ``z``
(``tma_store``, ``tma_commit``, ``tma_wait``, in the issuing thread or at block level),
``sync()``, thread loops that read or
write ``s``, block-level ``seq`` loops and uniform ``if``s.  The tile is plain (rows of 64
f32) or swizzled (``@ SHARED(swizzle=W)``, rows of ``W`` bytes, boxes of one row, copies
at rows 0 and 8: the swizzle's period, now and then at row 1: refused as misaligned).

``GPUDSL_TMA_EXAMPLES`` sets the number of examples (default 60 for CI);
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

N_EXAMPLES = int(os.environ.get("GPUDSL_TMA_EXAMPLES", "60"))
RANGES = [(0, 64), (0, 32), (32, 64)]
STATS: Counter = Counter()
# (columns of the tile and its boxes, swizzle width, rows between copy slots)
LAYOUTS = [(64, 0, 1), (64, 0, 1), (32, 128, 8), (16, 64, 8), (8, 32, 8)]
LAYOUT = {"cw": 64, "slot": 1}   # the layout of the proc being drawn


def _row(draw, kv) -> str:
    """A copy's first row: slot 0 or 1 (slots of 8 rows in a swizzled tile, whose copies
    start at a multiple of its period; now and then row 1 there: misaligned)."""
    slot = draw(st.sampled_from(["0", "1"] + ([f"{kv} % 2"] if kv else [])))
    if LAYOUT["slot"] == 1 or slot == "0" or not draw(st.integers(0, 7)):
        return slot
    return f"8 * ({slot})"


@st.composite
def copy_loop(draw, tv, kv, arrives, bar=None, who=None):
    bar = bar or draw(st.sampled_from(sorted(arrives)))
    who = draw(st.sampled_from([0, 32])) if who is None else who
    src = draw(st.sampled_from(["0", "n - 1"] + ([f"{kv} % n"] if kv else [])))
    cw = LAYOUT["cw"]
    if draw(st.booleans()):
        copy = f"tma_load(s[{_row(draw, kv)}, 0:{cw}], x[{src}, 0:{cw}], bar={bar})"
    else:
        copy = f"tma_load(s[0:2, 0:{cw}], x[{src}:{src} + 2, 0:{cw}], bar={bar})"
    return [f"for {tv} in par({who}, {who + 1}) @ THREADS:", "    " + copy]


@st.composite
def use_loop(draw, tv, kv):
    cw = LAYOUT["cw"]
    row = draw(st.sampled_from(["0", "1", "8" if cw < 64 else "0"] +
                               ([f"{kv} % 2"] if kv else [])))
    i = draw(st.sampled_from([f"{tv} % {cw}", f"{cw - 1} - {tv} % {cw}",
                              f"({tv} + 1) % {cw}"]))
    op = draw(st.sampled_from([f"y[{tv}] += s[{row}, {i}]", f"y[{tv}] += s[{row}, {i}]",
                               f"s[{row}, {i}] = 1.0"]))
    lo, hi = draw(st.sampled_from(RANGES))
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:", "    " + op]


@st.composite
def items(draw, depth, kv, counter, arrives):
    out = []
    for _ in range(draw(st.integers(1, 5))):
        kinds = ["copy", "phase", "phase", "arrive", "wait", "sync", "use", "use", "store",
                 "store", "commit", "twait"] + \
            (["seq", "if"] if depth < 2 else [])
        kind = draw(st.sampled_from(kinds))
        counter[0] += 1
        tv = f"t{counter[0]}"
        if kind == "copy":
            out += draw(copy_loop(tv, kv, arrives))
        elif kind == "phase":   # a copy by a thread of the barrier's range, its arrive, a wait
            bar = draw(st.sampled_from(sorted(arrives)))
            out += draw(copy_loop(tv, kv, arrives, bar, arrives[bar][0]))
            out.append(f"arrive({bar}, {arrives[bar][0]}, {arrives[bar][1]})")
            if draw(st.integers(0, 3)):
                lo, hi = draw(st.sampled_from(RANGES))
                out.append(f"wait({bar}, {lo}, {hi})")
        elif kind == "use":
            out += draw(use_loop(tv, kv))
        elif kind == "store":   # a row of s to a row of z, grouped by tma_commit/tma_wait
            who = draw(st.sampled_from([0, 32]))
            row = _row(draw, kv)
            dst = draw(st.sampled_from(["0", "n - 1"] + ([f"{kv} % n"] if kv else [])))
            cw = LAYOUT["cw"]
            body = [f"    tma_store(z[{dst}, 0:{cw}], s[{row}, 0:{cw}])"]
            body += draw(st.sampled_from([[], ["    tma_commit()", "    tma_wait(0)"],
                                          ["    tma_commit()"]]))
            out += [f"for {tv} in par({who}, {who + 1}) @ THREADS:"] + body
        elif kind == "commit":
            out.append("tma_commit()")
        elif kind == "twait":
            out.append(f"tma_wait({draw(st.sampled_from([0, 0, 1]))})")
        elif kind == "arrive":
            bar = draw(st.sampled_from(sorted(arrives)))
            out.append(f"arrive({bar}, {arrives[bar][0]}, {arrives[bar][1]})")
        elif kind == "wait":
            bar = draw(st.sampled_from(sorted(arrives)))
            lo, hi = draw(st.sampled_from(RANGES))
            out.append(f"wait({bar}, {lo}, {hi})")
        elif kind == "sync":
            out.append("sync()")
        elif kind == "seq":
            k = f"k{counter[0]}"
            inner = draw(items(depth + 1, k, counter, arrives))
            out += [f"for {k} in seq(0, {draw(st.sampled_from(['2', 'n']))}):"] + \
                ["    " + ln for ln in inner]
        else:
            cond = draw(st.sampled_from(["n > 1"] + ([f"{kv} > 0"] if kv else [])))
            inner = draw(items(depth + 1, kv, counter, arrives))
            out += [f"if {cond}:"] + ["    " + ln for ln in inner]
    return out


@st.composite
def tma_proc(draw):
    arrives = {"bar": draw(st.sampled_from([(0, 1), (0, 32), (32, 33), (0, 64)])),
               "other": draw(st.sampled_from([(0, 32), (32, 64), (0, 64)]))}
    cw, swz, slot = draw(st.sampled_from(LAYOUTS))
    LAYOUT.update(cw=cw, slot=slot)
    body = draw(items(0, None, [0], arrives))
    STATS[f"swizzle {swz}" if swz else "plain"] += 1
    mem = f"SHARED(swizzle={swz})" if swz else "SHARED"
    lines = ["@proc", "def rand(n: size, x: f32[n, 64], y: f32[64], z: f32[n, 64]):",
             "    assert n <= 3",
             "    for b in par(0, 1) @ BLOCKS:", f"        s: f32[{2 * slot}, {cw}] @ {mem}",
             "        bar: barrier @ SHARED", "        other: barrier @ SHARED"]
    return "\n".join(lines + ["        " + ln for ln in body]) + "\n"


def _run(p, n):
    try:
        gpudsl.interpret(p, detect_races=True, n=n,
                         x=np.arange(n * 64, dtype=np.float32).reshape(n, 64),
                         y=np.zeros(64, np.float32), z=np.zeros((n, 64), np.float32))
    except (gpudsl.RaceError, gpudsl.InterpError) as e:
        return e
    return None


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(tma_proc(), st.integers(1, 3))
def test_interpreter_finding_implies_check_fails(src, n):
    p = proc_from_source(src, file="<random proc>")
    STATS["procs"] += 1
    err = _run(p, n)
    rep = p.check(target="sm_90a", n=n)
    if "unknown" in rep.kinds():
        STATS["unknown"] += 1
    if err is not None:
        STATS["race" if isinstance(err, gpudsl.RaceError) else "in flight, deadlock or fault"] += 1
        assert not rep.ok, f"check() proved what the interpreter refutes, n={n}:\n{src}\n{err}"
        assert not p.check(target="sm_90a").ok, f"missed with n symbolic:\n{src}\n{err}"
        return
    if rep.ok:
        STATS["proved"] += 1
        return
    STATS["check fails, interpreter clean for this n"] += 1


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\ntma soundness:", dict(STATS))
