"""Grouped-query attention over a contiguous or paged KV cache with a length per
sequence (gpudsl.stdlib.attention_paged, issue 37).  check() proves every kernel the
planner picks (head dimensions, causal or not, contiguous and paged, f32 and halves)
for all sizes and all table and length contents; the racy twins (no barrier after the
staged chunk, the partials of two chunks in one slot, an unclamped page number, a
lane-dependent skip around the warp sum) are refused with the reason; the kernels
equal the float64 reference (``gqa_reference``, per sequence ``attention_reference``)
within ``attention_tolerance`` in the interpreter with the race detector and on the
emulator over decode and prefill, causal or not, GQA ratios 1 / 4 / 8, paged and
contiguous, odd sequence lengths; a bad table or length sets the fault flag and reads
nothing outside the cache; ``gpudsl.ops.attention`` takes the forms and refuses bad
arguments; NVRTC compiles the decode kernels for sm_80 / sm_90 without spills."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gpudsl import ops
from gpudsl.stdlib.attention import attention_reference, attention_tolerance
from gpudsl.stdlib.attention_paged import (HEAD_DIMS, gqa_reference, paged_kernel,
                                           paged_rows, paged_text, plan_gqa)
from gpudsl.stdlib.common import make_proc

NP = {"f32": np.float32, "f16": np.float16, "bf16": ml_dtypes.bfloat16}


def make(bt, hk, g, m, d, lens, page=0, dt="f32", seed=0):
    """Inputs: q [B, H, M, D]; k, v contiguous [B, Hkv, N, D] or paged [pages, P, Hkv,
    D] with a shuffled table (one spare page per sequence, two unused pages)."""
    rng = np.random.default_rng(seed + 97 * g + 13 * m + d + page)
    f = lambda s: rng.standard_normal(s, dtype=np.float32).astype(NP[dt])  # noqa: E731
    q = f((bt, hk * g, m, d))
    if page:
        mp = max(-(-L // page) for L in lens) + 1
        pages = bt * mp + 2
        table = rng.permutation(pages)[:bt * mp].reshape(bt, mp).astype(np.int32)
        k, v = f((pages, page, hk, d)), f((pages, page, hk, d))
    else:
        table = None
        k, v = f((bt, hk, max(lens) + 3, d)), f((bt, hk, max(lens) + 3, d))
    return q, k, v, table, np.array(lens, np.int32)


def run(p, q, k, v, table, lens, target=None, **extra):
    bt, h, m, d = q.shape
    hk = k.shape[2] if table is not None else k.shape[1]
    out, err = np.zeros((bt, hk, h // hk, m, d), q.dtype), np.zeros(1, np.int32)
    args = dict(q=q.reshape(bt, hk, h // hk, m, d), k=k, v=v, lens=lens,
                scale=np.float32(1 / np.sqrt(d)), out=out, err=err)
    if table is not None:
        args["table"] = table
    if target is None:
        p.interpret(**args, **extra)
    else:
        p.compile(target)(**args)
    return out.reshape(q.shape), int(err[0])


def close(got, q, k, v, table, lens, causal, dt="f32"):
    want = gqa_reference(q, k, v, lens, causal, table)
    atol, rtol = attention_tolerance(dt)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


# ------------------------------------------------------------------ proofs

PLANS = [(g, m) for g in (1, 2, 4, 8) for m in (1, 2, 5)]


@pytest.mark.parametrize("page", [0, 16, 256])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", HEAD_DIMS)
def test_proved_for_all_sizes(d, causal, page):
    for p in {plan_gqa(d, causal, g, m, page) for g, m in PLANS}:
        assert p.check().ok, p.name


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("page", [0, 32, 128])
def test_half_kernels_are_proved(page, dt):
    for causal in (False, True):
        for g, m in ((1, 1), (8, 1), (1, 5)):
            assert plan_gqa(128, causal, g, m, page, dt).check().ok


def test_int64_table_kernels_are_proved():
    # the graph's (int64 tables and lengths) and the one-sequence prefix form's
    for causal in (False, True):
        for page in (0, 64):
            for g, m in ((1, 1), (4, 1), (2, 5)):
                assert plan_gqa(48, causal, g, m, page, "bf16", "i64").check().ok


def test_the_plan_shares_the_chunk_over_the_group():
    # a small group's decode splits the chunk's keys over 4 warps
    assert plan_gqa(64, False, 1, 1).name == "attention_gqa_d64_c32_w1x1x4"
    assert plan_gqa(64, False, 2, 1).name == "attention_gqa_d64_c32_w2x1x2"
    assert plan_gqa(64, False, 4, 1).name == "attention_gqa_d64_c32_w4x1"
    assert plan_gqa(64, True, 8, 1, 16).name == "attention_gqa_d64_causal_paged16_c32_w8x1"
    assert plan_gqa(64, True, 1, 7, 0, "bf16").name == "attention_gqa_d64_causal_c32_w1x4_bf16"
    assert plan_gqa(64, True, 2, 7).name == "attention_gqa_d64_causal_c32_w2x2"
    with pytest.raises(ValueError, match="page size"):
        paged_kernel(64, False, 24)
    with pytest.raises(ValueError, match="divide the chunk"):
        paged_kernel(64, False, 0, "f32", 32, 8, 2)


# ------------------------------------------------------------------ twins


def _text(**kw):
    return str(make_proc("bad", paged_text(**kw))).replace("@proc\n", "")


@pytest.mark.parametrize("page", [0, 16])
def test_without_the_barrier_after_the_staged_chunk_is_a_race(page):
    text = _text(d=32, causal=True, page=page, wg=4)
    marker = "\n" + " " * 20 + "sync()\n"
    assert text.count(marker) == 1
    report = make_proc("bad", text.replace(marker, "\n")).check()
    assert not report.ok
    assert any(dg.kind == "race" and dg.witness["array"] in ("ks", "vs")
               for dg in report.diagnostics), report


@pytest.mark.parametrize("page", [0, 16])
def test_partials_of_two_chunks_in_one_slot_is_a_race(page):
    text = _text(d=32, page=page, wg=4)
    old = "pm[b, kh, 4 * a + w % 4, 1 * it + w // 4, sb] = mr"
    assert text.count(old) == 1
    report = make_proc("bad", text.replace(old, old.replace(", sb]", ", 0]"))).check()
    assert not report.ok
    assert any(dg.kind == "race" and dg.witness["array"] == "pm"
               for dg in report.diagnostics), report


def test_key_warps_partials_in_one_slot_is_a_race():
    text = _text(d=32, page=16, wk=4)
    old = "pm[b, kh, 1 * a + w % 1, 1 * it + w % 1 // 1, 4 * sb + w // 1] = mr"
    assert text.count(old) == 1
    report = make_proc("bad", text.replace(old, old.replace("4 * sb + w // 1]", "4 * sb]")))
    report = report.check()
    assert not report.ok
    assert any(dg.kind == "race" and dg.witness["array"] == "pm"
               for dg in report.diagnostics), report


def test_a_page_number_read_without_the_clamp_is_refused():
    # the table's entries are data: check() cannot assume them in [0, pages)
    text = _text(d=32, page=16, wg=4)
    old = "min(max(table[b, (32 * sb + 4 * kk + w) // 16], 0), pages - 1)"
    assert text.count(old) == 2
    new = "table[b, (32 * sb + 4 * kk + w) // 16]"
    report = make_proc("bad", text.replace(old, new)).check()
    assert not report.ok
    assert any(dg.kind == "bounds" and "'k'" in dg.message for dg in report.diagnostics)


def test_a_lane_dependent_skip_around_the_warp_sum_is_refused():
    text = _text(d=32, causal=True, page=16, wg=4)
    old = "if 32 * sb + 8 * st < lens[b]"
    assert text.count(old) == 1
    report = make_proc("bad", text.replace(old, "if 32 * sb + 8 * st + l < lens[b]")).check()
    assert not report.ok
    assert any(dg.kind == "divergence" for dg in report.diagnostics), report


# ------------------------------------------------------------------ meaning

# (batch, KV heads, group, query rows, lengths, page): odd lengths, one page and many
INTERP = [(2, 1, 4, 1, [5, 37], 16), (1, 2, 1, 3, [3], 0), (2, 1, 8, 2, [17, 2], 32)]


@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("bt, hk, g, m, lens, page", INTERP)
def test_interpreter_with_the_race_detector(bt, hk, g, m, lens, page, causal):
    q, k, v, table, ln = make(bt, hk, g, m, 32, lens, page)
    got, err = run(plan_gqa(32, causal, g, m, page), q, k, v, table, ln, detect_races=True)
    assert err == 0
    close(got, q, k, v, table, ln, causal)


# (group, query rows, lengths, page, causal): decode and prefill, GQA 1 / 4 / 8
EMULATOR = [(1, 1, [1, 45], 16, False), (4, 1, [33, 7], 16, True), (8, 1, [50], 0, False),
            (4, 1, [19, 64], 0, True), (1, 5, [5, 41], 0, True), (4, 5, [23], 16, False),
            (8, 3, [3, 70], 16, True), (8, 1, [31, 9], 64, False)]


@pytest.mark.parametrize("g, m, lens, page, causal", EMULATOR)
def test_emulator(g, m, lens, page, causal):
    q, k, v, table, ln = make(len(lens), 2, g, m, 32, lens, page)
    got, err = run(plan_gqa(32, causal, g, m, page), q, k, v, table, ln, target="emulator")
    assert err == 0
    close(got, q, k, v, table, ln, causal)


def test_emulator_head_dim_48_ratio_3():
    # the LLaMA example's heads (48 entries: the lanes past it hold none), 6 over 2
    q, k, v, table, ln = make(2, 2, 3, 1, 48, [37, 5], 16)
    got, err = run(plan_gqa(48, True, 3, 1, 16), q, k, v, table, ln, target="emulator")
    assert err == 0
    close(got, q, k, v, table, ln, True)


@pytest.mark.parametrize("dt, g, m, page, causal", [("f16", 4, 1, 16, True),
                                                    ("bf16", 8, 3, 0, True),
                                                    ("bf16", 1, 1, 16, False)])
def test_emulator_halves(dt, g, m, page, causal):
    q, k, v, table, ln = make(2, 1, g, m, 64, [37, 4], page, dt)
    got, err = run(plan_gqa(64, causal, g, m, page, dt), q, k, v, table, ln, "emulator")
    assert err == 0 and got.dtype == NP[dt]
    close(got, q, k, v, table, ln, causal, dt)


@pytest.mark.parametrize("causal, page, dt", [(False, 0, "f32"), (True, 16, "f32"),
                                             (True, 32, "bf16")])
def test_the_algorithm_is_proved_and_is_the_meaning(causal, page, dt):
    # the readable procedure (plain loops through the table) equals the float64
    # reference and the kernel, and flags what the kernel flags
    p = paged_rows(causal, page, dt)
    assert p.check().ok
    q, k, v, table, ln = make(2, 2, 4, 3, 48, [37, 5], page, dt)
    got, err = run(p, q, k, v, table, ln, d=48)
    assert err == 0
    close(got, q, k, v, table, ln, causal, dt)
    kern, _ = run(plan_gqa(48, causal, 4, 3, page, dt), q, k, v, table, ln)
    atol, rtol = attention_tolerance(dt)
    np.testing.assert_allclose(kern.astype(np.float64), got.astype(np.float64),
                               rtol=2 * rtol, atol=2 * atol)
    if page:
        bad = table.copy()
        bad[1, 0] = -3
        assert run(p, q, k, v, bad, ln, d=48)[1] == 2
    assert run(p, q, k, v, table, np.array([2, 5], np.int32), d=48)[1] == (1 if causal else 0)


def test_ratio_one_equals_the_plain_reference():
    q, k, v, _, ln = make(1, 3, 1, 2, 32, [21])
    got, _ = run(plan_gqa(32, True, 1, 2), q, k, v, None, ln)
    want = attention_reference(q[0], k[0], v[0], True, 21)
    np.testing.assert_allclose(got[0], want, rtol=1e-4, atol=2e-5)


def test_bad_tables_and_lengths_set_the_fault_flag_and_stay_in_bounds():
    q, k, v, table, ln = make(2, 1, 4, 1, 32, [20, 9], 16)
    bad = table.copy()
    bad[0, 1] = 1 << 30  # a page far outside the cache: clamped, flagged
    got, err = run(plan_gqa(32, False, 4, 1, 16), q, k, v, bad, ln, detect_races=True)
    assert err == 2 and np.isfinite(got).all()
    bad[0, 1] = -5
    assert run(plan_gqa(32, False, 4, 1, 16), q, k, v, bad, ln)[1] == 2
    # an unused entry past the length is never read
    ok = table.copy()
    ok[1, 1] = -1
    got, err = run(plan_gqa(32, False, 4, 1, 16), q, k, v, ok, ln)
    assert err == 0
    close(got, q, k, v, ok, ln, False)
    for lens in ([0, 9], [20, 10 ** 6]):
        got, err = run(plan_gqa(32, False, 4, 1, 16), q, k, v, table,
                       np.array(lens, np.int32))
        assert err == 1 and np.isfinite(got).all()
    q2, k2, v2, _, _ = make(1, 1, 1, 3, 32, [4])  # causal: 3 rows need 3 keys
    assert run(plan_gqa(32, True, 1, 3), q2, k2, v2, None, np.array([2], np.int32))[1] == 1


# ------------------------------------------------------------------ gpudsl.ops


def test_ops_grouped_heads_by_shape():
    rng = np.random.default_rng(5)
    q = rng.standard_normal((8, 1, 32), dtype=np.float32)
    k, v = rng.standard_normal((2, 2, 20, 32), dtype=np.float32)
    got = ops.attention(q, k, v, prefix=13)
    assert got.shape == (8, 1, 32)
    want = gqa_reference(q[None], k[None], v[None], [13])[0]
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)
    got = ops.attention(q, k, v, prefix=np.array([13], np.int64), kv_heads=2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=2e-5)


def test_ops_batch_of_lengths_and_paged_cache():
    q, k, v, table, ln = make(2, 2, 4, 1, 32, [33, 7], 16)
    got = ops.attention(q, k, v, block_table=table, seq_lens=ln)
    close(got, q, k, v, table, ln, False)
    flat = lambda a: a.reshape(a.shape[0], a.shape[1], -1)  # noqa: E731
    got2 = ops.attention(q, flat(k), flat(v), block_table=table, seq_lens=ln, kv_heads=2)
    np.testing.assert_array_equal(got, got2)
    q, k, v, _, ln = make(2, 1, 4, 1, 32, [33, 7])
    got = ops.attention(q, k, v, seq_lens=ln)
    close(got, q, k, v, None, ln, False)


def test_ops_halves_and_int64_tables():
    q, k, v, table, ln = make(2, 2, 4, 1, 32, [33, 7], 16, "f16")
    got = ops.attention(q, k, v, block_table=table.astype(np.int64),
                        seq_lens=ln.astype(np.int64))
    assert got.dtype == np.float16 and got.shape == q.shape
    close(got, q, k, v, table, ln, False, "f16")


def test_the_node_tables_paged_attention():
    # gpudsl.ops.paged_attention: the graph node's form (rank 3, int64), by the table
    import gpudsl

    q, k, v, table, ln = make(2, 2, 4, 1, 32, [33, 7], 16)
    q3, flat = q.reshape(16, 1, 32), lambda a: a.reshape(a.shape[0], 16, 64)  # noqa: E731
    t64, l64 = table.astype(np.int64), ln.astype(np.int64)
    for causal in (False, True):
        got = ops.paged_attention(q3, flat(k), flat(v), t64, l64, causal=causal)
        close(got.reshape(q.shape), q, k, v, table, ln, causal)
    t64[0, 0] = 99  # a used page outside the cache: the kernel's fault flag
    with pytest.raises(gpudsl.Error, match="paged_attention"):
        ops.paged_attention(q3, flat(k), flat(v), t64, l64)


def test_ops_torch_tensors():
    torch = pytest.importorskip("torch")
    q, k, v, table, ln = make(2, 2, 4, 1, 32, [33, 7], 16)
    got = ops.attention(*(torch.from_numpy(a) for a in (q, k, v)),
                        block_table=torch.from_numpy(table), seq_lens=torch.from_numpy(ln))
    assert isinstance(got, torch.Tensor)
    close(got.numpy(), q, k, v, table, ln, False)


@pytest.mark.parametrize("change, text", [
    (dict(block_table=np.array([[0, 9], [1, 2]], np.int32)), "names page 9"),
    (dict(seq_lens=np.array([0, 7], np.int32)), "length 0 is outside"),
    (dict(seq_lens=np.array([33, 7], np.int64)), "one integer type"),
    (dict(seq_lens=None), "needs seq_lens"),
    (dict(kv_heads=2), "kv_heads=2 but the keys have 1"),
    (dict(prefix=3), "prefix and block_table"),
])
def test_ops_bad_arguments_are_refused(change, text):
    import gpudsl

    q, k, v, table, ln = make(2, 1, 4, 1, 32, [17, 7], 16)
    args = dict(block_table=table, seq_lens=ln)
    args.update(change)
    with pytest.raises(gpudsl.Error, match=text):
        ops.attention(q, k, v, **args)


def test_ops_bad_shapes_are_refused():
    import gpudsl

    rng = np.random.default_rng(0)
    q = rng.standard_normal((6, 1, 32), dtype=np.float32)
    k = rng.standard_normal((4, 9, 32), dtype=np.float32)
    with pytest.raises(gpudsl.Error, match="not a multiple of the 4 key/value heads"):
        ops.attention(q, k, k)
    k2 = rng.standard_normal((2, 9, 32), dtype=np.float32)
    with pytest.raises(gpudsl.Error, match="prefix 10 is outside"):
        ops.attention(q, k2, k2, prefix=10)
    with pytest.raises(gpudsl.Error, match="outside"):
        ops.attention(q[:, [0, 0, 0]], k2, k2, causal=True, prefix=2)  # 3 rows, 2 keys
    with pytest.raises(gpudsl.Error, match="kv_heads=3 but the keys have 2"):
        ops.attention(q, k2, k2, kv_heads=3)
    with pytest.raises(gpudsl.Error, match="scale must be a number"):
        ops.attention(q, k2, k2, scale="big")
    kc = rng.standard_normal((4, 24, 1, 32), dtype=np.float32)
    with pytest.raises(gpudsl.Error, match="page size 24"):
        ops.attention(q[None], kc, kc, block_table=np.zeros((1, 2), np.int32),
                      seq_lens=np.array([3], np.int32))


# ------------------------------------------------------------------ machine code


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dt", ["f32", "f16"])
def test_nvrtc_compiles_the_decode_kernels_without_spills(dt, arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    plans = [plan_gqa(128, True, g, 1, 16, dt) for g in (1, 8)]
    plans.append(plan_gqa(48, True, 3, 1, 16, dt, "i64"))  # the LLaMA example's
    for p in plans:
        res = compile_cubin(cuda_source(p), arch).resources
        assert len(res) == 2  # the split kernel and the combine
        for r in res.values():
            assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0
            assert r.registers <= 128
