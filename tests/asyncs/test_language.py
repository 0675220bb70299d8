"""async_copy / async_commit / async_wait (docs/async_copies.md): parsed with clear errors, printed
and parsed back equal, run by the interpreter (copies land at the completing wait; a
premature access is an error naming both statements), seen by the race detector."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import InterpError, ProcError, RaceError, proc_from_source

from .cases import PROCS


def _args(p, n=3, seed=0):
    rng = np.random.default_rng(seed)
    cols = p.ir.params[1].shape[1].val
    x = rng.integers(-4, 5, size=(n, cols)).astype(np.float32)
    return dict(x=x, y=np.zeros_like(x))


@pytest.mark.parametrize("name", sorted(PROCS))
def test_round_trip(name):
    p = PROCS[name]
    assert proc_from_source(str(p)).ir == p.ir


def test_printed_forms():
    text = str(PROCS["staged"])
    assert "async_copy(s[4 * t:4 * t + 4], x[b, 4 * t:4 * t + 4])" in text
    assert "async_commit()" in text and "async_wait(0)" in text
    assert "async_copy(s[t], x[b, t])" in str(PROCS["premature"])


BAD = [
    ("async_copy(x[b, t], s[t])", "GLOBAL array to a SHARED"),
    ("async_copy(s[t:t + 8], x[b, t:t + 8])", "4, 8 or 16 bytes"),
    ("async_copy(s[t:t + 3], x[b, t:t + 3])", "4, 8 or 16 bytes"),
    ("async_copy(s[t:2 * t], x[b, t:2 * t])", "constant length"),
    ("async_copy(s[t:t + 2], x[b, t:t + 4])", "2 element(s), the source 4"),
    ("async_copy(s[t])", "takes the SHARED destination"),
    ("async_copy(s, x)", "an element or a window"),
    ("async_wait(n)", "integer constant"),
    ("async_wait(-1)", "integer constant"),
    ("async_commit(1)", "no arguments"),
]


@pytest.mark.parametrize("stmt, msg", BAD)
def test_frontend_errors(stmt, msg):
    src = ("@proc\ndef bad(n: size, x: f32[n, 64], y: f32[n, 64]):\n"
           "    for b in par(0, n) @ BLOCKS:\n        s: f32[64] @ SHARED\n"
           f"        for t in par(0, 16) @ THREADS:\n            {stmt}\n")
    with pytest.raises(ProcError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        proc_from_source(src)


@pytest.mark.parametrize("name", ["staged", "double_buffered", "thread_level"])
def test_interpreter_meaning(name):
    p = PROCS[name]
    a = _args(p)
    gpudsl.interpret(p, detect_races=True, **a)
    x, y = a["x"], a["y"]
    want = {"staged": x[:, ::-1], "double_buffered": 2 * x[:, ::-1],
            "thread_level": x + 1}[name]
    assert np.array_equal(y, want)


@pytest.mark.parametrize("name", ["premature", "no_wait", "wrong_depth", "one_buffer"])
def test_premature_access_names_both_statements(name):
    p = PROCS[name]
    with pytest.raises(InterpError) as e:
        gpudsl.interpret(p, **_args(p))
    msg = str(e.value)
    assert "async copy `async_copy(" in msg and "before the async_wait" in msg
    # the access and the copy, each at its line of tests/asyncs/cases.py
    import re
    where = set(re.findall(r"cases\.py:(\d+):", msg.split("\n")[0]))
    assert len(where) == 2, msg


def test_no_barrier_is_a_race_for_the_detector():
    p = PROCS["no_sync"]
    gpudsl.interpret(p, **_args(p))   # sequentially the copy has landed
    with pytest.raises(RaceError, match="async_copy"):
        gpudsl.interpret(p, detect_races=True, **_args(p))


def test_source_written_in_flight():
    p = proc_from_source(str(PROCS["staged"]).replace(
        "        async_commit()\n",
        "        for t in par(0, 64) @ THREADS:\n            x[b, t] = 0.0\n"
        "        async_commit()\n"))
    with pytest.raises(InterpError, match="the source of the async copy"):
        gpudsl.interpret(p, **_args(p))


def test_uncommitted_copy_never_lands():
    p = proc_from_source(str(PROCS["staged"]).replace("        async_commit()\n", ""))
    with pytest.raises(InterpError, match="destination of the async copy"):
        gpudsl.interpret(p, **_args(p))


def test_copy_in_callee():
    src = '''
@proc
def fill(x: f32[64], s: f32[64] @ SHARED):
    for t in par(0, 64) @ THREADS:
        async_copy(s[t], x[t])

@proc
def outer(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        fill(x, s)
        async_commit()
        async_wait(0)
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = s[63 - t] * 3.0
'''
    fill = proc_from_source("@proc" + src.split("@proc")[1])
    outer = proc_from_source("@proc" + src.split("@proc")[2], {"fill": fill})
    x = np.arange(64, dtype=np.float32)
    y = np.zeros(64, np.float32)
    gpudsl.interpret(outer, detect_races=True, x=x, y=y)
    assert np.array_equal(y, 3 * x[::-1])
    assert outer.check().ok


def test_copy_in_flight_when_the_block_ends():
    """A copy no wait completes is an error where its block's code ends (check()
    refuses it as a race: it lands nowhere)."""
    p = proc_from_source('''
@proc
def dangling(x: f32[64], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            async_copy(s[t], x[t])
            y[t] = x[t]
''')
    with pytest.raises(InterpError, match="still in flight where the block's code ends"):
        gpudsl.interpret(p, x=np.ones(64, np.float32), y=np.zeros(64, np.float32))
    assert any("lands nowhere" in d.message for d in p.check().diagnostics)
