"""Issue 11: scheduling strings are read by the frontend's typed expression
parser, in the scope of the statement; patterns are matched on the IR.

Each refusal below was accepted (or crashed) with the old untyped parser of
``schedule/patterns.py``.
"""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, REGISTER, SHARED, THREADS, ProcError, SchedulingError, f32, i32,
                    atomic_add, par, proc, seq, size, sync)
from gpudsl.ir.nodes import Alloc, Assign, Atomic, Builtin, Call, For, If, Var
from gpudsl.ir.printer import print_expr
from gpudsl.proc import proc_from_source
from gpudsl.schedule import (bind_expr, cut_loop, divide_loop, expand_dim, pad_dim, rename,
                             specialize, stage_mem)


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = a * x[i] + y[i]


@proc
def transpose(n: size, m: size, x: f32[n, m], y: f32[m, n]):
    for i in seq(0, n):
        for j in seq(0, m):
            y[j, i] = x[i, j]


@proc
def rowsum(n: size, m: size, x: f32[n, m], s: f32[n]):
    for i in seq(0, n):
        s[i] = 0.0
        for j in seq(0, m):
            s[i] += x[i, j]


@proc
def scale2(x: f32[8], y: f32[8], a: f32):
    for i in seq(0, 8):
        y[i] = x[i] * a + x[i] * a


def _refused(prim, f, *words):
    with pytest.raises(SchedulingError) as e:
        f()
    assert e.value.primitive == prim
    for w in words:
        assert w in e.value.raw_message, e.value.raw_message
    return e.value


def _staged_row():
    return stage_mem(transpose, transpose.find_loop("j"), "x[i, 0:m]", "row", SHARED)


def _staged_acc():
    return stage_mem(rowsum, rowsum.find_loop("i").body(), "s[i]", "acc", REGISTER)


# ------------------------------------------------------------------ refused forms


def test_float_bound_refused():
    _refused("cut_loop", lambda: cut_loop(saxpy, "i", "n * 0.5"), "integer", "f32")
    _refused("cut_loop", lambda: cut_loop(saxpy, "i", 2.0), "integer")


def test_bool_bound_refused():
    _refused("cut_loop", lambda: cut_loop(saxpy, "i", "n > 4"), "integer", "bool")
    _refused("expand_dim", lambda: expand_dim(_staged_acc(), "acc", "n > 1", "i"),
             "integer", "bool")


def test_min_of_one_argument_refused():  # was an IndexError inside cut_loop
    _refused("cut_loop", lambda: cut_loop(saxpy, "i", "min(n)"), "min()", "2 argument")


def test_three_argument_max_refused_like_in_source():
    # the reproduction: accepted, then out of bounds
    _refused("cut_loop", lambda: cut_loop(saxpy, "i", "max(0, 4, n + 5)"), "2 argument")
    with pytest.raises(ProcError, match="2 argument"):
        proc_from_source("def f(n: size, x: f32[n]):\n"
                         "    for i in seq(0, max(0, 4, n)):\n"
                         "        x[0] = 1.0\n", {})


def test_float_shape_refused_in_pad_dim():
    q = _staged_row()
    _refused("pad_dim", lambda: pad_dim(q, "row", 0, "m + 0.5"), "integer", "f32")


def test_float_shape_refused_in_expand_dim():
    q = _staged_acc()
    _refused("expand_dim", lambda: expand_dim(q, "acc", "n * 1.0", "i"), "integer")
    _refused("expand_dim", lambda: expand_dim(q, "acc", "n", "i * 1.0"), "integer")


def test_shape_from_a_loop_variable_refused_like_in_source():
    # an allocation's extent uses sizes and index parameters only (as in a proc)
    q = stage_mem(rowsum, rowsum.find_loop("j"), "x[i, 0:m]", "xr", SHARED)
    _refused("pad_dim", lambda: pad_dim(q, "xr", 0, "m + i"), "sizes", "loop variable")


def test_float_window_bound_refused():  # was silently read as x[i, 0:m]
    _refused("stage_mem", lambda: stage_mem(transpose, transpose.find_loop("j"),
                                            "x[i, 0:m + 0.5]", "row", SHARED),
             "integer", "f32")


@pytest.mark.parametrize("name", ["class", "for", "lambda", "None"])
def test_keyword_as_new_name_refused(name):
    _refused("rename", lambda: rename(saxpy, name), "keyword")
    _refused("divide_loop", lambda: divide_loop(saxpy, "i", 4, [name, "ii"]), "keyword")
    _refused("stage_mem", lambda: stage_mem(rowsum, rowsum.find_loop("i").body(), "s[i]",
                                            name, REGISTER), "keyword")
    _refused("bind_expr", lambda: bind_expr(scale2, "x[_] * a", name), "keyword")


