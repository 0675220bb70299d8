"""The attention fusion (gpudsl.graph.attention_fusion, issue 27): matmul -> sliced_softmax
-> matmul over a KV cache runs as one split-key attention step, with the meaning of the
nodes kept (entries past the prefix and a mask that is not zero there included): equal
to the same graph run node by node and to numpy; the LLaMA example with 2 layers gives
numpy's tokens with fewer launches per token; patterns that do not hold (a second use,
a mask over the heads, layouts that differ, the cache written between its read and the
group's step) are not fused and still give the node-by-node result."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from dataclasses import replace

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.graph import attention_fusion

from .test_fusion import Launches

ROOT = pathlib.Path(__file__).resolve().parents[2]
ATOL, RTOL = 2e-5, 1e-4


def rand(*shape, seed=0):
    return np.random.default_rng(seed + sum(shape)).standard_normal(shape, dtype=np.float32)


@pytest.fixture
def unfused(monkeypatch):
    """Compile without the attention fusion (the node-by-node run)."""
    def compile_unfused(node):
        with monkeypatch.context() as m:
            m.setattr(attention_fusion, "attention_groups", lambda *a: [])
            return graph.compile(node)
    return compile_unfused


def sliced_reference(q, k, v, prefix, mask, scale):
    """The nodes' meaning in float64: ``q [H, D, 1]``, ``k, v [H, S, D]``."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    s = scale * np.einsum("hsd,hd->hs", k, q[:, :, 0])
    a = s.copy()
    if prefix:
        e = np.exp(s[:, :prefix] - s[:, :prefix].max(-1, keepdims=True))
        a[:, :prefix] = e / e.sum(-1, keepdims=True)
    a = a * mask
    return np.einsum("hs,hsd->hd", a, v)[:, :, None].astype(np.float32)


def decode_graph(h, s, d, layout, scale, mask, prefix_node):
    q = graph.InputTensor("q", "float32", [h, d, 1])
    if layout == "nhd":
        kc = graph.InputTensor("kc", "float32", [s, h * d])
        vc = graph.InputTensor("vc", "float32", [s, h * d])
        keys = kc.reshape([s, h, d]).permute([1, 0, 2])
        values = vc.reshape([s, h, d]).permute([1, 2, 0])
    else:
        keys = graph.InputTensor("kc", "float32", [h, s, d])
        values = graph.InputTensor("vc", "float32", [h, s, d]).permute([0, 2, 1])
    x = (keys @ q).reshape([h, s])
    if scale is not None:
        x = x * graph.ConstantTensor(np.full((1, 1), scale, np.float32))
    pos = graph.InputTensor("pos_end", "int64", [1]) if prefix_node is True else prefix_node
    att = x.sliced_softmax(pos)
    if mask:
        att = att * graph.InputTensor("mask", "float32", [s]).reshape([1, s])
    return values @ att.reshape([h, s, 1])


def feeds(h, s, d, layout, prefix, mask_kind, seed=0):
    q, k, v = rand(h, d, 1, seed=seed), rand(h, s, d, seed=seed + 1), rand(h, s, d,
                                                                          seed=seed + 2)
    g = np.random.default_rng(seed)
    mask = {"ones": np.ones(s), "prefix": (np.arange(s) < prefix) * 1.0,
            "random": g.standard_normal(s) * (g.random(s) < 0.5)}[mask_kind]
    mask = mask.astype(np.float32)
    if layout == "nhd":
        kc, vc = (a.transpose(1, 0, 2).reshape(s, h * d).copy() for a in (k, v))
    else:
        kc, vc = k, v
    return dict(q=q, kc=kc, vc=vc, mask=mask, pos_end=np.array([prefix], np.int64)), \
        (q, k, v, mask)


def fused_names(model):
    return [e.name for e in model.kernels if e.name.startswith("attention_split")]


