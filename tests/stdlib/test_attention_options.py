"""Sliding window and softcap (issue 37, Mistral / Gemma 2): ``window`` (with causal:
the row at position ``p`` attends the keys ``p - window < j <= p``) and ``softcap``
(scores ``c * tanh(s / c)``) in the readable algorithm procs (proved, equal to the
float64 reference in the interpreter), the tiled prefill (f32 and halves), the
tensor-core prefill, the split-KV grouped/paged kernel and the tensor-core GQA decode
(proved, equal to the reference on the emulator); tiles and chunks entirely before the
window are skipped, not masked (their values are never read: NaN there changes
nothing); ``gpudsl.ops.attention`` and ``AttentionNode`` take both, and refuse bad
values with a ``gpudsl.Error``."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import graph, ops
from gpudsl.stdlib import attention_gqa_mma as gm
from gpudsl.stdlib import attention_mma as am
from gpudsl.stdlib.attention import (attention_kernel, attention_reference, attention_rows,
                                     attention_tolerance, plan_attention)
from gpudsl.stdlib.attention_paged import gqa_reference, paged_rows, plan_gqa

from .test_attention_paged import make

NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def inputs(h, m, n, d, dt="f32", seed=0, hk=None):
    g = np.random.default_rng(seed + 7 * m + n + d)
    hk = hk or h
    return tuple(g.standard_normal(s, dtype=np.float32).astype(NP[dt])
                 for s in ((h, m, d), (hk, n, d), (hk, n, d)))


def run_plain(p, q, k, v, prefix, softcap=None, target="emulator", **extra):
    out, err = np.zeros(q.shape, q.dtype), np.zeros(1, np.int32)
    args = dict(q=q, k=k, v=v, prefix=np.array([prefix], np.int64),
                scale=np.float32(q.shape[2] ** -0.5), out=out, err=err, **extra)
    if softcap is not None:
        args["cap"] = np.float32(softcap)
    if target is None:
        p.interpret(**args)
    else:
        p.compile(target)(**args)
    assert err[0] == 0
    return out.astype(np.float64)


def run_gqa(p, q, k, v, table, lens, softcap=None, target="emulator", **extra):
    bt, h, m, d = q.shape
    hk = k.shape[2] if table is not None else k.shape[1]
    out, err = np.zeros((bt, hk, h // hk, m, d), q.dtype), np.zeros(1, np.int32)
    args = dict(q=q.reshape(bt, hk, h // hk, m, d), k=k, v=v, lens=lens,
                scale=np.float32(d ** -0.5), out=out, err=err, **extra)
    if table is not None:
        args["table"] = table
    if softcap is not None:
        args["cap"] = np.float32(softcap)
    if target is None:
        p.interpret(**args)
    else:
        p.compile(target)(**args)
    assert err[0] == 0
    return out.reshape(q.shape).astype(np.float64)


def close(got, want, dt):
    atol, rtol = attention_tolerance(dt)
    assert (np.abs(got - want) <= atol + rtol * np.abs(want)).all(), np.abs(got - want).max()


# (causal, window, softcap)
OPTIONS = [(True, 7, None), (False, 0, 2.5), (True, 20, 4.0), (True, 1, None)]


# ---------------------------------------------------------------- the meaning


@pytest.mark.parametrize("causal, window, softcap", OPTIONS)
def test_the_algorithms_are_proved_and_are_the_reference(causal, window, softcap):
    rows = attention_rows(causal, "f32", window, softcap is not None)
    assert rows.check().ok
    q, k, v = inputs(2, 5, 40, 16)
    got = run_plain(rows, q, k, v, 37, softcap, target=None, d=16)
    close(got, attention_reference(q, k, v, causal, 37, None, window or None, softcap), "f32")
    pr = paged_rows(causal, 16, "bf16", window, softcap is not None)
    assert pr.check().ok
    q, k, v, table, ln = make(2, 1, 4, 3, 16, [37, 5], 16, "bf16")
    got = run_gqa(pr, q, k, v, table, ln, softcap, target=None, d=16)
    close(got, gqa_reference(q, k, v, ln, causal, table, None, window or None, softcap), "bf16")


def test_the_options_change_the_result():
    q, k, v = inputs(1, 4, 50, 32)
    plain = attention_reference(q, k, v, True, 50)
    assert not np.allclose(plain, attention_reference(q, k, v, True, 50, None, 10))
    assert not np.allclose(plain, attention_reference(q, k, v, True, 50, None, None, 0.5))
    # a window wider than the keys is no window; a window of 1 is the row's own value
    np.testing.assert_allclose(plain, attention_reference(q, k, v, True, 50, None, 50))
    np.testing.assert_allclose(attention_reference(q, k, v, True, 50, None, 1), v[:, 46:50],
                               rtol=1e-6)


# ---------------------------------------------------------------- the kernels


def _kernels(causal, window, softcap):
    sc = softcap is not None
    yield "tiled f32", attention_kernel(32, causal, 8, "f32", window, sc), "plain", "f32"
    yield "tiled bf16", attention_kernel(64, causal, 4, "bf16", window, sc), "plain", "bf16"
    yield "mma f16", am.attention_mma_kernel(64, causal, "f16", window, sc), "plain", "f16"
    yield "split-KV f32", plan_gqa(32, causal, 4, 3, 16, "f32", "i32", window, sc), "gqa", "f32"
    yield "gqa mma bf16", gm.gqa_mma_kernel(64, causal, 0, "bf16", "i32", window, sc), \
        "gqa", "bf16"


@pytest.mark.parametrize("causal, window, softcap", OPTIONS[:3])
def test_the_kernels_are_proved(causal, window, softcap):
    for name, p, _, _ in _kernels(causal, window, softcap):
        r = p.check()
        assert r.ok, (name, str(r))


@pytest.mark.parametrize("causal, window, softcap", OPTIONS)
def test_the_kernels_equal_the_reference_on_the_emulator(causal, window, softcap):
    for name, p, form, dt in _kernels(causal, window, softcap):
        if form == "plain":
            d = 32 if name == "tiled f32" else 64
            q, k, v = inputs(2, 70, 150, d, dt)
            got = run_plain(p, q, k, v, 133, softcap)
            want = attention_reference(q, k, v, causal, 133, None, window or None, softcap)
            if name.startswith("mma"):
                tol = am.attention_mma_tolerance(q, k, v, causal, 133, None, dt, window or None,
                                                 softcap)
                assert (np.abs(got - want) <= tol).all(), name
            else:
                close(got, want, dt)
            continue
        d, g, m, page = (32, 4, 3, 16) if "split" in name else (64, 8, 1, 0)
        q, k, v, table, ln = make(2, 1, g, m, d, [37, 130], page, dt)
        got = run_gqa(p, q, k, v, table, ln, softcap)
        want = gqa_reference(q, k, v, ln, causal, table, None, window or None, softcap)
        if "mma" in name:
            tol = gm.gqa_mma_tolerance(q, k, v, ln, causal, table, None, window or None,
                                       softcap, dt)
            assert (np.abs(got - want) <= tol).all(), name
        else:
            close(got, want, dt)


def test_tiles_before_the_window_are_skipped_not_masked():
    """Keys 0..127 lie in tiles (32, 64 keys) and chunks before every row's window
    (rows at positions 192..199, window 40: keys from 153): NaN in their values would
    reach a masked tile's sums (0 * NaN); a skipped tile's are never read."""
    for name, p, form, dt in _kernels(True, 40, None):
        if form == "plain":
            d = 32 if name == "tiled f32" else 64
            q, k, v = inputs(1, 8, 200, d, dt)
            want = attention_reference(q, k, v, True, 200, None, 40)
            v[:, :128] = np.nan
            got = run_plain(p, q, k, v, 200)
        else:
            d, g, page = (32, 4, 16) if "split" in name else (64, 8, 0)
            m = 8 if "split" in name else 1
            q, k, v, table, ln = make(1, 1, g, m, d, [200], page, dt)
            want = gqa_reference(q, k, v, ln, True, table, None, 40)
            if page:
                for j in range(128):
                    v[table[0, j // page], j % page] = np.nan
            else:
                v[:, :, :128] = np.nan
            got = run_gqa(p, q, k, v, table, ln)
        assert np.isfinite(got).all(), name
        assert np.abs(got - want).max() < 0.02, name


def test_the_planners_pass_the_options():
    assert plan_attention(2, 64, True, window=8).name == "attention_d64_causal_r2_win8"
    assert am.plan_prefill(100, 128, True, dt="f16", target="cuda", window=8,
                           softcap=True).name == "attention_mma_d128_causal_win8_softcap_f16"
    assert gm.plan_grouped(64, True, 8, 1, 16, "bf16", "i32", 64, True, "cuda").name == \
        "attention_gqa_mma_d64_causal_paged16_win64_softcap_bf16"
    with pytest.raises(ValueError, match="causal"):
        attention_kernel(32, False, 1, "f32", 4)
    with pytest.raises(ValueError, match="head dimension"):
        plan_attention(8, 48, True, window=8)


# ---------------------------------------------------------------- ops and graphs


@pytest.fixture()
def emulator(monkeypatch):
    from gpudsl.stdlib import array_ops as ops_mod

    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")


@pytest.mark.parametrize("h, hk, m, d, dt", [
    (2, 2, 1, 64, "f32"), (2, 2, 9, 32, "f32"), (4, 1, 1, 48, "f16"), (2, 2, 9, 64, "bf16"),
    (8, 2, 1, 64, "f16"), (2, 2, 6, 48, "f32")])
def test_ops_attention_takes_both(emulator, h, hk, m, d, dt):
    for causal, window, softcap in OPTIONS[:3]:
        q, k, v = inputs(h, m, 60, d, dt, hk=hk)
        got = ops.attention(q, k, v, causal=causal, prefix=57, window=window or None,
                            softcap=softcap)
        close(np.asarray(got, np.float64),
              attention_reference(q, k, v, causal, 57, None, window or None, softcap), dt)


def test_ops_attention_paged_takes_both(emulator):
    q, k, v, table, ln = make(2, 2, 4, 1, 64, [37, 90], 16)
    got = ops.attention(q, k, v, causal=True, block_table=table, seq_lens=ln, window=30,
                        softcap=5.0)
    close(got.astype(np.float64), gqa_reference(q, k, v, ln, True, table, None, 30, 5.0), "f32")


@pytest.mark.parametrize("kw, match", [
    (dict(window=4), "causal=True"), (dict(causal=True, window=-2), "negative"),
    (dict(softcap=0.0), "positive"), (dict(softcap=float("inf")), "positive"),
    (dict(softcap="2"), "positive"), (dict(causal=True, window=2.5), "integer")])
def test_ops_attention_refuses_bad_options(kw, match):
    q, k, v = inputs(2, 1, 10, 64)
    with pytest.raises(gpudsl.Error, match=match):
        ops.attention(q, k, v, **kw)


def test_attention_node_takes_both(emulator):
    q, k, v = inputs(8, 1, 40, 64, hk=2)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", q.shape), k, v,
                               prefix=37, causal=True, window=9, softcap=3.0)
    assert node.attrs == {"causal": True, "window": 9, "softcap": 3.0, "prefix": 37}
    got = graph.compile(node).evaluate({"q": q})
    close(np.asarray(got, np.float64), attention_reference(q, k, v, True, 37, None, 9, 3.0),
          "f32")
    with pytest.raises(gpudsl.GraphError, match="causal"):
        graph.AttentionNode(q, k, v, window=9)
    with pytest.raises(gpudsl.GraphError, match="softcap"):
        graph.AttentionNode(q, k, v, softcap=-1.0)


def test_paged_attention_node_takes_both(emulator):
    from .test_attention_paged import make as make_paged

    q, k, v, table, ln = make_paged(2, 1, 4, 1, 32, [37, 20], 16)
    bt, h, m, d = q.shape
    kv = k.reshape(k.shape[0], 16, d)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", [bt * h, m, d]), kv,
                               v.reshape(kv.shape), causal=True, window=12, softcap=2.0,
                               block_table=graph.InputTensor("t", "int64", table.shape),
                               seq_lens=graph.InputTensor("n", "int64", [bt]))
    assert node.op == "PagedAttentionNode"
    assert ", 1, 12, 2.0);" in graph.to_script(node).script
    got = graph.compile(node).evaluate({"q": q.reshape(bt * h, m, d),
                                        "t": table.astype(np.int64), "n": ln.astype(np.int64)})
    want = gqa_reference(q, k, v, ln, True, table, None, 12, 2.0)
    close(np.asarray(got, np.float64).reshape(q.shape), want, "f32")


_SCRIPT = ("$1 = InputTensor(q, float32, [2, 1, 32]);\n"
           "$2 = InputTensor(k, float32, [2, 40, 32]);\n"
           "$3 = AttentionNode($1, $2, $2, 30, {args});\nresult = $3;\n")


def test_scripts_take_the_options_as_optional_trailing_arguments(emulator):
    q, k, _ = inputs(2, 1, 40, 32)
    for args, window, softcap in (("1", None, None), ("1, 8", 8, None), ("1, 8, 2.5", 8, 2.5),
                                  ("0, 0, 3", None, 3.0), ("1, 0, 1e+01", None, 10.0)):
        model = graph.compile(_SCRIPT.format(args=args))
        got = model.evaluate({"q": q, "k": k})
        want = attention_reference(q, k, k, args[0] == "1", 30, None, window, softcap)
        close(np.asarray(got, np.float64), want, "f32")
    for args, match in (("0, 8", "needs causal"), ("1, 8, 0.0", "positive"),
                        ("1, 8, 2.5, [0.5, 1], 1", "extra"), ("1, 2.5", "integer")):
        with pytest.raises(gpudsl.GraphError, match=match) as e:
            graph.parse(_SCRIPT.format(args=args))
        assert e.value.line == 3, args


def test_to_script_refuses_an_attribute_it_cannot_write():
    from gpudsl.graph.graph_nodes import Node

    q = graph.InputTensor("q", "float32", [2, 1, 32])
    k = graph.InputTensor("k", "float32", [2, 40, 32])
    node = Node("AttentionNode", (q, k, k), {"causal": True, "prefix": 30, "dropout": 1})
    with pytest.raises(gpudsl.GraphError, match="dropout"):
        graph.to_script(node)
