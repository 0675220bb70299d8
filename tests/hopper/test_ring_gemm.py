"""A Hopper GEMM main loop from the language's own pieces (issue 35): a producer warp fills a
four-deep ring of shared tiles, a consumer warpgroup multiplies them with wgmma, full and
empty barrier rings join them.  check() proves it for every size (the async obligations
order through split barriers: the producer's writes before the wgmma's issue, the
wgmma's landing before the producer refills the slot); its twins without an edge are
refused, the detector agrees; odd and even shapes equal numpy (edges clipped by the
guards) in the interpreter and the emulator; NVRTC builds it for sm_90a with no spills,
HGMMA in the SASS and no shared-memory loads feeding it.  (TMA loads are not in the
language yet: the producer copies with plain loads.)"""
from __future__ import annotations


import numpy as np
import pytest

import gpudsl
from gpudsl import InterpError, RaceError, proc_from_source
from gpudsl.codegen import generate
from gpudsl.runtime.nvrtc import compile_cubin

SRC = '''
@proc
def gemm_ring(m: size, n: size, k: size, a: f16[m, k], bt: f16[n, k], c: f32[m, n]):
    for bm in par(0, (m + 63) // 64) @ BLOCKS:
        for bn in par(0, (n + 63) // 64) @ BLOCKS:
            acc: f32[128, 32] @ REGISTER
            a_s: f16[8, 64, 8] @ SHARED
            b_s: f16[8, 64, 8] @ SHARED
            full: barrier[4] @ SHARED
            empty: barrier[4] @ SHARED
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    acc[t, i] = 0.0
            for j in seq(0, 4):
                arrive(empty[j], 0, 128)
            for ks in seq(0, (k + 15) // 16):
                wait(empty[ks % 4], 128, 160)
                for t in par(128, 160) @ THREADS:
                    for r in seq(0, 2):
                        for h in seq(0, 2):
                            for j in seq(0, 8):
                                if 64 * bm + 2 * (t - 128) + r < m and 16 * ks + 8 * h + j < k:
                                    a_s[2 * (ks % 4) + h, 2 * (t - 128) + r, j] = a[64 * bm + 2 * (t - 128) + r, 16 * ks + 8 * h + j]
                                else:
                                    a_s[2 * (ks % 4) + h, 2 * (t - 128) + r, j] = 0.0
                                if 64 * bn + 2 * (t - 128) + r < n and 16 * ks + 8 * h + j < k:
                                    b_s[2 * (ks % 4) + h, 2 * (t - 128) + r, j] = bt[64 * bn + 2 * (t - 128) + r, 16 * ks + 8 * h + j]
                                else:
                                    b_s[2 * (ks % 4) + h, 2 * (t - 128) + r, j] = 0.0
                arrive(full[ks % 4], 128, 160)
                wait(full[ks % 4], 0, 128)
                for t in par(0, 128) @ THREADS:
                    wgmma(acc[t, 0:32], a_s[2 * (ks % 4):2 * (ks % 4) + 2, 0:64, 0:8],
                          b_s[2 * (ks % 4):2 * (ks % 4) + 2, 0:64, 0:8])
                wgmma_commit()
                wgmma_wait(0)
                arrive(empty[ks % 4], 0, 128)
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    if 64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2) < m and 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2 < n:
                        c[64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''

GEMM = proc_from_source(SRC)

TWINS = {
    # the consumers free the slot before their wgmma has landed
    "early release": ("                wgmma_commit()\n                wgmma_wait(0)\n"
                      "                arrive(empty[ks % 4], 0, 128)\n",
                      "                arrive(empty[ks % 4], 0, 128)\n"
                      "                wgmma_commit()\n                wgmma_wait(0)\n"),
    # the consumers read the slot the producers are still filling
    "no wait for the tile": ("                wait(full[ks % 4], 0, 128)\n"
                             "                for t in par(0, 128) @ THREADS:\n"
                             "                    wgmma(",
                             "                for t in par(0, 128) @ THREADS:\n"
                             "                    wgmma("),
}


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    bt = rng.integers(-3, 4, (n, k)).astype(np.float16)
    return a, bt, a.astype(np.float32) @ bt.astype(np.float32).T


def test_the_ring_main_loop_is_proved_for_every_size():
    assert GEMM.check(target="sm_90a").ok
    assert GEMM.check(target="sm_90").kinds() == {"target"}


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_twins_without_an_edge_are_refused_and_the_detector_agrees(twin):
    old, new = TWINS[twin]
    assert old in SRC
    p = proc_from_source(SRC.replace(old, new))
    rep = p.check(target="sm_90a")
    assert "race" in rep.kinds(), str(rep)
    a, bt, _ = _operands(64, 64, 96)
    with pytest.raises((RaceError, InterpError)):
        gpudsl.interpret(p, a=a, bt=bt, c=np.zeros((64, 64), np.float32), detect_races=True)


@pytest.mark.parametrize("shape", [(64, 64, 64), (70, 33, 50), (5, 130, 97), (128, 64, 16)])
def test_equal_to_numpy_with_edges_clipped(shape):
    a, bt, want = _operands(*shape)
    if shape in ((64, 64, 64), (70, 33, 50)):   # the interpreter is slow
        c = np.zeros(want.shape, np.float32)
        gpudsl.interpret(GEMM, a=a, bt=bt, c=c, detect_races=True)
        assert (c == want).all()
    c = np.zeros(want.shape, np.float32)
    GEMM.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()


def test_sm90a_build_issues_hgmma_fed_by_no_shared_loads():
    from gpudsl.perf import sass
    r = compile_cubin(generate(GEMM.ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = sass.opcode_counts(sass.disassemble(r.cubin))
    assert ops["HGMMA"] >= 1 and ops["SYNCS"] >= 4      # wgmma; mbarrier arrive and wait
    assert ops["LDS"] == 0 and ops["LDSM"] == 0          # operands go by descriptor


@pytest.mark.gpu
def test_on_the_gpu():
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    a, bt, want = _operands(192, 130, 200)
    c = np.zeros(want.shape, np.float32)
    GEMM.compile("cuda")(a=a, bt=bt, c=c)
    assert (c == want).all()
