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


# a producer warp's cp.async copies complete on a ring; a warpgroup's wgmma reads them
COPY_WGMMA = '''
def cpwg(k: size, a: f16[64, k], bt: f16[64, k], c: f32[128, 32]):
    assert k % 16 == 0
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 32] @ REGISTER
        a_s: f16[4, 64, 8] @ SHARED
        b_s: f16[4, 64, 8] @ SHARED
        full: barrier[2] @ SHARED
        empty: barrier[2] @ SHARED
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 32):
                acc[t, i] = 0.0
        for j in seq(0, 2):
            arrive(empty[j], 0, 128)
        for ks in seq(0, k // 16):
            wait(empty[ks % 2], 128, 160)
            for t in par(128, 160) @ THREADS:
                for r in seq(0, 2):
                    for h in seq(0, 2):
                        async_copy(a_s[2 * (ks % 2) + h, 2 * (t - 128) + r, 0:8], a[2 * (t - 128) + r, 16 * ks + 8 * h:16 * ks + 8 * h + 8], bar=full[ks % 2])
                        async_copy(b_s[2 * (ks % 2) + h, 2 * (t - 128) + r, 0:8], bt[2 * (t - 128) + r, 16 * ks + 8 * h:16 * ks + 8 * h + 8], bar=full[ks % 2])
            arrive(full[ks % 2], 128, 160)
            wait(full[ks % 2], 0, 128)
            for t in par(0, 128) @ THREADS:
                wgmma(acc[t, 0:32], a_s[2 * (ks % 2):2 * (ks % 2) + 2, 0:64, 0:8], b_s[2 * (ks % 2):2 * (ks % 2) + 2, 0:64, 0:8])
            wgmma_commit()
            wgmma_wait(0)
            arrive(empty[ks % 2], 0, 128)
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 32):
                c[t, i] = acc[t, i]
'''

ONE_COPY = '''
def one_copy(a: f16[64, 16], bt: f16[64, 16], c: f32[128, 32]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 32] @ REGISTER
        a_s: f16[2, 64, 8] @ SHARED
        b_s: f16[2, 64, 8] @ SHARED
        full: barrier @ SHARED
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 32):
                acc[t, i] = 0.0
        for t in par(128, 160) @ THREADS:
            for r in seq(0, 2):
                for h in seq(0, 2):
                    async_copy(a_s[h, 2 * (t - 128) + r, 0:8], a[2 * (t - 128) + r, 8 * h:8 * h + 8], bar=full)
                    async_copy(b_s[h, 2 * (t - 128) + r, 0:8], bt[2 * (t - 128) + r, 8 * h:8 * h + 8], bar=full)
        arrive(full, 128, 160)
        wait(full, 0, 128)
        for t in par(0, 128) @ THREADS:
            wgmma(acc[t, 0:32], a_s, b_s)
        wgmma_commit()
        wgmma_wait(0)
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 32):
                c[t, i] = acc[t, i]
'''


def test_waiters_fence_cp_async_copies_that_a_wgmma_reads():
    """The producer's fence at the end of its loop runs before its copies land: the
    consumers fence after the wait that lands them, before the wgmma."""
    from gpudsl.ir.wgmma_meaning import frag_col, frag_row
    from gpudsl.runtime.nvrtc import compile_cubin
    rng = np.random.default_rng(0)
    for text, k in ((COPY_WGMMA, 48), (ONE_COPY, 16)):
        p, src = _src(text)
        body = src[src.index("__global__"):]
        wait = body.index("gpudsl_mbar_wait(&full")
        assert wait < body.index("gpudsl_proxy_fence();", wait) < body.index("wgmma_fence", wait)
        compile_cubin(src, "sm_90a")
        a = rng.integers(-3, 4, (64, k)).astype(np.float16)
        bt = rng.integers(-3, 4, (64, k)).astype(np.float16)
        c = np.zeros((128, 32), np.float32)
        args = dict(a=a, bt=bt, c=c) if k == 16 else dict(k=k, a=a, bt=bt, c=c)
        p.compile("emulator")(**args)
        d = a.astype(np.float32) @ bt.astype(np.float32).T
        assert all(c[l, i] == d[frag_row(l, i), frag_col(l, i)] for l in range(128)
                   for i in range(32))
