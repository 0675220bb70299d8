"""The sm_90a TF32 GEMM derived by primitives (gpudsl/stdlib/matmul_sm90_tf32.py,
docs/hopper.md "TF32 by the same derivation"): ``c = a @ bt^T`` of f32 whose readable
algorithm reads each operand as tf32 (``tf32(x)``), derived into TMA boxes of 128-byte
swizzled f32 rows, a barrier ring and chained k8 tf32 wgmmas; proved, equal to numpy's
truncated product on the emulator, built by NVRTC for sm_90a with no spills, its main
loop ``HGMMA.64xNx8.F32.TF32`` fed by ``UTMALDG`` only."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.ir.wgmma_meaning import tf32_truncate
from gpudsl.stdlib.matmul_sm90_tf32 import (matmul_nt_tf32_algorithm, sm90_tf32_kernel,
                                            sm90_tf32_space)

from .test_derived_gemm import _sass_ops

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)
WIDE = dict(bn=256, wgs=2, bk=32, stages=4)


def _exact(m, n, k, seed=0):
    """Small integers with bits below tf32's mantissa added: the tf32 product is the
    integers' (exact in f32), a plain f32 product is not."""
    rng = np.random.default_rng(seed)
    ai = rng.integers(-3, 4, (m, k)).astype(np.float32)
    bi = rng.integers(-3, 4, (n, k)).astype(np.float32)
    return ai * np.float32(1 + 2.0 ** -13), bi * np.float32(1 + 2.0 ** -12), ai @ bi.T


def _reference(a, bt):
    return tf32_truncate(a).astype(np.float64) @ tf32_truncate(bt).astype(np.float64).T


def test_the_derivation_ends_in_tma_tf32_wgmma_and_rings():
    text = str(sm90_tf32_kernel(**SMALL))
    assert "As: f32[2, 64, 32] @ SHARED(swizzle=128)" in text
    assert "tma_load(As[po % 2, 0:64, 0:32], a[64 * bi:64 * bi + 64, 32 * po:32 * po + 32]" in text
    assert "wgmma(s[t, 0:32], As[po % 2, 0:64, 16 * kq + 8 * k2:16 * kq + 8 * k2 + 8]" in text
    assert "for k2 in seq(0, 2)" in text and "wait(empty[po % 2], 128, 129)" in text
    assert "tf32(" not in text and "= a[" not in text     # the products became wgmmas


@pytest.mark.parametrize("cfg", [SMALL, dict(SMALL, clip=True), dict(SMALL, bk=16, clip=True),
                                 dict(SMALL, clip=True, tma_store=False),
                                 dict(SMALL, tma_store=False)],
                         ids=["64x64", "clipped", "bk16-clipped", "clipped-direct", "direct"])
def test_the_derived_kernel_is_proved_for_all_sizes(cfg):
    r = sm90_tf32_kernel(**cfg).check(target="sm_90a")
    assert r.ok, r


def test_the_readable_algorithm_reads_its_operands_as_tf32():
    p = matmul_nt_tf32_algorithm((64, 64, 32))
    a, bt, want = _exact(64, 128, 64)
    c = np.zeros((64, 128), np.float32)
    gpudsl.interpret(p, a=a, bt=bt, c=c)
    assert (c == want).all()
    assert not (a @ bt.T == want).all()      # plain f32 products differ


@pytest.mark.parametrize("cfg,shape", [(SMALL, (64, 64, 32)), (SMALL, (128, 192, 96)),
                                       (dict(SMALL, clip=True), (70, 44, 64)),
                                       (dict(SMALL, clip=True), (129, 8, 32)),
                                       (dict(SMALL, clip=True), (1, 4, 32)),
                                       (dict(SMALL, clip=True), (100, 132, 32)),
                                       (dict(SMALL, bk=16, clip=True), (65, 20, 48)),
                                       (dict(SMALL, clip=True, tma_store=False), (70, 45, 64)),
                                       (dict(SMALL, clip=True, tma_store=False), (1, 1, 32)),
                                       (dict(SMALL, tma_store=False), (128, 64, 64))],
                         ids=["one-tile", "2x3x3", "clipped-70x44", "clipped-129x8",
                              "clipped-1x4", "clipped-100x132", "bk16-clipped",
                              "clipped-direct-70x45", "clipped-direct-1x1", "direct"])
def test_the_derived_kernel_equals_numpy_on_the_emulator(cfg, shape):
    m, n, k = shape
    f = sm90_tf32_kernel(**cfg).compile("emulator")
    a, bt, want = _exact(m, n, k, seed=m + n)
    c = np.zeros((m, n), np.float32)
    f(a=a, bt=bt, c=c)
    assert (c == want).all()                  # exact: the truncated products are integers
    rng = np.random.default_rng(k)
    a = rng.standard_normal((m, k)).astype(np.float32)
    bt = rng.standard_normal((n, k)).astype(np.float32)
    c = np.zeros((m, n), np.float32)
    f(a=a, bt=bt, c=c)
    ref = _reference(a, bt)
    assert np.abs(c - ref).max() <= 1e-5 * k   # f32 sums of tf32 products
    assert np.abs(c - a.astype(np.float64) @ bt.astype(np.float64).T).max() > 1e-4


@pytest.mark.parametrize("cfg", [dict(bn=128, wgs=1, bk=32, stages=4), WIDE],
                         ids=["64x128", "128x256"])
