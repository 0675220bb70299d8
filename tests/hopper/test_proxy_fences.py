"""Cross-proxy fences around TMA (PTX ISA, memory consistency model: proxies).  A bulk
tensor copy reads and writes memory through the async proxy; a plain store is the
generic proxy's, and a barrier alone does not make one proxy's writes visible to the
other.  check() proves these kernels (the accesses are ordered); the code must also
fence, or the GPU may copy stale bytes: a proved kernel silently wrong."""
from __future__ import annotations

import re

import numpy as np

import gpudsl
from gpudsl import proc_from_source
from gpudsl.codegen import generate

NS = vars(gpudsl)

# threads double x (GLOBAL), then one thread loads it with TMA
GLOBAL_THEN_TMA = '''
def global_then_tma(x: f16[64, 64], y: f16[64, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f16[64, 64] @ SHARED
        full: barrier @ SHARED
        for t in par(0, 64) @ THREADS:
            for j in seq(0, 64):
                x[t, j] = x[t, j] * 2.0
        sync()
        for t in par(0, 1) @ THREADS:
            tma_load(s[0:64, 0:64], x[0:64, 0:64], bar=full)
        arrive(full, 0, 1)
        wait(full, 0, 64)
        for t in par(0, 64) @ THREADS:
            for j in seq(0, 64):
                y[t, j] = s[t, j]
'''


def _src(text):
    p = proc_from_source(text, NS)
    assert p.check(target="sm_90a").ok
    return p, generate(p.ir, {}).source


def test_generic_global_writes_fence_before_a_tma_load_reads_them():
    p, src = _src(GLOBAL_THEN_TMA)
    body = src[src.index("__global__"):]
    fence = body.index("gpudsl_tma_fence_global();")
    assert body.index("x[t * 64 + j] =") < fence < body.index("__syncthreads();", fence)
    assert "fence.proxy.async.global;" in src
    assert "fence.mbarrier_init.release.cluster;" in src
    from gpudsl.runtime.nvrtc import compile_cubin
    compile_cubin(src, "sm_90a")
    x = (np.arange(64 * 64).reshape(64, 64) % 7).astype(np.float16)
    y = np.zeros_like(x)
    p.compile("emulator")(x=x.copy(), y=y)
    assert (y == 2 * x).all()


def test_mbarrier_init_is_fenced_for_the_async_proxy_where_tma_completes_on_it():
    _, src = _src(GLOBAL_THEN_TMA)
    assert "gpudsl_mbar_init(&full, 1); gpudsl_mbar_init_fence(); }" in src
    _, ring = _src(GLOBAL_THEN_TMA.replace("full: barrier @", "full: barrier[1] @").replace(
        "bar=full)", "bar=full[0])").replace("(full,", "(full[0],"))
    assert re.search(r"gpudsl_mbar_init\(&full\[gpudsl_j\], 1\); gpudsl_mbar_init_fence\(\); \}",
                     ring)


def test_no_extra_fences_without_tma():
    """A ring of plain copies keeps its init lines; a TMA store's tile writers keep theirs."""
    ring = '''
def ring2(n: size, x: f32[n, 32], y: f32[n, 32]):
    for b in par(0, 1) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        full: barrier[2] @ SHARED
        empty: barrier[2] @ SHARED
        for j in seq(0, 2):
            arrive(empty[j], 32, 64)
        for i in seq(0, n):
            wait(empty[i % 2], 0, 32)
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[i, t]
            arrive(full[i % 2], 0, 32)
            wait(full[i % 2], 32, 64)
            for t in par(32, 64) @ THREADS:
                y[i, t - 32] = buf[i % 2, t - 32] * 2.0
            arrive(empty[i % 2], 32, 64)
'''
    _, src = _src(ring)
    assert "tma_fence" not in src and "init_fence" not in src
