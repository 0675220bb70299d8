"""wgmma with an MN-major B (issue 35/36/37, docs/hopper.md "MN-major B"):
``wgmma(acc, a, b, b_major="mn")`` reads B stored K x N (N contiguous), the PTX ISA's
``imm-trans-b = 1``: a window ``[N // E, 16, E]`` (or ``[16, N]`` when N = E) whose rows are
E elements: 16 bytes of a plain tile (the canonical interleaved layout) or W bytes of a
tile swizzled with W bytes (what a TMA box lands in).  The interpreter and the emulator
(which reads through the descriptor) equal numpy; check() proves the alignment and
refuses the twins; NVRTC builds HGMMA with the transposed B; and the NN GEMM ``a @ b``
with TMA boxes of ``b[k-tile, n-tile]`` in 128-byte swizzled rings is proved for every
size and equals numpy."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import gpudsl
from gpudsl import Error, RaceError, InterpError, proc_from_source
from gpudsl.ir.wgmma_meaning import frag_col, frag_row


def mn_src(w: int = 128, n: int = 64, two: bool = False, k_rows: int = 64,
           k0: str = "16 * kk") -> str:
    """One warpgroup: A 64 x 64 in a 128-byte swizzled K-major tile, B 64 x n stored K x N
    (MN-major) in a tile swizzled with ``w`` bytes (0: plain, rows of 8), four chained
    wgmmas (``two``: the ``[16, N]`` window of a one-block tile)."""
    e = w // 2 if w else 8
    nb = n // e
    lay = f" @ SHARED(swizzle={w})" if w else " @ SHARED"
    if two:
        tile, win = f"f16[{k_rows}, {e}]", f"b_s[{k0}:{k0} + 16, 0:{e}]"
        store = f"b_s[t, j] = b[t, {e} * cb + j]"
    else:
        tile, win = f"f16[{nb}, {k_rows}, {e}]", f"b_s[0:{nb}, {k0}:{k0} + 16, 0:{e}]"
        store = f"b_s[cb, t, j] = b[t, {e} * cb + j]"
    return f'''
@proc
def one(a: f16[64, 64], b: f16[64, {n}], c: f32[128, {n // 2}]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, {n // 2}] @ REGISTER
        a_s: f16[64, 64] @ SHARED(swizzle=128)
        b_s: {tile}{lay}
        for t in par(0, 128) @ THREADS:
            for i in seq(0, {n // 2}):
                acc[t, i] = 0.0
            if t < 64:
                for j in seq(0, 64):
                    a_s[t, j] = a[t, j]
                for cb in seq(0, {nb}):
                    for j in seq(0, {e}):
                        {store}
        sync()
        for t in par(0, 128) @ THREADS:
            for kk in seq(0, 4):
                wgmma(acc[t, 0:{n // 2}], a_s[0:64, 16 * kk:16 * kk + 16], {win}, b_major="mn")
        wgmma_commit()
        wgmma_wait(0)
        for t in par(0, 128) @ THREADS:
            for i in seq(0, {n // 2}):
                c[t, i] = acc[t, i]
'''


def _frag(d: np.ndarray, n: int) -> np.ndarray:
    return np.array([[d[frag_row(l, i), frag_col(l, i)] for i in range(n // 2)]
                     for l in range(128)], np.float32)


def _run(p, n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-4, 5, (64, 64)).astype(np.float16)
    b = rng.integers(-4, 5, (64, n)).astype(np.float16)
    return a, b, _frag(a.astype(np.float32) @ b.astype(np.float32), n)


def test_round_trip_and_printed_form():
    p = proc_from_source(mn_src(128, 128))
    text = str(p)
    assert 'b_s[0:2, 16 * kk:16 * kk + 16, 0:64], b_major="mn")' in text
    assert proc_from_source(text).ir == p.ir
    plain = proc_from_source(mn_src(0, 16))
    assert proc_from_source(str(plain)).ir == plain.ir


@pytest.mark.parametrize("w,n,two", [(128, 64, True), (128, 128, False), (32, 32, False),
                                     (0, 16, False), (0, 8, True)])
def test_interpreter_and_emulator_equal_numpy(w, n, two):
    p = proc_from_source(mn_src(w, n, two))
    assert p.check(target="sm_90a").ok
    a, b, want = _run(p, n, w + n)
    c = np.zeros((128, n // 2), np.float32)
    gpudsl.interpret(p, a=a, b=b, c=c, detect_races=n <= 16)
    assert (c == want).all()
    c = np.zeros((128, n // 2), np.float32)
    p.compile("emulator")(a=a, b=b, c=c)     # reads B through the descriptor
    assert (c == want).all()


def _ops(cubin) -> Counter:
    from gpudsl.perf import sass
    return sass.opcode_counts(sass.disassemble(cubin), full=True)


def test_sm90a_build_issues_hgmma_with_b_transposed():
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    src = generate(proc_from_source(mn_src(128, 128)).ir, {}).source
    assert "p, 1, 1, 0, 1;" in src                     # imm-trans-b = 1
    assert "gpudsl_wgmma_make_desc_mn<128>(&gpudsl_swz<128>((__half*)b_s, (0 * 64 + 16 * kk) " \
           "* 64 + 0), 8192u)" in src                  # LBO: 64 rows of 128 bytes
    r = compile_cubin(src, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = _ops(r.cubin)
    hg = {k: v for k, v in ops.items() if k.startswith("HGMMA")}
    assert sum(hg.values()) >= 4 and all(".tnspB" not in k for k in hg)  # the mnemonic
    text = sass.disassemble(r.cubin)
    assert text.count("tnspB") >= 4


def test_plain_mn_descriptor_offsets():
    """The interleaved layout: LBO = 8 rows of 16 bytes (the two k8 groups), SBO = the
    stride of the blocks of 8 columns (64 rows of 16 bytes here)."""
    from gpudsl.codegen import generate
    src = generate(proc_from_source(mn_src(0, 16)).ir, {}).source
    assert "gpudsl_wgmma_make_desc(&b_s[0][16 * kk][0], 128u, 1024u)" in src
    assert "gpudsl_wgmma_m64n16k16_f16_mn(" in src


def test_misaligned_rows_are_refused_with_a_witness():
    rep = proc_from_source(mn_src(128, 128, k_rows=80, k0="16 * kk + 4")).check(
        target="sm_90a")
    d = next(d for d in rep.diagnostics if d.kind == "mapping" and "1024 bytes" in d.message)
    assert "first row" in d.message and "thread1" in d.witness
    assert proc_from_source(mn_src(128, 128, k_rows=80, k0="16 * kk + 8")).check(
        target="sm_90a").ok


def test_blocks_off_the_period_are_refused():
    rep = proc_from_source(mn_src(128, 128, k_rows=68)).check(target="sm_90a")
    assert any(d.kind == "mapping" and "leading byte offset" in d.message
               for d in rep.diagnostics), rep


@pytest.mark.parametrize("change,why", [
    # rows of 128 bytes in a plain tile: the interleaved layout's rows are 16 bytes
    (("b_s: f16[2, 64, 64] @ SHARED(swizzle=128)", "b_s: f16[2, 64, 64] @ SHARED"),
     "exactly 16 bytes"),
    # rows of 256 bytes in a 128-byte swizzle
    (("b_s: f16[2, 64, 64] @ SHARED(swizzle=128)", "b_s: f16[2, 64, 128] @ SHARED(swizzle=128)"),
     "exactly 128 bytes"),
    # half a row
    (("16 * kk + 16, 0:64]", "16 * kk + 16, 0:32]"), "not [2, 16, 64]"),
    # the K-major shape with the MN keyword
    (("b_s[0:2, 16 * kk:16 * kk + 16, 0:64]", "b_s[0, 0:128, 16 * kk:16 * kk + 16]"),
     "name [2, 16, 64]"),
    # an unknown majorness
    (('b_major="mn"', 'b_major="n"'), 'b_major="mn" (B stored K x N)'),
])
def test_other_shapes_are_refused_by_the_parser(change, why):
    src = mn_src(128, 128)
    assert change[0] in src
    with pytest.raises(Error, match=None) as e:
        proc_from_source(src.replace(*change))
    assert why in str(e.value), str(e.value)


NN = '''
@proc
def gemm_nn(m: size, n: size, k: size, a: f16[m, k], b: f16[k, n], c: f32[m, n]):
    assert k % 8 == 0
    assert n % 8 == 0
    for bm in par(0, (m + 63) // 64) @ BLOCKS:
        for bn in par(0, (n + 127) // 128) @ BLOCKS:
            acc: f32[128, 64] @ REGISTER
            a_s: f16[4, 64, 64] @ SHARED(swizzle=128)
            b_s: f16[4, 2, 64, 64] @ SHARED(swizzle=128)
            full: barrier[4] @ SHARED
            empty: barrier[4] @ SHARED
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 64):
                    acc[t, i] = 0.0
            for j in seq(0, 4):
                arrive(empty[j], 0, 128)
            for ks in seq(0, (k + 63) // 64):
                wait(empty[ks % 4], 128, 129)
                for t in par(128, 129) @ THREADS:
                    tma_load(a_s[ks % 4, 0:64, 0:64], a[64 * bm:64 * bm + 64, 64 * ks:64 * ks + 64], bar=full[ks % 4])
                    for cb in seq(0, 2):
                        tma_load(b_s[ks % 4, cb, 0:64, 0:64], b[64 * ks:64 * ks + 64, 128 * bn + 64 * cb:128 * bn + 64 * cb + 64], bar=full[ks % 4])
                arrive(full[ks % 4], 128, 129)
                wait(full[ks % 4], 0, 128)
                for t in par(0, 128) @ THREADS:
                    for kk in seq(0, 4):
                        wgmma(acc[t, 0:64], a_s[ks % 4, 0:64, 16 * kk:16 * kk + 16], b_s[ks % 4, 0:2, 16 * kk:16 * kk + 16, 0:64], b_major="mn")
                wgmma_commit()
                wgmma_wait(0)
                arrive(empty[ks % 4], 0, 128)
            for t in par(0, 128) @ THREADS:
                for i in seq(0, 64):
                    if 64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2) < m and 128 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2 < n:
                        c[64 * bm + 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2), 128 * bn + 8 * (i // 4) + 2 * (t % 4) + i % 2] = acc[t, i]
'''


def _nn_operands(m, n, k, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(np.float16)
    b = rng.integers(-3, 4, (k, n)).astype(np.float16)
    return a, b, a.astype(np.float32) @ b.astype(np.float32)


def test_the_nn_gemm_is_proved_for_every_size():
    assert proc_from_source(NN).check(target="sm_90a").ok


@pytest.mark.parametrize("shape", [(64, 128, 64), (70, 40, 72), (130, 200, 136)])
def test_the_nn_gemm_equals_numpy_on_the_emulator(shape):
    a, b, want = _nn_operands(*shape)
    c = np.zeros(want.shape, np.float32)
    proc_from_source(NN).compile("emulator")(a=a, b=b, c=c)
    assert (c == want).all()


def test_the_nn_gemm_equals_numpy_in_the_interpreter():
    a, b, want = _nn_operands(40, 24, 40)
    c = np.zeros(want.shape, np.float32)
    gpudsl.interpret(proc_from_source(NN), a=a, b=b, c=c, detect_races=True)
    assert (c == want).all()


def test_nn_twin_without_the_full_wait_is_a_race():
    p = proc_from_source(NN.replace("                wait(full[ks % 4], 0, 128)\n", ""))
    assert "race" in p.check(target="sm_90a").kinds()


def test_nn_gemm_builds_utmaldg_and_hgmma_with_no_shared_loads():
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    src = generate(proc_from_source(NN).ir, {}).source
    assert "gpudsl_tmap_b_64x64_s128" in src and "gpudsl_wgmma_m64n128k16_f16_mn(" in src
    r = compile_cubin(src, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = Counter()
    for k, v in _ops(r.cubin).items():
        ops[k.split(".")[0]] += v
    assert ops["UTMALDG"] >= 2 and ops["HGMMA"] >= 4
    assert ops["LDS"] == 0 and ops["LDSM"] == 0 and ops["STS"] == 0 and ops["LDG"] == 0


@pytest.mark.gpu
def test_the_nn_gemm_equals_numpy_on_an_h100():
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("wgmma needs an H100/H200 (sm_90a)")
    k = proc_from_source(NN).compile("cuda")
    for shape in ((64, 128, 64), (130, 200, 136), (512, 512, 1024)):
        a, b, want = _nn_operands(*shape, seed=shape[0])
        c = np.zeros(want.shape, np.float32)
        k(a=a, b=b, c=c)
        assert (c == want).all(), shape
    one = proc_from_source(mn_src(0, 16)).compile("cuda")      # the interleaved layout
    a, b, want = _run(None, 16, 3)
    c = np.zeros((128, 8), np.float32)
    one(a=a, b=b, c=c)
    assert (c == want).all()


ROW = "16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2)"
COL = "8 * (i // 4) + 2 * (t % 4) + i % 2"


def nest_src(w: int, n: int, b_read: str) -> str:
    """``mn_src`` with the wgmmas written as the per-thread product loops."""
    src = mn_src(w, n, two=n == (w // 2 if w else 8))
    head, rest = src.split("            for kk in seq(0, 4):\n", 1)
    tail = rest.split("        wgmma_wait(0)\n", 1)[1]
    nest = (f"            for s in seq(0, 4):\n"
            f"                for i in seq(0, {n // 2}):\n"
            f"                    for kk in seq(0, 16):\n"
            f"                        acc[t, i] += f32(a_s[{ROW}, 16 * s + kk]) * "
            f"f32({b_read})\n")
    return head + nest + tail


NESTS = {
    "128B, [16, N]": (128, 64, f"b_s[16 * s + kk, {COL}]",
                      'b_s[16 * s:16 * s + 16, 0:64], b_major="mn")'),
    "128B, [2, 16, 64]": (128, 128, f"b_s[({COL}) // 64, 16 * s + kk, ({COL}) % 64]",
                          'b_s[0:2, 16 * s:16 * s + 16, 0:64], b_major="mn")'),
    "plain, [2, 16, 8]": (0, 16, f"b_s[({COL}) // 8, 16 * s + kk, ({COL}) % 8]",
                          'b_s[0:2, 16 * s:16 * s + 16, 0:8], b_major="mn")'),
}


@pytest.mark.parametrize("name", sorted(NESTS))
def test_make_wgmma_recognizes_an_mn_major_b(name):
    from gpudsl.schedule import make_wgmma
    w, n, read, want = NESTS[name]
    p = proc_from_source(nest_src(w, n, read))
    q = make_wgmma(p, "t #1")
    assert want in str(q), str(q)
    assert q.check(target="sm_90a").ok
    a, b, _ = _run(None, n, 5)
    outs = []
    for r in (p, q):
        c = np.zeros((128, n // 2), np.float32)
        gpudsl.interpret(r, a=a, b=b, c=c)
        outs.append(c)
    c = np.zeros((128, n // 2), np.float32)
    q.compile("emulator")(a=a, b=b, c=c)
    assert (outs[0] == outs[1]).all() and (c == outs[0]).all()


def test_make_wgmma_refuses_an_mn_major_b_read_off_the_fragment():
    from gpudsl import SchedulingError
    from gpudsl.schedule import make_wgmma
    # the column's pair swapped: B[k, n ^ 1] is not the fragment's column
    p = proc_from_source(nest_src(128, 64, "b_s[16 * s + kk, 8 * (i // 4) + 2 * (t % 4) + "
                                           "1 - i % 2]"))
    with pytest.raises(SchedulingError, match="fails for the witness"):
        make_wgmma(p, "t #1")


def test_primitives_keep_an_mn_major_operand_or_refuse():
    from gpudsl import SchedulingError
    from gpudsl import schedule as S
    p = proc_from_source(mn_src(128, 128))
    q = S.unroll_loop(p, "kk")                       # four wgmmas, each still MN-major
    assert str(q).count('b_major="mn"') == 4 and q.check(target="sm_90a").ok
    for width in (0, 64):                            # rows of 128 bytes fit only the 128B swizzle
        with pytest.raises(SchedulingError, match="MN-major B operand"):
            S.set_swizzle(p, "b_s", width)
    with pytest.raises(SchedulingError, match="wgmma"):
        S.pad_dim(p, "b_s", 1, 8)
