"""A node's keyword options in graph scripts and constructors (issue 36): a TF32
``MatMulNode`` is written ``MatMulNode($1, $2, precision=tf32)`` (``graph.MatMulNode(a,
b, precision="tf32")``), parsed, printed back by ``to_script``, run as TF32 (the emulator's
``mma.sync`` TF32 kernel), never fused into an fp32 epilogue or attention kernel;
errors at the option's column."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph
from gpudsl.graph import fusion

from .test_attention_fusion import decode_graph

SCRIPT = """
$1 = InputTensor(x, float32, [128, 32]);
$2 = ConstantTensor(w, float32, [32, 128]);
$3 = MatMulNode($1, $2{opt});
$4 = ReLUNode($3);
result = $4;
"""


def exact(seed=0):
    """Operands whose TF32 product (low mantissa bits dropped) is the integers' and
    differs from their float32 product."""
    rng = np.random.default_rng(seed)
    xi = rng.integers(-3, 4, (128, 32)).astype(np.float32)
    wi = rng.integers(-3, 4, (32, 128)).astype(np.float32)
    return xi * np.float32(1 + 2.0 ** -13), wi * np.float32(1 + 2.0 ** -12), xi @ wi


def test_the_option_parses_into_the_attribute_and_the_default_into_none():
    g = graph.parse(SCRIPT.format(opt=", precision=tf32"))
    assert g.nodes[2].attrs == {"precision": "tf32"}
    assert graph.parse(SCRIPT.format(opt=", precision=fp32")).nodes[2].attrs == {}
    assert graph.parse(SCRIPT.format(opt="")).nodes[2].attrs == {}
    spaced = SCRIPT.format(opt=" ,  precision =tf32 ")
    assert graph.parse(spaced).nodes[2].attrs == {"precision": "tf32"}


def test_the_constructor_and_to_script_round_trip():
    x = graph.InputTensor("x", "float32", [4, 8])
    w = np.ones((8, 4), np.float32)
    y = graph.MatMulNode(x, w, precision="tf32")
    assert y.attrs == {"precision": "tf32"} and y.shape == (4, 4)
    text = graph.to_script(y.relu()).script
    assert "$3 = MatMulNode($1, $2, precision=tf32);" in text
    assert graph.parse(text).nodes[2].attrs == {"precision": "tf32"}
    plain = graph.to_script(graph.MatMulNode(x, w, precision="fp32")).script
    assert "MatMulNode($1, $2);" in plain          # the default is not written
    for bad, words in (({"precision": "fp16"}, "one of fp32, tf32"),
                       ({"precison": "tf32"}, "has no option 'precison'")):
        with pytest.raises(gpudsl.GraphError, match=words):
            graph.MatMulNode(x, w, **bad)
    with pytest.raises(gpudsl.GraphError, match="has no option"):
        graph.ReLUNode(x, precision="tf32")


@pytest.mark.parametrize("opt,words,col", [
    (", precision=fp16", "precision of MatMulNode is one of fp32, tf32, not 'fp16'", 35),
    (", prec=tf32", "MatMulNode has no option 'prec'", 25),
    (", precision=tf32, precision=fp32", "the option precision is given twice", 41),
    (", precision=", r"one of fp32, tf32, not '\)'", 35),
    (", precision=2", "not '2'", 35),
])
def test_bad_options_are_errors_at_their_column(opt, words, col):
    with pytest.raises(gpudsl.GraphError, match=words) as e:
        graph.parse(SCRIPT.format(opt=opt))
    assert e.value.line == 4 and (col is None or e.value.column == col)


def test_an_argument_after_an_option_and_options_of_nodes_without_any():
    text = SCRIPT.replace("MatMulNode($1, $2{opt})", "MatMulNode($1, precision=tf32, $2)")
    with pytest.raises(gpudsl.GraphError, match="after its keyword options"):
        graph.parse(text)
    text = SCRIPT.format(opt="").replace("ReLUNode($3)", "ReLUNode($3, precision=tf32)")
    with pytest.raises(gpudsl.GraphError, match="ReLUNode takes no keyword options"):
        graph.parse(text)


def test_tf32_on_half_operands_is_refused():
    text = SCRIPT.format(opt=", precision=tf32").replace("float32", "float16")
    with pytest.raises(gpudsl.GraphError, match="precision=tf32 reads float32 operands"):
        graph.parse(text)


def test_a_tf32_node_runs_as_tf32_and_is_not_fused_into_its_epilogue():
    x, w, want = exact()
    for opt, tf32 in (("", False), (", precision=tf32", True)):
        model = graph.compile(SCRIPT.format(opt=opt), constants={"w": w})
        got = model.evaluate({"x": x})
        names = [e.name for e in model.kernels]
        if tf32:   # the product read as tf32: exact; the relu its own step
            assert np.array_equal(got, np.maximum(want, 0)), names
            assert len(names) == 2 and any("tf32" in n for n in names), names
        else:      # fp32: one fused kernel, the float32 product
            assert len(names) == 1 and not np.array_equal(got, np.maximum(want, 0))
            np.testing.assert_allclose(got, np.maximum(x @ w, 0), rtol=1e-5, atol=1e-5)


def _topological(result):
    order, seen = [], set()

    def visit(n):
        if id(n) not in seen:
            seen.add(id(n))
            for m in n.inputs:
                visit(m)
            order.append(n)
    visit(result)
    return order


@pytest.mark.parametrize("which", [0, 1], ids=["scores", "values"])
def test_a_tf32_matmul_is_not_fused_into_attention(which):
    out = decode_graph(3, 40, 64, "hnd", 0.125, False, True)
    nodes = _topological(out)
    assert [g.head for g in fusion.groups(nodes, out)] == ["attention"]
    mms = [n for n in nodes if n.op == "MatMulNode"]
    mms[which].attrs["precision"] = "tf32"
    assert "attention" not in [g.head for g in fusion.groups(nodes, out)]
