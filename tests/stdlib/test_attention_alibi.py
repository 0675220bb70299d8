"""ALiBi (issue 37; FlashAttention's ``alibi_slopes``): the score of key ``j`` for the
query row at position ``p`` (``i + L - M``) less ``slope_h * |p - j|``, after the
softcap, causal or not, with the window.  In the readable algorithm procs (proved, equal
to the float64 reference in the interpreter), the tiled prefill (f32 and halves), the
tensor-core prefill, the split-KV grouped/paged kernel and the tensor-core GQA decode
(proved, equal to the reference on the emulator); ``gpudsl.ops.attention`` and
``AttentionNode`` take the slopes; a kernel that cannot take them is never chosen (a
``ValueError`` where asked for directly).  Also: the split-KV combine is one text."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import graph, ops
from gpudsl.stdlib import attention_gqa_mma as gm
from gpudsl.stdlib import attention_mma as am
from gpudsl.stdlib import attention_paged as ap
from gpudsl.stdlib.attention import (attention_kernel, attention_reference, attention_rows,
                                     plan_attention)
from gpudsl.stdlib.attention_paged import gqa_reference, paged_rows, plan_gqa

from .test_attention_options import close, inputs, run_gqa, run_plain
from .test_attention_paged import make

SLOPES = (2.0 ** -np.arange(1, 9)).astype(np.float32)  # 8 heads' geometric slopes


def _brute(q, k, v, causal, L, slopes, window=None, softcap=None):
    """FlashAttention's definition written out key by key (float64)."""
    q, k, v = (np.asarray(a, np.float64) for a in (q, k, v))
    h, m, d = q.shape
    g = h // k.shape[0]
    out = np.zeros(q.shape)
    for hh in range(h):
        for i in range(m):
            p = i + L - m
            keys = [j for j in range(L) if (not causal or j <= p) and
                    (not window or j > p - window)]
            s = np.array([q[hh, i] @ k[hh // g, j] / np.sqrt(d) for j in keys])
            if softcap:
                s = softcap * np.tanh(s / softcap)
            s -= np.array([slopes[hh] * abs(p - j) for j in keys])
            w = np.exp(s - s.max())
            out[hh, i] = (w / w.sum()) @ v[hh // g, keys]
    return out


@pytest.mark.parametrize("causal, window, softcap", [(False, None, None), (True, None, 3.0),
                                                     (True, 5, None)])
def test_the_reference_is_flash_attentions_definition(causal, window, softcap):
    q, k, v = inputs(4, 6, 20, 16, hk=2)
    want = _brute(q, k, v, causal, 17, SLOPES[:4], window, softcap)
    got = attention_reference(q, k, v, causal, 17, None, window, softcap, SLOPES[:4])
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    assert not np.allclose(got, attention_reference(q, k, v, causal, 17, None, window, softcap))
    # zero slopes: no bias
    np.testing.assert_allclose(attention_reference(q, k, v, causal, 17, None, window, softcap,
                                                   np.zeros(4)),
                               attention_reference(q, k, v, causal, 17, None, window, softcap))


# (causal, window, softcap)
OPTIONS = [(False, 0, None), (True, 0, 2.5), (True, 9, None)]


@pytest.mark.parametrize("causal, window, softcap", OPTIONS)
def test_the_algorithms_are_proved_and_are_the_reference(causal, window, softcap):
    rows = attention_rows(causal, "f32", window, softcap is not None, True)
    assert rows.name.endswith("_alibi")
    assert rows.check().ok
    q, k, v = inputs(2, 5, 40, 16)
    got = run_plain(rows, q, k, v, 37, softcap, target=None, d=16, slopes=SLOPES[:2])
    close(got, attention_reference(q, k, v, causal, 37, None, window or None, softcap,
                                   SLOPES[:2]), "f32")
    pr = paged_rows(causal, 16, "bf16", window, softcap is not None, True)
    assert pr.check().ok
    q, k, v, table, ln = make(2, 1, 4, 3, 16, [37, 5], 16, "bf16")
    got = run_gqa(pr, q, k, v, table, ln, softcap, target=None, d=16,
                  slopes=SLOPES[:4].reshape(1, 4))
    close(got, gqa_reference(q, k, v, ln, causal, table, None, window or None, softcap,
                             SLOPES[:4]), "bf16")


def _kernels(causal, window, softcap):
    sc = softcap is not None
    yield "tiled f32", attention_kernel(32, causal, 8, "f32", window, sc, True), "plain", "f32"
    yield "tiled bf16", attention_kernel(64, causal, 4, "bf16", window, sc, True), "plain", \
        "bf16"
    yield "mma f16", am.attention_mma_kernel(64, causal, "f16", window, sc, True), "plain", "f16"
    yield "split-KV f32", plan_gqa(32, causal, 4, 3, 16, "f32", "i32", window, sc, True), \
        "gqa", "f32"
    yield "gqa mma bf16", gm.gqa_mma_kernel(64, causal, 0, "bf16", "i32", window, sc, True), \
        "gqa", "bf16"


@pytest.mark.parametrize("causal, window, softcap", OPTIONS[1:])
def test_the_kernels_are_proved(causal, window, softcap):
    for name, p, _, _ in _kernels(causal, window, softcap):
        assert "_alibi" in p.name, name
        r = p.check()
        assert r.ok, (name, str(r))


@pytest.mark.parametrize("causal, window, softcap", OPTIONS)
def test_the_kernels_equal_the_reference_on_the_emulator(causal, window, softcap):
    for name, p, form, dt in _kernels(causal, window, softcap):
        if form == "plain":
            d = 32 if name == "tiled f32" else 64
            q, k, v = inputs(2, 70, 150, d, dt)
            got = run_plain(p, q, k, v, 133, softcap, slopes=SLOPES[:2])
            args = (causal, 133, None, window or None, softcap)
            want = attention_reference(q, k, v, *args, SLOPES[:2])
            if name.startswith("mma"):
                tol = am.attention_mma_tolerance(q, k, v, *args[:3], dt, *args[3:],
                                                 SLOPES[:2])
                assert (np.abs(got - want) <= tol).all(), name
            else:
                close(got, want, dt)
            continue
        d, g, m, page = (32, 4, 3, 16) if "split" in name else (64, 8, 1, 0)
        q, k, v, table, ln = make(2, 1, g, m, d, [37, 130], page, dt)
        got = run_gqa(p, q, k, v, table, ln, softcap, slopes=SLOPES[:g].reshape(1, g))
        args = (ln, causal, table, None, window or None, softcap)
        want = gqa_reference(q, k, v, *args, SLOPES[:g])
        if "mma" in name:
            tol = gm.gqa_mma_tolerance(q, k, v, *args, dt, SLOPES[:g])
            assert (np.abs(got - want) <= tol).all(), name
        else:
            close(got, want, dt)


def test_the_planners_pass_alibi_and_refuse_where_they_cannot():
    assert plan_attention(2, 64, True, alibi=True).name == "attention_d64_causal_r2_alibi"
    assert am.plan_prefill(100, 128, False, dt="f16", target="cuda", alibi=True).name == \
        "attention_mma_d128_alibi_f16"
    assert gm.plan_grouped(64, True, 8, 1, 16, "bf16", "i32", 0, False, "cuda", True).name \
        == "attention_gqa_mma_d64_causal_paged16_alibi_bf16"
    with pytest.raises(ValueError, match="alibi_slopes"):
        plan_attention(8, 48, True, alibi=True)  # the tiled kernel takes no D = 48
    with pytest.raises(ValueError, match="alibi_slopes"):
        plan_attention(8, 64, True, layout="nhd", alibi=True)


# ---------------------------------------------------------------- ops and graphs


@pytest.fixture()
def emulator(monkeypatch):
    from gpudsl.stdlib import array_ops as ops_mod

    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")


@pytest.mark.parametrize("h, hk, m, d, dt", [
    (2, 2, 1, 64, "f32"), (2, 2, 9, 32, "f32"), (4, 1, 1, 48, "f16"), (2, 2, 9, 64, "bf16"),
    (8, 2, 1, 64, "f16"), (2, 2, 6, 48, "f32")])
def test_ops_attention_takes_alibi(emulator, h, hk, m, d, dt):
    for causal, window, softcap in OPTIONS:
        q, k, v = inputs(h, m, 60, d, dt, hk=hk)
        got = ops.attention(q, k, v, causal=causal, prefix=57, window=window or None,
                            softcap=softcap, alibi_slopes=SLOPES[:h])
        close(np.asarray(got, np.float64), attention_reference(
            q, k, v, causal, 57, None, window or None, softcap, SLOPES[:h]), dt)


def test_ops_attention_paged_and_batched_take_alibi(emulator):
    q, k, v, table, ln = make(2, 2, 4, 1, 64, [37, 90], 16)
    got = ops.attention(q, k, v, causal=True, block_table=table, seq_lens=ln, window=30,
                        alibi_slopes=list(SLOPES))  # 2 KV heads x 4
    close(got.astype(np.float64), gqa_reference(q, k, v, ln, True, table, None, 30, None,
                                                SLOPES), "f32")
    q, k, v, _, ln = make(2, 2, 2, 3, 32, [37, 20], 0)
    got = ops.attention(q, k, v, seq_lens=ln, alibi_slopes=SLOPES[:4])
    close(got.astype(np.float64), gqa_reference(q, k, v, ln, False, None, None, None, None,
                                                SLOPES[:4]), "f32")


@pytest.mark.parametrize("slopes, match", [
    (SLOPES[:3], r"shape \(3,\), expected \(2,\)"), (SLOPES[:2].astype(np.float64), "float32"),
    (SLOPES[:2].reshape(1, 2), "alibi_slopes"), (["a", 1.0], "numbers"), (0.5, "array")])
def test_ops_attention_refuses_bad_slopes(slopes, match):
    q, k, v = inputs(2, 1, 10, 64)
    with pytest.raises(gpudsl.Error, match=match):
        ops.attention(q, k, v, alibi_slopes=slopes)


def test_ops_attention_refuses_slopes_elsewhere_than_q():
    """Slopes on a device for host q (or the reverse) would be read through a pointer
    of the other memory: refused before any kernel runs."""
    class OnDevice:  # a float32 [2] array that says it lives on a CUDA device
        shape, dtype = (2,), np.dtype(np.float32)
        __cuda_array_interface__ = {}

    q, k, v = inputs(2, 1, 10, 64)
    with pytest.raises(gpudsl.Error, match="where q does"):
        ops.attention(q, k, v, alibi_slopes=OnDevice())


def test_attention_node_takes_alibi(emulator):
    q, k, v = inputs(8, 1, 40, 64, hk=2)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", q.shape), k, v,
                               prefix=37, causal=True, window=9, alibi_slopes=SLOPES)
    assert node.attrs["alibi"] == tuple(float(x) for x in SLOPES)
    text = graph.to_script(node).script
    assert "AttentionNode($1, $2, $3, 37, 1, 9, 0, [0.5, 0.25," in text, text
    got = graph.compile(node).evaluate({"q": q})
    close(np.asarray(got, np.float64), attention_reference(q, k, v, True, 37, None, 9, None,
                                                           SLOPES), "f32")
    with pytest.raises(gpudsl.GraphError, match="8 finite slopes"):
        graph.AttentionNode(q, k, v, alibi_slopes=SLOPES[:3])
    with pytest.raises(gpudsl.GraphError, match="finite"):
        graph.AttentionNode(q, k, v, alibi_slopes=[np.inf] * 8)


def test_paged_attention_node_takes_alibi(emulator):
    q, k, v, table, ln = make(2, 1, 4, 1, 32, [37, 20], 16)
    bt, h, m, d = q.shape
    kv = k.reshape(k.shape[0], 16, d)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", [bt * h, m, d]), kv,
                               v.reshape(kv.shape), causal=True, alibi_slopes=SLOPES[:4],
                               block_table=graph.InputTensor("t", "int64", table.shape),
                               seq_lens=graph.InputTensor("n", "int64", [bt]))
    assert ", 1, 0, 0, [0.5, 0.25, 0.125, 0.0625]);" in graph.to_script(node).script
    got = graph.compile(node).evaluate({"q": q.reshape(bt * h, m, d),
                                        "t": table.astype(np.int64), "n": ln.astype(np.int64)})
    want = gqa_reference(q, k, v, ln, True, table, None, None, None, SLOPES[:4])
    close(np.asarray(got, np.float64).reshape(q.shape), want, "f32")


def test_prefill_node_takes_alibi(emulator):
    q, k, v = inputs(2, 9, 40, 32)
    node = graph.AttentionNode(graph.InputTensor("q", "float32", q.shape), k, v,
                               causal=True, softcap=4.0, alibi_slopes=[0.3, 0.1])
    got = graph.compile(node).evaluate({"q": q})
    close(np.asarray(got, np.float64), attention_reference(q, k, v, True, 40, None, None, 4.0,
                                                           [0.3, 0.1]), "f32")


_SCRIPT = ("$1 = InputTensor(q, float32, [2, 1, 32]);\n"
           "$2 = InputTensor(k, float32, [2, 40, 32]);\n"
           "$3 = AttentionNode($1, $2, $2, 30, {args});\nresult = $3;\n")


def test_scripts_take_the_slopes_as_an_optional_trailing_list(emulator):
    q, k, _ = inputs(2, 1, 40, 32)
    for args, window, softcap in (("0, 0, 0, [0.5, 0.25]", None, None),
                                  ("1, 8, 2.5, [1, 2e-1]", 8, 2.5)):
        slopes = [float(x) for x in args[args.index("[") + 1:-1].split(",")]
        got = graph.compile(_SCRIPT.format(args=args)).evaluate({"q": q, "k": k})
        want = attention_reference(q, k, k, args[0] == "1", 30, None, window, softcap, slopes)
        close(np.asarray(got, np.float64), want, "f32")
    for args, match in (("1, 0, 0, [0.5]", "2 finite slopes"),
                        ("1, 0, 0, 0.5", "list of numbers"),
                        ("1, 0, 0, [0.5, x]", "finite number"),
                        ("1, 0, 0, [0.5, 1e999]", "finite")):
        with pytest.raises(gpudsl.GraphError, match=match) as e:
            graph.parse(_SCRIPT.format(args=args))
        assert e.value.line == 3, args


def test_the_split_kv_combine_is_one_text():
    assert gm.combine_text is ap.combine_text
    text = gm.kernel_text(64, True, 16, "f16")
    assert text.count("wp = exp(pm[b, kh, gg, i, p] - mx)") == 1
    assert ap.paged_text(64, True, 16, "f32").count("wp = exp(pm[b, kh, gg, i, p] - mx)") == 1


# ---------------------------------------------------------------- machine code


def _sass(p, arch):
    try:
        from gpudsl.runtime.nvrtc import compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - environments without NVRTC
        pytest.skip(f"NVRTC not available: {e}")
    from gpudsl.perf.sass import have_disassembler

    if not have_disassembler():
        pytest.skip("no nvdisasm")
    return p.compile("cuda", check=False).sass(arch).kernels


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_builds_the_alibi_kernels_without_spills(arch):
    """The tensor-core prefill and GQA decode keep both products on HMMA with the bias;
    the tiled prefill and the split-KV kernel compile without spills too."""
    prefill = _sass(am.attention_mma_kernel(128, True, "f16", 0, False, True), arch)[0]
    decode = _sass(gm.gqa_mma_kernel(128, True, 16, "bf16", "i32", 0, False, True), arch)[0]
    for ks, hmma in ((prefill, 128), (decode, 128 // 16 * 4)):
        assert ks.spill_bytes == 0 and ks.registers <= 255, ks.name
        assert max(f.count("HMMA") for f in ks.figures) == hmma, ks.name
    for p in (attention_kernel(64, True, 4, "bf16", 0, True, True),
              plan_gqa(128, False, 4, 1, 16, "f32", "i32", 0, False, True)):
        for ks in _sass(p, arch):
            assert ks.spill_bytes == 0, (p.name, ks.name)


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_on_the_gpu_through_ops(dt):
    """On CUDA: the tensor-core prefill and GQA decode with ALiBi (and the window),
    within their stated bounds of the float64 reference."""
    for h, hk, m, n, prefix, causal, window in ((4, 4, 300, 700, 650, True, 100),
                                                (4, 4, 200, 200, 200, False, 0),
                                                (8, 2, 1, 1000, 901, True, 0)):
        q, k, v = inputs(h, m, n, 128, dt, hk=hk)
        got = ops.attention(q, k, v, causal=causal, prefix=prefix, window=window or None,
                            alibi_slopes=SLOPES[:h])
        args = (causal, prefix, None, window or None, None)
        want = attention_reference(q, k, v, *args, SLOPES[:h])
        tol = am.attention_mma_tolerance(q, k, v, *args[:3], dt, *args[3:], SLOPES[:h])
        assert (np.abs(np.asarray(got, np.float64) - want) <= tol).all(), (h, m, n)
