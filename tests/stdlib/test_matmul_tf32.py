"""The TF32 tensor-core matmul (gpudsl/stdlib/matmul_tf32.py): check() proves the
schedule, the emulator (which runs the instr's fallback with inputs rounded like
cvt.rna.tf32.f32) equals numpy within the stated TF32 tolerance, the generated CUDA
carries the inline PTX and compiles with NVRTC for sm_80 and sm_90 without spills,
ops.matmul(precision="tf32") reaches it, and on a GPU it equals numpy too."""
import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.errors import SchedulingError
from gpudsl.stdlib import matmul_tf32 as mt
from gpudsl.stdlib.shapes import NodeError

SHAPE = dict(m=128, n=64, k=64)  # one block row, two block columns, two k tiles
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
    assert mt.mma_precondition_holds(kernel)


def test_the_mma_is_a_call_of_the_instr(kernel):
    text = str(kernel)
    assert "mma_m16n8k8_tf32(acc[" in text
    assert "As: f32[128, 36] @ SHARED" in text and "Bs: f32[32, 72] @ SHARED" in text


def test_emulator_equals_numpy_within_the_tf32_tolerance(emulated):
    m, n, k = SHAPE["m"], SHAPE["n"], SHAPE["k"]
    a = RNG.standard_normal((m, n)).astype(np.float32)
    b = RNG.standard_normal((n, k)).astype(np.float32)
    c = np.zeros((m, k), np.float32)
    emulated(a=a, b=b, c=c)
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c - ref)
    assert np.all(err <= mt.tf32_tolerance(a, b))
    # the fallback really rounds to TF32: far from fp32's error, near TF32's
    assert err.max() > 1e-4 > np.abs(a @ b - ref).max()


def test_fallback_rounds_like_cvt_rna(emulated):
    """1 + 2**-11 is half a TF32 ulp above 1: cvt.rna rounds it away from zero to
    1 + 2**-10; 1 + 2**-12 rounds down to 1; integers are exact."""
    m, n, k = SHAPE["m"], SHAPE["n"], SHAPE["k"]
    b = np.ones((n, k), np.float32)
    c = np.zeros((m, k), np.float32)
    for x, want in ((1 + 2.0 ** -11, 1 + 2.0 ** -10), (1 + 2.0 ** -12, 1.0),
                    (-(1 + 2.0 ** -11), -(1 + 2.0 ** -10))):
        a = np.full((m, n), x, np.float32)
        emulated(a=a, b=b, c=c)
        np.testing.assert_array_equal(c, np.float32(n * want))
    a = RNG.integers(-8, 8, (m, n)).astype(np.float32)
    bi = RNG.integers(-8, 8, (n, k)).astype(np.float32)
    emulated(a=a, b=bi, c=c)
    np.testing.assert_array_equal(c, a @ bi)


def test_interpreter_gives_the_fp32_meaning(kernel):
    """The instr's body (what the interpreter runs) is the exact fp32 product."""
    m, n, k = 128, 32, 64
    a = RNG.integers(-4, 4, (m, n)).astype(np.float32)
    b = RNG.integers(-4, 4, (n, k)).astype(np.float32)
    c = np.zeros((m, k), np.float32)
    gpudsl.interpret(kernel, m=m, n=n, k=k, a=a, b=b, c=c)
    np.testing.assert_array_equal(c, a @ b)


def test_cuda_has_the_inline_ptx_and_a_fallback(kernel):
    src = kernel.cuda_source(**SHAPE)
    assert "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32" in src
    assert "cvt.rna.tf32.f32" in src
    assert "__CUDA_ARCH__ >= 800" in src and "#else" in src


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


def test_perf_report_has_no_spills(kernel):
    rep = kernel.perf("H100", **SHAPE)
    if any("ptxas figures unavailable" in n for n in rep.notes):
        pytest.skip("ptxas figures unavailable")
    (kp,) = rep.kernels
    assert kp.spills == 0
    assert kp.registers is not None and kp.registers <= 255
    # the tile copies read global memory with the minimum number of sectors
    for acc in kp.accesses:
        if acc.memory == "GLOBAL" and acc.kind == "read":
            assert acc.sectors == acc.min_sectors, acc


def test_ops_matmul_tf32_on_the_emulator():
    a = RNG.standard_normal((128, 32)).astype(np.float32)
    b = RNG.standard_normal((32, 64)).astype(np.float32)
    c = ops.matmul(a, b, precision="tf32")
    err = np.abs(c - a.astype(np.float64) @ b)
    assert np.all(err <= mt.tf32_tolerance(a, b))
    np.testing.assert_allclose(ops.matmul(a, b), a @ b, rtol=1e-4, atol=1e-4)  # default fp32


@pytest.mark.parametrize("sa, sb", [((100, 32), (32, 64)), ((128, 30), (30, 64)),
                                    ((128, 32), (32, 60)), ((2, 128, 32), (2, 32, 64)),
                                    ((128, 32), (64, 64))], ids=str)
def test_refuses_other_shapes(sa, sb):
    with pytest.raises(NodeError):
        mt.matmul_tf32_kernel(sa, sb)


def test_ops_refuses_unknown_precision():
    a = np.ones((128, 32), np.float32)
    with pytest.raises(NodeError, match="precision"):
        ops.matmul(a, np.ones((32, 64), np.float32), precision="fp16")


def test_replace_refuses_code_that_is_not_the_mma():
    """replace() unifies the block with the instr's body: a k loop of 4 is not an mma."""
    from gpudsl.schedule import replace

    src = gpudsl.proc_from_source(
        "def f(acc: f32[2, 2] @ REGISTER, a: f32[9, 8] @ SHARED, b: f32[8, 2] @ SHARED):\n"
        "    for rh in seq(0, 2):\n"
        "        for rl in seq(0, 2):\n"
        "            for kk in seq(0, 4):\n"
        "                acc[rh, rl] += a[8 * rh, kk] * b[kk, rl]\n",
        namespace=vars(gpudsl))
    with pytest.raises(SchedulingError, match="does not match"):
        replace(src, "rh", mt.mma_m16n8k8_tf32)


def test_tile_options_are_validated():
    with pytest.raises(NodeError):
        mt.schedule_matmul_tf32(mt.matmul_algorithm(False, (64, 64, 32)), bm=64, bn=64,
                                bk=32, wm=24)


@pytest.mark.gpu
def test_tf32_matmul_on_the_gpu_equals_numpy():
    for m, n, k in ((128, 64, 64), (512, 256, 384)):
        a = RNG.standard_normal((m, n)).astype(np.float32)
        b = RNG.standard_normal((n, k)).astype(np.float32)
        p, bind = mt.matmul_tf32_kernel(a.shape, b.shape)
        c = np.zeros((m, k), np.float32)
        p.compile("cuda")(a=a, b=b, c=c)
        err = np.abs(c - a.astype(np.float64) @ b)
        assert np.all(err <= mt.tf32_tolerance(a, b)), err.max()
