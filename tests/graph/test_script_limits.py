"""Hostile scripts end in ``gpudsl.GraphError`` with a location, never a raw exception
(issue 28): a shape literal of over 4,300 digits raised Python's ValueError, shapes too
large for memory numpy's ValueError / MemoryError at compile."""
import pytest

from gpudsl import GraphError, graph


@pytest.mark.parametrize("src, where, what", [
    ("$1 = InputTensor(x, float32, [" + "9" * 5000 + "]);\nresult = $1;\n", ":1:31:",
     "5000 digits"),
    ("$1 = InputTensor(x, float32, [" + "9" * 30 + ", 4]);\nresult = $1;\n", ":1:31:",
     "does not fit in 64 bits"),
    ("$1 = InputTensor(x, float32, [4]);\n$2 = SliceNode($1, " + str(2 ** 70) + ", 3);\n"
     "result = $2;\n", ":2:20:", "does not fit in 64 bits"),
])
def test_huge_literals(src, where, what):
    with pytest.raises(GraphError, match=what) as e:
        graph.compile(src)
    assert where in str(e.value)


@pytest.mark.parametrize("shape", ["[4611686018427387904]", "[1099511627776, 1024]"])
def test_shapes_too_large_for_memory(shape):
    with pytest.raises(GraphError, match="bytes of memory"):
        graph.compile(f"$1 = InputTensor(x, float32, {shape});\n$2 = ReLUNode($1);\n"
                      "result = $2;\n")
