"""The race detector against a brute-force oracle, on random small kernels.

Each kernel has two thread loops (the second possibly narrower, possibly after
a ``sync()``), each touching a SHARED or a GLOBAL array at an affine index of
the thread and block, by a read, a write or an atomic update.  The oracle lists
every access and compares all pairs; the detector must raise RaceError exactly
when the oracle finds a race.  Also covers races inside one statement.
"""
from __future__ import annotations

import itertools

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from gpudsl import RaceError, interpret, proc_from_source

access = st.tuples(
    st.sampled_from(["read", "write", "atomic"]),
    st.sampled_from(["s", "g"]),  # SHARED s, GLOBAL g
    st.integers(0, 2),  # a: coefficient of t
    st.integers(0, 1),  # c: coefficient of b
    st.integers(0, 7),  # d: constant
)


def index_src(a, c, d, m):
    return f"({a} * t + {c} * b + {d}) % {m}"


def statement(acc, loop, m):
    kind, mem, a, c, d = acc
    ref = f"{mem}[{index_src(a, c, d, m)}]"
    if kind == "read":
        return f"out[b, {loop}, t] = {ref}"
    if kind == "write":
        return f"{ref} = 1.0"
    return f"atomic_add({ref}, 1.0)"


def make_proc(nb, nt, nt2, m, acc1, acc2, sync):
    src = f"""\
@proc
def k(g: f32[{m}], out: f32[{nb}, 2, {nt}]):
    for b in par(0, {nb}) @ BLOCKS:
        s: f32[{m}] @ SHARED
        for t in par(0, {nt}) @ THREADS:
            {statement(acc1, 0, m)}
{"        sync()" if sync else "        pass"}
        for t in par(0, {nt2}) @ THREADS:
            {statement(acc2, 1, m)}
"""
    return proc_from_source(src, {}, file="<oracle>")


def oracle(nb, nt, nt2, m, acc1, acc2, sync) -> bool:
    events = []  # (block, phase, thread, mem, element, kind)
    for b in range(nb):
        for loop, (acc, n) in enumerate(((acc1, nt), (acc2, nt2))):
            kind, mem, a, c, d = acc
            for t in range(n):
                events.append((b, loop if sync else 0, t, mem, (a * t + c * b + d) % m, kind))
    for e1, e2 in itertools.combinations(events, 2):
        b1, p1, t1, mem1, x1, k1 = e1
        b2, p2, t2, mem2, x2, k2 = e2
        if mem1 != mem2 or x1 != x2:
            continue
        if k1 == k2 == "read" or k1 == k2 == "atomic":
            continue
        if b1 == b2 and p1 == p2 and t1 != t2:
            return True
        if mem1 == "g" and b1 != b2:
            return True
    return False


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 3), st.integers(1, 6), st.integers(1, 6), st.integers(1, 8), access,
       access, st.booleans())
def test_detector_agrees_with_brute_force(nb, nt, nt2, m, acc1, acc2, sync):
    nt2 = min(nt2, nt)
    p = make_proc(nb, nt, nt2, m, acc1, acc2, sync)
    args = dict(g=np.zeros(m, np.float32), out=np.zeros((nb, 2, nt), np.float32))
    want = oracle(nb, nt, nt2, m, acc1, acc2, sync)
    try:
        interpret(p, detect_races=True, **args)
        got = False
    except RaceError:
        got = True
    assert got == want, str(p)


# ---------------------------------------------------------------- 2-D blocks, block level

def make_proc_2d(nb, ny, nx, nt2, m, acc1, acc2, sync, blevel):
    kind, mem, a, c, d = acc1
    idx1 = f"({a} * tx + {c} * ty + {d} + b) % {m}"
    ref1 = f"{mem}[{idx1}]"
    st1 = {"read": f"out[b, ty, tx] = {ref1}", "write": f"{ref1} = 1.0",
           "atomic": f"atomic_add({ref1}, 1.0)"}[kind]
    bl = ""
    if blevel is not None:
        bmem, bd, where = blevel
        line = f"        if {bmem}[{bd % m}] > 100.0:\n            pass\n"
        bl = (line, "")[where] + "{SYNC}" + ("", line)[where]
    else:
        bl = "{SYNC}"
    bl = bl.replace("{SYNC}", "        sync()\n" if sync else "")
    src = f"""\
@proc
def k2(g: f32[{m}], out: f32[{nb}, 8, 8]):
    for b in par(0, {nb}) @ BLOCKS:
        s: f32[{m}] @ SHARED
        for ty in par(0, {ny}) @ THREADS:
            for tx in par(0, {nx}) @ THREADS:
                {st1}
{bl}        for t in par(0, {nt2}) @ THREADS:
            {statement(acc2, 1, m).replace("out[b, 1, t]", "out[b, 7, t]")}
"""
    return proc_from_source(src, {}, file="<oracle2d>")


def oracle_2d(nb, ny, nx, nt2, m, acc1, acc2, sync, blevel) -> bool:
    nthreads = ny * max(nx, nt2)
    events = []
    for b in range(nb):
        kind, mem, a, c, d = acc1
        for ty in range(ny):
            for tx in range(nx):
                events.append((b, 0, (ty, tx), mem, (a * tx + c * ty + d + b) % m, kind))
        kind, mem, a, c, d = acc2
        for t in range(nt2):
            events.append((b, int(sync), (0, t), mem, (a * t + c * b + d) % m, kind))
        if blevel is not None:
            bmem, bd, where = blevel
            events.append((b, int(sync and where == 1), "ALL", bmem, bd % m, "read"))
    for e1, e2 in itertools.combinations(events, 2):
        b1, p1, t1, mem1, x1, k1 = e1
        b2, p2, t2, mem2, x2, k2 = e2
        if mem1 != mem2 or x1 != x2:
            continue
        if k1 == k2 == "read" or k1 == k2 == "atomic":
            continue
        distinct = nthreads >= 2 if "ALL" in (t1, t2) else t1 != t2
        if b1 == b2 and p1 == p2 and distinct:
            return True
        if mem1 == "g" and b1 != b2:
            return True
    return False


blevel = st.one_of(st.none(), st.tuples(st.sampled_from(["s", "g"]), st.integers(0, 7),
                                        st.integers(0, 1)))


@settings(max_examples=300, deadline=None)
@given(st.integers(1, 2), st.integers(1, 3), st.integers(1, 4), st.integers(1, 6),
       st.integers(1, 6), access, access, st.booleans(), blevel)
def test_detector_agrees_with_brute_force_2d(nb, ny, nx, nt2, m, acc1, acc2, sync, bl):
    p = make_proc_2d(nb, ny, nx, nt2, m, acc1, acc2, sync, bl)
    args = dict(g=np.zeros(m, np.float32), out=np.zeros((nb, 8, 8), np.float32))
    want = oracle_2d(nb, ny, nx, nt2, m, acc1, acc2, sync, bl)
    try:
        interpret(p, detect_races=True, **args)
        got = False
    except RaceError:
        got = True
    assert got == want, str(p)
