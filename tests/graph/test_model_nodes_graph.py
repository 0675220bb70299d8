"""RMSNormNode, ComplexHadamardProductNode and SlicedSoftmaxNode in graphs (issue 17):
through scripts and through the Python API against numpy, shape errors at the script's
line and column, the prefix as an int64 input read at run time."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph

from tests.stdlib.test_model_nodes import rand, ref_complex, ref_rms_norm, ref_softmax


def _err(text):
    with pytest.raises(gpudsl.GraphError) as e:
        graph.parse(text)
    return e.value


@pytest.mark.parametrize("shape", [(1,), (37,), (3, 1), (2, 3, 5)])
def test_rms_norm_script_and_api(shape):
    x, w = rand(*shape), rand(shape[-1])
    dims = ", ".join(map(str, shape))
    script = (f"$1 = InputTensor(x, float32, [{dims}]);\n"
              f"$2 = ConstantTensor(w, float32, [{shape[-1]}]);\n"
              "$3 = RMSNormNode($1, $2);\nresult = $3;\n")
    want = ref_rms_norm(x, w)
    got = graph.compile(script, {"w": w}).evaluate({"x": x})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)
    node = graph.InputTensor("x", "float32", list(shape)).rms_norm(w)
    np.testing.assert_allclose(graph.compile(node).evaluate({"x": x}), want, rtol=1e-5,
                               atol=1e-5)
    assert "RMSNormNode($1, $2)" in graph.to_script(node).script


@pytest.mark.parametrize("a, b", [((2,), (2,)), ((6, 24, 2), (1, 24, 2)), ((5, 3, 2), (5, 1, 2)),
                                  ((1, 1, 2), (1, 1, 2)), ((7, 2), (1, 2))])
def test_complex_hadamard_product_script_and_api(a, b):
    x, y = rand(*a), rand(*b)
    want = ref_complex(x, y)
    script = (f"$1 = InputTensor(a, float32, {list(a)});\n"
              f"$2 = InputTensor(b, float32, {list(b)});\n"
              "$3 = ComplexHadamardProductNode($1, $2);\nresult = $3;\n")
    got = graph.compile(script).evaluate({"a": x, "b": y})
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    node = graph.ComplexHadamardProductNode(graph.InputTensor("a", "float32", a),
                                            graph.ConstantTensor(y))
    np.testing.assert_allclose(graph.compile(node).evaluate({"a": x}), want, rtol=1e-5,
                               atol=1e-6)


@pytest.mark.parametrize("shape, prefix", [((1,), 1), ((9,), 0), ((6, 33), 7), ((2, 1, 4), 4)])
def test_sliced_softmax_int_prefix(shape, prefix):
    x = rand(*shape)
    script = (f"$1 = InputTensor(x, float32, {list(shape)});\n"
              f"$2 = SlicedSoftmaxNode($1, {prefix});\nresult = $2;\n")
    want = ref_softmax(x, prefix)
    np.testing.assert_allclose(graph.compile(script).evaluate({"x": x}), want, rtol=1e-5,
                               atol=1e-6)
    node = graph.InputTensor("x", "float32", shape).sliced_softmax(prefix)
    text = graph.to_script(node).script
    assert f"SlicedSoftmaxNode($1, {prefix})" in text
    np.testing.assert_allclose(graph.compile(node).evaluate({"x": x}), want, rtol=1e-5,
                               atol=1e-6)


def test_sliced_softmax_prefix_input_changes_between_evaluations():
    x = rand(3, 16)
    node = graph.InputTensor("x", "float32", [3, 16]).sliced_softmax(
        graph.InputTensor("p", "int64", [1]))
    script = graph.to_script(node).script
    assert "SlicedSoftmaxNode($1, $2)" in script
    model = graph.compile(node)
    for p in (1, 5, 16, 0):
        got = model.evaluate({"x": x, "p": np.array([p], np.int64)})
        np.testing.assert_allclose(got, ref_softmax(x, p), rtol=1e-5, atol=1e-6)
    with pytest.raises(gpudsl.GraphError, match="outside \\[0, 16\\]"):
        model.evaluate({"x": x, "p": np.array([17], np.int64)})


@pytest.mark.parametrize("text, line, col, what", [
    ("$1 = InputTensor(x, float32, [3, 4]);\n$2 = InputTensor(w, float32, [3]);\n"
     "$3 = RMSNormNode($1, $2);\nresult = $3;\n", 3, 22, "last axis"),
    ("$1 = InputTensor(x, int64, [4]);\n$2 = InputTensor(w, float32, [4]);\n"
     "$3 = RMSNormNode($1, $2);\nresult = $3;\n", 3, 18, "float32"),
    ("$1 = InputTensor(a, float32, [3, 3]);\n"
     "$2 = ComplexHadamardProductNode($1, $1);\nresult = $2;\n", 2, 33, "size 2"),
    ("$1 = InputTensor(a, float32, [3, 2]);\n$2 = InputTensor(b, float32, [2, 2]);\n"
     "$3 = ComplexHadamardProductNode($1, $2);\nresult = $3;\n", 3, 37, "axis 0"),
    ("$1 = InputTensor(a, float32, [3, 2]);\n$2 = InputTensor(b, float32, [2]);\n"
     "$3 = ComplexHadamardProductNode($1, $2);\nresult = $3;\n", 3, 37, "ranks"),
    ("$1 = InputTensor(x, float32, [3, 4]);\n$2 = SlicedSoftmaxNode($1, 5);\nresult = $2;\n",
     2, 28, "outside [0, 4]"),
    ("$1 = InputTensor(x, float32, [3, 4]);\n$2 = InputTensor(p, float32, [1]);\n"
     "$3 = SlicedSoftmaxNode($1, $2);\nresult = $3;\n", 3, 28, "int64"),
    ("$1 = InputTensor(x, float32, [3, 4]);\n$2 = InputTensor(p, int64, [2]);\n"
     "$3 = SlicedSoftmaxNode($1, $2);\nresult = $3;\n", 3, 28, "one element"),
    ("$1 = InputTensor(x, float32, [3, 4]);\n$2 = SlicedSoftmaxNode($1, [1]);\nresult = $2;\n",
     2, 28, "an integer or a node reference"),
    ("$1 = InputTensor(x, float32, [3, 4]);\n$2 = RMSNormNode($1);\nresult = $2;\n",
     2, 20, "takes 2 argument"),
])
def test_bad_scripts_are_refused_at_line_and_column(text, line, col, what):
    e = _err(text)
    assert (e.line, e.column) == (line, col), str(e)
    assert what in str(e)


def test_python_api_refusals():
    x = graph.InputTensor("x", "float32", [3, 4])
    with pytest.raises(gpudsl.GraphError, match="last axis"):
        x.rms_norm(np.ones(3, np.float32))
    with pytest.raises(gpudsl.GraphError, match="outside"):
        x.sliced_softmax(-1)
    with pytest.raises(gpudsl.GraphError, match="integer"):
        x.sliced_softmax(1.5)
    with pytest.raises(gpudsl.GraphError, match="size 2"):
        x.complex_hadamard_product(x)