@pytest.mark.parametrize("layout", ["nhd", "hnd"])
@pytest.mark.parametrize("scale, mask", [(0.125, True), (None, False), (0.3, False)])
@pytest.mark.parametrize("d", [48, 64])
def test_fused_equals_node_by_node_and_numpy(d, scale, mask, layout, unfused):
    h, s = 3, 40
    node = decode_graph(h, s, d, layout, scale, mask, True)
    model, plain = graph.compile(node), unfused(node)
    assert len(fused_names(model)) == 1 and not fused_names(plain)
    assert len(model.kernels) == 1  # the permutes, scores, scale, softmax, mask: one step
    assert len(plain.kernels) == 5 + (scale is not None) + mask - (layout == "hnd")
    assert model.unfused == [] and model.unit.proved
    for prefix, kind in ((1, "prefix"), (17, "random"), (40, "ones"), (0, "random")):
        inputs, (q, k, v, mk) = feeds(h, s, d, layout, prefix, kind, seed=prefix)
        if not mask:
            inputs.pop("mask")
            mk = np.ones(s, np.float32)
        want = sliced_reference(q, k, v, prefix, mk, 1.0 if scale is None else scale)
        got = model.evaluate(inputs)
        np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * max(1, np.abs(want).max()))
        np.testing.assert_allclose(got, plain.evaluate(inputs), rtol=RTOL,
                                   atol=ATOL * max(1, np.abs(want).max()))


def test_prefix_as_an_integer():
    node = decode_graph(2, 24, 64, "nhd", 0.125, True, 17)
    model = graph.compile(node)
    assert len(fused_names(model)) == 1
    inputs, (q, k, v, mk) = feeds(2, 24, 64, "nhd", 17, "random")
    inputs.pop("pos_end")
    np.testing.assert_allclose(model.evaluate(inputs), sliced_reference(q, k, v, 17, mk, 0.125),
                               rtol=RTOL, atol=1e-4)


def _not_fused(node, inputs, want, unfused):
    model = graph.compile(node)
    assert not fused_names(model)
    np.testing.assert_allclose(model.evaluate(inputs), want, rtol=RTOL, atol=1e-4)
    np.testing.assert_allclose(model.evaluate(inputs), unfused(node).evaluate(inputs),
                               rtol=RTOL, atol=1e-5)


def test_not_fused_when_the_pattern_does_not_hold(unfused):
    h, s, d = 2, 16, 64
    inputs, (q, k, v, mk) = feeds(h, s, d, "nhd", 9, "random")
    kc = graph.InputTensor("kc", "float32", [s, h * d])
    vc = graph.InputTensor("vc", "float32", [s, h * d])
    qn = graph.InputTensor("q", "float32", [h, d, 1])
    keys = kc.reshape([s, h, d]).permute([1, 0, 2])
    pos = graph.InputTensor("pos_end", "int64", [1])
    scores = (keys @ qn).reshape([h, s])
    att = scores.sliced_softmax(pos)
    # the scores have a second use
    out = vc.reshape([s, h, d]).permute([1, 2, 0]) @ (att + scores).reshape([h, s, 1])
    sc = np.einsum("hsd,hd->hs", k.astype(np.float64), q[:, :, 0])
    e = np.exp(sc[:, :9] - sc[:, :9].max(-1, keepdims=True))
    att_np = sc.copy()
    att_np[:, :9] = e / e.sum(-1, keepdims=True)
    want = np.einsum("hs,hsd->hd", att_np + sc, v)[:, :, None]
    inputs.pop("mask")
    _not_fused(out, inputs, want, unfused)
    # keys in [N, H, D] and values in [H, N, D]
    vals = graph.InputTensor("vc", "float32", [h, s, d]).permute([0, 2, 1])
    out = vals @ att.reshape([h, s, 1])
    inputs2 = dict(inputs, vc=v)
    want = np.einsum("hs,hsd->hd", att_np, v)[:, :, None]
    _not_fused(out, inputs2, want, unfused)


