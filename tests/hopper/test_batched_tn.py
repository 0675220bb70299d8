"""Batched TN GEMMs on sm_90a (gpudsl/stdlib/matmul_sm90.py, matmul_sm90_tf32.py):
``[nb, m, k] @ [nb, n, k]^T`` in f16/bf16 and TF32, blocks over the batch, derived by
the 2-D kernels' primitives (the batch loop parallelized over blocks, the tiles' windows
at ``z``); proved for every size, clipped and unclipped, equal to numpy on the emulator
at odd and even shapes; the plans (gpudsl/stdlib/sm90_plans.py) pick them."""
from __future__ import annotations

import re

import numpy as np
import pytest

from gpudsl.ir.wgmma_meaning import tf32_truncate
from gpudsl.stdlib.matmul_sm90 import matmul_nt_sm90, plan_matmul_sm90, sm90_kernel
from gpudsl.stdlib.matmul_sm90_tf32 import (matmul_tf32_sm90, plan_matmul_sm90_tf32,
                                            sm90_tf32_kernel)

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)
TF32 = dict(bn=64, wgs=1, bk=32, stages=2)


def _halves(nb, m, n, k, npdt, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (nb, m, k)).astype(npdt)
    bt = rng.integers(-3, 4, (nb, n, k)).astype(npdt)
    return a, bt, (a.astype(np.float32) @ bt.astype(np.float32).transpose(0, 2, 1)).astype(npdt)


def _tf32(nb, m, n, k, seed):
    """Small integers with bits below tf32's mantissa: the tf32 product is exact."""
    rng = np.random.default_rng(seed)
    ai = rng.integers(-3, 4, (nb, m, k)).astype(np.float32)
    bi = rng.integers(-3, 4, (nb, n, k)).astype(np.float32)
    want = ai @ bi.transpose(0, 2, 1)
    return ai * np.float32(1 + 2.0 ** -13), bi * np.float32(1 + 2.0 ** -12), want


@pytest.mark.parametrize("clip", [False, True], ids=["exact", "clipped"])
def test_batched_tn_half_is_proved_for_all_sizes(clip):
    p = sm90_kernel("f16", **SMALL, clip=clip, batched=True)
    text = str(p)
    assert "for z in par(0, nb) @ BLOCKS" in text
    assert "tma_load(Bs[po % 2, 0:64, 0:32], bt[z, 64 * bj:" in text and "wgmma(" in text
    # the epilogue through SHARED slabs and TMA boxes at the block's matrix (issue 36)
    assert "tma_store(c[z, 64 * bi:64 * bi + 64, 64 * bj + 64 * ch:" in text
    assert "c[z, 64 * bi + " not in text
    r = p.check(target="sm_90a")
    assert r.ok, r


@pytest.mark.parametrize("clip", [False, True], ids=["exact", "clipped"])
def test_batched_tf32_is_proved_for_all_sizes(clip):
    p = sm90_tf32_kernel(**TF32, clip=clip, batched=True)
    text = str(p)
    assert "for z in par(0, nb) @ BLOCKS" in text and "tf32(" not in text
    assert "tma_load(As[po % 2, 0:64, 0:32], a[z, 64 * bi:" in text
    assert "tma_store(c[z, 64 * bi:64 * bi + 64, 64 * bj + 32 * ch:" in text   # f32 slabs
    assert "c[z, 64 * bi + " not in text
    r = p.check(target="sm_90a")
    assert r.ok, r


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("clip,shape", [(False, (2, 64, 128, 64)), (True, (3, 70, 40, 32)),
                                        (True, (2, 1, 65, 96))])
def test_batched_tn_half_equals_numpy_on_the_emulator(dt, clip, shape):
    import ml_dtypes
    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    nb, m, n, k = shape
    a, bt, want = _halves(*shape, npdt, sum(shape))
    c = np.full((nb, m, n), 5, npdt)
    kw = dict(tma_store=False) if clip and n % 8 else {}   # c's rows not 16 bytes apart
    sm90_kernel(dt, **SMALL, clip=clip, batched=True, **kw).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()


@pytest.mark.parametrize("clip,shape", [(False, (2, 64, 128, 64)), (True, (3, 67, 33, 32)),
                                        (True, (3, 67, 36, 32)), (False, (1, 128, 64, 32))])
def test_batched_tf32_equals_numpy_on_the_emulator(clip, shape):
    nb, m, n, k = shape
    a, bt, want = _tf32(*shape, seed=sum(shape))
    c = np.full((nb, m, n), 5, np.float32)
    kw = dict(tma_store=False) if clip and n % 4 else {}   # c's rows not 16 bytes apart
    sm90_tf32_kernel(**TF32, clip=clip, batched=True, **kw).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want).all()
    ref = tf32_truncate(a).astype(np.float64) @ tf32_truncate(bt).astype(np.float64).transpose(0, 2, 1)
    assert np.array_equal(c, ref.astype(np.float32))


