"""Issue 41: a node is one declaration.  A toy pointwise node, ``cube``, declared in one
``register(pointwise_node(...))`` inside the test (its element expression and its numpy
reference, nothing else), works through ``gpudsl.ops`` (float32 and float16), a graph
script and ``graph.CubeNode``, ``gpudsl tune cube`` and ``gpudsl bench --backend
emulator``; it is removed after each test, so the rest of the suite never sees it.

Before: adding a pointwise node took ``stdlib/pointwise.py`` and ``node_table.py``; the
tuner's reference was an if-chain that gave silu's formula to any other node, float16
operands bypassed the table in ``gpudsl.ops`` (a LaunchError for a new node), and
``graph.CONSTRUCTORS`` / ``__all__`` / ``bench.NODES`` were lists kept by hand."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph, ops
from gpudsl.cli import main
from gpudsl.stdlib import array_ops as ops_mod
from gpudsl.stdlib.node_table import pointwise_node
from gpudsl.stdlib.node_registry import get, register, unregister
from gpudsl.stdlib.pointwise import unary_kernel


def _cube_ref(x):
    return np.asarray(x, np.float64) ** 3


@pytest.fixture()
def cube(tmp_path, monkeypatch):
    """The toy node's one declaration (and a private tuning database)."""
    monkeypatch.setenv("GPUDSL_TUNE_DB", str(tmp_path / "tune.sqlite"))
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    node = register(pointwise_node("cube", "CubeNode", "{x} * {x} * {x}", _cube_ref))
    yield node
    unregister("cube")


@pytest.fixture()
def sub(monkeypatch):
    """A binary toy node whose operands do not commute."""
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    node = register(pointwise_node("sub", "DifferenceNode", "{a} - {b}",
                                   lambda a, b: np.asarray(a, np.float64) - b))
    yield node
    unregister("sub")


def _rand(*shape, seed=0, dtype=np.float32):
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


def _launched(fn, *args):
    seen = []
    run = ops_mod._run
    ops_mod._run = lambda p, **a: seen.append(p)
    try:
        fn(*args)
    finally:
        ops_mod._run = run
    return seen


def test_the_toy_node_through_ops_in_float32_and_float16(cube):
    x = _rand(6, 40)
    np.testing.assert_allclose(ops.cube(x), x.astype(np.float64) ** 3, rtol=1e-6)
    assert _launched(ops.cube, x) == [unary_kernel("cube", 4)]
    for dt, short, rtol in ((np.float16, "f16", 2e-3), ("bfloat16", "bf16", 2e-2)):
        h = _rand(6, 40, seed=1).astype(dt)
        got = ops.cube(h)  # was a LaunchError: halves went past the node table
        assert got.dtype == h.dtype and got.shape == h.shape
        np.testing.assert_allclose(got.astype(np.float64), _cube_ref(h.astype(np.float64)),
                                   rtol=rtol, atol=1e-3)
        assert _launched(ops.cube, h) == [unary_kernel("cube", 8, dt=short)]
    text = str(unary_kernel("cube", 8, dt="f16"))
    assert "xf * xf * xf" in text  # computed in f32 from the declaration's expression
    with pytest.raises(gpudsl.Error, match="cube"):
        ops.cube(np.arange(4))  # int64: refused, as for relu


def test_the_toy_node_through_a_graph_script_and_its_constructor(cube):
    script = ("$1 = InputTensor(x, float32, [8, 64]);\n$2 = CubeNode($1);\n"
              "$3 = ReLUNode($2);\nresult = $3;\n")
    m = graph.compile(script, device="emulator")
    x = _rand(8, 64)
    np.testing.assert_allclose(m.evaluate({"x": x}), np.maximum(x.astype(np.float64) ** 3, 0),
                               rtol=1e-6)
    assert [k.ops for k in m.kernels] == [("CubeNode", "ReLUNode")]  # fused: pointwise
    # the Python constructor is derived from the declaration
    y = graph.CubeNode(graph.InputTensor("x", "float32", [8, 64])).relu()
    assert graph.to_script(y).script == script
    # float16: the table's half kernel (fusion chains are float32)
    h = graph.compile(script.replace("float32", "float16"), device="emulator")
    xh = x.astype(np.float16)
    np.testing.assert_allclose(h.evaluate({"x": xh}).astype(np.float64),
                               np.maximum(_cube_ref(xh), 0), rtol=2e-3, atol=1e-3)
    with pytest.raises(gpudsl.GraphError, match="CubeNode"):
        graph.parse(script.replace("CubeNode($1)", "CubeNode($1, $1)"))


