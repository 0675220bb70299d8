"""Property-based soundness of what issue 39 taught check() (the GPUVerify false
alarms): a thread's reads of one location in one region are one value, index locals
assigned several times, atomic tickets with per-block counters and resets, and
summaries of SHARED arrays written once per thread before a barrier.  Random
small procs with guards on integer data (nested, with writes, loops or nothing
between them), locals reassigned at top level or under an ``if``, tickets from a
SHARED or a GLOBAL counter, zeroed before or after a barrier, in another kernel, or
not at all; a SHARED array written from the writer's coordinates (a permutation or
not, guarded, in a loop, written again, read before its barrier) used as an index.
Whenever the interpreter's race detector finds a race, or an access
leaves its array, check() is not ok.

``GPUDSL_HYPOTHESIS_EXAMPLES`` sets the number of examples (default 200 for CI);
``GPUDSL_HYPOTHESIS_STATS=1`` prints what was found at the end.
"""
from __future__ import annotations

import os
from collections import Counter

import numpy as np
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import gpudsl
from gpudsl import proc_from_source

N_EXAMPLES = int(os.environ.get("GPUDSL_HYPOTHESIS_EXAMPLES", "200"))
STATS: Counter = Counter()
S, G = 16, 32     # shared s, global y extents
NS = vars(gpudsl)


def _idx(draw, tv):
    return draw(st.sampled_from([tv, tv, f"({tv} + 1) % {S}", f"{tv} % 4", "0",
                                 f"({tv} + {S - 1}) % {S}"]))


@st.composite
def guard_chain(draw, tv):
    """``if s[i] == v: <between> if s[j] ...: <write>``"""
    i, j, w = _idx(draw, tv), _idx(draw, tv), _idx(draw, tv)
    between = draw(st.sampled_from([[], ["pass"], [f"s[{i}] = 1"], [f"s[{w}] = 0"],
                                    [f"y[{tv} % {G}] = s[{i}]"], "loop"]))
    inner_cond = draw(st.sampled_from([f"s[{j}] != 0", f"s[{j}] == 0", f"s[{j}] > s[{i}]",
                                       f"s[{i}] != 0 and s[{j}] != 0"]))
    act = draw(st.sampled_from([f"y[0] = {tv}", f"s[{w}] = 2", f"y[s[{i}] % {G}] = 1",
                                f"s[{j}] = 3"]))
    first = draw(st.sampled_from([f"s[{i}] == 0", f"s[{i}] != 1", f"x[{tv}] == 0"]))
    if between == "loop":
        return ([f"if {first}:", "    for q in seq(0, 2):", f"        if {inner_cond}:",
                 f"            {act}", f"        s[{i}] = 1"])
    return ([f"if {first}:"] + ["    " + b for b in between] +
            [f"    if {inner_cond}:", f"        {act}"])


@st.composite
def local_stmts(draw, tv, uid):
    a = f"a{uid}"
    e1, e2 = draw(st.sampled_from([tv, "0", f"{tv} // 2", "1"])), \
        draw(st.sampled_from([tv, "0", f"{tv} % 2", f"{S - 1} - {tv}"]))
    second = draw(st.sampled_from([[f"{a} = {e2}"], [f"if {tv} > 1:", f"    {a} = {e2}"],
                                   [f"if s[{tv}] == 0:", f"    {a} = {e2}"], []]))
    use = draw(st.sampled_from([f"y[{a}] = {tv}", f"s[{a}] = {tv}",
                                f"if {a} >= 0 and {a} < {S}:\n    s[{a}] += 1"]))
    return [f"{a}: i32", f"{a} = {e1}"] + second + use.split("\n")


@st.composite
def ticket_stmts(draw, tv, uid, counter):
    k = f"k{uid}"
    use = draw(st.sampled_from([f"y[{k}] = {tv}", f"y[{k}] = {tv}", f"s[{k} % {S}] = 1",
                                f"y[({k} + {tv}) % {G}] = 1"]))
    bound = f"if {k} >= 0 and {k} < {G}:" if "% " not in use or "y[(" in use \
        else f"if {k} >= 0:"
    return [f"{k}: i32", f"{k} = atomic_add({counter}[0], 1)", bound, "    " + use]


