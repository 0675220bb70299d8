"""Orderings compose (issue 35): check() judges races on chains of barrier and
arrive/wait edges through relay threads, as PTX's release/acquire does and as the
interpreter's race detector does.  The issue's three-thread-group hand-off and a
depth-6 ring passed around three warp roles are proved; their twins without one edge
are refused with witnesses, and the detector, run at the witness's sizes, agrees."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import RaceError, check, interpret, proc_from_source


def _kinds(rep):
    return {str(getattr(d.kind, "value", d.kind)) for d in rep.diagnostics}


HANDOFF = """
@proc
def k(x: f32[32], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32] @ SHARED
        ab: barrier @ SHARED
        bc: barrier @ SHARED
        for t in par(0, 32) @ THREADS:
            s[t] = x[t]
        arrive(ab, 0, 32)
        wait(ab, 32, 64)
        arrive(bc, 32, 64)
        wait(bc, 64, 96)
        for t in par(64, 96) @ THREADS:
            y[t - 64] = s[t - 64]
"""

# each twin drops or breaks one edge of the chain
HANDOFF_TWINS = {
    "relay does not wait": ("        wait(ab, 32, 64)\n", ""),
    "relay sends before it receives": (
        "        wait(ab, 32, 64)\n        arrive(bc, 32, 64)\n",
        "        arrive(bc, 32, 64)\n        wait(ab, 32, 64)\n"),
    "consumer waits on the wrong barrier": ("        wait(bc, 64, 96)\n",
                                            "        wait(bc, 32, 64)\n"),
}


def _run(p, n=None):
    x = np.arange(32 if n is None else n * 32, dtype=np.float32)
    y = np.zeros_like(x)
    args = dict(x=x, y=y) if n is None else dict(n=n, x=x.reshape(n, 32),
                                                 y=y.reshape(n, 32))
    interpret(p, detect_races=True, **args)
    return x, y


def test_a_chain_through_a_relay_group_is_proved():
    p = proc_from_source(HANDOFF)
    rep = check(p)
    assert rep.ok, str(rep)
    x, y = _run(p)
    assert np.array_equal(y, x)


@pytest.mark.parametrize("twin", sorted(HANDOFF_TWINS))
def test_a_chain_without_one_edge_is_refused_and_the_detector_agrees(twin):
    old, new = HANDOFF_TWINS[twin]
    assert old in HANDOFF
    p = proc_from_source(HANDOFF.replace(old, new))
    rep = check(p)
    assert not rep.ok
    assert "race" in _kinds(rep), str(rep)
    d = [d for d in rep.diagnostics if str(getattr(d.kind, "value", d.kind)) == "race"][0]
    assert d.witness["array"] == "s"
    assert {d.witness["thread1"]["threadIdx"][0] // 32,
            d.witness["thread2"]["threadIdx"][0] // 32} == {0, 2}
    with pytest.raises(RaceError):
        _run(p)


def ring(depth: int = 6, drop: str | None = None) -> str:
    """A producer (threads 0-31) passes tiles to a first consumer (32-63), which passes
    them on to a second (64-95), which hands the slot back to the producer: a ring of
    ``depth`` slots, written with one split barrier per slot and edge (unrolled: no
    barrier arrays yet).  ``drop``: "full2" makes the second consumer wait on the
    producer's barrier instead of the first consumer's (the first consumer's reads are
    then ordered before nothing the producer waits for)."""
    lines = [f"@proc",
             f"def ring(n: size, x: f32[n, {depth}, 32], y: f32[n, {depth}, 32]):",
             "    for b in par(0, 1) @ BLOCKS:",
             f"        buf: f32[{depth}, 32] @ SHARED",
             f"        mid: f32[{depth}, 32] @ SHARED"]
    for j in range(depth):
        lines += [f"        full{j}: barrier @ SHARED", f"        next{j}: barrier @ SHARED",
                  f"        empty{j}: barrier @ SHARED"]
    for j in range(depth):
        lines.append(f"        arrive(empty{j}, 64, 96)")
    lines.append("        for i in seq(0, n):")
    for j in range(depth):
        second = f"full{j}" if drop == "full2" else f"next{j}"
        lines += [
            f"            wait(empty{j}, 0, 32)",
            "            for t in par(0, 32) @ THREADS:",
            f"                buf[{j}, t] = x[i, {j}, t]",
            f"            arrive(full{j}, 0, 32)",
            f"            wait(full{j}, 32, 64)",
            "            for t in par(32, 64) @ THREADS:",
            f"                mid[{j}, t - 32] = buf[{j}, t - 32] * 2.0",
        ]
        if drop != "full2":
            lines += [f"            arrive(next{j}, 32, 64)"]
        lines += [
            f"            wait({second}, 64, 96)",
            "            for t in par(64, 96) @ THREADS:",
            f"                y[i, {j}, t - 64] = buf[{j}, t - 64] + mid[{j}, t - 64]",
            f"            arrive(empty{j}, 64, 96)",
        ]
    return "\n".join(lines) + "\n"


def test_a_depth_six_three_role_ring_is_proved_and_exact():
    p = proc_from_source(ring(6))
    rep = check(p)
    assert rep.ok, str(rep)
    n = 3
    x = np.random.default_rng(0).standard_normal((n, 6, 32)).astype(np.float32)
    y = np.zeros_like(x)
    interpret(p, n=n, x=x, y=y, detect_races=True)
    assert np.array_equal(y, 3 * x)


def test_the_ring_without_the_relay_edge_is_refused_and_the_detector_agrees():
    p = proc_from_source(ring(2, drop="full2"))
    rep = check(p)
    assert "race" in _kinds(rep), str(rep)
    d = [d for d in rep.diagnostics if str(getattr(d.kind, "value", d.kind)) == "race"][0]
    n = max(d.witness["sizes"].get("n", 2), 2)
    x = np.ones((n, 2, 32), np.float32)
    with pytest.raises(RaceError):
        interpret(p, n=n, x=x, y=np.zeros_like(x), detect_races=True)


RING3 = """
@proc
def ring3(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[6, 32] @ SHARED
        mid: f32[6, 32] @ SHARED
        full: barrier[6] @ SHARED
        relay: barrier[6] @ SHARED
        empty: barrier[6] @ SHARED
        for j in seq(0, 6):
            arrive(empty[j], 64, 96)
        for i in seq(0, n):
            wait(empty[i % 6], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 6, t] = x[i, t]
            arrive(full[i % 6], 0, 32)
            wait(full[i % 6], 32, 64)
            for t in par(32, 64) @ THREADS:
                mid[i % 6, t - 32] = buf[i % 6, t - 32] * 2.0
            arrive(relay[i % 6], 32, 64)
            wait(relay[i % 6], 64, 96)
            for t in par(64, 96) @ THREADS:
                y[i, t - 64] = buf[i % 6, t - 64] + mid[i % 6, t - 64]
            arrive(empty[i % 6], 64, 96)
"""


def test_the_three_role_ring_written_with_barrier_rings_is_proved_and_runs():
    p = proc_from_source(RING3)
    rep = check(p)
    assert rep.ok, str(rep)
    k = p.compile("emulator")
    for n in (1, 5, 13):
        x = np.random.default_rng(n).standard_normal((n, 32)).astype(np.float32)
        y, z = np.zeros_like(x), np.zeros_like(x)
        interpret(p, n=n, x=x, y=y, detect_races=True)
        k(n=n, x=x, y=z)
        assert np.array_equal(y, 3 * x) and np.array_equal(z, y)


def test_the_barrier_ring_without_the_relay_edge_is_refused_and_the_detector_agrees():
    # the second consumer waits on the producer's barrier: the first consumer's reads
    # of buf are ordered before nothing the producer waits for
    p = proc_from_source(RING3.replace("            arrive(relay[i % 6], 32, 64)\n", "")
                         .replace("wait(relay[i % 6], 64, 96)", "wait(full[i % 6], 64, 96)"))
    rep = check(p)
    assert "race" in _kinds(rep), str(rep)
    d = [d for d in rep.diagnostics if str(getattr(d.kind, "value", d.kind)) == "race"][0]
    n = max(d.witness["sizes"].get("n", 7), 7)
    x = np.ones((n, 32), np.float32)
    with pytest.raises(RaceError):
        interpret(p, n=n, x=x, y=np.zeros_like(x), detect_races=True)


def test_a_chain_is_followed_under_two_block_loops():
    """Regression: a relay's receive count over the block's code was counted over the
    list holding the inner block loop (a par loop: 0), so with two block loops no chain
    ordered anything and this hand-off was refused (a false alarm)."""
    src = HANDOFF.replace("    for b in par(0, 1) @ BLOCKS:\n",
                          "    for b in par(0, 1) @ BLOCKS:\n      for c in par(0, 1) @ BLOCKS:\n")
    p = proc_from_source(src)
    rep = check(p)
    assert rep.ok, str(rep)
    x, y = _run(p)
    assert np.array_equal(y, x)
