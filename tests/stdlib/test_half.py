"""Half precision end to end (issue 27): f16 and bf16 (ml_dtypes' numpy bfloat16)
through the interpreter, check(), codegen, the emulator and NVRTC; vector copies of
halves; the ops on float16/bfloat16 arrays; the f16/bf16 tensor-core matmul within
its stated error bound against float64."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import BLOCKS, THREADS, bf16, f16, f32, par, proc, seq, size  # noqa: F401
from gpudsl import ops
from gpudsl.errors import SchedulingError
from gpudsl.schedule import delete_sync, divide_loop, stage_mem, vectorize
from gpudsl.stdlib import matmul_f16 as mh
from gpudsl.stdlib.shapes import NodeError

RNG = np.random.default_rng(27)
NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _nvrtc():
    try:
        from gpudsl.runtime.nvrtc import compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")


def _no_spills(src, arch):
    from gpudsl.runtime.nvrtc import compile_cubin

    res = compile_cubin(src, arch).resources
    assert res
    for name, r in res.items():
        assert r.spill_stores_bytes == 0 and r.stack_bytes == 0, (name, r)
    return res


# ---------------------------------------------------------------- the language


@proc
def mixed_halves(n: size, x: bf16[n], y: bf16[n], h: f16[n], z: f32[n]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[b] = x[b] * 3.0 + exp(x[b])
            h[b] = f16(f32(x[b]) / 3.0)
            z[b] = f32(max(x[b], y[b])) + f32(h[b])


def test_bf16_is_interpreted_with_ml_dtypes_and_equals_the_emulator():
    x = np.linspace(-2, 2, 24).astype(ml_dtypes.bfloat16)
    outs = [dict(y=np.zeros(24, ml_dtypes.bfloat16), h=np.zeros(24, np.float16),
                 z=np.zeros(24, np.float32)) for _ in range(2)]
    gpudsl.interpret(mixed_halves, x=x, **outs[0])
    mixed_halves.compile("emulator")(x=x, **outs[1])
    for k in outs[0]:
        assert outs[0][k].dtype == outs[1][k].dtype
        np.testing.assert_array_equal(outs[0][k].view(np.uint16 if k != "z" else np.uint32),
                                      outs[1][k].view(np.uint16 if k != "z" else np.uint32))
    # bf16 rounding is ml_dtypes' (to nearest even), not truncation: 1 + 2**-8 + 2**-9
    # is nearer 1 + 2**-7
    v = np.array([1 + 2 ** -8 + 2 ** -9], np.float32).astype(ml_dtypes.bfloat16)
    assert float(v[0]) == 1 + 2 ** -7
    assert mixed_halves.check().ok


def test_a_bf16_array_is_refused_for_an_f16_parameter():
    with pytest.raises(gpudsl.Error, match="holds f16"):
        gpudsl.interpret(mixed_halves, x=np.zeros(4, ml_dtypes.bfloat16),
                         y=np.zeros(4, ml_dtypes.bfloat16), h=np.zeros(4, ml_dtypes.bfloat16),
                         z=np.zeros(4, np.float32))


@proc
def copy_halves(n: size, x: f16[n, 64], y: f16[n, 64]):
    for b in seq(0, n):
        for j in seq(0, 64):
            y[b, j] = x[b, j] * 3.0


def _vectorized(width: int):
    from gpudsl.schedule import parallelize_loop

    p = divide_loop(copy_halves, "j", width, ["jt", "v"], tail="perfect")
    p = parallelize_loop(p, "b", BLOCKS)
    p = parallelize_loop(p, "jt", THREADS)
    p = stage_mem(p, p.find_loop("v"), f"y[b, {width} * jt:{width} * jt + {width}]", "yr",
                  gpudsl.REGISTER)
    p = stage_mem(p, p.find_loop("v"), f"x[b, {width} * jt:{width} * jt + {width}]", "xr",
                  gpudsl.REGISTER)
    for name in ("xr", "yr"):
        st = p.find(f"{name}[_] = _") if name == "xr" else p.find(f"y[_] = {name}[_]")
        p = vectorize(p, st.parent(), width)
    return p


@pytest.mark.parametrize("width", [2, 8])
def test_vector_copies_of_halves_equal_the_interpreter(width):
    p = _vectorized(width)
    assert p.check().ok
    src = p.cuda_source()
    assert f"vcopy{width}_f16" in str(p) and ("uint4" in src if width == 8 else True)
    x = RNG.standard_normal((3, 64)).astype(np.float16)
    y1, y2 = np.zeros((3, 64), np.float16), np.zeros((3, 64), np.float16)
    gpudsl.interpret(p, x=x, y=y1)
    p.compile("emulator")(x=x, y=y2)
    np.testing.assert_array_equal(y1, y2)
    np.testing.assert_array_equal(y1, x * np.float16(3))


def test_vectorize_refuses_mixed_types_and_256_bits():
    @proc
    def widen(n: size, x: f16[n, 8], y: f32[n, 8]):
        for b in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                for v in seq(0, 8):
                    y[b, v] = f32(x[b, v])

    with pytest.raises(SchedulingError, match="one copy"):
        vectorize(widen, "v", 8)

    @proc
    def f32_copy(n: size, x: f32[n, 8], y: f32[n, 8]):
        for b in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                for v in seq(0, 8):
                    y[b, v] = x[b, v]

    with pytest.raises(SchedulingError, match="128 bits"):
        vectorize(f32_copy, "v", 8)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_finds_the_half_headers_and_vector_copies_compile(arch):
    _nvrtc()
    for src in (mixed_halves.cuda_source(), _vectorized(8).cuda_source(),
                _vectorized(2).cuda_source()):
        assert "#include <cuda_bf16.h>" in src
        _no_spills(src, arch)


# ---------------------------------------------------------------- ops


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_pointwise_ops_equal_numpys_half_arithmetic(dt):
    t = NP[dt]
    a = RNG.standard_normal((3, 40)).astype(t)
    b = RNG.standard_normal((3, 40)).astype(t)
    # one rounding of the exact f32 result: what numpy's float16 / ml_dtypes give
    for got, want in ((ops.add(a, b), a + b), (ops.mul(a, b[:1]), a * b[:1]),
                      (ops.add(a, 2.0), a + t(2.0)), (ops.relu(a), np.maximum(a, t(0)))):
        assert got.dtype == np.dtype(t)
        np.testing.assert_array_equal(got.astype(np.float32), want.astype(np.float32))
    x64 = a.astype(np.float64)
    s = ops.silu(a)
    ref = x64 / (1 + np.exp(-x64))
    # computed in f32, rounded once: within one rounding of the exact value
    u = 2.0 ** -11 if dt == "f16" else 2.0 ** -8
    assert np.all(np.abs(s.astype(np.float64) - ref) <= u * np.abs(ref) * 1.001 + 2 ** -24)


def test_mixed_precisions_are_refused_with_the_dtypes_named():
    a = np.ones((2, 8), np.float16)
    for call in (lambda: ops.add(a, a.astype(np.float32)),
                 lambda: ops.mul(a.astype(ml_dtypes.bfloat16), a),
                 lambda: ops.matmul(a, np.ones((8, 4), np.float32))):
        with pytest.raises(NodeError, match="mixed precisions .*float16"):
            call()
    # issue 40: rms_norm takes weights of another dtype (torch's mixed precision) and
    # permute copies halves: tests/stdlib/test_ops_issue40.py


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_rms_norm_and_sliced_softmax_in_half_precision(dt):
    t, u = NP[dt], (2.0 ** -11 if dt == "f16" else 2.0 ** -8)
    x = RNG.standard_normal((3, 50)).astype(t)
    w = RNG.standard_normal(50).astype(t)
    x64, w64 = x.astype(np.float64), w.astype(np.float64)
    got = ops.rms_norm(x, w)
    ref = w64 * x64 / np.sqrt((x64 ** 2).mean(-1, keepdims=True) + 1e-5)
    assert got.dtype == np.dtype(t)
    # f32 arithmetic (~1e-6 relative) and one rounding to the half type
    assert np.all(np.abs(got.astype(np.float64) - ref) <= (u + 1e-5) * np.abs(ref) + 2 ** -24)
    sm = ops.sliced_softmax(x, 20)
    e = np.exp(x64[:, :20] - x64[:, :20].max(-1, keepdims=True))
    ref = np.concatenate([e / e.sum(-1, keepdims=True), x64[:, 20:]], -1)
    assert sm.dtype == np.dtype(t)
    assert np.all(np.abs(sm.astype(np.float64) - ref) <= (u + 1e-5) * np.abs(ref) + 2 ** -24)
    np.testing.assert_array_equal(sm[:, 20:], x[:, 20:])


# ---------------------------------------------------------------- the mma matmul


@pytest.fixture(scope="module", params=["f16", "bf16"])
def mma(request):
    return request.param, mh.half_kernel(request.param)


def test_the_tensor_core_kernel_is_proved_and_keeps_its_preconditions(mma):
    dt, k = mma
    r = k.check()
    assert r.ok, str(r)
    assert mh.half_preconditions_hold(k, dt)
    assert f"mma_{dt}(" in str(k)
    from gpudsl.stdlib.rms_norm import rms_norm_kernel
    from gpudsl.stdlib.softmax import sliced_softmax_kernel

    for row_kernel in (rms_norm_kernel(64, dt), sliced_softmax_kernel(64, dt)):
        assert row_kernel.check().ok
    src = k.cuda_source()
    assert f"m16n8k16.row.col.f32.{dt}.{dt}.f32" in src
    assert "ldmatrix.sync.aligned.m8n8.x4.shared.b16" in src and ".x2.trans" in src


def test_a_missing_barrier_is_flagged(mma):
    """Either barrier around the tile copies is needed: delete_sync proves through
    check()'s race obligation and refuses both (the copies would race with the
    ldmatrix reads of other lanes' rows)."""
    _dt, k = mma
    for which in ("sync()", "sync() #1"):
        with pytest.raises(SchedulingError, match="race|barrier"):
            delete_sync(k, k.find(which))


