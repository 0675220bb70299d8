"""Every node through the Python API and through scripts, against numpy (emulator in CI)."""
import numpy as np
import pytest

import gpudsl
from gpudsl import graph

rng = np.random.default_rng(7)


def f32(*shape):
    return rng.standard_normal(shape).astype(np.float32)


def run(node, **inputs):
    """Evaluate ``node`` through the API and through its script; both must agree."""
    m = graph.compile(node)
    out = m.evaluate(inputs)
    text, consts = graph.to_script(node)
    out2 = graph.compile(text, constants=consts).evaluate(inputs)
    np.testing.assert_array_equal(out, out2)
    return out


BROADCASTS = [((5, 3), (5, 3)), ((5, 3), (1, 3)), ((5, 3), (5, 1)), ((5, 3), (1, 1)),
              ((7,), (1,)), ((7,), (7,)), ((2, 3, 4), (1, 3, 4)), ((2, 3, 4), (2, 1, 4)),
              ((2, 3, 4), (2, 3, 1)), ((2, 3, 4), (1, 1, 4)), ((2, 3, 4), (1, 3, 1)),
              ((2, 3, 4), (2, 1, 1)), ((2, 3, 4), (1, 1, 1)), ((1, 3, 1), (1, 1, 1))]


@pytest.mark.parametrize("sa, sb", BROADCASTS)
@pytest.mark.parametrize("op", ["+", "*"])
def test_sum_and_hadamard_broadcast(op, sa, sb):
    a, b = f32(*sa), f32(*sb)
    x, y = graph.InputTensor("a", "float32", sa), graph.InputTensor("b", "float32", sb)
    out = run(x + y if op == "+" else x * y, a=a, b=b)
    np.testing.assert_allclose(out, a + b if op == "+" else a * b, rtol=1e-6)


@pytest.mark.parametrize("sa, sb", [((3, 5), (5, 1)), ((1, 5), (5, 7)), ((5,), (5, 3)),
                                    ((2, 3, 5), (2, 5, 1)), ((1, 1, 1), (1, 1, 3))])