@st.composite
def thread_loop(draw, T, counter, uid):
    tv = f"t{uid}"
    body = []
    for n in range(draw(st.integers(1, 2))):
        kind = draw(st.sampled_from(["chain", "chain", "local", "ticket", "reset", "plain"]))
        if kind == "chain":
            body += draw(guard_chain(tv))
        elif kind == "local":
            body += draw(local_stmts(tv, f"{uid}_{n}"))
        elif kind == "ticket":
            body += draw(ticket_stmts(tv, f"{uid}_{n}", counter))
        elif kind == "reset":
            body += [draw(st.sampled_from([f"if {tv} == 0:", f"if {tv} == 1:", "if b == 0:"])),
                     f"    {counter}[0] = 0"]
        else:
            body += [draw(st.sampled_from([f"s[{tv}] = x[{tv}]", f"s[({tv} + 1) % {S}] = 1",
                                           f"y[{tv}] = s[{tv}]"]))]
    return [f"for {tv} in par(0, {T}) @ THREADS:"] + ["    " + l for l in body]


@st.composite
def summary_items(draw, T):
    """A SHARED array ``P`` written once per thread (or not quite: guarded, in a loop,
    written again, read before its write), a barrier or not, then used as an index
    (what summaries.py infers).  Mostly permutations, so that most are race-free."""
    def rare(k):   # (hypothesis draws the ends of integer ranges often)
        return draw(st.sampled_from([False] * (k - 1) + [True]))

    perms = ["pt", f"({T} - 1) - pt", f"(pt + 1) % {T}", f"(pt * 3) % {T}",
             f"select(pt % 2 == 0, (pt + 2) % {T}, pt)"]
    value = draw(st.sampled_from(perms)) if not rare(4) else \
        draw(st.sampled_from(["pt % 2", "0", f"(pt + 1) % {T} // 2"]))
    at = "pt" if not rare(4) else draw(st.sampled_from(["pt + 1", "(pt + 1) % 4"]))
    body = [f"P[{at}] = {value}"]
    if rare(6):
        body = [draw(st.sampled_from([f"y[P[pt] % {G}] = 1", f"s[P[pt] % {S}] = 2"]))] + body
    elif rare(5):
        body = [f"if {draw(st.sampled_from(['pt > 0', f'pt < {T} - 1']))}:", "    " + body[0]]
    if rare(8):
        body = ["for pi in seq(0, 2):"] + ["    " + b for b in body]
    items = [[f"for pt in par(0, {T}) @ THREADS:"] + ["    " + b for b in body]]
    if rare(8):
        items.append(["sync()", f"for pu in par(0, {T}) @ THREADS:", "    if pu == 1:",
                      "        P[pu] = 0"])
    if not rare(6):
        items.append(["sync()"])
    r = draw(st.sampled_from(["qt", f"(qt + 1) % {T}", f"{T} - 1 - qt", "qt"])) \
        if not rare(6) else "qt // 2"
    use = draw(st.sampled_from([f"s[P[{r}] % {S}] = qt", f"s[P[{r}] % {S}] = qt",
                                f"if P[{r}] >= 0 and P[{r}] < {S}:\n    s[P[{r}]] = qt",
                                f"y[P[{r}] % {G}] = qt + b", f"s[P[{r}]] = qt"]))
    items.append([f"for qt in par(0, {T}) @ THREADS:"] + ["    " + u for u in use.split("\n")])
    return items


