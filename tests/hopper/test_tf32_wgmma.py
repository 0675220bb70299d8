"""TF32 wgmma (issue 35/36, docs/hopper.md "TF32"): f32 SHARED operands make
``wgmma.mma_async.m64nNk8.f32.tf32.tf32``, K = 8 per wgmma, K-major only: the canonical
windows ``[2, rows, 4]`` (core-matrix rows of 4 f32) or ``[rows, 8]`` of a swizzled tile
with rows of W bytes.  The meaning reads each operand as tf32 (its low 13 mantissa bits
dropped, as the tensor cores and the stdlib's mma.sync tf32 kernels do); the interpreter
and the emulator agree with numpy on that; NVRTC builds ``HGMMA.64xNx8.F32.TF32``; the
shapes the hardware cannot read are refused."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import Error, SchedulingError, proc_from_source
from gpudsl.ir.wgmma_meaning import frag_col, frag_row, tf32_truncate


def tf_src(w: int = 128, n: int = 16, col: str = "8 * kk") -> str:
    """One warpgroup, A 64 x 32 and B n x 32 (K-major) of f32, four chained k8 wgmmas:
    from tiles swizzled with ``w`` bytes (rows of 32 f32: w = 128) or plain ones."""
    if w:
        tiles = (f"a_s: f32[64, 32] @ SHARED(swizzle={w})\n"
                 f"        b_s: f32[{n}, 32] @ SHARED(swizzle={w})")
        sa, sb = "a_s[t, j] = a[t, j]", "b_s[t, j] = bt[t, j]"
        call = (f"wgmma(acc[t, 0:{n // 2}], a_s[0:64, {col}:{col} + 8], "
                f"b_s[0:{n}, {col}:{col} + 8])")
    else:
        tiles = f"a_s: f32[8, 64, 4] @ SHARED\n        b_s: f32[8, {n}, 4] @ SHARED"
        sa, sb = "a_s[j // 4, t, j % 4] = a[t, j]", "b_s[j // 4, t, j % 4] = bt[t, j]"
        call = (f"wgmma(acc[t, 0:{n // 2}], a_s[2 * kk:2 * kk + 2, 0:64, 0:4], "
                f"b_s[2 * kk:2 * kk + 2, 0:{n}, 0:4])")
    return f'''
@proc
def tf(a: f32[64, 32], bt: f32[{n}, 32], c: f32[128, {n // 2}]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, {n // 2}] @ REGISTER
        {tiles}
        for t in par(0, 128) @ THREADS:
            for i in seq(0, {n // 2}):
                acc[t, i] = 0.0
            for j in seq(0, 32):
                if t < 64:
                    {sa}
                if t < {n}:
                    {sb}
        sync()
        for t in par(0, 128) @ THREADS:
            for kk in seq(0, 4):
                {call}
        wgmma_commit()
        wgmma_wait(0)
        for t in par(0, 128) @ THREADS:
            for i in seq(0, {n // 2}):
                c[t, i] = acc[t, i]
'''


def _frag(d: np.ndarray, n: int) -> np.ndarray:
    return np.array([[d[frag_row(l, i), frag_col(l, i)] for i in range(n // 2)]
                     for l in range(128)], np.float32)


def _operands(n: int, seed: int = 1):
    """Small integers with bits below tf32's mantissa added: the tf32 product is the
    integers' (exact), the f32 one is not."""
    rng = np.random.default_rng(seed)
    ai = rng.integers(-3, 4, (64, 32)).astype(np.float32)
    bi = rng.integers(-3, 4, (n, 32)).astype(np.float32)
    a = ai * np.float32(1 + 2.0 ** -13)
    bt = bi * np.float32(1 + 2.0 ** -12)
    return a, bt, _frag(ai @ bi.T, n)


def test_tf32_truncate_drops_the_low_13_bits():
    x = np.float32(1 + 2.0 ** -10 + 2.0 ** -11 + 2.0 ** -20)
    assert tf32_truncate(x) == np.float32(1 + 2.0 ** -10)
    assert tf32_truncate(np.float32(-3.0)) == np.float32(-3.0)
    assert tf32_truncate(np.array([1 + 2.0 ** -12], np.float32))[0] == 1.0


