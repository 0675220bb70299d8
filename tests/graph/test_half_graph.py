"""Graphs on float16 / bfloat16 tensors (issue 27): the dtype spellings, the one-dtype
rule of every node, scripts with half tensors (parse, to_script), and the compiled
half nodes equal to ``gpudsl.ops`` (the same stdlib kernels) or to numpy within their
roundings; nodes without a half kernel refused at compile with their reason."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import graph, ops
from gpudsl.graph.graph_nodes import dtype_name
from gpudsl.stdlib.attention import attention_reference, attention_tolerance

BF16 = ml_dtypes.bfloat16
RNG = np.random.default_rng(27)


def rand(shape, dt):
    return RNG.standard_normal(shape, dtype=np.float32).astype(dt)


@pytest.mark.parametrize("spelling, name", [
    ("float16", "float16"), ("f16", "float16"), (np.float16, "float16"),
    ("torch.float16", "float16"), ("torch.half", "float16"), (gpudsl.f16, "float16"),
    ("bfloat16", "bfloat16"), ("bf16", "bfloat16"), (BF16, "bfloat16"),
    ("torch.bfloat16", "bfloat16"), (gpudsl.bf16, "bfloat16")])
def test_half_dtype_spellings(spelling, name):
    assert dtype_name(spelling) == name


def test_a_node_of_mixed_precisions_is_refused():
    a = graph.InputTensor("a", "float16", [4, 8])
    b = graph.InputTensor("b", "float32", [4, 8])
    with pytest.raises(graph.GraphError, match="operand 2 is float32 and operand 1 "
                       "float16: the operands of one node share a dtype"):
        a + b
    with pytest.raises(graph.GraphError, match="share a dtype"):
        a @ graph.ConstantTensor(rand((8, 2), BF16))
    # a Python number takes the node's dtype (and its rank)
    assert (a * 0.5).dtype == "float16" and (a + 1).inputs[1].shape == (1, 1)


def test_scripts_with_half_tensors_round_trip():
    text = ("$1 = InputTensor(x, float16, [4, 64]);\n"
            "$2 = ConstantTensor(w, float16, [64, 32]);\n"
            "$3 = MatMulNode($1, $2);\n"
            "$4 = SiLUNode($3);\n"
            "result = $4;\n")
    g = graph.parse(text)
    assert g.result.dtype == "float16"
    b = graph.parse("$1 = BufferTensor(bfloat16, [2, 8]);\n$2 = ReLUNode($1);\nresult = $2;\n")
    assert b.result.dtype == "bfloat16" and b.buffers[0].dtype == "bfloat16"
    built = (graph.InputTensor("x", np.float16, [4, 64]) @ graph.ConstantTensor(
        rand((64, 32), np.float16), "w")).silu()
    script = graph.to_script(built).script
    assert script == text, script
    with pytest.raises(graph.GraphError, match="graphs hold float32, float16, bfloat16"):
        graph.parse("$1 = InputTensor(x, float64, [4]);\nresult = $1;\n")


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_half_nodes_equal_the_ops(dt):
    x = graph.InputTensor("x", dt, [4, 64])
    w = rand((64, 128), dt)
    g = rand(128, dt)
    bias = rand((1, 128), dt)
    h = x @ graph.ConstantTensor(w)
    y = (h.silu() * graph.ConstantTensor(bias) + h).relu().rms_norm(graph.ConstantTensor(g))
    s = y.sliced_softmax(100)
    model = graph.compile(s)
    assert all(k.name.endswith("_f16" if dt == np.float16 else "_bf16")
               or k.name.startswith("matmul_f16" if dt == np.float16 else "matmul_bf16")
               for k in model.kernels), model.kernels
    xv = rand((4, 64), dt)
    got = model.evaluate({"x": xv})
    hv = ops.matmul(xv, w)
    want = ops.sliced_softmax(ops.rms_norm(ops.relu(ops.add(ops.mul(ops.silu(hv), bias), hv)),
                                           g), 100)
    assert got.dtype == np.dtype(dt)
    np.testing.assert_array_equal(got.view(np.uint16), want.view(np.uint16))


@pytest.mark.parametrize("dt", [np.float16, BF16])
def test_half_cache_writes_rotary_product_and_attention(dt):
    h, s, d = 2, 40, 64
    row = graph.InputTensor("row", dt, [1, h * d])
    pos = graph.InputTensor("pos", "int64", [1])
    end = graph.InputTensor("end", "int64", [1])
    freq = graph.InputTensor("freq", dt, [1, d // 2, 2])
    rot = row.reshape([h, d // 2, 2]).complex_hadamard_product(freq).reshape([1, h * d])
    cache = graph.BufferTensor(dt, [s, h * d]).replace(rot, pos, end)
    k = cache.reshape([s, h, d]).reshape([h, s, d])  # (a view: the bytes as [h, s, d])
    q = graph.InputTensor("q", dt, [h, 3, d])
    out = graph.AttentionNode(q, k, k, end)
    model = graph.compile(out)
    assert any(k.name.startswith("complex_mul") for k in model.kernels)
    qv = rand((h, 3, d), dt)
    rows, fr = [], rand((1, d // 2, 2), dt)
    for p in range(5):
        r = rand((1, h * d), dt)
        rows.append(ops.complex_hadamard_product(r.astype(np.float32).reshape(h, d // 2, 2),
                                                 fr.astype(np.float32)))
        got = model.evaluate({"row": r, "pos": np.array([p], np.int64),
                              "end": np.array([p + 1], np.int64), "freq": fr, "q": qv})
    cache_v = model.buffers[0]
    assert cache_v.dtype == np.dtype(dt)
    # the rotary product in f32 rounded once equals the f32 op's result rounded
    for p, r in enumerate(rows):
        np.testing.assert_array_equal(cache_v[p].view(np.uint16),
                                      r.reshape(-1).astype(dt).view(np.uint16))
    assert not cache_v[5:].astype(np.float32).any()
    kv = cache_v.reshape(h, s, d)
    want = attention_reference(qv, kv, kv, False, 5)
    atol, rtol = attention_tolerance("f16" if dt == np.float16 else "bf16")
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def test_nodes_without_a_half_kernel_are_refused_at_compile():
    a = graph.InputTensor("a", "float16", [2, 4, 8])
    with pytest.raises(graph.GraphError, match="MatMulNode: float16/bfloat16 matmul takes"):
        graph.compile(a @ graph.InputTensor("b", "float16", [2, 8, 4]))


def test_inputs_of_the_wrong_precision_are_refused():
    model = graph.compile(graph.InputTensor("x", "bfloat16", [8]).relu())
    with pytest.raises(graph.GraphError, match="input 'x' is float16; the graph declares "
                       "bfloat16"):
        model.evaluate({"x": np.zeros(8, np.float16)})
    got = model.evaluate({"x": np.linspace(-1, 1, 8).astype(BF16)})
    assert got.dtype == BF16 and (got.astype(np.float32) >= 0).all()


def test_a_half_permute_runs_in_a_graph():
    # issue 40: the permute kernels are dtype-generic (a copy); it was refused
    a = graph.InputTensor("a", "bfloat16", [2, 4, 8])
    m = graph.compile(a.permute([0, 2, 1]), device="emulator")
    x = np.random.default_rng(3).standard_normal((2, 4, 8)).astype(BF16)
    got = m.evaluate({"a": x})
    np.testing.assert_array_equal(got.view(np.uint16),
                                  np.ascontiguousarray(x.transpose(0, 2, 1)).view(np.uint16))
