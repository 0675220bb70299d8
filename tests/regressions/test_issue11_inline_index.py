"""Issue 11: the one inliner passes size and index arguments, and window offsets, by
value too.  One that reads memory the callee writes is held in a fresh integer scalar
before the body (read back in index positions); one the callee needs where the IR
cannot read data (loop bounds, shapes) is refused: the `inline` primitive raises
SchedulingError, code generation CompileError, check() reports it."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CompileError, SchedulingError, f32, i32, index, proc, proc_from_source, seq, size
from gpudsl.ir.nodes import Call
from gpudsl.ir.visitor import walk
from gpudsl.schedule import inline


@proc
def g(k: index, x: [f32][4], c: [i32][1]):
    c[0] = 3
    x[k] = 1.0


@proc
def caller(x: f32[4], c: i32[1]):
    g(c[0], x[0:4], c[0:1])


@proc
def gw(x: [f32][2], c: [i32][1]):
    c[0] = 2
    x[1] = 1.0


@proc
def caller_window(x: f32[4], c: i32[1]):
    gw(x[c[0]:c[0] + 2], c[0:1])


@proc
def gs(m: size, x: [f32][4], c: [i32][1]):
    c[0] = 1
    for i in seq(0, m):
        x[i] = 1.0


@proc
def caller_size(x: f32[4], c: i32[1]):
    gs(c[0], x[0:4], c[0:1])


def _run(p, c0):
    x, c = np.zeros(4, np.float32), np.array([c0], np.int32)
    gpudsl.interpret(p, x=x, c=c)
    return list(x)


@pytest.mark.parametrize("p,c0,want", [(caller, 0, [1, 0, 0, 0]), (caller, 2, [0, 0, 1, 0]),
                                       (caller_window, 0, [0, 1, 0, 0]),
                                       (caller_window, 1, [0, 0, 1, 0])],
                         ids=["index0", "index2", "window0", "window1"])
def test_inline_holds_index_arguments_by_value(p, c0, want):
    assert _run(p, c0) == want
    q = inline(p, f"{p.ir.body[0].proc.name}(_)")
    assert not any(isinstance(n, Call) for n in walk(q.ir.body))
    assert _run(q, c0) == want
    r = proc_from_source(str(q))
    assert str(r) == str(q)
    assert _run(r, c0) == want


@pytest.mark.parametrize("p,c0,want", [(caller, 2, [0, 0, 1, 0]),
                                       (caller_window, 1, [0, 0, 1, 0])],
                         ids=["index", "window"])
def test_generated_code_holds_index_arguments_by_value(p, c0, want):
    x, c = np.zeros(4, np.float32), np.array([c0], np.int32)
    p.compile("emulator", check=False)(x=x, c=c)  # data-dependent index: unproved
    assert list(x) == want


def test_check_analyses_the_value_passed():
    # the index is data the caller does not bound: a bounds diagnostic on the held
    # value, and check() does not crash
    rep = caller.check()
    assert rep.kinds() <= {"bounds"}


def test_size_argument_used_as_loop_bound_is_refused_everywhere():
    assert _run(caller_size, 2) == [1, 1, 0, 0]
    with pytest.raises(SchedulingError, match="loop 'i'"):
        inline(caller_size, "gs(_)")
    with pytest.raises(CompileError, match="loop 'i'"):
        caller_size.compile("emulator", check=False)
    rep = caller_size.check()
    assert [d.kind for d in rep.diagnostics] == ["unknown"]
    assert "loop 'i'" in rep.diagnostics[0].message