@pytest.mark.parametrize("w,n", [(128, 16), (0, 8)])
def test_interpreter_and_emulator_read_operands_as_tf32(w, n):
    p = proc_from_source(tf_src(w, n))
    assert p.check(target="sm_90a").ok
    assert proc_from_source(str(p)).ir == p.ir
    a, bt, want = _operands(n)
    assert not (_frag(a @ bt.T, n) == want).all()      # f32 products would differ
    for run in ("interpret", "emulator"):
        c = np.zeros((128, n // 2), np.float32)
        if run == "interpret":
            gpudsl.interpret(p, a=a, bt=bt, c=c, detect_races=n == 8)
        else:
            p.compile("emulator")(a=a, bt=bt, c=c)
        assert (c == want).all(), run


def test_sm90a_build_issues_tf32_hgmma():
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    src = generate(proc_from_source(tf_src(128, 16)).ir, {}).source
    assert "wgmma.mma_async.sync.aligned.m64n16k8.f32.tf32.tf32" in src
    assert "p, 1, 1;" in src                     # the tf32 form has no transpose immediates
    assert "gpudsl_wgmma_make_desc_swz<128>(&gpudsl_swz<128>((float*)a_s, 0 * 32 + 0), " \
           "(unsigned)(8 * kk) * 4u)" in src      # 32 bytes per k8 step
    plain = generate(proc_from_source(tf_src(0, 8)).ir, {}).source
    assert "gpudsl_wgmma_make_desc(&a_s[2 * kk][0][0], 1024u, 128u)" in plain
    r = compile_cubin(src, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    text = sass.disassemble(r.cubin)
    assert text.count("HGMMA.64x16x8.F32.TF32") >= 4


def test_a_k8_step_off_the_grid_is_refused_with_a_witness():
    rep = proc_from_source(tf_src(128, 16, col="4 * kk")).check(target="sm_90a")
    d = next(d for d in rep.diagnostics if d.kind == "mapping" and "column" in d.message)
    assert "multiple of 8 elements" in d.message and "thread1" in d.witness


@pytest.mark.parametrize("change,why", [
    # the halves' core row of 8 elements: 32 bytes of f32
    (("a_s: f32[8, 64, 4]", "a_s: f32[4, 64, 8]"), "not [2, 64, 4]"),
    # a transposed B of f32: tf32 reads K-major operands only
    (("b_s[2 * kk:2 * kk + 2, 0:8, 0:4])", 'b_s[2 * kk:2 * kk + 2, 0:8, 0:4], b_major="mn")'),
     "K-major operands only"),
    # f32 with halves
    (("b_s: f32[8, 8, 4] @ SHARED", "b_s: f16[8, 8, 8] @ SHARED"), "hold one type"),
])
def test_other_tf32_shapes_are_refused(change, why):
    src = tf_src(0, 8)
    assert change[0] in src
    src = src.replace(*change)
    if "a_s: f32[4, 64, 8]" in src:
        src = src.replace("a_s[j // 4, t, j % 4]", "a_s[j // 8, t, j % 8]").replace(
            "a_s[2 * kk:2 * kk + 2, 0:64, 0:4]", "a_s[kk:kk + 2, 0:64, 0:8]")
    if "b_s: f16" in src:
        src = src.replace("b_s[j // 4, t, j % 4] = bt[t, j]", "b_s[j // 8, t, j % 8] = "
                          "f16(bt[t, j])").replace("0:8, 0:4])", "0:8, 0:8])")
    with pytest.raises(Error) as e:
        proc_from_source(src)
    assert why in str(e.value), str(e.value)


def test_make_wgmma_refuses_a_nest_of_f32_products():
    """A nest of f32 products is not a tf32 wgmma's meaning (no rounding): refused."""
    from gpudsl.schedule import make_wgmma
    src = tf_src(0, 8).replace(
        "            for kk in seq(0, 4):\n                wgmma(acc[t, 0:4], a_s[2 * kk:2 * kk + "
        "2, 0:64, 0:4], b_s[2 * kk:2 * kk + 2, 0:8, 0:4])\n",
        "            for i in seq(0, 4):\n                for kk in seq(0, 32):\n"
        "                    acc[t, i] += f32(a_s[kk // 4, 16 * (t // 32) + t % 32 // 4 + 8 * "
        "(i // 2 % 2), kk % 4]) * f32(b_s[kk // 4, 8 * (i // 4) + 2 * (t % 4) + i % 2, kk % 4])\n")
    src = src.replace("        wgmma_commit()\n        wgmma_wait(0)\n", "")
    with pytest.raises(SchedulingError, match="tf32"):
        make_wgmma(proc_from_source(src), "t #1")


@pytest.mark.gpu
def test_tf32_wgmma_equals_numpy_on_an_h100():
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("wgmma needs an H100/H200 (sm_90a)")
    for w, n in ((128, 16), (0, 8)):
        a, bt, want = _operands(n)
        c = np.zeros((128, n // 2), np.float32)
        proc_from_source(tf_src(w, n)).compile("cuda")(a=a, bt=bt, c=c)
        assert (c == want).all(), (w, n)


def _tf32_nest_src(w: int, n: int = 16, cast: str = "tf32") -> str:
    """:func:`tf_src` with its wgmmas written as the readable nest of products,
    ``acc += tf32(a_s[..]) * tf32(b_s[..])``, in four k8 steps ``kq`` (what
    ``make_wgmma`` recognizes as the tf32 wgmma)."""
    row = "16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2)"
    col = "8 * (i // 4) + 2 * (t % 4) + i % 2"
    if w:
        ra, rb = f"a_s[{row}, 8 * kq + kk]", f"b_s[{col}, 8 * kq + kk]"
    else:
        ra = f"a_s[2 * kq + kk // 4, {row}, kk % 4]"
        rb = f"b_s[2 * kq + kk // 4, {col}, kk % 4]"
    nest = (f"            for kq in seq(0, 4):\n                for i in seq(0, {n // 2}):\n"
            f"                    for kk in seq(0, 8):\n                        acc[t, i] += "
            f"{cast}({ra}) * {cast}({rb})\n")
    src = tf_src(w, n)
    start = src.index("            for kk in seq(0, 4):")
    end = src.index("        wgmma_commit()")
    return src[:start] + nest + src[end:].replace("        wgmma_commit()\n        wgmma_wait(0)\n", "")


@pytest.mark.parametrize("w,n", [(128, 16), (0, 8)])
def test_make_wgmma_makes_the_tf32_wgmma_of_a_nest_of_tf32_products(w, n):
    """``acc += tf32(a[..]) * tf32(b[..])`` of f32 SHARED tiles in k8 steps is the tf32
    wgmma's meaning: make_wgmma makes it (proved), and it computes what the nest does."""
    from gpudsl.schedule import make_wgmma
    nest = proc_from_source(_tf32_nest_src(w, n))
    assert nest.check(target="sm_90a").ok
    made = make_wgmma(nest, "t #1")
    text = str(made)
    assert text.count("wgmma(") == 1 and "tf32(" not in text, text
    assert made.check(target="sm_90a").ok
    a, bt, want = _operands(n)
    for p in (nest, made):
        c = np.zeros((128, n // 2), np.float32)
        gpudsl.interpret(p, a=a, bt=bt, c=c)
        assert (c == want).all()
    c = np.zeros((128, n // 2), np.float32)
    made.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()


def test_make_wgmma_refuses_tf32_products_whose_steps_are_k16():
    """Sixteen steps of k per wgmma are the halves' K: of f32 the nest must be k8 steps."""
    from gpudsl.schedule import make_wgmma
    src = _tf32_nest_src(128).replace("for kq in seq(0, 4)", "for kq in seq(0, 2)").replace(
        "for kk in seq(0, 8)", "for kk in seq(0, 16)").replace("8 * kq + kk", "16 * kq + kk")
    with pytest.raises(SchedulingError, match="one per 8 steps of k"):
        make_wgmma(proc_from_source(src), "t #1")


def test_make_wgmma_refuses_tf32_products_reading_b_mn_major():
    """The tf32 wgmma reads K-major operands only: a nest reading ``b_s[k, n]`` (B stored
    K x N) is refused, with the reason, where halves would make ``b_major="mn"``."""
    from gpudsl.schedule import make_wgmma
    col = "8 * (i // 4) + 2 * (t % 4) + i % 2"
    src = _tf32_nest_src(128, 32).replace(f"b_s[{col}, 8 * kq + kk]", f"b_s[8 * kq + kk, {col}]")
    p = proc_from_source(src)
    assert p.check(target="sm_90a").ok
    with pytest.raises(SchedulingError, match="K-major operands only"):
        make_wgmma(p, "t #1")