@pytest.mark.parametrize("m,n,k", [(64, 32, 128), (128, 96, 256)])
def test_emulator_equals_float64_within_the_stated_bound(mma, m, n, k):
    dt, kern = mma
    a = RNG.uniform(-1, 1, (m, n)).astype(NP[dt])
    b = RNG.uniform(-1, 1, (n, k)).astype(NP[dt])
    c = np.zeros((m, k), NP[dt])
    kern.compile("emulator")(a=a, b=b, c=c)
    err = np.abs(c.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64))
    tol = mh.half_tolerance(a, b, dt)
    assert np.all(err <= tol), (err.max(), tol.max())
    # the bound is not vacuous: about one rounding to the half type
    assert tol.max() < 4 * (2.0 ** -11 if dt == "f16" else 2.0 ** -8) * np.abs(a.astype(
        np.float64) @ b.astype(np.float64)).max() + 1e-3


def test_the_interpreter_gives_the_f32_accumulated_meaning():
    kern = mh.half_kernel("f16")
    a = RNG.uniform(-1, 1, (64, 32)).astype(np.float16)
    b = RNG.uniform(-1, 1, (32, 128)).astype(np.float16)
    c1, c2 = np.zeros((64, 128), np.float16), np.zeros((64, 128), np.float16)
    gpudsl.interpret(kern, a=a, b=b, c=c1)
    kern.compile("emulator")(a=a, b=b, c=c2)  # the emulator runs the body: equal
    np.testing.assert_array_equal(c1, c2)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_nvrtc_compiles_the_half_kernels_without_spills(arch):
    _nvrtc()
    from gpudsl.stdlib.pointwise import binary_kernel, unary_kernel
    from gpudsl.stdlib.rms_norm import rms_norm_kernel
    from gpudsl.stdlib.softmax import sliced_softmax_kernel

    for dt in ("f16", "bf16"):
        res = _no_spills(mh.half_kernel(dt).cuda_source(), arch)
        assert all(r.registers <= 128 for r in res.values()), res
        _no_spills(mh.half_simple_kernel(dt).cuda_source(), arch)
        _no_spills(binary_kernel("add", (True, True), 8, dt=dt).cuda_source(), arch)
        _no_spills(unary_kernel("silu", 8, dt=dt).cuda_source(), arch)
        _no_spills(rms_norm_kernel(256, dt).cuda_source(), arch)
        _no_spills(sliced_softmax_kernel(256, dt).cuda_source(), arch)


