"""Issue 21: every standard-library node is declared once, in the node table
(``gpudsl.stdlib.node_table``), and ``gpudsl.ops``, graphs, ``gpudsl tune`` and
``gpudsl bench`` read that declaration: they run the same kernel for the same shapes
(the tuned winner included), and a node added with one module and one declaration
is available through all of them."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph, ops
from gpudsl.cli import main
from gpudsl.stdlib import node_table, node_registry as nodes
from gpudsl.stdlib import array_ops as ops_mod
from gpudsl.stdlib.node_registry import Node, register, unregister

from . import toy_node


@pytest.fixture()
def tune_db(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDSL_TUNE_DB", str(tmp_path / "tune.sqlite"))
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    return tmp_path / "tune.sqlite"


@pytest.fixture()
def toy():
    """The toy node's one declaration."""
    node = register(Node(
        "square_add", toy_node.shape, toy_node.launch,
        lambda a, b: a.astype(np.float64) ** 2 + b, graph="SquareAddNode",
        script=(("ref", "a"), ("ref", "b")), operands=("a", "b"),
        tuning=lambda shapes, options: toy_node.SquareAddTask(shapes[0]), tune_shapes=1,
        example=toy_node.example))
    yield node
    unregister("square_add")


def _launched(fn, *args):
    seen = []
    run = ops_mod._run
    ops_mod._run = lambda p, **a: seen.append(p)
    try:
        fn(*args)
    finally:
        ops_mod._run = run
    return seen


def _graph_procs(script: str, consts=None) -> list:
    m = graph.compile(script, consts or {}, device="emulator")
    return [s.proc for s in m.launches.steps]


def _rand(*shape, seed=0):
    return np.random.default_rng(seed).standard_normal(shape).astype(np.float32)


def test_graph_runs_the_tuned_winner_ops_runs(tune_db):
    # before the table, the graph ran the defaults for pointwise nodes and permute
    # whatever the database held, while gpudsl.ops ran the winners
    x = _rand(8, 64)
    script = ("$1 = InputTensor(x, float32, [8, 64]);\n$2 = ReLUNode($1);\n"
              "$3 = PermuteNode($2, [1, 0]);\nresult = $3;\n")
    assert _launched(ops.relu, x) == _graph_procs(script)[:1]
    assert main(["tune", "relu", "--shape", "8x64", "--param", "threads=64",
                 "--param", "vec=2", "--backend", "emulator", "--reps", "2"]) == 0
    assert main(["tune", "permute", "--shape", "8x64", "--perm", "1,0", "--param",
                 "tile=16", "--param", "pad=0", "--backend", "emulator", "--reps", "2"]) == 0
    tuned = _launched(ops.relu, x) + _launched(ops.permute, x, (1, 0))
    assert tuned[0].name == "relu_v2"
    assert _graph_procs(script) == tuned
    m = graph.compile(script, device="emulator")
    np.testing.assert_array_equal(m.evaluate({"x": x}), np.maximum(x, 0).T)


def test_ops_and_graph_choose_the_same_kernels(tune_db):
    script = """$1 = InputTensor(x, float32, [16, 64]);
$2 = InputTensor(w, float32, [64, 48]);
$3 = MatMulNode($1, $2);
$4 = InputTensor(g, float32, [48]);
$5 = RMSNormNode($3, $4);
$6 = SlicedSoftmaxNode($5, 20);
$7 = PermuteNode($6, [1, 0]);
$8 = InputTensor(c, float32, [48, 1]);
$9 = SumNode($7, $8);
result = $9;
"""
    x, w, g, c = _rand(16, 64), _rand(64, 48, seed=1), _rand(48, seed=2), _rand(48, 1)
    h = ops.matmul(x, w)
    want = (_launched(ops.matmul, x, w) + _launched(ops.rms_norm, h, g)
            + _launched(ops.sliced_softmax, h, 20) + _launched(ops.permute, h, (1, 0))
            + _launched(ops.add, h.T.copy(), c))
    assert _graph_procs(script) == want


def test_every_graph_node_is_declared_once():
    from gpudsl.graph.script import SIGNATURES

    declared = {n.graph: n for n in node_table.all_nodes() if n.graph}
    leaves = {"InputTensor", "ConstantTensor", "BufferTensor"}
    assert set(SIGNATURES) == set(declared) | leaves
    for name, n in declared.items():
        assert SIGNATURES[name] == tuple(kind for kind, _ in n.script)
        assert n.reference is not None, name
        if n.launch is not None:
            assert getattr(ops, n.name).__name__ == n.name


def test_toy_node_through_ops(toy, tune_db):
    a, b = _rand(8, 64), _rand(8, 64, seed=1)
    np.testing.assert_allclose(ops.square_add(a, b), a * a + b, rtol=1e-6)
    assert _launched(ops.square_add, a, b) == [toy_node.square_add_kernel(4)]
    with pytest.raises(gpudsl.Error, match="square_add: the operands have shapes"):
        ops.square_add(a, _rand(8, 32))


