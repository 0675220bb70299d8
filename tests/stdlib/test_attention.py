"""Fused attention (issue 27, f32): the algorithm proc and the kernel equal the float64
numpy reference in the interpreter (the kernel with the dynamic race detector) and on
the emulator through gpudsl.ops, for decode (M = 1) and prefill (M = L, causal), causal
and not, prefix lengths 1, 17 and 256, head dimensions 64 and 128; check() proves the
kernels for all sizes; the racy twin (the running-maximum update without its barrier)
is flagged with a witness; NVRTC compiles them for sm_80 and sm_90 without spills;
bad arguments are refused.

Tolerance: absolute 2e-5 and relative 1e-4 against the float64 reference (inputs
standard normal; the measured errors are about 1e-6, see docs)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.stdlib.attention import (TILED_HEAD_DIMS, ROW_CHOICES, attention_kernel,
                                     attention_reference, attention_rows, plan_attention)
from gpudsl.stdlib.common import make_proc

ATOL, RTOL = 2e-5, 1e-4


def inputs(h, m, n, d, seed=0):
    g = np.random.default_rng(seed + 1000 * h + 100 * m + n + d)
    return tuple(g.standard_normal(s, dtype=np.float32)
                 for s in ((h, m, d), (h, n, d), (h, n, d)))


def interpret(p, q, k, v, prefix, **extra):
    out, err = np.zeros(q.shape, np.float32), np.zeros(1, np.int32)
    p.interpret(q=q, k=k, v=v, prefix=np.array([prefix], np.int64),
                scale=np.float32(1 / np.sqrt(q.shape[2])), out=out, err=err, **extra)
    return out, int(err[0])


# ------------------------------------------------------------------ proofs


KERNELS = [(d, rows) for d in TILED_HEAD_DIMS for rows in ROW_CHOICES if rows * d <= 1024]


@pytest.mark.parametrize("d, rows", KERNELS)
@pytest.mark.parametrize("causal", [False, True])
def test_kernels_are_proved_for_all_sizes(d, rows, causal):
    assert attention_kernel(d, causal, rows).check().ok


@pytest.mark.parametrize("d", [64, 128])
def test_kernels_are_proved_with_bindings(d):
    for rows in (1, 512 // d):
        assert attention_kernel(d, True, rows).check(hh=2, m=17, n=256).ok


def test_plan_rows_per_block():
    # up to SPLIT_MAX_ROWS = 4 rows: the split-key kernel (tests/stdlib/test_attention_split.py)
    assert [plan_attention(m, 128).name for m in (1, 4, 5, 17)] == \
        ["attention_split_d128_c32", "attention_split_d128_c32", "attention_d128_r4",
         "attention_d128_r4"]
    assert plan_attention(6, 64).name == "attention_d64_r8"
    assert plan_attention(300, 48, True).name == "attention_split_d48_causal_c32"
    assert plan_attention(300, 64, True).name == "attention_d64_causal_r8"
    assert plan_attention(300, 32).name == "attention_d32_r16"
    with pytest.raises(ValueError, match="rows per block"):
        attention_kernel(128, False, 16)


@pytest.mark.parametrize("causal", [False, True])
def test_algorithm_is_proved_in_bounds(causal):
    assert attention_rows(causal).check().ok


MARKER = "mr[r, t] = mnew\n                    sync()\n"


def racy_twin(d=64, rows=1):
    """The kernel without the barrier after the running-maximum update (the row's
    rescaling factor and the tile's weights, written by the row's first warp after its
    warp_max / warp_sum, read by all the row's threads)."""
    text = str(attention_kernel(d, False, rows)).replace("@proc\n", "")
    assert text.count(MARKER) == 1
    return make_proc("bad", text.replace(MARKER, "mr[r, t] = mnew\n"))


@pytest.mark.parametrize("rows", [1, 4])
def test_running_max_without_its_barrier_is_a_race(rows):
    # the barrier between the row's warp writing alpha = exp(m_old - m_new), the tile's
    # sum and weights and the row's threads reading them is what makes the online
    # softmax correct: check() must see it
    report = racy_twin(64, rows).check()
    assert not report.ok
    races = [dg for dg in report.diagnostics if dg.kind == "race"]
    assert races and races[0].witness["array"] in ("stat", "p")
    w = races[0].witness
    assert w["sizes"] and w["thread1"]["block"] == w["thread2"]["block"]  # one block
    assert w["thread1"]["thread"] != w["thread2"]["thread"]


def test_without_the_barrier_the_race_detector_sees_it_too():
    q, k, v = inputs(1, 1, 3, 64)
    with pytest.raises(gpudsl.Error, match="race"):
        interpret(racy_twin(), q, k, v, 3, detect_races=True)


# ------------------------------------------------------------------ interpreter

# (heads, query rows M, cache rows N, prefix L): decode against a prefix, prefill
SHAPES = [(2, 1, 20, 1), (2, 1, 40, 17), (1, 1, 256, 256), (1, 17, 17, 17), (1, 3, 33, 33)]


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, m, n, prefix", SHAPES)
def test_algorithm_and_kernel_equal_the_reference(h, m, n, prefix, causal, d):
    q, k, v = inputs(h, m, n, d)
    want = attention_reference(q, k, v, causal, prefix)
    got, err = interpret(attention_rows(causal), q, k, v, prefix, d=d)
    assert err == 0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)
    got, err = interpret(plan_attention(m, d, causal), q, k, v, prefix, detect_races=True)
    assert err == 0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("d, rows", [(64, 8), (128, 2), (32, 16), (96, 4)])
