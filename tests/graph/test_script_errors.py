"""Bad scripts are refused with a GraphError at the script's line and column."""
import pytest

import gpudsl
from gpudsl import graph

GOOD = """$1 = InputTensor(x, float32, [4, 3]);
$2 = ConstantTensor(w, float32, [3, 5]);
$3 = MatMulNode($1, $2);
result = $3;
"""


def _err(text):
    with pytest.raises(gpudsl.GraphError) as e:
        graph.parse(text)
    return e.value


def test_good_script_parses():
    g = graph.parse(GOOD)
    assert g.result.shape == (4, 5) and [n.op for n in g.nodes][-1] == "MatMulNode"


def test_graph_error_is_a_gpudsl_error():
    assert issubclass(gpudsl.GraphError, gpudsl.Error)


@pytest.mark.parametrize("text, line, col, words", [
    # unknown node
    ("$1 = InputTensor(x, float32, [4]);\n$2 = FooNode($1);\nresult = $2;\n", 2, 6,
     "unknown node 'FooNode'"),
    # bad argument: a name where a reference is expected
    ("$1 = InputTensor(x, float32, [4]);\n$2 = ReLUNode(x);\nresult = $2;\n", 2, 15,
     "must be a node reference"),
    # bad argument: unknown dtype
    ("$1 = InputTensor(x, float64, [4]);\nresult = $1;\n", 1, 21, "unknown dtype"),
    # bad argument: too many
    ("$1 = InputTensor(x, float32, [4]);\n$2 = ReLUNode($1, $1);\nresult = $2;\n", 2, 19,
     "extra"),
    # too few
    ("$1 = InputTensor(x, float32, [4]);\n$2 = SumNode($1);\nresult = $2;\n", 2, 16,
     "takes 2 argument"),
    # redefinition
    ("$1 = InputTensor(x, float32, [4]);\n$1 = ReLUNode($1);\nresult = $1;\n", 2, 1,
     "defined twice"),
    # forward reference
    ("$1 = InputTensor(x, float32, [4]);\n$2 = SumNode($1, $3);\n$3 = ReLUNode($1);\n"
     "result = $2;\n", 2, 18, "not defined before"),
    # missing result
    ("$1 = InputTensor(x, float32, [4]);\n$2 = ReLUNode($1);\n", 3, 1, "no result line"),
    # trailing symbols
    ("$1 = InputTensor(x, float32, [4]); $2\nresult = $1;\n", 1, 36, "trailing"),
    # missing semicolon
    ("$1 = InputTensor(x, float32, [4])\nresult = $1;\n", 1, 34, "';'"),
    # shape mismatch: matmul inner dimensions, at the second operand
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = ConstantTensor(w, float32, [4, 5]);\n"
     "$3 = MatMulNode($1, $2);\nresult = $3;\n", 3, 21, "inner dimensions differ"),
    # shape mismatch: broadcast axis
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = InputTensor(y, float32, [2, 3]);\n"
     "$3 = SumNode($1, $2);\nresult = $3;\n", 3, 18, "axis 0"),
    # shape mismatch: ranks
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = InputTensor(y, float32, [3]);\n"
     "$3 = HadamardProductNode($1, $2);\nresult = $3;\n", 3, 30, "ranks 2 and 1"),
    # reshape element count
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = ReshapeNode($1, [5, 2]);\nresult = $2;\n",
     2, 22, "cannot reshape"),
    # reshape with -1 is refused
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = ReshapeNode($1, [-1]);\nresult = $2;\n",
     2, 22, "not positive"),
    # permutation
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = PermuteNode($1, [0, 0]);\nresult = $2;\n",
     2, 22, "not a permutation"),
    # empty slice
    ("$1 = InputTensor(x, float32, [4, 3]);\n$2 = SliceNode($1, 2, 2);\nresult = $2;\n",
     2, 20, "non-empty range"),
    # rank 4
    ("$1 = InputTensor(x, float32, [1, 2, 3, 4]);\nresult = $1;\n", 1, 30,
     "1 to 3"),
    # replace: begin not int64
    ("$1 = BufferTensor(float32, [8, 2]);\n$2 = InputTensor(r, float32, [1, 2]);\n"
     "$3 = InputTensor(b, float32, [1]);\n$4 = ReplaceSliceNode($1, $2, $3, $3);\n"
     "result = $4;\n", 4, 31, "int64"),
    # a name declared twice
    ("$1 = InputTensor(x, float32, [4]);\n$2 = InputTensor(x, float32, [4]);\n"
     "$3 = SumNode($1, $2);\nresult = $3;\n", 2, 18, "declared twice"),
    # a statement after the result
    ("$1 = InputTensor(x, float32, [4]);\nresult = $1;\n$2 = ReLUNode($1);\n", 3, 1,
     "after the result"),
    # a stray character
    ("$1 = InputTensor(x, float32, [4]) @;\nresult = $1;\n", 1, 35, "unexpected symbol"),
    # a float dtype mismatch: int64 into a float node
    ("$1 = InputTensor(x, int64, [4]);\n$2 = ReLUNode($1);\nresult = $2;\n", 2, 15,
     "int64"),
])
def test_bad_script_refused_at_line_and_column(text, line, col, words):
    e = _err(text)
    assert (e.line, e.column) == (line, col), str(e)
    assert words in str(e)
    assert f"<script>:{line}:{col}:" in str(e)


def test_message_quotes_the_line_with_a_caret():
    e = _err("$1 = InputTensor(x, float32, [4]);\n$2 = FooNode($1);\nresult = $2;\n")
    lines = str(e).split("\n")
    assert lines[1].strip() == "$2 = FooNode($1);"
    assert lines[2].index("^") == lines[1].index("FooNode")


def test_whole_model_nodes_are_implemented_and_checked():
    # issue 17: RMSNormNode and friends were refused as "not implemented yet"; now they
    # parse, and a weight that does not fit is refused at its argument
    graph.parse("$1 = InputTensor(x, float32, [4]);\n$2 = RMSNormNode($1, $1);\nresult = $2;\n")
    e = _err("$1 = InputTensor(x, float32, [2, 4]);\n$2 = RMSNormNode($1, $1);\nresult = $2;\n")
    assert (e.line, e.column) == (2, 22) and "weights" in str(e)


def test_missing_constant_is_refused_at_its_line():
    with pytest.raises(gpudsl.GraphError) as e:
        graph.compile(GOOD, constants={})
    assert e.value.line == 2 and "'w' was not given" in str(e.value)


def test_constant_of_wrong_shape():
    import numpy as np
    with pytest.raises(gpudsl.GraphError) as e:
        graph.compile(GOOD, constants={"w": np.zeros((5, 3), np.float32)})
    assert e.value.line == 2 and "[5, 3]" in str(e.value)
