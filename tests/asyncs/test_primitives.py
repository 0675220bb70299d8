"""Primitives on procs with async copies (docs/async_copies.md): a statement never moves across an
async_commit / async_wait (reorder_stmts), a barrier that orders a copy's landing is
not deleted, a rewrite whose result has an access in flight is refused by the async
guard; rewrites that keep the order are accepted and still prove."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.ir.nodes import AsyncCopy
from gpudsl import SchedulingError
from gpudsl.schedule import (delete_sync, divide_loop, expand_dim, reorder_stmts, rotate_loop,
                             stage_mem)

from .cases import PROCS
from .test_language import _args


def _same(p, q, n=3):
    a, b = _args(p, n=n), _args(p, n=n)
    gpudsl.interpret(p, **a)
    gpudsl.interpret(q, detect_races=True, **b)
    assert np.array_equal(a["y"], b["y"])


def test_reorder_refuses_async_statements():
    p = PROCS["double_buffered"]
    with pytest.raises(SchedulingError, match="synchronizing statement"):
        reorder_stmts(p, p.find("async_commit()").expand(0, 1))
    with pytest.raises(SchedulingError, match="synchronizing statement"):
        reorder_stmts(p, p.find("async_commit() #1").expand(0, 1))


@pytest.mark.parametrize("which", ["sync()", "sync() #1"])
def test_delete_sync_refused(which):
    with pytest.raises(SchedulingError):
        delete_sync(PROCS["double_buffered"], which)


def test_guard_refuses_a_premature_result():
    """Moving the use into the copy's thread loop (here: by hand-built IR through a
    primitive that would not know better) is caught by the async guard."""
    from gpudsl.schedule.async_guard import broken_async
    p, bad = PROCS["staged"], PROCS["no_sync"]
    why = broken_async(p.ir, bad.ir)
    assert why is not None and "in flight" in why[0]
    assert broken_async(p.ir, p.ir) is None


def test_accepted_rewrites_keep_the_proof():
    p = PROCS["double_buffered"]
    q = divide_loop(p, "i", 2, ["io", "ii"], tail="cut")
    assert q.check().ok
    _same(p, q, n=5)
    r = rotate_loop(p, "i", 1)
    assert r.check().ok
    _same(p, r)
    s = expand_dim(PROCS["staged"], "s", 1, "0")
    assert "async_copy(s[0, 4 * t:4 * t + 4]" in str(s) and s.check().ok
    _same(PROCS["staged"], s)


def test_stage_mem_refuses_async_copied_array():
    p = PROCS["staged"]
    with pytest.raises(SchedulingError, match="async copy"):
        stage_mem(p, "for t in _: _", "x[b, 0:64]", "xs")


PLAIN = gpudsl.proc_from_source('''
@proc
def rows_plain(n: size, x: f32[n, 256], y: f32[n, 256]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[256] @ SHARED
        for i in seq(0, n):
            sync()
            for t in par(0, 64) @ THREADS:
                for v in seq(0, 4):
                    buf[4 * t + v] = x[i, 4 * t + v]
            sync()
            for t in par(0, 256) @ THREADS:
                y[i, t] = buf[255 - t] * 2.0
''')


def test_make_async_element_and_vector_copies():
    from gpudsl.schedule import make_async, vectorize
    q = make_async(PLAIN, "for t in _: _")
    assert "async_copy(buf[4 * t + v], x[i, 4 * t + v])" in str(q)
    assert "async_commit()\n            async_wait(0)\n            sync()" in str(q)
    assert q.check().ok
    _same(PLAIN, q)
    v = make_async(vectorize(PLAIN, "v", 4), "for t in _: _")
    assert "async_copy(buf[4 * t:4 * t + 4], x[i, 4 * t:4 * t + 4])" in str(v)
    assert v.check().ok
    _same(PLAIN, v)


def test_make_async_refusals():
    from gpudsl.schedule import make_async
    with pytest.raises(SchedulingError, match="thread loops"):
        make_async(PLAIN, "sync()")
    with pytest.raises(SchedulingError, match="no copy from a GLOBAL"):
        make_async(PLAIN, "for t in _: _ #1")
    # a copy whose destination the same thread loop reads: the copy would be in flight
    own = gpudsl.proc_from_source(str(PLAIN).replace(
        "                    buf[4 * t + v] = x[i, 4 * t + v]\n",
        "                    buf[4 * t + v] = x[i, 4 * t + v]\n"
        "                    y[i, 4 * t + v] = buf[4 * t + v]\n"))
    with pytest.raises(SchedulingError, match="in flight|before the async_wait"):
        make_async(own, "for t in _: _")


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipeline_loop(stages):
    from gpudsl.schedule import make_async, pipeline_loop, vectorize
    q = make_async(vectorize(PLAIN, "v", 4), "for t in _: _")
    r = pipeline_loop(q, "i", stages=stages)
    text = str(r)
    assert f"buf: f32[{stages}, 256] @ SHARED" in text
    assert f"async_wait({stages - 2})" in text and text.count("sync()") == 1
    assert text.count("async_commit()") == stages
    assert r.check().ok and r.check(n=1).ok and r.check(n=stages + 1).ok
    for n in (1, 2, stages + 3):
        _same(PLAIN, r, n=n)
    assert gpudsl.proc_from_source(text).ir == r.ir


def test_pipeline_loop_refusals():
    from gpudsl.schedule import make_async, pipeline_loop
    q = make_async(PLAIN, "for t in _: _")
    with pytest.raises(SchedulingError, match="stages must be 2 to 8"):
        pipeline_loop(q, "i", stages=1)
    with pytest.raises(SchedulingError, match="make_async"):
        pipeline_loop(PLAIN, "i", stages=2)   # plain copies
    # the loop writes the copies' source: an early copy would read it too soon
    w = gpudsl.proc_from_source(str(q).replace(
        "                y[i, t] = buf[255 - t] * 2.0\n",
        "                y[i, t] = buf[255 - t] * 2.0\n"
        "                x[(i + 1) % n, t] = 0.0\n"))
    with pytest.raises(SchedulingError, match="writes 'x'"):
        pipeline_loop(w, "i", stages=2)
    # the staged buffer allocated in the loop
    inner = gpudsl.proc_from_source(str(q).replace(
        "        buf: f32[256] @ SHARED\n        for i in seq(0, n):\n",
        "        for i in seq(0, n):\n            buf: f32[256] @ SHARED\n"))
    with pytest.raises(SchedulingError, match="lift_alloc"):
        pipeline_loop(inner, "i", stages=2)


def test_regression_fission_moving_a_copy_into_another_kernel():
    """Differential seed 2, case 148: fission split the block loop between a copy and
    the wait that completed it; the count-based guard let it through (the input had
    one async race, the result one copy that never lands).  A proc whose async copies
    are not proved is refused now, and a copy that never lands is a race."""
    from gpudsl.schedule import fission, lift_alloc
    src = '''
@proc
def p148(n: size, a: f32, x: f32[n, 64], y: f32[n, 64]):
    assert n >= 1
    for b in par(0, 1) @ BLOCKS:
        s: f32[2, 64] @ SHARED
        for t in par(0, 16) @ THREADS:
            async_copy(s[0, 4 * t:4 * t + 4], x[0, 4 * t:4 * t + 4])
        async_commit()
        for i in seq(0, n):
            async_commit()
            async_wait(1)
            for u in par(0, 64) @ THREADS:
                y[i, u] += s[i % 2, (u + 1) % 64]
'''
    p = gpudsl.proc_from_source(src)
    with pytest.raises(SchedulingError, match="not proved"):
        lift_alloc(p, "s")
    good = gpudsl.proc_from_source(src.replace("            async_wait(1)\n",
                                               "            async_wait(1)\n            sync()\n"))
    assert good.check().ok
    lifted = lift_alloc(good, "s")   # SHARED outside the kernel: an unfinished schedule
    with pytest.raises(SchedulingError, match="lands nowhere"):
        fission(lifted, lifted.find("async_commit()").after())
    lone = gpudsl.proc_from_source(src.replace("            async_wait(1)\n", ""))
    assert any("lands nowhere" in d.message for d in lone.check().diagnostics)


def test_pipeline_loop_and_make_async_forwarding():
    # issue 21: their forwarding is declared with fwd_edits; the loop and what became
    # part of it (the leading sync, the copies, the commit and wait) forward to the new
    # loop, the compute to its place after the 4 new statements of the loop's body
    from gpudsl.schedule import make_async, pipeline_loop, vectorize
    from gpudsl.schedule.cursors import Cursor
    v = vectorize(PLAIN, "v", 4)
    q = make_async(v, "for t in _: _")
    copy = v.find("for t in _: _")
    assert q.forward(copy).addr == copy.addr == (0, "body", 1, "body", 1)
    assert isinstance(q.forward(copy).node().body[0], AsyncCopy)
    r = pipeline_loop(q, "i", stages=3)
    loop = q.find_loop("i")
    new_loop = (0, "body", 5)
    assert r.forward(loop).addr == new_loop and r.forward(loop).node().iter == "i"
    at = lambda addr: Cursor(q, "stmt", addr, None)  # noqa: E731
    for k in range(5):  # sync(), the copies, async_commit(), async_wait(0), sync()
        assert r.forward(at(loop.addr + ("body", k))).addr == new_loop
    compute = at(loop.addr + ("body", 5))
    assert r.forward(compute).addr == new_loop + ("body", 4)
    stmt = q.find("y[_] = _")
    assert r.forward(stmt).addr == new_loop + ("body", 4, "body", 0)
    assert r.forward(q.find_alloc("buf")).addr == (0, "body", 0)


def test_guard_asks_each_proc_once(monkeypatch):
    """A schedule's result is asked again as the next primitive's input: the async
    guard answers it from memory (schedule/memo.py), with the same verdicts."""
    from gpudsl.schedule import async_guard, memo
    monkeypatch.setattr(memo, "_RECENT", [])   # answers of earlier tests
    asked = []
    real = async_guard._async_issues
    monkeypatch.setattr(async_guard, "_async_issues", lambda p: asked.append(p) or real(p))
    p = PROCS["double_buffered"]
    q = rotate_loop(p, "i", 1)
    r = divide_loop(q, "i", 2, ["io", "ii"], tail="cut")
    assert len(asked) == 3 and len({id(x) for x in asked}) == 3   # p, q's IR, r's IR
    assert r.check().ok
    _same(p, r, n=5)
    why = async_guard.broken_async(PROCS["staged"].ir, PROCS["no_sync"].ir)
    assert why is not None and "in flight" in why[0]   # a refusal is still one
    assert async_guard.broken_async(PROCS["no_sync"].ir, PROCS["staged"].ir) is not None
