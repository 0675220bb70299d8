"""Grouped-query heads and a paged KV cache in graphs (issue 37): AttentionNode with
``k, v [Hkv, N, D]`` (GQA by shape), and with ``block_table=`` / ``seq_lens=`` (the
script's PagedAttentionNode, ``q [B * H, M, D]``, caches ``[pages, P, Hkv * D]``), equal
to the float64 reference through the Python API and scripts; the table and the lengths
change between evaluations and are checked before any kernel runs; refusals."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph
from gpudsl.stdlib.attention import attention_tolerance
from gpudsl.stdlib.attention_paged import gqa_reference, plan_gqa

ATOL, RTOL = attention_tolerance()


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape, dtype=np.float32)


def test_grouped_heads_by_shape_with_a_prefix_input():
    q, k, v = rand(8, 2, 32), rand(2, 30, 32, seed=1), rand(2, 30, 32, seed=2)
    pre = graph.InputTensor("prefix", "int64", [1])
    node = graph.AttentionNode(graph.InputTensor("q", "float32", q.shape), k, v, pre,
                               causal=True, kv_heads=2)
    model = graph.compile(node)
    assert [e.name for e in model.kernels] == [plan_gqa(32, True, 4, 2, 0, "f32", "i64").name]
    for L in (2, 17, 30):
        got = model.evaluate({"q": q, "prefix": np.array([L])})
        want = gqa_reference(q[None], k[None], v[None], [L], True)[0]
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    with pytest.raises(gpudsl.GraphError, match="prefix 1 is outside"):
        model.evaluate({"q": q, "prefix": np.array([1])})  # causal: 2 rows need 2 keys
    with pytest.raises(gpudsl.GraphError, match="kv_heads=4 but the keys"):
        graph.AttentionNode(q, k, v, kv_heads=4)


def _paged(B=2, H=4, Hkv=2, M=1, D=32, P=16, pages=7, mp=3):
    cache_k = rand(pages, P, Hkv * D, seed=3)
    cache_v = rand(pages, P, Hkv * D, seed=4)
    q = graph.InputTensor("q", "float32", [B * H, M, D])
    table = graph.InputTensor("table", "int64", [B, mp])
    lens = graph.InputTensor("lens", "int64", [B])
    return cache_k, cache_v, q, table, lens


def _want(qv, ck, cv, t, L, causal, B, Hkv):
    pages, P, _ = ck.shape
    D = qv.shape[2]
    kv = (pages, P, Hkv, D)
    q4 = qv.reshape(B, -1, qv.shape[1], D)
    return gqa_reference(q4, ck.reshape(kv), cv.reshape(kv), L, causal, t).reshape(qv.shape)


@pytest.mark.parametrize("causal, M", [(False, 1), (True, 3)])
def test_paged_cache_through_the_api_and_a_script(causal, M):
    ck, cv, q, table, lens = _paged(M=M)
    node = graph.AttentionNode(q, ck, cv, causal=causal, block_table=table, seq_lens=lens)
    script = graph.to_script(node)
    assert f"PagedAttentionNode($1, $2, $3, $4, $5, {int(causal)});" in script.script
    for model in (graph.compile(node), graph.compile(script.script, script.constants)):
        qv = rand(8, M, 32, seed=5)
        for t, L in (([[3, 0, 6], [1, 4, 2]], [33, 9]), ([[5, 1, 0], [2, 0, 0]], [40, 3])):
            t, L = np.array(t), np.array(L)
            got = model.evaluate({"q": qv, "table": t, "lens": L})
            np.testing.assert_allclose(got, _want(qv, ck, cv, t, L, causal, 2, 2),
                                       rtol=RTOL, atol=ATOL)


def test_paged_lengths_and_tables_are_checked_before_any_kernel_runs():
    ck, cv, q, table, lens = _paged()
    model = graph.compile(graph.AttentionNode(q, ck, cv, block_table=table, seq_lens=lens))
    qv = rand(8, 1, 32, seed=5)
    good = np.array([[3, 0, 6], [1, 4, 2]])
    for t, L in ((good, [49, 3]), (good, [0, 3]), (np.array([[3, 7, 6], [1, 4, 2]]), [20, 3]),
                 (np.array([[3, 0, 6], [-1, 4, 2]]), [20, 3])):
        with pytest.raises(gpudsl.GraphError, match="PagedAttentionNode: sequence"):
            model.evaluate({"q": qv, "table": t, "lens": np.array(L)})
    # an entry past the length is never read: any value is fine
    got = model.evaluate({"q": qv, "table": np.array([[3, 0, 6], [1, -9, -9]]),
                          "lens": np.array([33, 16])})
    assert np.isfinite(got).all()


@pytest.mark.parametrize("text, what", [
    ("$6 = PagedAttentionNode($1, $2, $3, $4, $5, 2);", "causal must be 0 or 1"),
    ("$6 = PagedAttentionNode($1, $2, $3, $5, $5, 0);", "block table must be int64"),
    ("$6 = PagedAttentionNode($1, $2, $2, $4, $4, 0);", "sequence lengths must be int64"),
])
def test_bad_paged_scripts_are_refused(text, what):
    script = ("$1 = InputTensor(q, float32, [8, 1, 32]);\n"
              "$2 = ConstantTensor(k, float32, [7, 16, 64]);\n"
              "$3 = ConstantTensor(v, float32, [7, 16, 64]);\n"
              "$4 = InputTensor(table, int64, [2, 3]);\n"
              "$5 = InputTensor(lens, int64, [2]);\n" + text + "\nresult = $6;\n")
    with pytest.raises(gpudsl.GraphError, match=what):
        graph.parse(script)
    with pytest.raises(gpudsl.GraphError, match="page size 24"):
        graph.parse(script.replace("[7, 16, 64]", "[7, 24, 64]").replace(text,
                    "$6 = PagedAttentionNode($1, $2, $3, $4, $5, 0);"))
