"""CUDA for wgmma (docs/hopper.md): NVRTC builds it for sm_90a (HGMMA in the SASS, no
spills) and refuses other architectures with a clear #error; the descriptors, fences and
waits are where the order needs them; the emulator runs the same C and equals numpy."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CompileError
from gpudsl.codegen import generate
from gpudsl.runtime.nvrtc import compile_cubin

from .cases import expected, gemm, operands

FORMS = [(8, "local"), (64, "block"), (64, "ktile"), (256, "ktile"), (128, "local")]


@pytest.mark.parametrize("n, form", FORMS)
def test_nvrtc_builds_for_sm90a(n, form):
    m = generate(gemm(n, form).ir, {})
    r = compile_cubin(m.source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res


def test_other_architectures_stop_with_an_error():
    m = generate(gemm(8).ir, {})
    with pytest.raises(CompileError, match="wgmma needs sm_90a"):
        compile_cubin(m.source, "sm_90")


def test_sass_issues_hgmma():
    from gpudsl.perf import sass
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    for (n, form), want in (((64, "block"), 1), ((256, "ktile"), 2)):
        text = sass.disassemble(compile_cubin(generate(gemm(n, form).ir, {}).source,
                                              "sm_90a").cubin)
        lines = text.splitlines()
        hgmma = [ln for ln in lines if "HGMMA" in ln]
        assert len(hgmma) == want and all(f"64x{n}x16.F32" in ln for ln in hgmma), hgmma
        assert sum("WARPGROUP.ARRIVE" in ln for ln in lines) == 1   # one fence per run
        assert any("WARPGROUP.DEPBAR.LE" in ln for ln in lines)      # the wait
        assert any("FENCE.VIEW.ASYNC.S" in ln for ln in lines)       # the proxy fence


def test_lowering_text():
    src = generate(gemm(64, "ktile").ir, {}).source
    assert "wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16" in src
    assert "wgmma.fence.sync.aligned;" in src and "wgmma.commit_group.sync.aligned;" in src
    assert "wgmma.wait_group.sync.aligned %0;" in src
    assert "fence.proxy.async.shared::cta;" in src
    # descriptors: the window's start, LBO = the stride of its first range (64 x 8 halves),
    # SBO = 8 rows of 16 bytes
    assert "gpudsl_wgmma_make_desc(&a_s[2 * s][0][0], 1024u, 128u)" in src
    body = src[src.index("__global__"):]
    fence = body.index("gpudsl_wgmma_fence();")
    assert fence < body.index("for (int s = 0") < body.index("gpudsl_wgmma_m64n64k16_f16(")
    assert body.count("gpudsl_wgmma_fence();") == 1
    # the writers fence before the barrier, the accumulators after the wait
    assert body.index("gpudsl_proxy_fence();") < body.index("__syncthreads();")
    assert "gpudsl_reg_fence((&acc[0])[gpudsl_r]);" in body
    bf = generate(gemm(16, "local", "bf16").ir, {}).source
    assert "m64n16k16.f32.bf16.bf16" in bf


def test_b_descriptor_follows_n():
    src = generate(gemm(256, "block").ir, {}).source
    assert "gpudsl_wgmma_make_desc(&b_s[0][0][0], 4096u, 128u)" in src


@pytest.mark.parametrize("n, form", [(8, "local"), (64, "block"), (64, "ktile"),
                                     (256, "ktile"), (24, "local")])
def test_emulator_equals_numpy(n, form):
    k = gemm(n, form).compile("emulator")
    for kk in (32, 96):
        args = operands(n, kk, seed=kk + n)
        k(**args)
        assert np.array_equal(args["c"], expected(args))


def test_emulator_bf16_equals_interpreter():
    p = gemm(16, "ktile", "bf16")
    a = operands(16, 64, seed=5, dt=gpudsl.bf16.numpy)
    b = {k: v.copy() for k, v in a.items()}
    gpudsl.interpret(p, **a)
    p.compile("emulator")(**b)
    assert np.array_equal(a["c"], b["c"])


def test_emulator_rounds_as_the_interpreter():
    """Non-integer halves: the emulator sums in f32 in order of k, as the meaning."""
    p = gemm(8, "ktile")
    rng = np.random.default_rng(7)
    a = dict(a=rng.standard_normal((64, 64)).astype(np.float16),
             bt=rng.standard_normal((8, 64)).astype(np.float16),
             c=np.zeros((64, 8), np.float32))
    b = {k: v.copy() for k, v in a.items()}
    gpudsl.interpret(p, **a)
    p.compile("emulator")(**b)
    assert np.array_equal(a["c"], b["c"])
    assert np.allclose(a["c"], expected(a), rtol=1e-5, atol=1e-4)
