"""check() on async copies (issue 23's acceptance): a premature read, a missing
async_wait, a wait of the wrong depth and a missing barrier after the wait are each
refused with a witness that replays in the interpreter; the staged copy and the
double-buffered staged loop are proved."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import proc_from_source

from .cases import EXPECT, PROCS
from .test_language import _args


@pytest.mark.parametrize("name", sorted(PROCS))
def test_verdicts(name):
    rep = PROCS[name].check()
    want = EXPECT[name]
    if want == "ok":
        assert rep.ok, str(rep)
    else:
        assert not rep.ok
        assert want in rep.kinds(), str(rep)


@pytest.mark.parametrize("name", ["premature", "no_wait", "wrong_depth", "no_sync",
                                  "one_buffer"])
def test_witness_replays(name):
    p = PROCS[name]
    d = next(d for d in p.check().diagnostics if d.kind == "race")
    n = d.witness["sizes"].get("n", 1)
    assert d.witness["thread1"]["access"].startswith("write of")
    with pytest.raises((gpudsl.InterpError, gpudsl.RaceError)):
        gpudsl.interpret(p, detect_races=True, **_args(p, n=n))


def test_messages():
    d = PROCS["premature"].check().of_kind("race")[0]
    assert "the same thread reads" in d.message and "async_wait" in d.message
    d = PROCS["no_sync"].check().of_kind("race")[0]
    assert "another thread" in d.message or "between the same barriers" in d.message


def test_double_buffered_bound_sizes():
    for n in (1, 2, 7):
        assert PROCS["double_buffered"].check(n=n).ok


def test_misaligned_copy_is_bounds():
    p = proc_from_source(str(PROCS["staged"]).replace(
        "x[b, 4 * t:4 * t + 4]", "x[b, 4 * t + 2:4 * t + 6]").replace(
        "for t in par(0, 16)", "for t in par(0, 15)"))
    rep = p.check()
    d = rep.of_kind("bounds")
    assert d and "not a multiple of 4" in d[0].message and d[0].witness["offset"] % 4 == 2



def test_no_commit_before_the_wait():
    p = proc_from_source(str(PROCS["staged"]).replace("        async_commit()\n", ""))
    rep = p.check()
    assert "race" in rep.kinds()


def test_later_commit_in_loop_unknown_when_counts_depend_on_the_loop():
    src = '''
@proc
def tri(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        for i in seq(0, n):
            for j in seq(0, i):
                async_commit()
            for t in par(0, 64) @ THREADS:
                async_copy(s[t], x[i, t])
            async_commit()
            async_wait(0)
            sync()
            for t in par(0, 64) @ THREADS:
                y[i, t] = s[63 - t]
            sync()
'''
    rep = proc_from_source(src).check()
    assert not rep.ok and "unknown" in rep.kinds()
    x = np.ones((3, 64), np.float32)
    y = np.zeros_like(x)
    gpudsl.interpret(proc_from_source(src), detect_races=True, x=x, y=y)
    assert (y == 1).all()


def test_wrong_memories_are_refused():
    """The frontend refuses a copy between the wrong memories; set_memory cannot make
    one (the async guard of the primitives), and check() calls one mapping."""
    from gpudsl.schedule import set_memory
    p = PROCS["staged"]
    with pytest.raises(gpudsl.SchedulingError):
        set_memory(p, "s", gpudsl.REGISTER)
    from gpudsl.analysis.proc_effects import collect
    from gpudsl.ir.nodes import Alloc
    from gpudsl.ir.visitor import Transformer

    class ToReg(Transformer):
        def visit_Alloc(self, a: Alloc):
            return a.with_(mem=gpudsl.REGISTER) if a.name == "s" else a

    bad = ToReg().visit(p.ir)
    issues = [i.message for i in collect(bad).issues if i.kind == "mapping"]
    assert any("async_copy copies from GLOBAL to SHARED" in m for m in issues)


@pytest.mark.parametrize("old, new, what", [
    ("            async_wait(0)\n", "", "when its thread loop ends"),
    ("async_wait(0)", "async_wait(1)", "when its thread loop ends"),
    ("y[b, t] = s[t] + 1.0", "y[b, t] = s[63 - t] + 1.0", "between the same barriers"),
])
def test_commits_and_waits_in_the_thread_loop(old, new, what):
    p = proc_from_source(str(PROCS["thread_level"]).replace(old, new))
    rep = p.check()
    assert not rep.ok and what in rep.diagnostics[0].message, str(rep)
    with pytest.raises((gpudsl.InterpError, gpudsl.RaceError)):
        gpudsl.interpret(p, detect_races=True, **_args(p))


def test_thread_loop_read_before_its_wait():
    src = str(PROCS["thread_level"]).replace(
        "            async_wait(0)\n            y[b, t] = s[t] + 1.0\n",
        "            y[b, t] = s[t] + 1.0\n            async_wait(0)\n")
    p = proc_from_source(src)
    d = p.check().of_kind("race")[0]
    assert "the same thread reads s[" in d.message
    with pytest.raises(gpudsl.InterpError, match="before the async_wait"):
        gpudsl.interpret(p, **_args(p))


def test_mixed_levels_unknown():
    src = str(PROCS["thread_level"]).replace(
        "            y[b, t] = s[t] + 1.0\n",
        "            y[b, t] = s[t] + 1.0\n        async_commit()\n")
    rep = proc_from_source(src).check()
    assert not rep.ok and "unknown" in rep.kinds()


def test_every_async_witness_has_sizes_and_a_thread():
    """The random soundness run (1,500 examples) stopped on a copy that never lands in
    its thread loop: its diagnostic had no witness sizes (KeyError in the harness)."""
    src = '''
@proc
def rand(n: size, x: f32[n, 64], y: f32[64]):
    assert n <= 3
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        for t1 in par(0, 64) @ THREADS:
            async_copy(s[0, t1], x[0, t1])
            async_commit()
            async_wait(0)
        for t2 in par(0, 16) @ THREADS:
            async_copy(s[1, 4 * t2:4 * t2 + 4], x[0, 4 * t2:4 * t2 + 4])
'''
    for p in (proc_from_source(src), PROCS["no_wait"], PROCS["wrong_depth"]):
        for d in p.check().of_kind("race"):
            assert "sizes" in d.witness and "thread1" in d.witness, d


_LOCAL_IN_SEQ = '''
def local_rows(n: size, x: f32[n, 128], y: f32[n, 128]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[128] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                async_copy(buf[4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4])
                async_commit()
                async_wait(0)
            sync()
            for t in par(0, 128) @ THREADS:
                y[i, t] = buf[127 - t] * 2.0
            sync()
'''


def test_thread_level_copies_in_a_seq_loop_are_proved():
    """Each run of the thread loop lands its copies (the wait in the same body), so the
    copy of step i + 1 does not meet the copy of step i in flight: check() used to pair
    them across iterations of the seq loop (a false race; warp_specialize's producers)."""
    p = proc_from_source(_LOCAL_IN_SEQ)
    assert p.check().ok, str(p.check())
    x = np.arange(3 * 128, dtype=np.float32).reshape(3, 128)
    y = np.zeros_like(x)
    gpudsl.interpret(p, detect_races=True, x=x, y=y)
    assert np.array_equal(y, 2 * x[:, ::-1])
    # in one run, an access before the wait is still refused, and replays
    bad = proc_from_source(_LOCAL_IN_SEQ.replace(
        "                async_commit()\n                async_wait(0)\n",
        "                async_commit()\n                y[i, t] = buf[4 * t]\n"
        "                async_wait(0)\n"))
    d = bad.check().of_kind("race")[0]
    assert "the same thread reads buf[" in d.message
    with pytest.raises(gpudsl.InterpError, match="before the async_wait"):
        gpudsl.interpret(bad, x=x, y=np.zeros_like(x))
