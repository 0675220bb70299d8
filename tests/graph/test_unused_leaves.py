"""Leaves the result does not use are optional, inputs and constants alike (issue 28:
an unused declared InputTensor was refused when given, while an unused ConstantTensor
had to be given); an inputs dict with keys of several types is a GraphError, not a
TypeError from sorting them."""
import numpy as np
import pytest

from gpudsl import GraphError, graph

SRC = ("$1 = InputTensor(x, float32, [4]);\n$2 = InputTensor(y, float32, [4]);\n"
       "$3 = ConstantTensor(c, float32, [4]);\n$4 = ReLUNode($1);\nresult = $4;\n")


def test_unused_inputs_and_constants_are_optional():
    m = graph.compile(SRC)  # c unused: need not be given
    x = np.array([-1, 2, -3, 4], np.float32)
    want = np.maximum(x, 0)
    np.testing.assert_array_equal(m.evaluate({"x": x}), want)
    np.testing.assert_array_equal(m.evaluate({"x": x, "y": x}), want)  # y may be given
    m2 = graph.compile(SRC, constants={"c": np.ones(4, np.float32)})  # or c
    np.testing.assert_array_equal(m2.evaluate({"x": x}), want)
    with pytest.raises(GraphError, match="unknown input"):
        m.evaluate({"x": x, "z": x})
    with pytest.raises(GraphError, match="input 'x' was not given"):
        m.evaluate({"y": x})


def test_mixed_key_types():
    m = graph.compile(graph.ReLUNode(graph.InputTensor("x", "float32", [4])))
    with pytest.raises(GraphError, match="unknown input"):
        m.evaluate({"x": np.ones(4, np.float32), 1: 2, ("a",): 3})