def test_matmul(sa, sb):
    a, b = f32(*sa), f32(*sb)
    out = run(graph.InputTensor("a", "float32", sa) @ graph.ConstantTensor(b), a=a)
    np.testing.assert_allclose(out, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("bad", [((3, 5), (4, 2)), ((5,), (5,)), ((2, 3, 5), (5, 2)),
                                 ((2, 3, 5), (3, 5, 2)), ((3, 5), (5,))])
def test_matmul_refusals(bad):
    sa, sb = bad
    with pytest.raises(gpudsl.GraphError):
        graph.InputTensor("a", "float32", sa) @ graph.InputTensor("b", "float32", sb)


@pytest.mark.parametrize("shape", [(1,), (7,), (3, 1), (2, 3, 5)])
def test_relu_silu(shape):
    a = f32(*shape)
    x = graph.InputTensor("a", "float32", shape)
    np.testing.assert_allclose(run(x.relu(), a=a), np.maximum(a, 0))
    np.testing.assert_allclose(run(graph.SiLUNode(x), a=a), a / (1 + np.exp(-a)),
                               rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("shape, perm", [((3, 5), (1, 0)), ((2, 3, 4), (2, 0, 1)),
                                         ((2, 1, 4), (1, 2, 0)), ((5,), (0,))])
def test_permute(shape, perm):
    a = f32(*shape)
    out = run(graph.InputTensor("a", "float32", shape).permute(perm), a=a)
    np.testing.assert_array_equal(out, np.transpose(a, perm))


def test_slice_and_reshape_are_views_and_compute():
    a = f32(6, 4)
    x = graph.InputTensor("a", "float32", [6, 4])
    node = (x[1:4].reshape([2, 6]) + graph.ConstantTensor(np.ones((1, 6), np.float32)))
    m = graph.compile(node)
    np.testing.assert_allclose(m.evaluate({"a": a}), a[1:4].reshape(2, 6) + 1)
    # the slice and the reshape take no memory: input (6x4) and the sum (2x6) only
    assert m.memory.tensors == 2


def test_slice_of_slice_and_a_constant_slice():
    c = f32(5, 3)
    node = graph.ConstantTensor(c)[1:5][2:4].relu()
    np.testing.assert_array_equal(run(node), np.maximum(c[3:5], 0))


def test_shared_subgraph_emitted_once():
    x = graph.InputTensor("a", "float32", [3])
    h = x.relu()
    text, _ = graph.to_script(h + h)
    assert text.count("ReLUNode") == 1
    a = f32(3)
    np.testing.assert_allclose(run(h * h, a=a), np.maximum(a, 0) ** 2)


def test_torch_constant_where_installed():
    torch = pytest.importorskip("torch")
    w = torch.ones(3, 2)
    out = run(graph.InputTensor("a", "float32", [4, 3]) @ graph.ConstantTensor(w),
              a=np.ones((4, 3), np.float32))
    np.testing.assert_allclose(out, np.full((4, 2), 3.0))


# ------------------------------------------------------------------ run-time inputs


def _model():
    return graph.compile(graph.InputTensor("a", "float32", [2, 3]).relu())


@pytest.mark.parametrize("inputs, words", [
    ({}, "'a' was not given"),
    ({"a": np.zeros((2, 3), np.float32), "b": 1}, "unknown input"),
    ({"a": np.zeros((3, 2), np.float32)}, "shape [3, 2]"),
    ({"a": np.zeros((2, 3), np.float64)}, "float64"),
])
def test_inputs_validated(inputs, words):
    with pytest.raises(gpudsl.GraphError) as e:
        _model().evaluate(inputs)
    assert words in str(e.value)


def test_input_error_names_the_script_line():
    m = graph.compile("$1 = InputTensor(a, float32, [2]);\n$2 = ReLUNode($1);\n"
                      "result = $2;\n")
    with pytest.raises(gpudsl.GraphError) as e:
        m.evaluate({"a": np.zeros(3, np.float32)})
    assert e.value.line == 1


# ------------------------------------------------------------------ buffers


CACHE = """$1 = BufferTensor(float32, [4, 3]);
$2 = InputTensor(row, float32, [1, 3]);
$3 = InputTensor(begin, int64, [1]);
$4 = InputTensor(end, int64, [1]);
$5 = ReplaceSliceNode($1, $2, $3, $4);
$6 = SumNode($5, $5);
result = $6;
"""


def _pos(i):
    return {"begin": np.array([i], np.int64), "end": np.array([i + 1], np.int64)}


def test_buffers_persist_across_evaluations():
    m = graph.compile(CACHE)
    rows = f32(4, 3)
    for i in range(4):
        out = m.evaluate({"row": rows[i:i + 1], **_pos(i)})
        expect = np.zeros((4, 3), np.float32)
        expect[:i + 1] = rows[:i + 1]
        np.testing.assert_allclose(out, 2 * expect)
    np.testing.assert_array_equal(m.buffers[0], rows)


@pytest.mark.parametrize("begin, end", [(4, 5), (-1, 0), (1, 3), (2, 2)])
def test_replace_out_of_range_is_an_error_and_the_buffer_is_untouched(begin, end):
    m = graph.compile(CACHE)
    m.evaluate({"row": np.ones((1, 3), np.float32), **_pos(0)})
    before = m.buffers[0].copy()
    with pytest.raises(gpudsl.GraphError) as e:
        m.evaluate({"row": np.full((1, 3), 9, np.float32),
                    "begin": np.array([begin], np.int64), "end": np.array([end], np.int64)})
    assert e.value.line == 5 and "nothing was written" in str(e.value)
    np.testing.assert_array_equal(m.buffers[0], before)


def test_replace_through_the_api():
    buf = graph.BufferTensor("float32", [3, 2])
    r = graph.InputTensor("r", "float32", [1, 2])
    b, e = graph.InputTensor("b", "int64", [1]), graph.InputTensor("e", "int64", [1])
    m = graph.compile(buf.replace(r, b, e))
    m.evaluate({"r": np.ones((1, 2), np.float32), "b": np.array([2]), "e": np.array([3])})
    out = m.evaluate({"r": np.full((1, 2), 2, np.float32), "b": np.array([0]),
                      "e": np.array([1])})
    np.testing.assert_array_equal(out, [[2, 2], [0, 0], [1, 1]])


def test_replace_on_a_constant_is_refused():
    r = graph.InputTensor("r", "float32", [1, 2])
    node = graph.ConstantTensor(np.zeros((3, 2), np.float32)).replace(r, 0, 1)
    with pytest.raises(gpudsl.GraphError, match="ConstantTensor"):
        graph.compile(node)


def test_the_launch_list_has_a_length():
    # issue 40: len(model.launches) raised TypeError
    import gpudsl.graph as graph

    x = graph.InputTensor("x", "float32", [4, 8])
    m = graph.compile((x + x).relu())
    assert len(m.launches) == len(m.kernels) == len(list(m.launches)) >= 1