def test_rows_per_block_equal_the_reference(d, rows):
    # fewer rows than the block holds (the edge block), causal, a prefix below the cache
    q, k, v = inputs(2, 5, 70, d)
    for causal in (False, True):
        got, err = interpret(attention_kernel(d, causal, rows), q, k, v, 40,
                             detect_races=True)
        assert err == 0
        np.testing.assert_allclose(got, attention_reference(q, k, v, causal, 40),
                                   rtol=RTOL, atol=ATOL)


@pytest.mark.slow
@pytest.mark.parametrize("d", [64, 128])
def test_prefill_of_256_rows_in_the_interpreter(d):
    # the interpreter runs every thread of the 256 blocks in Python: minutes with the
    # race detector, so without it here (the smaller shapes above run with it)
    q, k, v = inputs(1, 256, 256, d)
    want = attention_reference(q, k, v, True, 256)
    got, err = interpret(plan_attention(256, d, True), q, k, v, 256)
    assert err == 0
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_the_kernel_flags_a_bad_prefix():
    q, k, v = inputs(1, 2, 8, 64)
    assert interpret(attention_kernel(64), q, k, v, 0)[1] == 1
    assert interpret(attention_kernel(64), q, k, v, 9)[1] == 1
    assert interpret(attention_kernel(64, True), q, k, v, 1)[1] == 1  # M = 2 > 1
    assert interpret(attention_rows(True), q, k, v, 1, d=64)[1] == 1


# ------------------------------------------------------------------ ops (emulator)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("prefix", [1, 17, 256])
def test_ops_decode(prefix, causal, d):
    q, k, v = inputs(2, 1, 256, d)
    want = attention_reference(q, k, v, causal, prefix)
    np.testing.assert_allclose(ops.attention(q, k, v, causal=causal, prefix=prefix), want,
                               rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("d", [64, 128])
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("length", [1, 17, 256])
def test_ops_prefill(length, causal, d):
    # M == L query rows against a cache of L + 5 rows, its prefix L
    q, k, v = inputs(2, length, length + 5, d)
    want = attention_reference(q, k, v, causal, length)
    got = ops.attention(q, k, v, causal=causal, prefix=np.array([length], np.int64))
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL)


def test_ops_defaults_scale_and_other_head_dims():
    q, k, v = inputs(3, 4, 50, 32)
    np.testing.assert_allclose(ops.attention(q, k, v), attention_reference(q, k, v),
                               rtol=RTOL, atol=ATOL)
    q, k, v = inputs(1, 2, 9, 96)
    np.testing.assert_allclose(ops.attention(q, k, v, causal=True, prefix=7, scale=0.5),
                               attention_reference(q, k, v, True, 7, 0.5),
                               rtol=RTOL, atol=ATOL)


