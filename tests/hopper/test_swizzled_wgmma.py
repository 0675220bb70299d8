"""wgmma from swizzled K-major tiles (issue 35, docs/hopper.md "Warpgroup MMA"): ``a`` a
``[64, 16]`` window and ``b`` an ``[N, 16]`` window of tiles ``@ SHARED(swizzle=W)`` with
rows of exactly ``W`` bytes; the descriptor has the swizzle mode, SBO = 8 rows, the start
advanced by the window's column bytes; the emulator reads through the swizzle; check()
proves the windows' alignment (rows at the swizzle's period, columns at multiples of 16)
with witnesses.  A TMA + wgmma ring GEMM main loop with one 64 x 64 box per operand per
stage into 128-byte swizzled rings: proved for every size, equal to numpy in the
interpreter and the emulator, twins refused, built for sm_90a with UTMALDG and HGMMA and
no shared-memory loads."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import gpudsl
from gpudsl import Error, InterpError, RaceError, proc_from_source

GEMM = '''
@proc
def gemm_swz(m: size, n: size, k: size, a: f16[m, k], bt: f16[n, k], c: f32[m, n]):
    assert k % 8 == 0
    for bm in par(0, (m + 63) // 64) @ BLOCKS:
        for bn in par(0, (n + 63) // 64) @ BLOCKS:
            acc: f32[128, 32] @ REGISTER
            a_s: f16[4, 64, 64] @ SHARED(swizzle=128)
            b_s: f16[4, 64, 64] @ SHARED(swizzle=128)
            full: barrier[4] @ SHARED
            empty: barrier[4] @ SHARED
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    acc[t, i] = 0.0
            for j in seq(0, 4):
                arrive(empty[j], 0, 128)
            for ks in seq(0, (k + 63) // 64):
                wait(empty[ks % 4], 128, 129)
                for t in par(128, 129) @ THREADS:
                    tma_load(a_s[ks % 4, 0:64, 0:64], a[64 * bm:64 * bm + 64, 64 * ks:64 * ks + 64], bar=full[ks % 4])
                    tma_load(b_s[ks % 4, 0:64, 0:64], bt[64 * bn:64 * bn + 64, 64 * ks:64 * ks + 64], bar=full[ks % 4])
                arrive(full[ks % 4], 128, 129)
                wait(full[ks % 4], 0, 128)
                for t in par(0, 128) @ THREADS:
                    for kk in seq(0, 4):
                        wgmma(acc[t, 0:32], a_s[ks % 4, 0:64, 16 * kk:16 * kk + 16], b_s[ks % 4, 0:64, 16 * kk:16 * kk + 16])
                wgmma_commit()
                wgmma_wait(0)
                arrive(empty[ks % 4], 0, 128)
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 32):
                    if 64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2) < m and 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2 < n:
                        c[64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 64 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''

TWINS = {
    "the producer refills a slot the consumers have not freed": (
        "                wait(empty[ks % 4], 128, 129)\n", "", "race"),
    "the slot released before the wgmma landed": (
        "wgmma_commit()\n                wgmma_wait(0)\n                arrive(empty[ks % 4], 0, 128)",
        "arrive(empty[ks % 4], 0, 128)\n                wgmma_commit()\n                wgmma_wait(0)",
        "race"),
    "the consumers do not wait for the boxes": (
        "                wait(full[ks % 4], 0, 128)\n", "", "race"),
    "a k16 step off the swizzle's 32-byte grid": (
        "a_s[ks % 4, 0:64, 16 * kk:16 * kk + 16]", "a_s[ks % 4, 0:64, 8 * kk:8 * kk + 16]",
        "mapping"),
}


def _operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    bt = rng.integers(-3, 4, (n, k)).astype(np.float16)
    return a, bt, a.astype(np.float32) @ bt.astype(np.float32).T


def test_the_swizzled_ring_gemm_is_proved_for_every_size():
    rep = proc_from_source(GEMM).check(target="sm_90a")
    assert rep.ok, rep
    assert not proc_from_source(GEMM).check().ok      # sm_90: no wgmma, no TMA


# one block; two blocks of rows, one of columns, fewer k than a box; 2 x 2 blocks,
# both clipped (one odd), two k boxes, the second half full (interpreted: ~1/3 the
# time of the 3 x 4 blocks of (130, 200, 96), which added nothing more)
@pytest.mark.parametrize("shape", [(64, 64, 64), (70, 33, 40), (66, 71, 96)])
def test_the_swizzled_ring_gemm_equals_numpy(shape):
    p = proc_from_source(GEMM)
    a, bt, want = _operands(*shape)
    c = np.zeros(want.shape, np.float32)
    gpudsl.interpret(p, a=a, bt=bt, c=c, detect_races=shape == (70, 33, 40))
    assert (c == want).all()
    c = np.zeros(want.shape, np.float32)
    p.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()


@pytest.mark.parametrize("twin", sorted(TWINS))
def test_ring_twins_are_refused(twin):
    old, new, kind = TWINS[twin]
    assert old in GEMM
    p = proc_from_source(GEMM.replace(old, new))
    assert kind in p.check(target="sm_90a").kinds()
    if kind == "race":      # the interpreter replays it
        a, bt, _ = _operands(64, 64, 320)
        with pytest.raises((RaceError, InterpError)):
            gpudsl.interpret(p, a=a, bt=bt, c=np.zeros((64, 64), np.float32),
                             detect_races=True)


def _ops(cubin) -> Counter:
    from gpudsl.perf import sass
    return sass.opcode_counts(sass.disassemble(cubin))


def test_sm90a_build_issues_utmaldg_and_hgmma_with_no_shared_loads():
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    src = generate(proc_from_source(GEMM).ir, {}).source
    assert "gpudsl_tmap_a_64x64_s128" in src
    assert "gpudsl_wgmma_make_desc_swz<128>(&gpudsl_swz<128>((__half*)a_s, (ks % 4 * 64 + 0) * " \
           "64 + 0), (unsigned)(16 * kk) * 2u)" in src
    r = compile_cubin(src, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = _ops(r.cubin)
    assert ops["UTMALDG"] == 2 and ops["HGMMA"] >= 4
    assert ops["LDS"] == 0 and ops["LDSM"] == 0 and ops["STS"] == 0 and ops["LDG"] == 0


def test_the_descriptor_has_the_swizzle_mode_and_the_stride_of_8_rows():
    from gpudsl.codegen.wgmma_cuda import WGMMA_COMMON
    body = WGMMA_COMMON[WGMMA_COMMON.index("gpudsl_wgmma_make_desc_swz"):]
    body = body[:body.index("#endif")]
    assert "W == 128 ? 1ull : W == 64 ? 2ull : 3ull" in body and "(mode << 62)" in body
    assert "(((8u * W) & 0x3FFFFu) >> 4) << 32" in body and "(1ull << 16)" in body
    assert "a += col;" in body


def one_src(w: int = 128, n: int = 16, col: str = "16 * kk", a_rows: str = "0:64",
            a_tile_rows: int = 64, swz_b: bool = True) -> str:
    """One warpgroup: threads write A (64 x K) and B (n x K, K-major) into tiles swizzled
    with ``w`` bytes (K = w / 2), then w / 32 chained wgmmas."""
    k = w // 2
    lay_b = f"(swizzle={w})" if swz_b else ""
    return f'''
@proc
def one(a: f16[64, {k}], bt: f16[{n}, {k}], c: f32[128, {n // 2}]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, {n // 2}] @ REGISTER
        a_s: f16[{a_tile_rows}, {k}] @ SHARED(swizzle={w})
        b_s: f16[{n}, {k}] @ SHARED{lay_b}
        for t in par(0, 128) @ THREADS:
            for i in seq(0, {n // 2}):
                acc[t, i] = 0.0
            for j in seq(0, {k}):
                if t < 64:
                    a_s[{a_tile_rows - 64} + t, j] = a[t, j]
                if t < {n}:
                    b_s[t, j] = bt[t, j]
        sync()
        for t in par(0, 128) @ THREADS:
            for kk in seq(0, {w // 32}):
                wgmma(acc[t, 0:{n // 2}], a_s[{a_rows}, {col}:{col} + 16], b_s[0:{n}, {col}:{col} + 16])
        wgmma_commit()
        wgmma_wait(0)
        for t in par(0, 128) @ THREADS:
            for i in seq(0, {n // 2}):
                c[t, i] = acc[t, i]
'''


def _frag(d: np.ndarray, n: int) -> np.ndarray:
    from gpudsl.ir.wgmma_meaning import frag_col, frag_row
    return np.array([[d[frag_row(l, i), frag_col(l, i)] for i in range(n // 2)]
                     for l in range(128)], np.float32)


@pytest.mark.parametrize("w,n", [(32, 8), (64, 16), (128, 64)])
def test_wgmma_reads_tiles_swizzled_with_each_width(w, n):
    p = proc_from_source(one_src(w, n))
    assert p.check(target="sm_90a").ok
    rng = np.random.default_rng(w)
    a = rng.integers(-4, 5, (64, w // 2)).astype(np.float16)
    bt = rng.integers(-4, 5, (n, w // 2)).astype(np.float16)
    want = _frag(a.astype(np.float32) @ bt.astype(np.float32).T, n)
    for run in ("interpret", "emulator"):
        c = np.zeros((128, n // 2), np.float32)
        if run == "interpret":
            gpudsl.interpret(p, a=a, bt=bt, c=c, detect_races=True)
        else:
            p.compile("emulator")(a=a, bt=bt, c=c)
        assert (c == want).all(), run


def test_misaligned_windows_are_refused_with_witnesses():
    # the columns: a k16 step at 8 elements
    rep = proc_from_source(one_src(128, 16, col="8 * kk")).check(target="sm_90a")
    d = next(d for d in rep.diagnostics if d.kind == "mapping" and "column" in d.message)
    assert "multiple of 16 elements" in d.message and "thread1" in d.witness
    # the rows: a window from row 4 of a tile of 68 rows (512 bytes in, not 1024)
    src = one_src(128, 16, a_rows="4:68", a_tile_rows=68)
    rep = proc_from_source(src).check(target="sm_90a")
    assert any(d.kind == "mapping" and "1024 bytes" in d.message for d in rep.diagnostics), rep
    assert proc_from_source(one_src(128, 16, a_rows="8:72", a_tile_rows=72)) \
        .check(target="sm_90a").ok


@pytest.mark.parametrize("change,why", [
    # a [rows, 16] window of a plain tile
    (("b_s: f16[16, 64] @ SHARED(swizzle=128)", "b_s: f16[16, 64] @ SHARED"), "swizzle=W"),
    # rows of 256 bytes in a 128-byte swizzle
    (("a_s: f16[64, 64] @ SHARED(swizzle=128)", "a_s: f16[64, 128] @ SHARED(swizzle=128)"),
     "256 bytes"),
    # lanes naming different windows
    (("a_s[0:64, 16 * kk:", "a_s[0:64, 16 * (t % 2):"), "different A or B windows"),
])
def test_other_shapes_are_refused(change, why):
    src = one_src(128, 16).replace(*change)
    if "16 * (t % 2):" in src:
        src = src.replace("16 * (t % 2):16 * kk + 16", "16 * (t % 2):16 * (t % 2) + 16")
    try:
        p = proc_from_source(src)
    except Error as e:      # the layout, where the tile is declared: the parser
        assert why in str(e) and "different" not in why
        return
    rep = p.check(target="sm_90a")
    assert not rep.ok and why in str(rep), rep


def test_the_parser_refuses_a_window_of_neither_form():
    src = one_src(128, 16).replace("a_s[0:64, 16 * kk:16 * kk + 16]", "a_s[0:64, 0:8]")
    with pytest.raises(Error, match=r"\[2, 64, 8\] or \[64, 16\]"):
        proc_from_source(src)


def test_a_plain_operand_beside_a_swizzled_one():
    """A swizzled, B plain canonical: each operand's descriptor has its own layout."""
    src = one_src(128, 16).replace("b_s: f16[16, 64] @ SHARED(swizzle=128)",
                                   "b_s: f16[8, 16, 8] @ SHARED")
    src = src.replace("b_s[t, j] = bt[t, j]", "b_s[j // 8, t, j % 8] = bt[t, j]")
    src = src.replace("b_s[0:16, 16 * kk:16 * kk + 16]", "b_s[2 * kk:2 * kk + 2, 0:16, 0:8]")
    p = proc_from_source(src)
    assert p.check(target="sm_90a").ok
    rng = np.random.default_rng(1)
    a = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    bt = rng.integers(-4, 5, (16, 64)).astype(np.float16)
    want = _frag(a.astype(np.float32) @ bt.astype(np.float32).T, 16)
    c = np.zeros((128, 8), np.float32)
    p.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()