@pytest.mark.parametrize("name", ["min", "exp", "select", "f32", "seq", "sync",
                                  "SHARED", "atomic_add"])
def test_builtin_as_new_name_refused(name):
    _refused("divide_loop", lambda: divide_loop(saxpy, "i", 4, ["io", name]), "language")
    _refused("stage_mem", lambda: stage_mem(rowsum, rowsum.find_loop("i").body(), "s[i]",
                                            name, REGISTER), "language")
    _refused("bind_expr", lambda: bind_expr(scale2, "x[_] * a", name), "language")


@pytest.mark.parametrize("name", ["sync", "atomic_add", "if"])
def test_proc_named_like_a_statement_refused(name):
    # a caller of a proc named sync() would print a barrier
    _refused("rename", lambda: rename(saxpy, name), name)
    with pytest.raises((ProcError, SyntaxError)):
        proc_from_source(f"def {name}(n: size, x: f32[n]):\n    x[0] = 1.0\n", {})


def test_source_refuses_the_names_strings_refuse():
    for body in ("    for min in seq(0, n):\n        x[min] = 1.0\n",
                 "    f32: f32\n    f32 = 1.0\n    x[0] = f32\n",
                 "    sync: f32\n    sync = 1.0\n"):
        with pytest.raises(ProcError, match="name of the language"):
            proc_from_source("def f(n: size, x: f32[n]):\n" + body, {})


def test_non_condition_refused_in_specialize():
    _refused("specialize", lambda: specialize(saxpy, "i", ["n * 0.5"]), "condition")
    _refused("specialize", lambda: specialize(saxpy, "i", ["n + 1"]), "condition")


def test_names_outside_the_statement_scope_refused():
    # j is a loop inside the staged block, not in scope at the block
    _refused("cut_loop", lambda: cut_loop(transpose, "i", "j"), "unknown name 'j'")
    _refused("stage_mem", lambda: stage_mem(transpose, transpose.find_loop("i"),
                                            "x[j, 0:m]", "row", SHARED), "unknown name")


def test_window_with_step_or_wrong_rank_refused():
    loop = transpose.find_loop("j")
    # a step is accepted since issue 25 (stepped windows), but x[i, j] for every j is
    # not on a step of 2, and a step must be a positive integer literal
    _refused("stage_mem", lambda: stage_mem(transpose, loop, "x[i, 0:m:2]", "r", SHARED),
             "x[i, 0:m:2] misses")
    _refused("stage_mem", lambda: stage_mem(transpose, loop, "x[i, 0:m:n]", "r", SHARED),
             "step", "positive integer literal")
    _refused("stage_mem", lambda: stage_mem(transpose, loop, "x[0:m]", "r", SHARED),
             "dimension")


# ------------------------------------------------------------------ supported forms


def test_supported_forms_still_work():
    q = cut_loop(saxpy, "i", "n // 2")
    assert q.find_loop("i").node().hi == q.find_loop("i #1").node().lo
    q = cut_loop(saxpy, "i", "min(n, 4)")
    assert isinstance(q.find_loop("i").node().hi, Builtin)
    q = specialize(saxpy, "i", ["n % 16 == 0 and n > 0", "not n < 8"])
    assert isinstance(q.ir.body[0], If)
    q = pad_dim(_staged_row(), "row", 0, "m + 1")
    assert print_expr(q.find_alloc("row").node().shape[0]) == "m + 1"
    q = expand_dim(_staged_acc(), "acc", "n", "i")
    assert len(q.find_alloc("acc").node().shape) == 1


def test_window_forms():
    q = _staged_row()
    a = q.find_alloc("row").node()
    assert isinstance(a, Alloc) and len(a.shape) == 1
    # points on every dimension: a scalar
    q = stage_mem(transpose, transpose.find_loop("j").body(), "y[j, i]", "yr", REGISTER)
    assert q.find_alloc("yr").node().shape == ()
    # a whole array
    q = stage_mem(scale2, "i", "x", "xs", SHARED)
    assert len(q.find_alloc("xs").node().shape) == 1
    # a scalar
    q = stage_mem(scale2, "i", "a", "ar", REGISTER)
    assert q.find_alloc("ar").node().shape == ()


def test_expand_dim_index_may_use_loops_inside_the_scope():
    # the index names a loop that encloses the accesses, not the allocation
    @proc
    def acc_loop(n: size, x: f32[n], y: f32[n]):
        t: f32
        for i in seq(0, n):
            t = x[i]
            y[i] = t * 2.0

    q = expand_dim(acc_loop, "t", "n", "i")
    assert q.find("t[_] = _").node().idx[0] == Var("i")
    x = np.arange(5, dtype=np.float32)
    y = np.zeros(5, dtype=np.float32)
    gpudsl.interpret(q, n=5, x=x, y=y)
    assert list(y) == [0, 2, 4, 6, 8]


