"""Fused attention on float16 / bfloat16 (issue 27): q, k, v read widened to f32, the
scores, the online softmax and the weighted sums in f32, the output rounded once.  Both
kernels (the tiled prefill kernel and the split-key decode kernel, its one-block form
too) are proved by check() for all sizes; they equal the float64 reference of the same
(half) inputs within :func:`attention_tolerance` in the interpreter (with the race
detector) and on the emulator through ``gpudsl.ops``; NVRTC compiles them for sm_80 and
sm_90 without spills; mixed precisions are refused.

CI runs a subset of the grid (decode and prefill, causal and not, prefixes 1 / 17 / 256,
head dimensions 64 / 128, f16 and bf16); ``python -m tests.stdlib.attention_half_grid``
runs all of it in both the interpreter and the emulator and prints the worst errors."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.stdlib.attention import (attention_kernel, attention_reference, attention_rows,
                                     attention_tolerance, plan_attention)
from gpudsl.stdlib.attention_split import split_kernel

NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}
DTS = ["f16", "bf16"]


def inputs(h, m, n, d, dt, seed=0):
    g = np.random.default_rng(seed + 1000 * h + 100 * m + n + d)
    return tuple(g.standard_normal(s, dtype=np.float32).astype(NP[dt])
                 for s in ((h, m, d), (h, n, d), (h, n, d)))


def close(got, q, k, v, causal, prefix, dt):
    assert got.dtype == NP[dt]
    want = attention_reference(q, k, v, causal, prefix)
    atol, rtol = attention_tolerance(dt)
    np.testing.assert_allclose(got.astype(np.float64), want, rtol=rtol, atol=atol)


def interpret(p, q, k, v, prefix, layout="hnd", **extra):
    out, err = np.zeros(q.shape, q.dtype), np.zeros(1, np.int32)
    if layout == "nhd":
        k, v = (np.ascontiguousarray(a.transpose(1, 0, 2)) for a in (k, v))
    p.interpret(q=q, k=k, v=v, prefix=np.array([prefix], np.int64),
                scale=np.float32(1 / np.sqrt(q.shape[2])), out=out, err=err, **extra)
    assert int(err[0]) == 0
    return out


# ------------------------------------------------------------------ proofs


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("d, rows", [(64, 1), (64, 8), (128, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_tiled_kernels_are_proved(d, rows, causal, dt):
    p = attention_kernel(d, causal, rows, dt)
    assert p.name.endswith("_" + dt) and p.check().ok


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("d", [64, 128])
def test_split_kernels_are_proved(d, dt):
    for causal, layout, one in ((False, "hnd", False), (True, "hnd", False),
                                (True, "nhd", True), (False, "nhd", False)):
        assert split_kernel(d, causal, 32, 8 if one else 4, layout, one=one,
                            dt=dt).check().ok
    assert split_kernel(d, False, 32, 8, "nhd", sliced=True, one=True, dt=dt).check().ok
    assert split_kernel(d, False, 32, layout="nhd", sliced=True, dt=dt).check().ok
    assert attention_rows(True, dt).check().ok


def test_half_kernels_read_halves_and_keep_f32_arithmetic():
    p = split_kernel(128, False, 32, dt="f16")
    text = str(p)
    # the key/value rows copied as halves by vector copies, widened where used
    assert "vcopy4_f16_REGISTER_GLOBAL(kr[" in text and "f32(kr[u, c, x])" in text
    assert "out[h, i, t] = f16(o / tot)" in text and "f16" not in text.split("mr:")[1].split(
        "\n")[0]
    t = str(attention_kernel(64, True, 1, "bf16"))
    assert "ks[1 * kk + r, t] = f32(k[" in t and "= bf16(acc[r, t] / lr[r, t])" in t


def test_the_tolerance_adds_one_rounding():
    assert attention_tolerance("f32") == (2e-5, 1e-4)
    atol, rtol = attention_tolerance("bf16")
    assert rtol == pytest.approx(1e-4 + 2 ** -8, rel=1e-3) and atol < 2.1e-5


# ------------------------------------------------------------------ interpreter

SHAPES = [(2, 1, 20, 1), (1, 1, 40, 17), (1, 3, 17, 17)]  # (heads, rows, keys, prefix)


@pytest.mark.parametrize("dt", DTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, m, n, prefix", SHAPES)
def test_interpreter_with_the_race_detector(h, m, n, prefix, causal, dt):
    d = 64
    q, k, v = inputs(h, m, n, d, dt)
    close(interpret(attention_rows(causal, dt), q, k, v, prefix, d=d), q, k, v, causal,
          prefix, dt)
    for p, layout in ((split_kernel(d, causal, 32, 4, dt=dt), "hnd"),
                      (split_kernel(d, causal, 32, 8, "nhd", one=True, dt=dt), "nhd"),
                      (attention_kernel(d, causal, 2, dt), "hnd")):
        close(interpret(p, q, k, v, prefix, layout, detect_races=True), q, k, v, causal,
              prefix, dt)


def test_interpreter_head_dim_128_bf16():
    q, k, v = inputs(1, 5, 33, 128, "bf16")
    close(interpret(attention_kernel(128, True, 4, "bf16"), q, k, v, 33, detect_races=True),
          q, k, v, True, 33, "bf16")


# ------------------------------------------------------------------ ops (emulator)


# each prefix and head dimension with each dtype (the whole product: attention_half_grid)
@pytest.mark.parametrize("prefix, d, dt", [(1, 64, "f16"), (17, 128, "f16"), (256, 64, "f16"),
                                           (1, 128, "bf16"), (17, 64, "bf16"),
                                           (256, 128, "bf16")])
def test_ops_decode(prefix, d, dt):
    q, k, v = inputs(2, 1, 300, d, dt)
    for causal in (False, True):
        close(ops.attention(q, k, v, causal=causal, prefix=prefix), q, k, v, causal, prefix,
              dt)


@pytest.mark.parametrize("length, d, dt", [(17, 64, "f16"), (256, 128, "f16"),
                                           (17, 128, "bf16"), (256, 64, "bf16")])
def test_ops_prefill(length, d, dt):
    q, k, v = inputs(1 if length == 256 else 2, length, length + 5, d, dt)
    for causal in (False, True):
        close(ops.attention(q, k, v, causal=causal, prefix=np.array([length], np.int64)),
              q, k, v, causal, length, dt)


def test_ops_over_several_split_blocks_and_large_scores():
    q, k, v = inputs(3, 1, 1000, 128, "f16")
    assert plan_attention(1, 128, False, 3, 1000, dt="f16").name == \
        "attention_split_d128_c32_f16"
    close(ops.attention(q, k, v, prefix=777), q, k, v, False, 777, "f16")
    q = (q.astype(np.float32) * 40).astype(np.float16)  # scores in the hundreds
    got = ops.attention(q, k, v)
    assert np.isfinite(got.astype(np.float32)).all()
    close(got, q, k, v, False, 1000, "f16")


def test_mixed_precisions_are_refused():
    q, k, v = inputs(1, 1, 8, 64, "f16")
    with pytest.raises(gpudsl.Error, match="attention: mixed precisions .*v is bfloat16"):
        ops.attention(q, k, v.astype(ml_dtypes.bfloat16))
    with pytest.raises(gpudsl.Error, match="mixed precisions .*q is float32"):
        ops.attention(q.astype(np.float32), k, v)


# ------------------------------------------------------------------ NVRTC


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("dt", DTS)
def test_nvrtc_compiles_without_spills(dt, arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    try:
        from gpudsl.runtime.nvrtc import compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")
    kernels = [attention_kernel(d, causal, rows, dt) for d, rows in ((64, 8), (128, 4))
               for causal in (False, True)]
    kernels += [split_kernel(d, True, 32, dt=dt) for d in (64, 128)]
    kernels += [split_kernel(d, False, 32, 8, "nhd", sliced=True, one=True, dt=dt)
                for d in (48, 128)]  # (48: the LLaMA example's fused kernel)
    kernels += [
                split_kernel(128, False, 32, layout="nhd", sliced=True, dt=dt)]
    for p in kernels:
        for name, r in compile_cubin(cuda_source(p), arch).resources.items():
            assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0, (name, r)
            assert r.stack_bytes == 0 and r.registers <= 128, (name, r)


def test_the_half_kernels_racy_twins_are_flagged():
    # the barrier after the running-maximum update, removed from the f16 tiled kernel,
    # and a block's warps writing one partial slot of the bf16 split kernel
    from gpudsl.stdlib.common import make_proc

    text = str(attention_kernel(64, False, 2, "f16")).replace("@proc\n", "")
    marker = "mr[r, t] = mnew\n                    sync()\n"
    assert text.count(marker) == 1
    report = make_proc("bad", text.replace(marker, "mr[r, t] = mnew\n")).check()
    assert not report.ok and any(d.kind == "race" for d in report.diagnostics)
    from gpudsl.stdlib.attention_split import split_text

    text = split_text(64, False, 32, 4, dt="bf16")
    assert text.count("4 * sb + w] = mr") == 1
    report = make_proc("bad2", text.replace("4 * sb + w] = mr", "4 * sb] = mr")).check()
    assert not report.ok and any(d.kind == "race" for d in report.diagnostics)
