"""The TF32 tensor-core matmul (gpudsl/stdlib/matmul_tf32.py): check() proves the
schedule, the emulator (which rounds the staged tiles like cvt.rn.tf32.f32 and reads
the mma inputs as TF32) equals numpy within the stated TF32 tolerance for even and odd
multiples of the tiles, the generated CUDA carries the inline PTX and compiles with
NVRTC for sm_80 and sm_90 without spills, its sm_90 main loop issues at most 4
instructions per HMMA, ops.matmul(precision="tf32") reaches it, and on a GPU it equals
numpy too."""
import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.errors import SchedulingError
from gpudsl.stdlib import matmul_tf32 as mt
from gpudsl.stdlib.shapes import NodeError

SHAPE = dict(m=128, n=64, k=256)  # one block row, two block columns, four k tiles
RNG = np.random.default_rng(15)


@pytest.fixture(scope="module")
def kernel():
    return mt.tf32_kernel()


@pytest.fixture(scope="module")
def emulated(kernel):
    return kernel.compile("emulator")


def _nvrtc():
    try:
        from gpudsl.runtime.nvrtc import compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")


def test_check_proves_the_schedule(kernel):
    assert kernel.check().ok  # symbolic sizes under the divisibility asserts
    r = kernel.check(**SHAPE)
    assert r.ok, str(r)
    assert mt.mma_precondition_holds(kernel) and mt.alignment_holds(kernel)
    assert mt.tf32_preconditions_hold(kernel)


def test_the_other_tile_shapes_are_proved_and_equal_numpy():
    """128 x 64 x 32 tiles, one buffer (the bk % 32 == 0 copy of B), 2 x 2 warps of
    64 x 32: check() and the preconditions, and the emulator against numpy."""
    p = mt.tf32_kernel(128, 64, 32, 64, 32, False)
    assert p.check().ok and mt.tf32_preconditions_hold(p)
    a = RNG.standard_normal((384, 96)).astype(np.float32)
    b = RNG.standard_normal((96, 192)).astype(np.float32)
    c = np.zeros((384, 192), np.float32)
    p.compile("emulator")(a=a, b=b, c=c)
    assert np.all(np.abs(c - a.astype(np.float64) @ b) <= mt.tf32_tolerance(a, b))


def test_preconditions_refuse_a_misaligned_or_guarded_call():
    """The alignment check fails where a window starts at an odd element, the lane
    check where the thread loops are not (w, g, t) directly around the call."""
    import gpudsl as g

    src = g.proc_from_source(
        "def f(c: f32[8, 4], a: f32[8, 8], b: f32[8, 4]):\n"
        "    As: f32[8, 8] @ SHARED\n"
        "    Bs: f32[8, 4] @ SHARED\n"
        "    acc: f32[2, 2] @ REGISTER\n"
        "    mma_tf32_nt(acc[0:2, 0:2], As[1:3, 0:8], Bs[0:8, 1:3])\n",
        namespace={**vars(g), "mma_tf32_nt": mt.mma_tf32_nt})
    assert not mt.alignment_holds(src) and not mt.mma_precondition_holds(src)

def test_the_mma_is_a_call_of_the_instr(kernel):
    text = str(kernel)
    assert "mma_tf32_nt(acc[" in text and "store_tf32_x4(As[" in text
    assert "store_tf32_x4(Bs[" in text and "vcopy2_GLOBAL_REGISTER(c[" in text
    assert "As: f32[2, 128, 24] @ SHARED" in text and "Bs: f32[2, 16, 132] @ SHARED" in text


@pytest.mark.parametrize("m, n, k", [(128, 64, 256), (384, 48, 384)], ids=str)
def test_emulator_equals_numpy_within_the_tf32_tolerance(emulated, m, n, k):
    """Even and odd multiples of the tiles (three k steps: the double buffer's last
    step after an odd count)."""
    a = RNG.standard_normal((m, n)).astype(np.float32)
    b = RNG.standard_normal((n, k)).astype(np.float32)
    c = np.zeros((m, k), np.float32)
    emulated(a=a, b=b, c=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - ref)
    assert np.all(err <= mt.tf32_tolerance(a, b))
    # the fallback really rounds to TF32: far from fp32's error, near TF32's
    assert err.max() > 1e-4 > np.abs(a @ b - ref).max()


