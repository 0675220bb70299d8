"""The split-key decode kernel (gpudsl.stdlib.attention_split, issue 27): check() proves
both of its kernels for all sizes, every head dimension, causal and not, both KV layouts;
it equals the float64 reference in the interpreter with the dynamic race detector and on
the emulator for prefix lengths 1, 17 and 256, head dimensions 48, 64 and 128; the
chunk follows the shape; its twins (the scores reduced through SHARED memory without a
barrier instead of a warp sum, the partials of a block's warps in one slot, a
lane-dependent skip around the warp sum) are refused by check() with the reason.

Tolerance as tests/stdlib/test_attention.py: absolute 2e-5, relative 1e-4."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl.stdlib.attention import attention_reference, plan_attention
from gpudsl.stdlib.attention_split import (LAYOUTS, SPLIT_HEAD_DIMS, lanes, plan_chunk,
                                           split_kernel, split_text)
from gpudsl.stdlib.common import make_proc

ATOL, RTOL = 2e-5, 1e-4


def inputs(h, m, n, d, seed=0):
    g = np.random.default_rng(seed + 1000 * h + 100 * m + n + d)
    return tuple(g.standard_normal(s, dtype=np.float32)
                 for s in ((h, m, d), (h, n, d), (h, n, d)))


def nhd(a):
    return np.ascontiguousarray(a.transpose(1, 0, 2))


def run(p, q, k, v, prefix, layout="hnd", target=None, **extra):
    out, err = np.zeros(q.shape, np.float32), np.zeros(1, np.int32)
    if layout == "nhd":
        k, v = nhd(k), nhd(v)
    args = dict(q=q, k=k, v=v, prefix=np.array([prefix], np.int64),
                scale=np.float32(1 / np.sqrt(q.shape[2])), out=out, err=err)
    if target is None:
        p.interpret(**args, **extra)
    else:
        p.compile(target)(**args)
    return out, int(err[0])


# ------------------------------------------------------------------ proofs


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("d", SPLIT_HEAD_DIMS)
def test_proved_for_all_sizes(d, causal, layout):
    assert split_kernel(d, causal, 32, layout=layout).check().ok


def test_proved_with_other_chunks_and_warps():
    assert split_kernel(128, True, 64, warps=2).check().ok
    assert split_kernel(64, False, 8, warps=8, step=4).check().ok


@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("d", [48, 128])
def test_one_block_kernels_are_proved(d, layout):
    for causal, sliced in ((False, False), (True, False), (False, True)):
        assert split_kernel(d, causal, 32, 8, layout, sliced=sliced, one=True).check().ok


def test_lanes_and_chunks():
    assert lanes(128) == (4, 1, False) and lanes(64) == (2, 1, False)
    assert lanes(96) == (1, 3, False) and lanes(48) == (1, 2, True)
    # 32 heads x 4096 keys: 4096 warps of 32 keys, about 32 per SM of an H100
    assert plan_chunk(32, 1, 4096) == 32
    assert plan_chunk(1, 1, 1 << 20) == 256 and plan_chunk(6, 1, 256) == 32
    assert plan_attention(1, 128, heads=32, keys=4096).name == "attention_split_d128_c32"
    # up to 256 keys one block per row (8 warps, their partials combined in SHARED)
    assert plan_attention(1, 64, heads=6, keys=256).name == "attention_split_d64_c32_one8"
    assert plan_attention(2, 48, True, 6, 257).name == "attention_split_d48_causal_c32"
    assert plan_attention(1, 128, heads=1, keys=1 << 20).name == "attention_split_d128_c256"
    with pytest.raises(ValueError, match="multiple of the step"):
        split_kernel(128, False, 12)


# ------------------------------------------------------------------ twins


def _text(p):
    return str(make_proc("bad", p)).replace("@proc\n", "")  # as printed


def test_scores_through_shared_without_a_barrier_is_a_race():
    # the warp sum replaced by what it saves: each lane's partial dot product in a SHARED
    # row and every lane adding the row up, with no barrier between the writes and the
    # reads (the running maximum then reads a half-written row)
    text = _text(split_text(64, False, 32))
    text = text.replace("s[u] = warp_sum(dot)\n",
                        "red[w, l] = dot\n" + " " * 36 + "s[u] = 0.0\n" + " " * 36 +
                        "for r in seq(0, 32):\n" + " " * 40 + "s[u] += red[w, r]\n")
    text = text.replace("for w in par(0, 4) @ THREADS:",
                        "red: f32[4, 32] @ SHARED\n" + " " * 16 +
                        "for w in par(0, 4) @ THREADS:", 1)
    report = make_proc("bad", text).check()
    assert not report.ok
    races = [dg for dg in report.diagnostics if dg.kind == "race"]
    assert races and races[0].witness["array"] == "red"


def test_partials_of_a_blocks_warps_in_one_slot_is_a_race():
    text = _text(split_text(64, False, 32)).replace("pm[h, i, 4 * sb + w] = mr",
                                                      "pm[h, i, sb] = mr")
    report = make_proc("bad", text).check()
    assert not report.ok
    assert any(dg.kind == "race" and dg.witness["array"] == "pm"
               for dg in report.diagnostics)


def test_one_block_combine_without_its_barrier_is_a_race():
    text = _text(split_text(64, False, 32, 8, one=True))
    marker = "\n" + " " * 16 + "sync()\n"
    assert text.count(marker) == 1
    report = make_proc("bad", text.replace(marker, "\n")).check()
    assert not report.ok
    assert any(dg.kind == "race" and dg.witness["array"] in ("pms", "pls", "pos")
               for dg in report.diagnostics)


def test_a_lane_dependent_skip_around_the_warp_sum_is_refused():
    text = _text(split_text(64, False, 32))
    old = "if 32 * (4 * sb + w) + 8 * it < prefix[0]:"
    assert text.count(old) == 1
    report = make_proc("bad", text.replace(old, old.replace("it <", "it + l <"))).check()
    assert not report.ok
    assert any(dg.kind == "divergence" for dg in report.diagnostics), report


# ------------------------------------------------------------------ meaning


# (heads, query rows M, cache rows N, prefix L)
SHAPES = [(2, 1, 20, 1), (2, 1, 40, 17), (1, 1, 256, 256), (2, 3, 70, 40)]


@pytest.mark.parametrize("d", [48, 64, 128])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("causal", [False, True])
@pytest.mark.parametrize("h, m, n, prefix", SHAPES)
def test_interpreter_with_the_race_detector(h, m, n, prefix, causal, layout, d):
    q, k, v = inputs(h, m, n, d)
    for one in (False, True):
        got, err = run(split_kernel(d, causal, 32, 8 if one else 4, layout, one=one), q, k,
                       v, prefix, layout, detect_races=True)
        assert err == 0
        np.testing.assert_allclose(got, attention_reference(q, k, v, causal, prefix),
                                   rtol=RTOL, atol=ATOL)


@pytest.mark.parametrize("d", [48, 64, 128])
@pytest.mark.parametrize("layout", LAYOUTS)
@pytest.mark.parametrize("prefix", [1, 17, 256])
def test_emulator(prefix, layout, d):
    q, k, v = inputs(3, 1, 300, d)
    for causal in (False, True):
        got, err = run(split_kernel(d, causal, 40, warps=2, layout=layout), q, k, v,
                       prefix, layout, target="emulator")
        assert err == 0
        np.testing.assert_allclose(got, attention_reference(q, k, v, causal, prefix),
                                   rtol=RTOL, atol=ATOL)


def test_large_scores_and_a_bad_prefix():
    q, k, v = inputs(1, 1, 90, 64)
    q *= 40.0  # scores in the hundreds: the partial maxima keep exp finite
    got, err = run(split_kernel(64), q, k, v, 90, target="emulator")
    assert err == 0 and np.isfinite(got).all()
    np.testing.assert_allclose(got, attention_reference(q, k, v), rtol=RTOL, atol=ATOL)
    assert run(split_kernel(64), q, k, v, 0)[1] == 1
    assert run(split_kernel(64), q, k, v, 91)[1] == 1
    q2 = np.zeros((1, 3, 64), np.float32)
    assert run(split_kernel(64, True), q2, k, v, 2)[1] == 1  # M = 3 > 2


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("d", [48, 64, 128])
def test_nvrtc_compiles_without_spills(d, arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    res = compile_cubin(cuda_source(split_kernel(d, True, 32)), arch).resources
    assert len(res) == 2  # the split kernel and the combine
    for r in res.values():
        assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0 and r.stack_bytes == 0
        assert r.registers <= 128 and r.shared_bytes == 0


@pytest.mark.parametrize("prefix", [1, 17, 256, 1000])
def test_ops_decode_over_several_blocks(prefix):
    # 1000 keys: past the one-block kernel's 256, the split over blocks and the combine
    from gpudsl import ops

    q, k, v = inputs(3, 1, 1000, 128)
    assert plan_attention(1, 128, False, 3, 1000).name == "attention_split_d128_c32"
    for causal in (False, True):
        np.testing.assert_allclose(ops.attention(q, k, v, causal=causal, prefix=prefix),
                                   attention_reference(q, k, v, causal, prefix),
                                   rtol=RTOL, atol=ATOL)
