"""AttentionNode (issue 27, f32) in graphs: through scripts and the Python API against the
float64 reference, the prefix as an int or an int64 input read at run time (decode
against a growing KV cache), one launch per node, refusals at the script's line and
column."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph
from gpudsl.stdlib.attention import attention_reference, plan_attention

ATOL, RTOL = 2e-5, 1e-4


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape, dtype=np.float32)


def _script(q, k, prefix, causal):
    return (f"$1 = InputTensor(q, float32, {list(q)});\n"
            f"$2 = ConstantTensor(k, float32, {list(k)});\n"
            f"$3 = ConstantTensor(v, float32, {list(k)});\n"
            f"$4 = AttentionNode($1, $2, $3, {prefix}, {int(causal)});\nresult = $4;\n")


@pytest.mark.parametrize("h, m, n, d, prefix, causal", [
    (2, 1, 40, 64, 17, False), (2, 1, 40, 64, 1, True), (1, 17, 20, 128, 17, True),
    (2, 3, 33, 64, 33, False)])
def test_script_and_api(h, m, n, d, prefix, causal):
    q, k, v = rand(h, m, d), rand(h, n, d, seed=1), rand(h, n, d, seed=2)
    want = attention_reference(q, k, v, causal, prefix)
    model = graph.compile(_script(q.shape, k.shape, prefix, causal), {"k": k, "v": v})
    np.testing.assert_allclose(model.evaluate({"q": q}), want, rtol=RTOL, atol=ATOL)
    assert [(e.name, e.ops) for e in model.kernels] == \
        [(plan_attention(m, d, causal, h, n).name, ("AttentionNode",))]
    node = graph.AttentionNode(graph.InputTensor("q", "float32", q.shape), k, v,
                               prefix=prefix, causal=causal)
    text = graph.to_script(node).script
    assert f"AttentionNode($1, $2, $3, {prefix}, {int(causal)})" in text
    np.testing.assert_allclose(graph.compile(node).evaluate({"q": q}), want, rtol=RTOL,
                               atol=ATOL)
    back = graph.compile(text, graph.to_script(node).constants)  # the script round trip
    np.testing.assert_allclose(back.evaluate({"q": q}), want, rtol=RTOL, atol=ATOL)


def test_prefix_input_changes_between_evaluations():
    q, k, v = rand(2, 1, 64), rand(2, 48, 64, seed=1), rand(2, 48, 64, seed=2)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", [2, 1, 64]), k, v,
                               prefix=graph.InputTensor("pos", "int64", [1]), causal=True)
    assert "AttentionNode($1, $2, $3, $4, 1)" in graph.to_script(node).script
    model = graph.compile(node)
    for p in (1, 17, 33, 48):
        got = model.evaluate({"q": q, "pos": np.array([p], np.int64)})
        np.testing.assert_allclose(got, attention_reference(q, k, v, True, p), rtol=RTOL,
                                   atol=ATOL)
    with pytest.raises(gpudsl.GraphError, match="outside \\[1, 48\\]"):
        model.evaluate({"q": q, "pos": np.array([49], np.int64)})
    with pytest.raises(gpudsl.GraphError, match="outside \\[1, 48\\]"):
        model.evaluate({"q": q, "pos": np.array([0], np.int64)})


def test_default_prefix_is_every_key():
    q, k, v = rand(1, 2, 32), rand(1, 9, 32, seed=1), rand(1, 9, 32, seed=2)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", [1, 2, 32]), k, v)
    assert node.attrs == {"causal": False, "prefix": 9}
    np.testing.assert_allclose(graph.compile(node).evaluate({"q": q}),
                               attention_reference(q, k, v), rtol=RTOL, atol=ATOL)


def _err(text):
    with pytest.raises(gpudsl.GraphError) as e:
        graph.parse(text)
    return e.value


HEAD = ("$1 = InputTensor(q, float32, [2, 4, 64]);\n"
        "$2 = InputTensor(k, float32, [2, 8, 64]);\n")


@pytest.mark.parametrize("text, line, col, what", [
    (HEAD + "$3 = AttentionNode($1, $2, $2, 9, 0);\nresult = $3;\n", 3, 32, "outside [1, 8]"),
    (HEAD + "$3 = AttentionNode($1, $2, $2, 3, 1);\nresult = $3;\n", 3, 32,
     "at least the query rows"),
    (HEAD + "$3 = AttentionNode($1, $2, $2, 3, 2);\nresult = $3;\n", 3, 35,
     "causal must be 0 or 1"),
    (HEAD + "$3 = AttentionNode($1, $1, $2, 3, 0);\nresult = $3;\n", 3, 28, "differ"),
    (HEAD + "$3 = InputTensor(v, float32, [2, 8, 80]);\n"
     "$4 = AttentionNode($3, $3, $3, 3, 0);\nresult = $4;\n", 4, 20, "head dimension 80"),
    (HEAD + "$3 = InputTensor(p, float32, [1]);\n"
     "$4 = AttentionNode($1, $2, $2, $3, 0);\nresult = $4;\n", 4, 32, "int64"),
    (HEAD + "$3 = AttentionNode($1, $2, $2, 3);\nresult = $3;\n", 3, 33,
     "takes 5 argument"),
])
def test_bad_scripts_are_refused_at_line_and_column(text, line, col, what):
    e = _err(text)
    assert (e.line, e.column) == (line, col), str(e)
    assert what in str(e)


def test_python_api_refusals():
    q = graph.InputTensor("q", "float32", [2, 4, 64])
    k = np.zeros((2, 8, 64), np.float32)
    with pytest.raises(gpudsl.GraphError, match="causal must be a bool"):
        graph.AttentionNode(q, k, k, causal=1)
    with pytest.raises(gpudsl.GraphError, match="integer"):
        graph.AttentionNode(q, k, k, prefix=2.5)
    with pytest.raises(gpudsl.GraphError, match="3 axes"):
        graph.AttentionNode(q, k[0], k[0])