@st.composite
def region_proc(draw):
    T = draw(st.sampled_from([4, 8, 16]))
    nb = draw(st.sampled_from(["1", "1", "2", "n"]))
    counter = draw(st.sampled_from(["cs", "c"]))
    items = [[f"for t0 in par(0, {T}) @ THREADS:", "    s[t0] = x[t0]"], ["sync()"]]
    for u in range(draw(st.integers(1, 4))):
        kind = draw(st.sampled_from(["threads", "threads", "sync", "seq", "summary"]))
        if kind == "summary":
            items += draw(summary_items(T))
        elif kind == "threads":
            items.append(draw(thread_loop(T, counter, u + 1)))
            if draw(st.booleans()):
                items.append(["sync()"])
        elif kind == "sync":
            items.append(["sync()"])
        else:
            inner = draw(thread_loop(T, counter, u + 1))
            tail = draw(st.sampled_from([["sync()"], []]))
            items.append([f"for r{u} in seq(0, 2):"] + ["    " + l for l in inner + tail])
    lines = [f"def rand(n: size, x: i32[{S}], y: i32[{G}], c: i32[2]):", "    assert n <= 3"]
    if draw(st.booleans()):
        lines += ["    for b in par(0, 1) @ BLOCKS:", "        for t in par(0, 1) @ THREADS:",
                  "            c[0] = 0"]
    lines += [f"    for b in par(0, {nb}) @ BLOCKS:", f"        s: i32[{S}] @ SHARED",
              "        cs: i32[1] @ SHARED", f"        P: i32[{T + 1}] @ SHARED"]
    lines += ["        " + l for it in items for l in it]
    return "\n".join(lines) + "\n"


@st.composite
def summary_proc(draw):
    T = draw(st.sampled_from([4, 8, 16]))
    nb = draw(st.sampled_from(["1", "2", "n"]))
    lines = [f"def rand(n: size, x: i32[{S}], y: i32[{G}], c: i32[2]):", "    assert n <= 3",
             f"    for b in par(0, {nb}) @ BLOCKS:", f"        s: i32[{S}] @ SHARED",
             f"        P: i32[{T + 1}] @ SHARED"]
    lines += ["        " + l for it in draw(summary_items(T)) for l in it]
    return "\n".join(lines) + "\n"


def _run(p, n, x):
    try:
        gpudsl.interpret(p, detect_races=True, n=n, x=x.copy(), y=np.zeros(G, np.int32),
                         c=np.zeros(2, np.int32))
    except gpudsl.RaceError as e:
        return "race", e
    except (IndexError, gpudsl.errors.InterpError) as e:
        if "bound" in str(e).lower() or isinstance(e, IndexError):
            return "bounds", e
        return "error", e
    return None, None


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(region_proc(), st.integers(1, 3), st.lists(st.integers(0, 1), min_size=S, max_size=S))
def test_regions_tickets_and_locals_are_sound(src, n, data):
    try:
        p = proc_from_source(src, NS, file="<random proc>")
    except gpudsl.errors.ProcError:
        STATS["not a proc"] += 1
        return
    STATS["procs"] += 1
    found, err = _run(p, n, np.array(data, np.int32))
    rep = p.check(n=n)
    if "unknown" in rep.kinds():
        STATS["unknown"] += 1
    if found in ("race", "bounds"):
        STATS[f"dynamic {found}"] += 1
        assert not rep.ok, f"missed {found} for n={n}, x={data}:\n{src}\n{err}"
        assert not p.check().ok, f"missed {found} with n symbolic:\n{src}\n{err}"
        return
    if found == "error":
        STATS["other interpreter error"] += 1
        return
    STATS["proved" if rep.ok else "refused, none seen"] += 1
    if rep.ok:
        for feature, mark in (("summary", "P["), ("ticket", "atomic_add"), ("chain", "    if "),
                              ("local", "a1")):
            if mark in src:
                STATS[f"proved with {feature}"] += 1


@settings(max_examples=N_EXAMPLES, deadline=None,
          derandomize=not os.environ.get("GPUDSL_HYPOTHESIS_RANDOM"),
          suppress_health_check=list(HealthCheck))
@given(summary_proc(), st.integers(1, 3))
def test_summaries_are_sound(src, n):
    p = proc_from_source(src, NS, file="<random proc>")
    STATS["summary procs"] += 1
    found, err = _run(p, n, np.zeros(S, np.int32))
    rep = p.check(n=n)
    if found in ("race", "bounds"):
        STATS[f"summary dynamic {found}"] += 1
        assert not rep.ok, f"missed {found} for n={n}:\n{src}\n{err}"
        assert not p.check().ok, f"missed {found} with n symbolic:\n{src}\n{err}"
        return
    if found == "error":
        STATS["summary other interpreter error"] += 1
        return
    STATS["summary proved" if rep.ok else "summary refused, none seen"] += 1


def teardown_module(module):
    if os.environ.get("GPUDSL_HYPOTHESIS_STATS"):
        print("\nregion soundness stats:", dict(STATS))
