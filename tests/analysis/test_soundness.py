"""Property-based soundness of check(): random small GPU procs (grids, shared arrays
plain or swizzled,
affine / modular / bitwise indices, guards, barriers in and out of seq loops,
atomics, integer locals holding control values or the old values atomics return).  Whenever the interpreter's dynamic race detector finds a race for some
sizes, check() with those sizes (and with the sizes left symbolic) is not ok.

``GPUDSL_HYPOTHESIS_EXAMPLES`` sets the number of examples (default 300 for CI);
``GPUDSL_HYPOTHESIS_STATS=1`` prints what was found at the end.
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudsl
from gpudsl import proc_from_source

N_EXAMPLES = int(os.environ.get("GPUDSL_HYPOTHESIS_EXAMPLES", "300"))
STATS: Counter = Counter()
S, G, X = 32, 128, 64  # shared, global y, global x extents


def _ns():
    import gpudsl as g

    return {k: getattr(g, k) for k in dir(g) if not k.startswith("_")}


@st.composite
def shared_index(draw, tv: str, kv: str | None):
    forms = [
        lambda: f"{tv}",
        lambda: f"{tv}",
        lambda: f"{tv} + 8",
        lambda: f"({draw(st.integers(1, 3))} * {tv} + {draw(st.integers(0, 7))}) % {S}",
        lambda: f"({tv} + 1) % {S}",
        lambda: f"{tv} % {draw(st.sampled_from([2, 4, 8, 16]))}",
        lambda: f"{tv} // 2",
        lambda: f"{tv} >> 1",
        lambda: f"({tv} ^ {draw(st.sampled_from([1, 2, 3]))}) % {S}",
        lambda: f"({tv} & {draw(st.sampled_from([1, 3, 7]))})",
        lambda: f"{draw(st.integers(0, 7))}",
        lambda: f"(7 - {tv}) % {S}",
    ]
    if kv is not None:
        forms += [lambda: f"({tv} + {kv}) % {S}",
                  lambda: f"({tv} + {draw(st.integers(1, 2))} * {kv}) % {S}",
                  lambda: f"({kv} % 2) * 8 + {tv} % 8"]
    return draw(st.sampled_from(forms))()


@st.composite
def thread_stmt(draw, tv, kv, T, uid=0):
    i1 = draw(shared_index(tv, kv))
    i2 = draw(shared_index(tv, kv))
    gi = draw(st.sampled_from([f"(b * {T} + {i1}) % {G}", f"{i1}", f"(b + {i1}) % {G}"]))
    op = draw(st.sampled_from([
        f"s[{i1}] = x[{tv} % {X}]",
        f"s[{i1}] = s[{i2}] + 1.0",
        f"s[{i1}] += 1.0",
        f"y[{gi}] = s[{i2}]",
        f"y[{gi}] = x[{tv} % {X}]",
        f"y[{gi}] += 1.0",
        f"atomic_add(y[{gi}], 1.0)",
        f"atomic_add(s[{i1}], 1.0)",
        f"x[{tv} % {X}] = s[{i2}]",
    ]))
    # integer locals: control values, and the old values atomics return (data)
    j = f"j{uid}"
    local = draw(st.sampled_from([
        None, None, None,
        [f"{j}: i32", f"{j} = {i1}", f"s[{j} % {S}] = 1.0"],
        [f"{j}: i32", f"{j} = {tv}", f"{j} = atomic_max(c[0], 3)", f"s[{j} % {S}] = 1.0"],
        [f"{j}: i32", f"{j} = atomic_add(c[1], 1)", f"y[{j} % {G}] = 1.0"],
        [f"{j}: i32", f"{j} = atomic_exch(c[2], {tv})", f"s[({j} + {tv}) % {S}] += 1.0"],
    ]))
    lines = local if local is not None else [op]
    guard = draw(st.sampled_from([None, None, f"{tv} < {draw(st.integers(1, T))}",
                                  f"{tv} % 2 == 0", "b == 0", "n > 1"]))
    if guard:
        return [f"if {guard}:"] + ["    " + l for l in lines]
    return lines


@st.composite
def block_items(draw, T, depth, kv, counter):
    items = []
    for _ in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["threads", "threads", "sync", "sync", "seq", "if", "cut"]
                                    if depth < 2 else ["threads", "sync"]))
        if kind == "threads":
            counter[0] += 1
            tv = f"t{counter[0]}"
            ext = draw(st.sampled_from([T, T, T // 2]))
            body = []
            for _ in range(draw(st.integers(1, 2))):
                counter[0] += 1
                body += draw(thread_stmt(tv, kv, T, counter[0]))
            items.append([f"for {tv} in par(0, {ext}) @ THREADS:"] + ["    " + l for l in body])
        elif kind == "sync":
            items.append(["sync()"])
        elif kind == "seq":
            counter[0] += 1
            k = f"k{counter[0]}"
            # issue 13: trip counts from an outer seq variable (zero trips included)
            trips = draw(st.sampled_from(["2", "3", "n"] + ([kv, f"{kv} + 1"] if kv else [])))
            inner = draw(block_items(T, depth + 1, k, counter))
            items.append([f"for {k} in seq(0, {trips}):"] + ["    " + l for l in inner])
        elif kind == "cut":
            # a loop cut in two (cut_loop's result): sibling loops of one name and body,
            # barrier phases running from one into the other (issue 28)
            counter[0] += 1
            k = f"k{counter[0]}"
            at = draw(st.sampled_from(["1", "n", "min(n, 2)"]))
            inner = ["    " + l for l in draw(block_items(T, depth + 1, k, counter))]
            items.append([f"for {k} in seq(0, {at}):"] + inner +
                         [f"for {k} in seq({at}, 3):"] + inner)
        else:
            # issue 13: uniform ifs on seq variables too
            # issue 28: conditions on data every thread reads at one place (uniform
            # when no thread writes it in the same phase)
            cond = draw(st.sampled_from(["n > 1", "b == 0", "b % 2 == 1", "s[0] > 0.0",
                                         "x[b + 1] > 1.0", "y[b] == 0.0"] +
                                        ([f"{kv} == 0", f"{kv} > 0", f"{kv} % 2 == 1"]
                                         if kv else [])))
            inner = draw(block_items(T, depth + 1, kv, counter))
            items.append([f"if {cond}:"] + ["    " + l for l in inner])
    return [l for it in items for l in it]


@st.composite
def gpu_proc(draw):
    T = draw(st.sampled_from([4, 8]))
    nb = draw(st.sampled_from(["1", "2", "n"]))
    body = draw(block_items(T, 0, None, [0]))
    # a swizzled layout (docs/hopper.md) changes addresses only: never a race's verdict
    layout = draw(st.sampled_from(["", "", "", "(swizzle=32)", "(swizzle=64)",
                                   "(swizzle=128)"]))
    lines = [f"def rand(n: size, x: f32[{X}], y: f32[{G}], c: i32[4]):",
             "    assert n <= 3",
             f"    for b in par(0, {nb}) @ BLOCKS:",
             f"        s: f32[{S}] @ SHARED{layout}"]
    lines += ["        " + l for l in body]
    return "\n".join(lines) + "\n"


def _run(p, n):
    x = np.arange(X, dtype=np.float32)
    y = np.zeros(G, dtype=np.float32)
    try:
        gpudsl.interpret(p, detect_races=True, n=n, x=x, y=y, c=np.zeros(4, np.int32))
    except gpudsl.RaceError as e:
        return e
    return None


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(gpu_proc(), st.integers(1, 3))
def test_dynamic_race_implies_check_fails(src, n):
    p = proc_from_source(src, _ns(), file="<random proc>")
    STATS["procs"] += 1
    err = _run(p, n)
    rep = p.check(n=n)
    if rep.kinds() & {"unknown"}:
        STATS["unknown"] += 1
    if err is not None:
        STATS["dynamic races"] += 1
        assert not rep.ok, f"missed race for n={n}:\n{src}\n{err}"
        assert not p.check().ok, f"missed race with n symbolic:\n{src}\n{err}"
        return
    if rep.ok:
        STATS["proved safe"] += 1
        return
    STATS["check fails, no dynamic race for this n"] += 1
    # Races whose witness does not depend on data replay in the interpreter.
    for d in rep.of_kind("race"):
        w = d.witness
        if w.get("data_dependent"):
            continue
        STATS["race witnesses"] += 1
        if _run(p, w["sizes"]["n"]) is not None:
            STATS["race witnesses replayed"] += 1
        else:
            STATS["race witnesses not replayed"] += 1
            if os.environ.get("GPUDSL_HYPOTHESIS_SHOW"):
                print("NOT REPLAYED\n", src, d)
        break


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\nsoundness stats:", dict(STATS))