def test_not_fused_across_a_write_of_the_cache(unfused):
    # the cache is written after the scores read it and before the weighted values: the
    # group (run at its last node) would read the new keys
    h, s, d = 2, 16, 64
    script = (
        f"$1 = InputTensor(q, float32, [{h}, {d}, 1]);\n"
        f"$2 = BufferTensor(float32, [{s}, {h * d}]);\n"
        f"$3 = ReshapeNode($2, [{s}, {h}, {d}]);\n"
        "$4 = PermuteNode($3, [1, 0, 2]);\n"
        "$5 = MatMulNode($4, $1);\n"
        f"$6 = ReshapeNode($5, [{h}, {s}]);\n"
        f"$7 = SlicedSoftmaxNode($6, {s});\n"
        f"$8 = InputTensor(row, float32, [1, {h * d}]);\n"
        "$9 = InputTensor(pos, int64, [1]);\n"
        "$10 = InputTensor(pos_end, int64, [1]);\n"
        "$11 = ReplaceSliceNode($2, $8, $9, $10);\n"
        f"$12 = ReshapeNode($11, [{s}, {h}, {d}]);\n"
        "$13 = PermuteNode($12, [1, 2, 0]);\n"
        f"$14 = ReshapeNode($7, [{h}, {s}, 1]);\n"
        "$15 = MatMulNode($13, $14);\n"
        "result = $15;\n")
    model = graph.compile(script)
    assert not fused_names(model)
    q, row = rand(h, d, 1), rand(1, h * d, seed=5)
    inputs = dict(q=q, row=row, pos=np.array([3], np.int64), pos_end=np.array([4], np.int64))
    got = model.evaluate(inputs)  # the buffer starts as zeros: uniform weights
    new = np.zeros((s, h * d), np.float32)
    new[3] = row[0]
    vt = new.reshape(s, h, d).transpose(1, 0, 2)
    want = np.einsum("s,hsd->hd", np.full(s, 1.0 / s), vt)[:, :, None]
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=1e-6)


# ------------------------------------------------------------------ the LLaMA example


@pytest.fixture(scope="module")
def llama():
    spec = importlib.util.spec_from_file_location("llama_example_fusion",
                                                  ROOT / "examples/llama.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod
    spec.loader.exec_module(mod)
    return mod


def test_llama_runs_attention_as_one_step(llama, unfused, monkeypatch):
    cfg = replace(llama.STORIES15M, n_layers=2, vocab_size=512)
    w = llama.random_weights(cfg, seed=3)
    node = llama.build_graph(cfg, w)
    model, plain = graph.compile(node), unfused(node)
    # per layer: the two cache permutes, scores, scale, softmax, mask and weighted values
    # (7 steps) become one
    assert len(fused_names(model)) == cfg.n_layers
    # 256 cache rows: one block per head (8 warps of 32 keys), one device kernel
    assert fused_names(model)[0] == "attention_split_d48_nhd_sliced_c32_one8"
    assert (len(plain.kernels), len(model.kernels)) == (42, 30)
    counts = {}
    for name, m in (("plain", plain), ("fused", model)):
        launches = Launches(monkeypatch)
        m.evaluate(llama.step_inputs(cfg, w, 1, 0))
        counts[name] = (len(launches.procs), launches.device)
        m.reset_buffers()
        monkeypatch.undo()
    print("launches per token (steps, device kernels): node by node", counts["plain"],
          "fused", counts["fused"])
    assert counts == {"plain": (42, 42), "fused": (30, 30)}
    tokens, logits = llama.generate(llama.gpudsl_stepper(cfg, w, model), 1, 5)
    ref_tokens, ref_logits = llama.generate(llama.NumpyLlama(cfg, w), 1, 5)
    assert tokens == ref_tokens
    for got, want in zip(logits, ref_logits):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4 * np.abs(want).max())