def test_the_plans_pick_batched_kernels_and_the_entry_points_run_them():
    p, binds = plan_matmul_sm90((2, 256, 512), (2, 1024, 512), "f16")
    assert p is sm90_kernel("f16", bn=256, wgs=2, bk=64, stages=4, batched=True)
    assert binds == dict(m=256, n=1024, k=512, nb=2)
    q, qb = plan_matmul_sm90_tf32((3, 70, 48), (3, 128, 48))
    assert q is sm90_tf32_kernel(bn=256, wgs=2, bk=16, stages=4, clip=True, batched=True)
    assert qb == dict(m=70, n=128, k=48, nb=3)
    a, bt, want = _halves(2, 64, 64, 32, np.float16, 1)
    assert (matmul_nt_sm90(a, bt, **SMALL) == want).all()
    a, bt, want = _tf32(2, 64, 64, 32, 2)
    c = matmul_tf32_sm90(a, bt, **TF32)
    assert c.shape == (2, 64, 64) and (c == want).all()


def test_the_plans_refuse_mismatched_batches():
    from gpudsl.stdlib.shapes import NodeError
    with pytest.raises(NodeError, match="do not match"):
        plan_matmul_sm90((2, 64, 64), (3, 64, 64), "f16")
    with pytest.raises(NodeError, match="do not match"):
        plan_matmul_sm90_tf32((2, 64, 64), (64, 64))
    with pytest.raises(NodeError, match=r"multiple of 32 or 16.*2 x 64x64x40"):
        plan_matmul_sm90_tf32((2, 64, 40), (2, 64, 40))


def test_gpudsl_bench_rows_of_the_batched_kernels_run_on_the_emulator():
    from gpudsl import bench
    rows = {"bmatmul_f16_sm90", "bmatmul_tf32_sm90"}
    assert rows <= bench.MATMULS
    env = bench._Env("emulator")
    cases = bench._matmul_cases(env, True, rows, variants=True)
    assert [c.node for c in cases] == ["bmatmul_f16_sm90", "bmatmul_tf32_sm90"]
    for c in cases:
        assert c.size.startswith("2x32^3") and c.tol == 1e-2
        assert env.rel_error(c.run(), c.want()) <= c.tol, c.node


@pytest.mark.parametrize("kind", ["f16", "tf32"])
def test_batched_sm90a_builds_have_the_2d_main_loop_and_no_spills(kind):
    """NVRTC for sm_90a: the 128 x 256 batched kernels keep the 2-D main loop (per slot 2
    TMA boxes, 4 chained HGMMAs, one group in flight, no shared loads), no spills."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    from .test_derived_gemm import _k_tile, _sass_ops
    p = (sm90_kernel("f16", bn=256, wgs=2, bk=64, stages=4, batched=True) if kind == "f16"
         else sm90_tf32_kernel(bn=256, wgs=2, bk=32, stages=4, batched=True))
    r = compile_cubin(generate(p.ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    assert not re.search(r"C751[4689]", r.log), r.log     # the wgmmas not serialized
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    text = sass.disassemble(r.cubin)
    ops = _sass_ops(text)
    assert ops["HGMMA"] == 4 and ops["UTMALDG"] == 2, ops
    assert ("HGMMA.64x256x8.F32.TF32" in text) == (kind == "tf32")
    tile = _k_tile(text)
    assert not any(x.startswith(("STS", "LDS", "LDG")) for x in tile)
    assert ops["LDS"] == ops["LDSM"] == ops["LDG"] == 0
    # the epilogue: slabs of 128-byte rows through SHARED, one TMA box each (issue 36)
    assert ops["UTMASTG"] == (8 if kind == "tf32" else 4) and ops["STG"] == 0, ops


def test_batched_nn_sm90a_build_stores_through_tma_boxes():
    """The unclipped batched NN kernel (``ops.matmul`` of ``[nb, m, n] @ [nb, n, k]``
    halves on an H100): its epilogue through SHARED and a TMA box per 64-column slab,
    no thread's global store, no spills (NVRTC sm_90a)."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    from gpudsl.stdlib.matmul_sm90_nn import sm90_nn_kernel

    from .test_derived_gemm import _sass_ops
    p = sm90_nn_kernel("f16", bn=256, wgs=2, bk=64, stages=4, batched=True)
    r = compile_cubin(generate(p.ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    assert not re.search(r"C751[4689]", r.log), r.log
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = _sass_ops(sass.disassemble(r.cubin))
    assert ops["HGMMA"] == 4 and ops["UTMASTG"] == 4 and ops["STG"] == 0, ops


@pytest.mark.gpu
@pytest.mark.parametrize("clip,shape", [(False, (3, 256, 512, 256)), (True, (2, 257, 500, 192))],
                         ids=["128x256", "128x256-clipped"])
def test_batched_on_the_gpu(clip, shape):
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    nb, m, n, k = shape
    a, bt, want = _halves(*shape, np.float16, 5)
    c = np.zeros((nb, m, n), np.float16)
    # c's rows 1000 bytes apart (n = 500) take no tensor map: guarded stores, as
    # choose_sm90 plans them (on the H200 the TMA-store kernel refused n = 500 at launch)
    sm90_kernel("f16", bn=256, wgs=2, bk=64, stages=4, clip=clip, batched=True,
                tma_store=n % 8 == 0).compile("cuda")(a=a, bt=bt, c=c)
    assert (c == want).all()
    a, bt, want = _tf32(*shape, seed=6)
    c = np.zeros((nb, m, n), np.float32)
    sm90_tf32_kernel(bn=256, wgs=2, bk=32, stages=4, clip=clip, batched=True).compile("cuda")(
        a=a, bt=bt, c=c)
    assert (c == want).all()