@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_ops_matmul_in_half_precision(dt):
    for m, n, k in ((64, 32, 128), (5, 40, 33)):
        a = RNG.uniform(-1, 1, (m, n)).astype(NP[dt])
        b = RNG.uniform(-1, 1, (n, k)).astype(NP[dt])
        c = ops.matmul(a, b)
        assert c.dtype == np.dtype(NP[dt]) and c.shape == (m, k)
        err = np.abs(c.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64))
        assert np.all(err <= mh.half_tolerance(a, b, dt))
    v = ops.matmul(a[0], b)
    assert v.shape == (k,)
    np.testing.assert_array_equal(v, c[0])


@pytest.mark.gpu
@pytest.mark.parametrize("dt", ["f16", "bf16"])
def test_half_matmul_on_the_gpu_within_the_bound(dt):  # pragma: no cover - needs a GPU
    a = RNG.uniform(-1, 1, (256, 512)).astype(NP[dt])
    b = RNG.uniform(-1, 1, (512, 384)).astype(NP[dt])
    p, _ = mh.matmul_half_kernel(a.shape, b.shape, dt)
    c = np.zeros((256, 384), NP[dt])
    p.compile("cuda")(a=a, b=b, c=c)
    err = np.abs(c.astype(np.float64) - a.astype(np.float64) @ b.astype(np.float64))
    assert np.all(err <= mh.half_tolerance(a, b, dt)), err.max()