def test_toy_node_through_a_graph_script(toy, tune_db):
    script = ("$1 = InputTensor(a, float32, [8, 64]);\n"
              "$2 = InputTensor(b, float32, [8, 64]);\n"
              "$3 = SquareAddNode($1, $2);\n$4 = ReLUNode($3);\nresult = $4;\n")
    m = graph.compile(script, device="emulator")
    a, b = _rand(8, 64), _rand(8, 64, seed=1)
    np.testing.assert_allclose(m.evaluate({"a": a, "b": b}), np.maximum(a * a + b, 0),
                               rtol=1e-6)
    assert [k.ops for k in m.kernels] == [("SquareAddNode",), ("ReLUNode",)]
    assert graph.to_script(m.graph.result).script == script
    with pytest.raises(gpudsl.GraphError, match="SquareAddNode: the operands have shapes"):
        graph.parse(script.replace("b, float32, [8, 64]", "b, float32, [8, 32]"))


def test_toy_node_through_tune(toy, tune_db, capsys):
    a, b = _rand(8, 64), _rand(8, 64, seed=1)
    assert main(["tune", "square_add", "--shape", "8x64", "--param", "threads=64",
                 "--param", "vec=2", "--backend", "emulator", "--reps", "2"]) == 0
    assert "gpudsl.ops uses it" in capsys.readouterr().out
    tuned = toy_node.square_add_kernel(2, 64)
    assert _launched(ops.square_add, a, b) == [tuned]
    script = ("$1 = InputTensor(a, float32, [8, 64]);\n"
              "$2 = InputTensor(b, float32, [8, 64]);\n$3 = SquareAddNode($1, $2);\n"
              "result = $3;\n")
    assert _graph_procs(script) == [tuned]
    np.testing.assert_allclose(ops.square_add(a, b), a * a + b, rtol=1e-6)


def test_toy_node_through_bench(toy, tune_db, capsys):
    from gpudsl.bench import main as bench

    assert bench(["--backend", "emulator", "--nodes", "square_add", "--reps", "1",
                  "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("square_add")]
    # two sizes, each with the L2 cold and warm (issue 34: every state reported)
    assert len(rows) == 4 and "GB/s" in rows[0], out


def _cases():
    r = lambda *s, seed=0: _rand(*s, seed=seed)  # noqa: E731
    idx = lambda v: np.array([v], np.int64)  # noqa: E731
    return {
        "add": ((r(6, 40), r(1, 40, seed=1)), {}),
        "mul": ((r(6, 40), r(6, 1, seed=1)), {}),
        "relu": ((r(7, 33),), {}),
        "silu": ((r(7, 33),), {}),
        "matmul": ((r(9, 20), r(20, 11, seed=1)), {}),
        "permute": ((r(3, 5, 7),), {"perm": (2, 0, 1)}),
        "slice": ((r(10, 6),), {"begin": 2, "end": 7}),
        "replace_slice": ((r(10, 6), r(3, 6, seed=1), idx(4), idx(7)), {}),
        "reshape": ((r(4, 6),), {"shape": (3, 8)}),
        "rms_norm": ((r(5, 48), r(48, seed=1)), {}),
        "complex_hadamard_product": ((r(4, 6, 2), r(1, 6, 2, seed=1)), {}),
        "sliced_softmax": ((r(5, 30), idx(17)), {}),
        "attention": ((r(2, 3, 32), r(2, 9, 32, seed=1), r(2, 9, 32, seed=2), idx(9)),
                      {"causal": False}),
    }


@pytest.mark.parametrize("name", sorted(_cases()))
def test_every_node_matches_its_declared_reference(name):
    # the declaration's reference is numpy's meaning of the node: ops agrees with it
    decl = node_table.get(name)
    assert decl is not None and decl.reference is not None
    operands, attrs = _cases()[name]
    fn = getattr(ops, name)
    if name == "replace_slice":
        got = fn(operands[0].copy(), *operands[1:])
    elif name in ("sliced_softmax", "attention"):
        got = fn(*operands[:-1], operands[-1], **attrs) if name == "sliced_softmax" else \
            fn(*operands[:3], prefix=operands[3], **attrs)
    elif attrs:
        got = fn(*operands, *attrs.values())
    else:
        got = fn(*operands)
    want = decl.reference(*operands, **attrs)
    np.testing.assert_allclose(got, want, rtol=2e-5, atol=2e-6)
    ins = tuple(type("T", (), {"dtype": a.dtype.name, "shape": a.shape})() for a in operands)
    assert decl.shape(ins, attrs) == ("float32", tuple(want.shape))


def test_the_kernel_choice_is_looked_up_once_per_database_version(toy, tune_db, monkeypatch):
    # the ops-level plan cache: a repeated call does not run the declaration's kernel
    # choice again, until the tuning database changes
    calls = []

    def counting(shapes, attrs, backend):
        calls.append(shapes)
        return toy_node.launch(shapes, attrs, backend)

    register(Node("square_add", toy_node.shape, counting, graph="SquareAddNode",
                  script=(("ref", "a"), ("ref", "b")), operands=("a", "b")))
    a, b = _rand(4, 32), _rand(4, 32, seed=1)
    for _ in range(3):
        np.testing.assert_allclose(ops.square_add(a, b), a * a + b, rtol=1e-6)
    assert calls == [((4, 32), (4, 32))]
    ops.square_add(_rand(2, 32), _rand(2, 32))  # other shapes: their own choice
    assert len(calls) == 2
    # the database changes: the winners are read again once its modification time is
    # read again (at most every STAMP_SECONDS, here at once)
    monkeypatch.setattr(nodes, "STAMP_SECONDS", 0.0)
    tune_db.write_bytes(b"")
    ops.square_add(a, b)
    assert len(calls) == 3