def test_inf_and_nan_pass_the_rounding(emulated):
    """The staging rounding keeps infinities and NaNs (a NaN whose mantissa would
    carry into the exponent is not turned into a number)."""
    m, n, k = SHAPE["m"], SHAPE["n"], SHAPE["k"]
    a = np.ones((m, n), np.float32)
    a[0, 0] = np.inf
    a[1, 3] = np.frombuffer(np.uint32(0x7fffffff).tobytes(), np.float32)[0]  # CUDA's NaN
    b = np.ones((n, k), np.float32)
    c = np.zeros((m, k), np.float32)
    emulated(a=a, b=b, c=c)
    assert np.all(np.isposinf(c[0])) and np.all(np.isnan(c[1]))
    np.testing.assert_array_equal(c[2:], np.float32(n))


def test_staging_rounds_like_cvt_rn(emulated):
    """cvt.rn.tf32.f32 rounds to nearest, ties to even: 1 + 2**-11 (a tie) rounds to
    1, 1 + 3 * 2**-11 to 1 + 2**-9, 1 + 2**-12 down to 1; integers are exact."""
    m, n, k = SHAPE["m"], SHAPE["n"], SHAPE["k"]
    b = np.ones((n, k), np.float32)
    c = np.zeros((m, k), np.float32)
    for x, want in ((1 + 2.0 ** -11, 1.0), (1 + 3 * 2.0 ** -11, 1 + 2.0 ** -9),
                    (1 + 2.0 ** -12, 1.0), (-(1 + 3 * 2.0 ** -11), -(1 + 2.0 ** -9))):
        a = np.full((m, n), x, np.float32)
        emulated(a=a, b=b, c=c)
        np.testing.assert_array_equal(c, np.float32(n * want))
    a = RNG.integers(-8, 8, (m, n)).astype(np.float32)
    bi = RNG.integers(-8, 8, (n, k)).astype(np.float32)
    emulated(a=a, b=bi, c=c)
    np.testing.assert_array_equal(c, a @ bi)


def test_interpreter_gives_the_fp32_meaning(kernel):
    """The instr's body (what the interpreter runs) is the exact fp32 product."""
    m, n, k = 128, 32, 128
    a = RNG.integers(-4, 4, (m, n)).astype(np.float32)
    b = RNG.integers(-4, 4, (n, k)).astype(np.float32)
    c = np.zeros((m, k), np.float32)
    gpudsl.interpret(kernel, m=m, n=n, k=k, a=a, b=b, c=c)
    np.testing.assert_array_equal(c, a @ b)


def test_cuda_has_the_inline_ptx_and_a_fallback(kernel):
    src = kernel.cuda_source(**SHAPE)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in src
    assert "cvt.rn.tf32.f32" in src and src.count("cvt.") == src.count("store_tf32_x4")
    assert "__CUDA_ARCH__ >= 900" in src and "__CUDA_ARCH__ >= 800" in src and "#else" in src


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_without_spills(kernel, arch):
    _nvrtc()
    from gpudsl.runtime.nvrtc import compile_cubin

    for bind in (SHAPE, {}):  # bound and symbolic sizes
        res = compile_cubin(kernel.cuda_source(**bind), arch).resources
        assert res, "no kernel in the ptxas log"
        for name, r in res.items():
            assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0, (name, r)
            assert r.stack_bytes == 0, (name, r)  # the accumulators stay in registers