def test_sm90a_build_feeds_tf32_hgmma_by_tma_with_one_wait_per_stage(cfg):
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    r = compile_cubin(generate(sm90_tf32_kernel(**cfg).ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    assert "C7514" not in r.log and "C7519" not in r.log, r.log   # wgmmas not serialized
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    text = sass.disassemble(r.cubin)
    ops = _sass_ops(text)
    assert ops["HGMMA"] == cfg["bk"] // 8             # the k8 steps of a slot, chained
    assert f"HGMMA.64x{cfg['bn']}x8.F32.TF32" in text
    assert ops["UTMALDG"] == 2                        # one box per operand and slot
    assert ops["LDS"] == ops["LDSM"] == ops["LDG"] == ops["LDL"] == 0
    assert text.count("WARPGROUP.DEPBAR") == 1                 # one wgmma wait
    # the epilogue through SHARED slabs of 32 f32 columns and TMA stores (issue 36), a
    # bulk-store wait (DEPBAR) after each, its proxy fences (MEMBAR) outside the loop
    assert ops["UTMASTG"] == cfg["bn"] // 32 and ops["STG"] == 0 and ops["STS"] > 0
    assert ops["DEPBAR"] == 1 + ops["UTMASTG"]
    from .test_derived_gemm import _k_tile
    assert not any(x.startswith(("STS", "LDS", "LDG", "STG", "MEMBAR"))
                   for x in _k_tile(text))


@pytest.mark.parametrize("cfg", [dict(bn=128, wgs=1, bk=32, stages=4), WIDE],
                         ids=["64x128", "128x256"])
def test_the_clipped_epilogue_stores_through_clipped_tma_boxes(cfg):
    """Clipped (issue 36): the fragment's guarded writes into a slab of 32 f32 columns,
    one box per slab the hardware clips at the edges; no thread stores to global."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    p = sm90_tf32_kernel(**cfg, clip=True)
    assert "Cs: f32[" in str(p) and "tma_store(c[" in str(p)
    r = compile_cubin(generate(p.ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    ops = _sass_ops(sass.disassemble(r.cubin))
    assert ops["UTMASTG"] == cfg["bn"] // 32 and ops["STG"] == 0 and ops["STS"] > 0
    assert ops["UTMALDG"] == 2 and ops["LDL"] == 0


def test_the_unclipped_epilogue_is_slabs_through_shared_and_tma_stores():
    """Unclipped (issue 36): the fragment rounded into a slab ``Cs`` of 32 f32 columns,
    one box per slab; ``tma_store=False``: each thread stores its fragment."""
    text = str(sm90_tf32_kernel(**SMALL))
    assert "Cs: f32[64, 32] @ SHARED(swizzle=128)" in text
    assert "tma_store(c[64 * bi:64 * bi + 64, 64 * bj + 32 * ch:64 * bj + 32 * ch + 32], " \
           "Cs[0:64, 0:32])" in text and "c[64 * bi + " not in text
    direct = str(sm90_tf32_kernel(**SMALL, tma_store=False))
    assert "tma_store" not in direct and "Cs" not in direct and "c[64 * bi + " in direct


def test_the_space_fits_the_shared_memory():
    space = sm90_tf32_space()
    assert WIDE in space
    assert all(c["stages"] * (64 * c["wgs"] + c["bn"]) * c["bk"] * 4 +
               64 * c["wgs"] * 32 * 4 <= 227 * 1024 for c in space)   # ring and slab


def test_matmul_tf32_sm90_plans_runs_and_refuses():
    from gpudsl import bench
    from gpudsl.stdlib import matmul_sm90_tf32 as mod
    from gpudsl.stdlib.shapes import NodeError

    a, bt, want = _exact(128, 64, 64, seed=3)
    c = mod.matmul_tf32_sm90(a, bt, **SMALL)
    assert c.dtype == np.float32 and (c == want).all()
    p, binds = mod.plan_matmul_sm90_tf32((256, 512), (1024, 512))
    assert p is sm90_tf32_kernel(**WIDE) and binds == dict(m=256, n=1024, k=512)
    assert mod.plan_matmul_sm90_tf32((70, 48), (128, 48))[0] is \
        sm90_tf32_kernel(**dict(WIDE, bk=16, clip=True))
    direct = mod.plan_matmul_sm90_tf32((70, 64), (130, 64))[0]   # c's rows: 520 bytes
    assert "tma_store" not in str(direct) and "n % 4" not in str(direct)
    with pytest.raises(NodeError, match="multiple of 32 or 16"):
        mod.plan_matmul_sm90_tf32((70, 40), (128, 40))
    assert "matmul_tf32_sm90" in bench.NODES and "matmul_tf32_sm90" in bench.MATMULS
    cases = bench._matmul_cases(bench._Env("emulator"), True, {"matmul_tf32_sm90"},
                                variants=True)
    assert [c_.node for c_ in cases] == ["matmul_tf32_sm90"]
    assert cases[0].extra == {"dtype": "float32", "tf32": True} and cases[0].tol == 1e-2


@pytest.mark.gpu
@pytest.mark.parametrize("cfg,shape", [(SMALL, (256, 512, 256)), (WIDE, (256, 512, 256)),
                                       (dict(WIDE, clip=True), (257, 500, 192))],
                         ids=["64x64", "128x256", "128x256-clipped"])
def test_on_the_gpu(cfg, shape):
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    a, bt, want = _exact(*shape, seed=5)
    c = np.zeros(shape[:2], np.float32)
    sm90_tf32_kernel(**cfg).compile("cuda")(a=a, bt=bt, c=c)
    assert (c == want).all()