def test_int_data_dependent_cut_like_a_loop_bound():
    @proc
    def ragged(n: size, k: i32[1], y: f32[n]):
        assert n >= 4
        for i in seq(0, n):
            y[i] = 1.0

    # reading an i32 is an integer expression, as in a loop bound
    with pytest.raises(SchedulingError) as e:
        cut_loop(ragged, "i", "k[0]")
    assert "integer" not in e.value.raw_message  # refused by the proof, not the type


def test_legal_names_accepted():
    q = divide_loop(saxpy, "i", 4, ["io", "ii"])
    assert q.find_loop("io") and q.find_loop("ii")
    assert rename(saxpy, "exp").name == "exp"  # the stdlib names procs after builtins
    assert rename(saxpy, "saxpy2").name == "saxpy2"


# ------------------------------------------------------------------ patterns on the IR


@proc
def shapes(n: size, x: f32[n, 16], y: f32[n], c: f32[1]):
    for b in par(0, n) @ BLOCKS:
        t: f32[16] @ SHARED
        for k in par(0, 16) @ THREADS:
            t[k] = x[b, k]
        sync()
        for k2 in par(0, 16) @ THREADS:
            if k2 > 0 and k2 < 15 and b >= 0:
                y[b] += t[k2 - 1] * -2.0
            else:
                y[b] = min(t[k2], 1.0)
    for i in seq(0, n, unroll=True):
        c[0] = c[0] - 1.0


def test_patterns_match_the_printed_shapes():
    assert isinstance(shapes.find("for k in par(0, 16) @ THREADS: _").node(), For)
    assert isinstance(shapes.find("for b in par(_, _) @ BLOCKS: _").node(), For)
    assert isinstance(shapes.find("for i in seq(0, n, unroll=True): _").node(), For)
    with pytest.raises(SchedulingError):
        shapes.find("for i in seq(0, n): _")  # the hint is part of the header
    assert isinstance(shapes.find("t: f32[16] @ SHARED").node(), Alloc)
    assert isinstance(shapes.find("t: f32[_] @ _").node(), Alloc)
    with pytest.raises(SchedulingError):
        shapes.find("t: f32[16] @ REGISTER")
    assert isinstance(shapes.find("if _: _\nelse: _").node(), If)
    assert isinstance(shapes.find("if _ and _ and _: _").node(), If)
    assert shapes.find("y[_] += _ * -2.0").node().op == "+"
    assert shapes.find("t[k2 - 1]").kind == "expr"
    assert shapes.find("min(_, _)").node().name == "min"
    assert shapes.find("-2.0").node().val == -2.0
    assert isinstance(shapes.find("c[0] = c[0] - _").node(), Assign)
    assert len(shapes.find("t[_]", many=True)) == 2  # reads; t[k] = ... writes
    assert shapes.find("x[b, _]").kind == "expr"
    assert shapes.find("t[_] = x[_]").node().name == "t"  # one hole: all indices
    assert shapes.find("sync()").node().__class__.__name__ == "Sync"
    assert len(shapes.find("for _ in _: _", many=True)) == 4
    assert [s.node().name for s in shapes.find("_ = _", many=True)] == ["t", "y", "c"]
    assert shapes.find("_ = _ #2").node().name == "c"


def test_patterns_match_calls_windows_and_atomics():
    @proc
    def add4(x: [f32][4], y: [f32][4]):
        for k in seq(0, 4):
            y[k] += x[k]

    @proc
    def caller(n: size, x: f32[n, 4], y: f32[n, 4], h: f32[4]):
        for i in seq(0, n):
            add4(x[i, 0:4], y[i, 0:4])
            atomic_add(h[0], x[i, 0])

    caller = proc_from_source(str(caller), {"add4": add4})
    assert isinstance(caller.find("add4(x[i, 0:4], _)").node(), Call)
    assert isinstance(caller.find("add4(_)").node(), Call)
    with pytest.raises(SchedulingError):
        caller.find("add4(x[i, 0:2], _)")
    assert isinstance(caller.find("atomic_add(h[0], _)").node(), Atomic)
    assert caller.find("x[i, 0:4]").kind == "expr"


def test_patterns_never_print_the_proc(monkeypatch):
    import gpudsl.ir.printer as printer
    import gpudsl.schedule.patterns as patterns

    def boom(*a, **k):
        raise AssertionError("a pattern printed the IR")

    for mod in (printer, patterns):
        monkeypatch.setattr(mod, "print_stmt", boom, raising=False)
        monkeypatch.setattr(mod, "print_expr", boom, raising=False)
    assert rowsum.find("s[_] += _", many=True)
    assert rowsum.find("x[_, j]").kind == "expr"
    assert rowsum.find("for j in _: _").node().iter == "j"