def test_ops_large_scores_are_stable():
    q, k, v = inputs(1, 1, 70, 64)
    q *= 40.0  # scores in the hundreds: exp overflows without the running maximum
    got = ops.attention(q, k, v)
    assert np.isfinite(got).all()
    np.testing.assert_allclose(got, attention_reference(q, k, v), rtol=RTOL, atol=ATOL)


# ------------------------------------------------------------------ NVRTC


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("d, rows", [(64, 1), (64, 8), (128, 1), (128, 4)])
@pytest.mark.parametrize("causal", [False, True])
def test_nvrtc_compiles_without_spills(causal, d, rows, arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    res = compile_cubin(cuda_source(attention_kernel(d, causal, rows)), arch).resources
    assert len(res) == 1
    for r in res.values():
        assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0 and r.stack_bytes == 0
        assert r.registers <= 64
        # q rows, the K tile padded to d + 1, the V tile, the dot partials, p, the row's
        # (alpha, tile sum); the arrays aligned to 16 bytes
        want = 4 * (rows * d + 32 * (d + 1) + 32 * d + rows * d + rows * 32 + rows * 2)
        assert 0 <= r.shared_bytes - want < 16


# ------------------------------------------------------------------ refusals


def _q(*s):
    return np.zeros(s, np.float32)


@pytest.mark.parametrize("call, text", [
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 9, 64)), "the keys"),
    (lambda: ops.attention(_q(2, 1, 64), _q(3, 8, 64), _q(3, 8, 64)), "heads"),
    (lambda: ops.attention(_q(2, 1, 32), _q(2, 8, 64), _q(2, 8, 64)), "head dimension"),
    (lambda: ops.attention(_q(2, 1, 80), _q(2, 8, 80), _q(2, 8, 80)),
     "head dimension 80 is not supported"),
    (lambda: ops.attention(_q(1, 64), _q(8, 64), _q(8, 64)), "3"),
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64), prefix=0),
     "prefix 0 is outside [1, 8]"),
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64), prefix=9),
     "prefix 9 is outside"),
    (lambda: ops.attention(_q(2, 4, 64), _q(2, 8, 64), _q(2, 8, 64), True, 3),
     "below the 4 query rows"),
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64), prefix=2.0), "integer"),
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64),
                           prefix=np.array([1], np.int32)), "int64"),
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64), scale="x"), "scale"),
    (lambda: ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64), causal=1), "bool"),
    (lambda: ops.attention(_q(2, 1, 64).astype(np.float64), _q(2, 8, 64), _q(2, 8, 64)),
     "float32"),
])
def test_bad_arguments_are_refused(call, text):
    with pytest.raises(gpudsl.Error) as e:
        call()
    assert text in str(e.value) and str(e.value).startswith("attention: ")


def test_prefix_tensor_out_of_range_is_refused_by_the_kernel():
    with pytest.raises(gpudsl.Error, match="outside \\[1, 8\\]"):
        ops.attention(_q(2, 1, 64), _q(2, 8, 64), _q(2, 8, 64), prefix=np.array([9], np.int64))
    with pytest.raises(gpudsl.Error, match="causal"):
        ops.attention(_q(2, 4, 64), _q(2, 8, 64), _q(2, 8, 64), causal=True,
                      prefix=np.array([3], np.int64))


# ------------------------------------------------------------------ bench


def test_bench_rows_on_the_emulator():
    from gpudsl.bench import NODES, run_bench

    assert "attention" in NODES
    res = run_bench("emulator", ["attention"], reps=1, warmup=0, log=lambda *a: None)
    rows = res["results"]
    assert [r["status"] for r in rows] == ["ok", "ok", "ok"], rows
    assert {r["size"] for r in rows} == {"2x1x64x64", "2x32x32x64 causal",
                                         "2x70x70x64 causal float16"}
    for r in rows:   # the half prefill row (the sm_90a kernel on a GPU) within 1e-2
        assert r["unit"] == "FLOP/s" and \
            r["rel_error"] <= (1e-2 if "float16" in r["size"] else 1e-4)
        assert r["reference"] == "numpy float64 reference"
