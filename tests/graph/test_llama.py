"""Two layers of the LLaMA-shaped model of examples/llama.py (issue 17's acceptance): at
the stories15M sizes (dim 288, 6 heads, hidden 768, vocabulary 32000, sequence 256)
but 2 layers, a few greedy tokens on the emulator equal to the numpy implementation
of the same model, argmax agreeing; the KV cache lives in the model's buffers."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from dataclasses import replace

import numpy as np
import pytest

from gpudsl import graph

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def llama():
    spec = importlib.util.spec_from_file_location("llama_example", ROOT / "examples/llama.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_two_layers_equal_numpy_and_keep_their_cache(llama):
    cfg = replace(llama.STORIES15M, n_layers=2)
    assert (cfg.dim, cfg.n_heads, cfg.hidden_dim, cfg.vocab_size, cfg.seq_len) == \
        (288, 6, 768, 32000, 256)
    w = llama.random_weights(cfg, seed=1)
    node = llama.build_graph(cfg, w)
    script = graph.to_script(node).script
    for name in ("RMSNormNode", "ComplexHadamardProductNode", "SlicedSoftmaxNode",
                 "ReplaceSliceNode", "BufferTensor"):
        assert name in script
    model = graph.compile(node)
    n = 4
    tokens, logits = llama.generate(llama.gpudsl_stepper(cfg, w, model), 1, n)
    ref = llama.NumpyLlama(cfg, w)
    ref_tokens, ref_logits = llama.generate(ref, 1, n)
    for got, want in zip(logits, ref_logits):
        assert got.shape == (cfg.vocab_size,)
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
        assert got.argmax() == want.argmax()
    assert tokens == ref_tokens
    # the caches persisted across the evaluations: the n rows written, zeros after them
    caches = [b for b in model.buffers]
    assert len(caches) == 2 * cfg.n_layers
    for want in list(ref.key_cache) + list(ref.value_cache):
        assert any(np.allclose(c[:n], want[:n], rtol=1e-4, atol=1e-4) and not c[n:].any()
                   for c in caches)
    # a position outside the cache is refused before anything is written
    before = [c.copy() for c in caches]
    bad = llama.step_inputs(cfg, w, 3, 0)
    bad["pos"], bad["pos_end"] = np.array([256], np.int64), np.array([257], np.int64)
    with pytest.raises(graph.GraphError):
        model.evaluate(bad)
    assert all((a == b).all() for a, b in zip(before, model.buffers))


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_two_layers_with_half_weights_give_numpys_tokens(llama, dtype):
    # the weights rounded to the half type and the graph in it (inputs, activations,
    # the KV cache); the numpy reference in float32 on the same rounded weights: the same
    # argmax tokens, logits within the activations' roundings
    cfg = replace(llama.STORIES15M, n_layers=2)
    w = llama.in_dtype(llama.random_weights(cfg, seed=1), dtype)
    model = graph.compile(llama.build_graph(cfg, w))
    assert all(b.dtype.name == dtype for b in model.buffers)
    names = [k.name for k in model.kernels]
    assert any(n.startswith("attention_split_d48_nhd_sliced") and n.endswith(
        {"float16": "_f16", "bfloat16": "_bf16"}[dtype]) for n in names)
    # per layer: rms_norm, q/k/v, two rotary products, two cache writes, the fused
    # attention, wo, the residual, rms_norm, w1, silu, w3, mul, w2, the residual (18;
    # f32 fuses 4 of them into matmul epilogues); then rms_norm and the classifier
    assert len(model.kernels) == 18 * cfg.n_layers + 2
    n = 4
    tokens, logits = llama.generate(llama.gpudsl_stepper(cfg, w, model), 1, n)
    ref_tokens, ref_logits = llama.generate(llama.NumpyLlama(cfg, llama.widened(w)), 1, n)
    tol = {"float16": 2e-2, "bfloat16": 1e-1}[dtype]
    for got, want in zip(logits, ref_logits):
        assert got.dtype.name == dtype and got.shape == (cfg.vocab_size,)
        err = np.abs(got.astype(np.float32) - want).max()
        assert err <= tol * np.abs(want).max(), err
    assert tokens == ref_tokens


def test_grouped_query_heads_over_a_paged_cache_equal_numpy(llama):
    # issue 37: 6 query heads over 2 KV heads, pages of 16 rows in a shuffled order; the
    # decode attention one PagedAttentionNode per layer, reading the cache through
    # the block table
    cfg = replace(llama.STORIES15M, n_layers=2, vocab_size=512, seq_len=64, n_kv_heads=2,
                  page_size=16)
    w = llama.random_weights(cfg, seed=1)
    assert w["wk"].shape == (2, 288, 96)
    node = llama.build_graph(cfg, w)
    script = graph.to_script(node).script
    assert script.count("PagedAttentionNode(") == 2 and "SlicedSoftmaxNode" not in script
    model = graph.compile(node)
    n = 18  # past the first page
    tokens, logits = llama.generate(llama.gpudsl_stepper(cfg, w, model), 1, n)
    ref = llama.NumpyLlama(cfg, w)
    ref_tokens, ref_logits = llama.generate(ref, 1, n)
    for got, want in zip(logits, ref_logits):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
    assert tokens == ref_tokens
    # position p's rows are in page table[p // 16], row p % 16; the spare page is unused
    table = llama.block_table(cfg)[0]
    rows = [table[p // 16] * 16 + p % 16 for p in range(n)]
    spare = sorted(set(range(cfg.pages)) - set(table.tolist()))[0]
    for want in list(ref.key_cache) + list(ref.value_cache):
        assert any(np.allclose(c[rows], want[:n], rtol=1e-4, atol=1e-4)
                   and not c[spare * 16:spare * 16 + 16].any() for c in model.buffers)
    bad = llama.step_inputs(cfg, w, 3, n)
    bad["block_table"] = bad["block_table"].copy()
    bad["block_table"][0, 1] = cfg.pages  # a page outside the pool
    with pytest.raises(graph.GraphError, match="PagedAttentionNode"):
        model.evaluate(bad)