def test_sm90_main_loop_issues_at_most_4_instructions_per_hmma(kernel):
    """The machine code of the kernel ops runs at 4096^3 (sizes as parameters): the
    main loop holds the tile's HMMAs, 64-bit fragment loads, one F2FP per staged
    element, 128-bit copies, two barriers: at most 4 instructions per HMMA (429 per
    64 HMMA, 6.7, before issue 24)."""
    _nvrtc()
    from gpudsl.perf.sass import have_disassembler, hot_loop

    if not have_disassembler():
        pytest.skip("nvdisasm absent")
    p, b = mt.matmul_tf32_kernel((4096, 4096), (4096, 4096))
    (ks,) = p.compile("emulator", check=False).sass("sm_90", **b).kernels
    hot = hot_loop(ks.figures)
    assert hot.count("HMMA") == 64 and hot.instructions <= 4 * hot.count("HMMA"), hot.counts
    assert hot.counts.get("LDS", 0) == 0 and hot.counts.get("LDS.64") == 32  # no scalar
    assert ks.spill_bytes == 0


def test_perf_report_has_no_spills(kernel):
    rep = kernel.perf("H100", **SHAPE)
    if any("ptxas figures unavailable" in n for n in rep.notes):
        pytest.skip("ptxas figures unavailable")
    (kp,) = rep.kernels
    assert kp.spills == 0
    assert kp.registers is not None and kp.registers <= 255
    # the tile copies and the epilogue move global memory in the minimum number of
    # sectors; the copies' stores and the fragment loads have no bank conflict
    for acc in kp.accesses:
        if acc.memory == "GLOBAL":
            assert acc.sectors == acc.min_sectors, acc
        else:
            assert acc.bank_conflict == 1, acc


def test_ops_matmul_tf32_on_the_emulator():
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    b = RNG.standard_normal((32, 128)).astype(np.float32)
    c = ops.matmul(a, b, precision="tf32")
    err = np.abs(c - a.astype(np.float64) @ b)
    assert np.all(err <= mt.tf32_tolerance(a, b))
    np.testing.assert_allclose(ops.matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)  # default fp32


@pytest.mark.parametrize("sa, sb", [((100, 32), (32, 128)), ((128, 30), (30, 128)),
                                    ((128, 32), (32, 60)), ((2, 128, 32), (2, 32, 128)),
                                    ((128, 32), (64, 128))], ids=str)
def test_refuses_other_shapes(sa, sb):
    with pytest.raises(NodeError):
        mt.matmul_tf32_kernel(sa, sb)


def test_ops_refuses_unknown_precision():
    a = np.ones((128, 32), np.float32)
    with pytest.raises(NodeError, match="precision"):
        ops.matmul(a, np.ones((32, 128), np.float32), precision="fp16")


def test_replace_refuses_code_that_is_not_the_mma():
    """replace() unifies the block with the instr's body: a k loop of 4 is not an mma."""
    from gpudsl.schedule import replace

    src = gpudsl.proc_from_source(
        "def f(acc: f32[2, 2] @ REGISTER, a: f32[2, 8] @ SHARED, b: f32[8, 2] @ SHARED):\n"
        "    for rm in seq(0, 2):\n"
        "        for rn in seq(0, 2):\n"
        "            for kk in seq(0, 4):\n"
        "                acc[rm, rn] += a[rm, kk] * b[kk, rn]\n",
        namespace=vars(gpudsl))
    with pytest.raises(SchedulingError, match="does not match"):
        replace(src, "rm", mt.mma_tf32_nt)


def test_tile_options_are_validated():
    with pytest.raises(NodeError):
        mt.schedule_matmul_tf32(mt.matmul_algorithm(False, (64, 64, 32)), bm=64, bn=64,
                                bk=32, wm=24)
    with pytest.raises(NodeError):  # eight warps
        mt.schedule_matmul_tf32(mt.matmul_algorithm(False, (128, 128, 16)), wm=32, wn=64)


@pytest.mark.gpu
def test_tf32_matmul_on_the_gpu_equals_numpy():
    for m, n, k in ((128, 64, 128), (512, 272, 384)):
        a = RNG.standard_normal((m, n)).astype(np.float32)
        b = RNG.standard_normal((n, k)).astype(np.float32)
        p, bind = mt.matmul_tf32_kernel(a.shape, b.shape)
        c = np.zeros((m, k), np.float32)
        p.compile("cuda")(a=a, b=b, c=c)
        err = np.abs(c - a.astype(np.float64) @ b)
        assert np.all(err <= mt.tf32_tolerance(a, b)), err.max()
