"""Grouped-query decode on tensor cores (issue 37, ``gpudsl.stdlib.attention_gqa_mma``):
proved for all sizes and all table and length contents; equal to the float64 reference
(``gqa_reference``) within ``gqa_mma_tolerance`` on the emulator over GQA ratios 4 / 8 /
16 / 6, paged and contiguous caches, odd lengths, one and several query rows, and in the
interpreter (which equals the emulator); racy twins refused; NVRTC builds it for sm_80
and sm_90 without spills with HMMA for both products in the decode loop (none in the
CUDA-core kernel it replaces); ``plan_grouped`` and ``ops.attention`` pick it for a half
decode with 4 or more heads per KV head on CUDA only."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import ops
from gpudsl.stdlib import attention_gqa_mma as gm
from gpudsl.stdlib.attention_mma import proc_of, register_mma_preconditions_hold
from gpudsl.stdlib.attention_paged import gqa_reference, plan_gqa

from .test_attention_paged import NP, make


def run(p, q, k, v, table, lens, target="emulator", softcap=None):
    bt, h, m, d = q.shape
    hk = k.shape[2] if table is not None else k.shape[1]
    out, err = np.zeros((bt, hk, h // hk, m, d), q.dtype), np.zeros(1, np.int32)
    args = dict(q=q.reshape(bt, hk, h // hk, m, d), k=k, v=v, lens=lens,
                scale=np.float32(d ** -0.5), out=out, err=err)
    if table is not None:
        args["table"] = table
    if softcap is not None:
        args["cap"] = np.float32(softcap)
    if target is None:
        p.interpret(**args)
    else:
        p.compile(target)(**args)
    return out.reshape(q.shape), int(err[0])


def within(got, q, k, v, table, lens, causal, dt, window=None, softcap=None):
    want = gqa_reference(q, k, v, lens, causal, table, None, window, softcap)
    tol = gm.gqa_mma_tolerance(q, k, v, lens, causal, table, None, window, softcap, dt)
    diff = np.abs(got.astype(np.float64) - want)
    assert (diff <= tol).all(), diff.max()


# ---------------------------------------------------------------- proofs


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("page", [0, 16, 256])
@pytest.mark.parametrize("d,causal", [(64, False), (64, True), (128, True)])
def test_proved_for_all_sizes(d, causal, page, dt):
    r = gm.gqa_mma_kernel(d, causal, page, dt).check()
    assert r.ok, str(r)
    assert sorted(r.trusted) == [f"mma_pv_{dt}", f"mma_qk_{dt}", "vcopy2_GLOBAL_REGISTER",
                                 f"vcopy2_{dt}_REGISTER_GLOBAL", f"vcopy8_{dt}_SHARED_GLOBAL"]


def test_the_graphs_integer_kernels_and_the_options_are_proved():
    for args in ((128, True, 64, "bf16", "i64"), (64, True, 0, "f16", "i32", 100, True),
                 (128, False, 32, "f16", "i64", 0, True)):
        assert gm.gqa_mma_kernel(*args).check().ok, args


# ---------------------------------------------------------------- meaning

# (GQA ratio, query rows, lengths, page, causal): ratios 4 / 8 / 16 and 6 (rows past the
# group's padded to the mma's 16), odd lengths, one and two chunks, many pages
CASES = [(4, 1, [5, 37], 0, True), (8, 1, [70, 1], 16, False), (16, 1, [129], 32, True),
         (6, 1, [64, 65], 16, True), (8, 3, [9, 77], 0, True), (4, 1, [200], 256, False)]


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("g, m, lens, page, causal", CASES)
def test_the_emulator_is_within_the_stated_tolerance(g, m, lens, page, causal, dt):
    d = 128 if g == 16 else 64
    q, k, v, table, ln = make(len(lens), 2, g, m, d, lens, page, dt)
    got, err = run(gm.gqa_mma_kernel(d, causal, page, dt), q, k, v, table, ln)
    assert err == 0 and got.dtype == NP[dt]
    within(got, q, k, v, table, ln, causal, dt)


def test_the_interpreter_equals_the_emulator():
    q, k, v, table, ln = make(2, 1, 4, 1, 64, [19, 40], 16, "f16", seed=3)
    p = gm.gqa_mma_kernel(64, True, 16, "f16")
    got, err = run(p, q, k, v, table, ln, target=None)
    emu, _ = run(p, q, k, v, table, ln)
    assert err == 0 and np.array_equal(got.view(np.uint16), emu.view(np.uint16))
    within(got, q, k, v, table, ln, True, "f16")


def test_bad_tables_and_lengths_set_the_fault_flag():
    q, k, v, table, ln = make(2, 1, 8, 1, 64, [20, 9], 16, "bf16")
    p = gm.gqa_mma_kernel(64, False, 16, "bf16")
    bad = table.copy()
    bad[0, 1] = 1 << 30  # clamped, flagged
    got, err = run(p, q, k, v, bad, ln)
    assert err == 2 and np.isfinite(got.astype(np.float32)).all()
    for lens in ([0, 9], [20, 10 ** 6]):
        assert run(p, q, k, v, table, np.array(lens, np.int32))[1] == 1


# ---------------------------------------------------------------- twins


def _text(**kw):
    return str(proc_of(gm.kernel_text(**kw))).replace("@proc\n", "")


def test_without_the_barrier_after_the_staged_chunk_is_a_race():
    text = _text(d=64, page=16)
    marker = "\n" + " " * 20 + "sync()\n"
    assert text.count(marker) == 1
    r = proc_of(text.replace(marker, "\n")).check()
    assert not r.ok
    assert any(dg.kind == "race" and dg.witness["array"] in ("ks", "vs")
               for dg in r.diagnostics), str(r)


def test_the_warps_partials_in_one_slot_is_a_race():
    text = _text(d=64)
    old = "4 * sb + l // 32] = mx"
    assert text.count(old) == 1
    r = proc_of(text.replace(old, "4 * sb] = mx")).check()
    assert not r.ok
    assert any(dg.kind == "race" and dg.witness["array"] == "pm" for dg in r.diagnostics)


def test_an_unclamped_page_number_is_refused():
    text = _text(d=64, page=16)
    old = "min(max(table[b, (64 * sb + 16 * it + l // 8) // 16], 0), pages - 1)"
    assert text.count(old) == 2
    r = proc_of(text.replace(old, "table[b, (64 * sb + 16 * it + l // 8) // 16]")).check()
    assert not r.ok
    assert any(dg.kind == "bounds" for dg in r.diagnostics), str(r)


@pytest.mark.parametrize("old,new", [
    ("l % 32 // 4)\n", "l % 32 // 4 % 4)\n"),          # another row group
    ("16 * dp + 2 * (l % 4):", "16 * dp + 1 + 2 * (l % 4):"),  # B columns off 16 bytes
    ("o[l, 2 * dp", "o[(l + 1) % 128, 2 * dp")])         # another lane's accumulators
def test_the_instructions_preconditions_are_rechecked(old, new):
    text = gm.kernel_text(64, True, 0, "f16")
    assert register_mma_preconditions_hold(proc_of(text)) and old in text
    assert not register_mma_preconditions_hold(proc_of(text.replace(old, new, 1)))


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
    return p.compile("cuda", check=False).sass(arch).kernels[0]


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("d,causal,page,dt", [(64, False, 0, "bf16"), (128, True, 16, "f16")])
def test_nvrtc_builds_it_without_spills_with_hmma_for_both_products(arch, d, causal, page, dt):
    ks = _sass(gm.gqa_mma_kernel(d, causal, page, dt), arch)
    assert ks.spill_bytes == 0 and ks.registers <= 255
    loops = [f for f in ks.figures if f.count("HMMA")]
    assert loops
    for f in loops:  # S = Q K^T: D / 16 x 2 mma; O = P V: D / 16 x 2; one ldmatrix.x4 each
        assert f.count("HMMA") == d // 16 * 2 + d // 16 * 2
        assert f.counts.get("LDSM", 0) == d // 8
    old = _sass(plan_gqa(d, causal, 8, 1, page, dt), arch)  # the CUDA-core kernel
    assert sum(f.count("HMMA") for f in old.figures) == 0


# ---------------------------------------------------------------- the choice


def test_plan_grouped_picks_it_for_a_half_decode_on_cuda_only():
    assert gm.plan_grouped(128, True, 8, 1, 16, "f16", target="cuda").name == \
        "attention_gqa_mma_d128_causal_paged16_f16"
    assert gm.plan_grouped(64, False, 4, 1, 0, "bf16", "i64", target="cuda").name == \
        "attention_gqa_mma_d64_bf16_i64"
    for args, kw in (((128, True, 8, 1, 16, "f16"), {}),                    # the emulator
                     ((128, True, 8, 1, 16, "f32"), dict(target="cuda")),    # f32
                     ((128, True, 2, 1, 16, "f16"), dict(target="cuda")),    # G < 4
                     ((48, True, 8, 1, 16, "f16"), dict(target="cuda")),     # D 48
                     ((128, True, 8, 5, 16, "f16"), dict(target="cuda"))):   # prefill
        assert not gm.plan_grouped(*args, **kw).name.startswith("attention_gqa_mma"), args


def test_ops_attention_runs_it_on_cuda(monkeypatch):
    from gpudsl.stdlib import array_ops as ops_mod

    seen = []
    monkeypatch.setattr(ops_mod, "backend", lambda: "cuda")
    monkeypatch.setattr(ops_mod, "_run", lambda p, **a: seen.append(p))
    q, k, v, table, ln = make(2, 2, 8, 1, 128, [30, 7], 16, "f16")
    ops.attention(q, k, v, causal=True, block_table=table, seq_lens=ln)
    kv = np.ascontiguousarray(k[0].transpose(1, 0, 2))  # one sequence: [Hkv, N, D]
    ops.attention(q[0], kv, kv, prefix=2)
    assert [p.name for p in seen] == ["attention_gqa_mma_d128_causal_paged16_f16",
                                      "attention_gqa_mma_d128_f16_i64"]


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_on_the_gpu_through_ops(dt):
    for g, m, lens, page, causal in CASES:
        if m > 1:
            continue
        q, k, v, table, ln = make(len(lens), 2, g, m, 128, lens, page, dt)
        got = ops.attention(q, k, v, causal=causal, block_table=table, seq_lens=ln) \
            if page else ops.attention(q, k, v, causal=causal, seq_lens=ln)
        within(np.asarray(got), q, k, v, table, ln, causal, dt)


def test_an_unknown_head_dimension_is_refused():
    with pytest.raises(ValueError, match="head dimension"):
        gm.gqa_mma_kernel(96)
    with pytest.raises(ValueError, match="f16 or bf16"):
        gm.gqa_mma_kernel(64, dt="f32")
    with pytest.raises(ValueError, match="causal"):
        gm.gqa_mma_kernel(64, False, 0, "f16", "i32", 8)
