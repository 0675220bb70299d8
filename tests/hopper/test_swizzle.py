"""Swizzled SHARED tiles (docs/hopper.md): the layout's meaning (a permutation inside the
tile, proved), the parser and printer, check()'s row rule, code generation and the
emulator running the same addresses, the performance report's bank conflicts, and the
primitives that keep or refuse it."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CompileError, ProcError, SchedulingError, proc_from_source
from gpudsl.codegen.swizzle_cuda import SWIZZLE
from gpudsl.ir.swizzle_meaning import WIDTHS, prove_permutation, repeat_bytes, swizzled
from gpudsl.runtime.artifact_cache import Cache
from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.nvrtc import compile_cubin
from gpudsl.runtime.signature import KernelSig
from gpudsl.schedule import divide_loop, pad_dim, set_memory, stage_mem, vectorize

from .cases import NS, tile_copy


@pytest.mark.parametrize("w", WIDTHS)
def test_the_swizzle_is_a_permutation_inside_the_tile(w):
    assert prove_permutation(w)                    # every size, with Z3
    for size in range(w, 4 * 1024 + 1, w):          # and by enumeration
        assert sorted(swizzled(o, w) for o in range(size)) == list(range(size))
    # the rule is needed: a tile of 200 bytes is not mapped onto itself
    assert sorted(swizzled(o, 128) for o in range(200)) != list(range(200))


def test_the_128_byte_pattern_is_chunk_xor_row():
    """Rows of 128 bytes: chunk c of row r is stored as chunk c ^ (r % 8) (TMA's and
    CUTLASS's 128-byte swizzle); the pattern repeats every 1024 bytes."""
    for r in range(16):
        for c in range(8):
            assert swizzled(128 * r + 16 * c + 4, 128) == 128 * r + 16 * (c ^ (r % 8)) + 4
    assert swizzled(64 * 2 + 16, 64) == 64 * 2 + 16 * (1 ^ 1)   # line 1, segment of 64
    assert [repeat_bytes(w) for w in WIDTHS] == [256, 512, 1024]


def test_the_generated_helper_is_the_python_meaning(tmp_path):
    """The C helper codegen emits (and the emulator compiles) puts every element where
    ``gpudsl.ir.swizzle_meaning`` says, for each width and element size."""
    src = SWIZZLE + r"""
extern "C" __global__ void offsets(long long* out, int w, int es, int n) {
  for (int i = 0; i < n; i++) {
    char* base = 0;
    long long o = 0;
    if (es == 2 && w == 128) o = (char*)&gpudsl_swz<128>((short*)base, i) - base;
    if (es == 4 && w == 128) o = (char*)&gpudsl_swz<128>((float*)base, i) - base;
    if (es == 4 && w == 64) o = (char*)&gpudsl_swz<64>((float*)base, i) - base;
    if (es == 8 && w == 32) o = (char*)&gpudsl_swz<32>((double*)base, i) - base;
    out[i] = o;
  }
}
"""
    mod = build_emulator_module(src, [KernelSig("offsets", ["long long*", "int", "int", "int"])],
                                cache=Cache(tmp_path))
    for w, es in [(128, 2), (128, 4), (64, 4), (32, 8)]:
        n = 2048 // es
        out = np.zeros(n, np.int64)
        mod.launch("offsets", grid=(1, 1, 1), block=(1, 1, 1), args=[out, w, es, n])
        assert out.tolist() == [swizzled(i * es, w) for i in range(n)]


def test_prints_and_parses_back():
    p = tile_copy()
    assert "s: f16[64, 64] @ SHARED(swizzle=128)" in str(p)
    assert proc_from_source(str(p), NS) == p
    assert proc_from_source(str(p).replace("(swizzle=128)", ""), NS) != p


@pytest.mark.parametrize("decl, msg", [
    ("f16[64, 40] @ SHARED(swizzle=128)", "80 bytes, not a multiple of the 128-byte"),
    ("f16[64, 64] @ REGISTER(swizzle=128)", "REGISTER memory has no layouts"),
    ("f16[64, 64] @ SHARED(swizzle=16)", "32, 64 or 128 bytes"),
    ("f16[64, 64] @ SHARED(128)", "one keyword"),
    ("f16 @ SHARED(swizzle=32)", "only arrays"),
])
def test_parser_refusals(decl, msg):
    src = str(tile_copy()).replace("f16[64, 64] @ SHARED(swizzle=128)", decl)
    with pytest.raises(ProcError, match=msg.replace("(", r"\(").replace(")", r"\)")):
        proc_from_source(src, NS)


def test_check_proves_the_row_rule_for_every_size():
    src = '''
@proc
def k(m: size, x: f32[64, m], y: f32[64, m]):
    assert m <= 64
    for b in par(0, 1) @ BLOCKS:
        s: f32[64, m] @ SHARED(swizzle=64)
        for t in par(0, 64) @ THREADS:
            for j in seq(0, m):
                s[t, j] = x[t, j]
        sync()
        for t in par(0, 64) @ THREADS:
            for j in seq(0, m):
                y[t, j] = s[63 - t, j]
'''
    rep = proc_from_source(src, NS).check()
    assert rep.kinds() == {"mapping"}
    assert rep.diagnostics[0].witness["row_bytes"] % 64 != 0
    assert proc_from_source(src.replace("m <= 64", "m <= 64 and m % 16 == 0"), NS).check().ok


def test_bounds_are_proved_on_indices_as_before():
    assert tile_copy().check().ok
    bad = str(tile_copy()).replace("(t + j) % 64]", "(t + j) % 65]")
    assert proc_from_source(bad, NS).check().kinds() == {"bounds"}


@pytest.mark.parametrize("w, ty, cols", [(128, "f16", 64), (64, "f32", 16), (32, "f32", 8),
                                         (128, "f32", 64), (32, "f64", 4)])
def test_the_emulator_equals_the_interpreter(w, ty, cols):
    p = tile_copy(w, ty, cols)
    assert p.check().ok
    dt = {"f16": np.float16, "f32": np.float32, "f64": np.float64}[ty]
    x = (np.arange(64 * cols) % 251).astype(dt).reshape(64, cols)
    want, got = np.zeros_like(x), np.zeros_like(x)
    gpudsl.interpret(p, x=x, y=want)
    p.compile("emulator")(x=x, y=got)
    assert np.array_equal(got, want)
    cu = p.cuda_source()
    assert f"__align__({repeat_bytes(w)})" in cu and f"gpudsl_swz<{w}>" in cu
    assert compile_cubin(cu, "sm_90", use_cache=False).resources   # NVRTC builds it


def test_a_tile_in_dynamic_shared_memory():
    """Above 48 KiB the tile is carved out of dynamic shared memory, at an offset that is
    a multiple of its pattern's period."""
    p = tile_copy(128, "f16", 256, 128)    # 64 KiB
    cu = p.cuda_source()
    assert "__align__(1024) unsigned char gpudsl_smem[]" in cu and "gpudsl_swz<128>" in cu
    x = (np.arange(128 * 256) % 1000).astype(np.float16).reshape(128, 256)
    want, got = np.zeros_like(x), np.zeros_like(x)
    gpudsl.interpret(p, x=x, y=want)
    p.compile("emulator")(x=x, y=got)
    assert np.array_equal(got, want)


def test_async_copies_and_atomics_into_a_swizzled_tile():
    p = proc_from_source('''
@proc
def k(x: f32[8, 32], y: f32[8, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[8, 32] @ SHARED(swizzle=128)
        for t in par(0, 64) @ THREADS:
            async_copy(s[t // 8, 4 * (t % 8):4 * (t % 8) + 4], x[t // 8, 4 * (t % 8):4 * (t % 8) + 4])
        async_commit()
        async_wait(0)
        sync()
        for t in par(0, 64) @ THREADS:
            atomic_add(s[t % 8, t // 8], 1.0)
        sync()
        for t in par(0, 64) @ THREADS:
            for j in seq(0, 4):
                y[t // 8, 4 * (t % 8) + j] = s[t // 8, (4 * (t % 8) + j + t // 8) % 32]
''', NS)
    assert p.check().ok
    x = np.arange(256, dtype=np.float32).reshape(8, 32)
    want, got = np.zeros_like(x), np.zeros_like(x)
    gpudsl.interpret(p, x=x, y=want)
    p.compile("emulator")(x=x, y=got)
    assert np.array_equal(got, want)


def test_the_report_shows_the_bank_conflicts_a_swizzle_removes():
    """A warp writing a column of f32[32, 32]: 32-way in the plain tile; the swizzle
    spreads the column over 8 (128 B), 4 (64 B) or 2 (32 B) chunks of each 4 banks."""
    def column_write(w):
        lay = f"(swizzle={w})" if w else ""
        p = proc_from_source(f'''
@proc
def tr(x: f32[32, 32], y: f32[32, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32, 32] @ SHARED{lay}
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 32):
                s[t, j] = x[j, t]
        sync()
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 32):
                y[j, t] = s[j, t]
''', NS)
        acc = [a for k in p.perf(sass=False).kernels for a in k.accesses
               if a.memory == "SHARED" and a.kind == "write"][0]
        return acc.bank_conflict, acc.figure()

    assert column_write(0) == (32, "32-way bank conflict")
    assert column_write(128) == (4, "4-way bank conflict (swizzle 128)")
    assert column_write(64)[0] == 8 and column_write(32)[0] == 16


def test_primitives_keep_the_layout_or_refuse():
    p = tile_copy(128, "f32", 32)
    q = divide_loop(p, "j", 8, ["jo", "ji"], tail="perfect")
    assert "SHARED(swizzle=128)" in str(q) and q.check().ok
    with pytest.raises(SchedulingError, match="swizzle"):
        set_memory(p, "s", gpudsl.GLOBAL)
    with pytest.raises(SchedulingError, match="not a multiple"):
        pad_dim(p, "s", 1, "33")                   # 132-byte rows
    r = pad_dim(p, "s", 0, "65")                   # more rows are fine
    assert "s: f32[65, 32] @ SHARED(swizzle=128)" in str(r) and r.check().ok
    v = divide_loop(p, "j", 4, ["jo", "jv"], tail="perfect")
    with pytest.raises(SchedulingError, match="swizzled tile to an @instr"):
        vectorize(v, v.find_loop("jv"), 4)
    st = stage_mem(p, p.find_loop("j"), "x[t, 0:32]", "xs")   # a new plain buffer
    assert "SHARED(swizzle=128)" in str(st)


def test_an_instr_window_of_a_swizzled_tile_is_refused_at_compile():
    copy4 = proc_from_source('''
@instr("*(float4*){dst_data} = *(const float4*){src_data};")
def copy4(dst: [f32][4] @ SHARED, src: [f32][4] @ GLOBAL):
    for i in seq(0, 4):
        dst[i] = src[i]
''', NS)
    p = proc_from_source('''
@proc
def k(x: f32[8, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[8, 32] @ SHARED(swizzle=128)
        for t in par(0, 64) @ THREADS:
            copy4(s[t // 8, 4 * (t % 8):4 * (t % 8) + 4], x[t // 8, 4 * (t % 8):4 * (t % 8) + 4])
''', dict(NS, copy4=copy4))
    with pytest.raises(CompileError, match="cannot follow the swizzled layout"):
        p.compile("emulator")