def test_the_toy_node_through_tune(cube, capsys):
    from gpudsl.stdlib.tuning import PointwiseTask

    # the tuner's reference is the declaration's (it was an if-chain: silu's formula)
    x = _rand(8, 64)
    np.testing.assert_array_equal(PointwiseTask("cube", (8, 64)).reference(x=x, out=None),
                                  _cube_ref(x))
    assert main(["tune", "cube", "--shape", "8x64", "--param", "threads=64",
                 "--param", "vec=2", "--backend", "emulator", "--reps", "2"]) == 0
    assert "gpudsl.ops uses it" in capsys.readouterr().out
    tuned = unary_kernel("cube", 2, 64)
    assert _launched(ops.cube, x) == [tuned]
    script = "$1 = InputTensor(x, float32, [8, 64]);\n$2 = CubeNode($1);\nresult = $2;\n"
    m = graph.compile(script, device="emulator")
    assert [s.proc for s in m.launches.steps] == [tuned]
    np.testing.assert_allclose(m.evaluate({"x": x}), _cube_ref(x), rtol=1e-6)


def test_the_toy_node_through_bench(cube, capsys):
    from gpudsl import bench

    assert "cube" in bench.NODES  # derived from the table
    assert bench.main(["--backend", "emulator", "--nodes", "cube", "--reps", "1",
                       "--warmup", "0"]) == 0
    out = capsys.readouterr().out
    rows = [line for line in out.splitlines() if line.startswith("cube")]
    assert len(rows) == 4 and all("GB/s" in r for r in rows), out


def test_the_toy_node_leaves_nothing_behind(cube):
    unregister("cube")
    assert get("cube") is None
    with pytest.raises(AttributeError):
        ops.cube
    with pytest.raises(AttributeError):
        graph.CubeNode
    from gpudsl import bench

    assert "cube" not in bench.NODES
    with pytest.raises(gpudsl.GraphError, match="unknown node 'CubeNode'"):
        graph.parse("$1 = InputTensor(x, float32, [4]);\n$2 = CubeNode($1);\nresult = $2;\n")


def test_a_binary_toy_node_broadcasts_only_its_second_operand(sub):
    a, b, row = _rand(4, 16), _rand(4, 16, seed=1), _rand(1, 16, seed=2)
    np.testing.assert_allclose(ops.sub(a, b), a - b, rtol=1e-6)
    np.testing.assert_allclose(ops.sub(a, row), a - row, rtol=1e-6)
    np.testing.assert_allclose(ops.sub(a, 2.0), a - 2, rtol=1e-6)
    # add and mul commute and swap such operands; a - b must not be computed as b - a
    with pytest.raises(gpudsl.Error, match="sub: a is a scalar"):
        ops.sub(2.0, a)
    with pytest.raises(gpudsl.Error, match="broadcasts onto b"):
        ops.sub(row, a)
    x = graph.InputTensor("x", "float32", [4, 16])
    m = graph.compile(graph.DifferenceNode(graph.DifferenceNode(x, 1.0), x),
                      device="emulator")
    np.testing.assert_allclose(m.evaluate({"x": a}), np.full_like(a, -1.0), atol=1e-6)


def test_a_node_declared_again_is_not_read_from_the_graph_cache(cube, tmp_path,
                                                                monkeypatch):
    # the graph cache's key covered gpudsl's sources only: a user's node declared again
    # with another meaning gave the first one's kernels back (the disk cache, and the
    # fused kernels' caches, keyed by the node's name)
    monkeypatch.setenv("GPUDSL_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("GPUDSL_GRAPH_CACHE", "1")
    script = ("$1 = InputTensor(x, float32, [4, 32]);\n$2 = CubeNode($1);\n"
              "$3 = SumNode($2, $1);\nresult = $3;\n")
    x = _rand(4, 32)
    first = graph.compile(script, device="emulator")
    assert [k.ops for k in first.kernels] == [("CubeNode", "SumNode")]
    np.testing.assert_allclose(first.evaluate({"x": x}), _cube_ref(x) + x, rtol=1e-5)
    register(pointwise_node("cube", "CubeNode", "{x} * {x}", lambda x: np.square(x)))
    again = graph.compile(script, device="emulator").evaluate({"x": x})
    np.testing.assert_allclose(again, x * x + x, rtol=1e-5)
