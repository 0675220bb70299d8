"""The sm_90a GEMM main loop derived by primitives from the readable ``c = a @ bt^T``
(gpudsl/stdlib/matmul_sm90.py, docs/hopper.md "A main loop derived by primitives"):
TMA loads into a ring, wgmma from the ring's tiles, a producer thread and consumer
warpgroups joined by barrier rings.  Proved for every size the algorithm admits, equal
to numpy on the emulator, built by NVRTC for sm_90a with no spills and the machine code
a Hopper main loop should have."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

import gpudsl
from gpudsl.stdlib.matmul_sm90 import matmul_nt_algorithm, sm90_kernel, sm90_space

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)                 # 64-byte swizzled tiles
WIDE = dict(bn=256, wgs=2, bk=64, stages=4)                 # 128-byte swizzled tiles
TALL = dict(bm=256, bn=128, wgs=2, bk=64, stages=4)         # two m64 tiles a warpgroup
PLAIN = dict(bn=64, wgs=1, bk=32, stages=2, swizzle=False)  # the canonical layout


def _operands(m, n, k, dt=np.float16, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, k)).astype(dt)
    bt = rng.integers(-3, 4, (n, k)).astype(dt)
    return a, bt, (a.astype(np.float32) @ bt.astype(np.float32).T)


def test_the_derivation_ends_in_tma_wgmma_and_rings():
    text = str(sm90_kernel("f16", **SMALL))
    assert "As: f16[2, 64, 32] @ SHARED(swizzle=64)" in text
    assert "tma_load(As[po % 2, 0:64, 0:32], a[64 * bi:64 * bi + 64, 32 * po:32 * po + 32]" in text
    assert "wgmma(s[t, 0:32], As[po % 2, 0:64, 16 * kq:16 * kq + 16]" in text
    assert "full: barrier[2] @ SHARED" in text and "wait(empty[po % 2], 128, 129)" in text
    # the plain copies and the product loops are gone
    assert "= a[" not in text and "+= f32(" not in text
    plain = str(sm90_kernel("f16", **PLAIN))
    assert "tma_load(As[po % 2, As_h, 0:64, 0:8]" in plain
    assert "wgmma(s[t, 0:32], As[po % 2, 2 * kq:2 * kq + 2, 0:64, 0:8]" in plain


@pytest.mark.parametrize("cfg", [SMALL, WIDE, PLAIN,
                                 dict(SMALL, inflight=False, tma_store=False), TALL],
                         ids=["64x64", "128x256", "plain", "64x64-wait0-direct", "256x128"])
def test_the_derived_main_loop_is_proved_for_all_sizes(cfg):
    r = sm90_kernel("f16", **cfg).check(target="sm_90a")
    assert r.ok, r


def test_the_readable_algorithm_is_the_meaning():
    p = matmul_nt_algorithm("f16", (64, 64, 32))
    a, bt, want = _operands(64, 128, 64)
    c = np.zeros((64, 128), np.float16)
    gpudsl.interpret(p, a=a, bt=bt, c=c)
    assert (c == want.astype(np.float16)).all()


@pytest.mark.parametrize("cfg", [SMALL, PLAIN, dict(SMALL, tma_store=False)],
                         ids=["swizzled", "plain", "direct"])
@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("shape", [(64, 64, 32), (128, 192, 96)])
def test_the_derived_kernel_equals_numpy_on_the_emulator(dt, shape, cfg):
    import ml_dtypes
    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    a, bt, want = _operands(*shape, dt=npdt)
    c = np.zeros(shape[:2], npdt)
    sm90_kernel(dt, **cfg).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want.astype(npdt)).all()


def test_the_wide_tile_equals_numpy_on_the_emulator():
    a, bt, want = _operands(128, 256, 128, seed=3)
    c = np.zeros((128, 256), np.float16)
    sm90_kernel("f16", **WIDE).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want.astype(np.float16)).all()


def test_the_tall_tile_makes_a_wgmma_per_m64_tile_and_equals_numpy_on_the_emulator():
    """256 x 128 (issue 36): each consumer warpgroup holds two m64 tiles, ``s[t, mi,
    f]``, one wgmma per tile and k16 step on the rows ``64 mi`` of its half of ``As``."""
    p = sm90_kernel("f16", **TALL)
    text = str(p)
    assert "s: f32[256, 2, 64] @ REGISTER" in text
    assert ("for kq in seq(0, 4):\n                        for mi in seq(0, 2):\n"
            "                            wgmma(s[t, mi, 0:64], As[po % 4, 128 * (t // 128) + "
            "64 * mi:128 * (t // 128) + 64 * mi + 64, 16 * kq:16 * kq + 16]") in text
    assert "Cs: f16[256, 32] @ SHARED(swizzle=64)" in text     # 4 slabs of 32 columns
    a, bt, want = _operands(512, 256, 192, seed=4)
    c = np.zeros((512, 256), np.float16)
    p.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want.astype(np.float16)).all()


@pytest.mark.parametrize("cfg, shape", [(dict(TALL, clip=True), (261, 136, 128)),
                                        (dict(TALL, clip=True, tma_store=False), (257, 130, 64)),
                                        (dict(TALL, wgs=1, bm=128), (256, 256, 128))],
                         ids=["clipped", "clipped-direct", "128x128-one-warpgroup"])
def test_the_tall_tile_variants_are_proved_and_equal_numpy(cfg, shape):
    p = sm90_kernel("bf16" if cfg.get("clip") else "f16", **cfg)
    r = p.check(target="sm_90a")
    assert r.ok, r
    import ml_dtypes
    npdt = ml_dtypes.bfloat16 if cfg.get("clip") else np.float16
    a, bt, want = _operands(*shape, dt=npdt, seed=sum(shape))
    c = np.full(shape[:2], 7, npdt)
    p.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want.astype(npdt)).all()


@pytest.mark.parametrize("cfg", [dict(TALL, clip=True), dict(TALL, producer="thread"),
                                 dict(TALL, wgs=1, bm=128)],
                         ids=["256x128-clipped", "256x128-producer-thread",
                              "128x128-one-warpgroup"])
def test_ptxas_keeps_the_two_tile_wgmmas_in_flight(cfg):
    """Regression: in the grouped block order ptxas serialized the clipped 256 x 128
    kernel's wgmmas (C7515: a wait after each of the 8); its default is the row order.
    Every two-tile variant keeps one wait per k tile."""
    res, text, log = _sass(cfg)
    assert "(C7515)" not in log and "(C7514)" not in log and "(C7518)" not in log
    waits = [x for x in _k_tile(text) if x.startswith("WARPGROUP.DEPBAR")]
    assert waits == ["WARPGROUP.DEPBAR.LE gsb0, 0x1"]


def test_sizes_outside_the_assertion_are_refused():
    a, bt, _ = _operands(70, 64, 32)
    with pytest.raises(gpudsl.Error):
        sm90_kernel("f16", **SMALL).compile("emulator")(a=a, bt=bt,
                                                        c=np.zeros((70, 64), np.float16))


CLIPPED = dict(SMALL, clip=True)
CLIPPED_DIRECT = dict(CLIPPED, tma_store=False)


@pytest.mark.parametrize("cfg, asserted", [(CLIPPED, "assert n % 8 == 0 and k % 32 == 0"),
                                           (CLIPPED_DIRECT, "assert k % 32 == 0")],
                         ids=["tma-store", "direct"])
def test_the_clipped_kernel_is_proved_for_every_m_and_n(cfg, asserted):
    p = sm90_kernel("f16", **cfg)
    assert asserted in str(p) and "m %" not in str(p)
    r = p.check(target="sm_90a")
    assert r.ok, r


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("cfg, shape", [
    (CLIPPED, (1, 8, 32)), (CLIPPED, (65, 72, 64)), (CLIPPED, (100, 136, 96)),
    (CLIPPED, (128, 64, 32)), (CLIPPED_DIRECT, (1, 1, 32)), (CLIPPED_DIRECT, (65, 70, 64)),
    (CLIPPED_DIRECT, (100, 130, 96))], ids=lambda x: "x".join(map(str, x))
    if isinstance(x, tuple) else ("tma" if x.get("tma_store", True) else "direct"))
def test_the_clipped_kernel_equals_numpy_at_odd_and_even_shapes(dt, cfg, shape):
    import ml_dtypes
    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    a, bt, want = _operands(*shape, dt=npdt, seed=sum(shape))
    c = np.full(shape[:2], 7, npdt)
    sm90_kernel(dt, **cfg).compile("emulator")(a=a, bt=bt, c=c)
    assert (c == want.astype(npdt)).all()


def test_the_clipped_epilogue_goes_through_a_clipped_tma_store():
    """The slab's writes into ``Cs`` keep their edge guards; its copy out is one box the
    hardware clips at the array's edge (issue 36)."""
    text = str(sm90_kernel("f16", **CLIPPED))
    assert "Cs: f16[64, 64] @ SHARED(swizzle=128)" in text
    assert "tma_store(c[64 * bi:64 * bi + 64, 64 * bj + 64 * ch:64 * bj + 64 * ch + 64], " \
           "Cs[0:64, 0:64])" in text
    tail = text.split("wgmma_wait(0)")[-1]
    assert "c[" not in tail.split("tma_store(")[0] and " < n:\n" in tail   # guarded writes
    assert "tma_store" not in str(sm90_kernel("f16", **CLIPPED_DIRECT))


@pytest.mark.parametrize("tma_store", [True, False], ids=["tma-store", "direct"])
def test_the_clipped_wide_tile_keeps_the_main_loop(tma_store):
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    p = sm90_kernel("f16", **WIDE, clip=True, tma_store=tma_store)
    r = compile_cubin(generate(p.ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    text = sass.disassemble(r.cubin)
    ops = _sass_ops(text)
    # the same main loop as the unclipped kernel: the boxes clip the edges; one wgmma
    # group in flight
    assert ops["HGMMA"] == 4 and ops["UTMALDG"] == 2
    assert [x for x in _k_tile(text) if x.startswith("WARPGROUP.DEPBAR")] == \
        ["WARPGROUP.DEPBAR.LE gsb0, 0x1"]
    assert ops["LDS"] == ops["LDSM"] == ops["LDG"] == ops["LDL"] == 0
    # the epilogue: a clipped box per 64-column slab, the fragment written to SHARED (no
    # STG); or, direct, guarded stores
    if tma_store:
        assert ops["UTMASTG"] == 4 and ops["STG"] == 0 and ops["STS"] > 0
    else:
        assert ops["UTMASTG"] == ops["STS"] == 0 and ops["STG"] > 0


def _sass_ops(text: str) -> Counter:
    from gpudsl.perf.sass import opcode_counts
    return opcode_counts(text)


def _sass(cfg, dt="f16"):
    """``(resources, SASS text, ptxas log)`` of the derived kernel for sm_90a (NVRTC)."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    r = compile_cubin(generate(sm90_kernel(dt, **cfg).ir, {}).source, "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    return res, sass.disassemble(r.cubin), r.log


def _k_tile(text: str) -> list:
    """The instructions of a k tile's consumer from its first HGMMA to the release of a
    ring slot (the first mbarrier arrive after its last HGMMA): the wgmmas, their wait."""
    ins = []
    for ln in text.splitlines():
        body = ln.split("*/", 1)[-1].strip() if ln.strip().startswith("/*") else ln.strip()
        if ";" in body:
            ins.append(body.split(";")[0].strip())
    first = next(i for i, x in enumerate(ins) if "HGMMA." in x)
    last = max(i for i, x in enumerate(ins) if "HGMMA." in x)
    end = next(i for i in range(last, len(ins)) if "SYNCS.ARRIVE" in ins[i])
    return ins[first:end + 1]


@pytest.mark.parametrize("cfg", [dict(bn=128, wgs=1, bk=64, stages=4), WIDE,
                                 dict(bn=128, wgs=1, bk=64, stages=4, swizzle=False),
                                 dict(bn=128, wgs=1, bk=64, stages=4, inflight=False,
                                      tma_store=False), TALL,
                                 dict(TALL, clip=True, tma_store=False)],
                         ids=["64x128", "128x256", "64x128-plain", "64x128-wait0-direct",
                              "256x128", "256x128-clipped-direct"])
def test_sm90a_build_feeds_hgmma_by_tma_with_one_wait_per_stage(cfg):
    res, text, log = _sass(cfg)
    ops = _sass_ops(text)
    tiles = cfg.get("bm", 64 * cfg["wgs"]) // (64 * cfg["wgs"])   # m64 tiles a warpgroup
    # the k16 steps of a stage, chained (two tiles: two accumulators, interleaved)
    assert ops["HGMMA"] == tiles * cfg["bk"] // 16
    assert f"HGMMA.64x{cfg['bn']}x16.F32" in text
    # one box per operand of the swizzled tiles, one per 8-column half of the plain ones
    assert ops["UTMALDG"] == (2 if cfg.get("swizzle", True) else 2 * cfg["bk"] // 8)
    # the operands reach the tensor cores by descriptor: no thread loads or stores them
    # (the epilogue's tile aside: STS of the fragment, below)
    assert ops["LDS"] == ops["LDSM"] == ops["LDG"] == 0
    # one wait for the stage's wgmmas (none between them: not serialized), no block
    # barrier in the loop's fences (TMA writes through the async proxy); with a group
    # in flight (the default) it leaves one pending, CUTLASS's mainloop
    tile = _k_tile(text)
    waits = [x for x in tile if x.startswith("WARPGROUP.DEPBAR")]
    depth = "0x1" if cfg.get("inflight", True) else "0x0"
    assert waits == [f"WARPGROUP.DEPBAR.LE gsb0, {depth}"], tile
    assert sum("HGMMA." in x for x in tile) == tiles * cfg["bk"] // 16
    assert not any(x.startswith(("STS", "LDS", "MEMBAR")) for x in tile)
    # ptxas serializes no wgmma (C7514/C7515/C7518; C7517's wait after the loop aside)
    assert not any(f"(C75{x})" in log for x in (14, 15, 18)) and "serialized" not in log
    assert ops["STL"] == ops["LDL"] == 0 and res.stack_bytes == 0
    # the epilogue (default): one bulk tensor store per slab of 64 columns (32 with two
    # tiles), the fragment written to SHARED (no STG); else each thread's stores
    slabs = cfg["bn"] // (64 // tiles)
    if cfg.get("tma_store", True):
        assert ops["UTMASTG"] == slabs and ops["STG"] == 0 and ops["STS"] > 0
    else:
        assert ops["UTMASTG"] == ops["STS"] == ops["MEMBAR"] == 0 and ops["STG"] > 0


def test_the_space_fits_the_shared_memory():
    space = sm90_space()
    assert dict(WIDE, swizzle=True, raster=16) in space
    assert dict(WIDE, swizzle=True, raster=0) in space
    assert dict(TALL, swizzle=True, raster=0) in space
    rows = [c.get("bm", 64 * c["wgs"]) for c in space]
    assert all(c["stages"] * (bm + c["bn"]) * c["bk"] * 2 +
               bm * min(c["bn"], 64 if bm == 64 * c["wgs"] else 32) * 2 <= 227 * 1024 and
               bm * c["bn"] // (128 * c["wgs"]) <= 128 for bm, c in zip(rows, space))
    assert len(sm90_space(64 * 1024)) < len(space)


@pytest.mark.gpu
@pytest.mark.parametrize("cfg,shape", [(SMALL, (256, 512, 256)), (WIDE, (256, 512, 256)),
                                       (dict(WIDE, clip=True), (257, 504, 192)),
                                       (dict(WIDE, clip=True, tma_store=False), (257, 500, 192)),
                                       (TALL, (512, 384, 256)),
                                       (dict(TALL, clip=True), (261, 392, 192))],
                         ids=["64x64", "128x256", "128x256-clipped", "128x256-clipped-direct",
                              "256x128", "256x128-clipped"])
def test_on_the_gpu(cfg, shape):
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    a, bt, want = _operands(*shape, seed=5)
    c = np.zeros(shape[:2], np.float16)
    sm90_kernel("f16", **cfg).compile("cuda")(a=a, bt=bt, c=c)
    assert (c == want.astype(np.float16)).all()


def test_matmul_nt_sm90_runs_where_ops_runs_and_refuses_what_it_does_not_serve():
    from gpudsl import bench
    from gpudsl.stdlib.matmul_sm90 import matmul_nt_sm90, plan_matmul_sm90
    from gpudsl.stdlib.shapes import NodeError

    a, bt, want = _operands(128, 256, 64, seed=7)
    c = matmul_nt_sm90(a, bt, **SMALL)
    assert c.dtype == np.float16 and (c == want.astype(np.float16)).all()
    p, binds = plan_matmul_sm90((256, 512), (1024, 512), "f16")
    from gpudsl.stdlib import matmul_sm90
    assert p is sm90_kernel("f16", **matmul_sm90.WIDE) and binds == dict(m=256, n=1024, k=512)
    assert matmul_sm90.WIDE == dict(WIDE, swizzle=True)
    # n a multiple of 128, not of 256: the 256 x 128 tile where m is a multiple of 256
    assert plan_matmul_sm90((512, 64), (384, 64), "f16")[0] is \
        sm90_kernel("f16", **matmul_sm90.TALL)
    assert matmul_sm90.TALL == dict(TALL, swizzle=True)
    clipped, _ = plan_matmul_sm90((70, 64), (128, 64), "f16")
    assert clipped is sm90_kernel("f16", **dict(matmul_sm90.WIDE, clip=True))
    # c's rows not 16 bytes apart: no tensor map, the clipped kernel's stores are direct
    direct = plan_matmul_sm90((70, 64), (130, 64), "f16")[0]
    assert str(direct) == str(sm90_kernel("f16", **dict(matmul_sm90.WIDE, clip=True,
                                                         tma_store=False)))
    assert "tma_store" not in str(direct) and "tma_store" in str(clipped)
    assert plan_matmul_sm90((70, 48), (128, 48), "f16")[0] is \
        sm90_kernel("f16", **dict(matmul_sm90.WIDE, bk=16, clip=True))
    with pytest.raises(NodeError, match="multiple of"):
        plan_matmul_sm90((70, 40), (128, 40), "f16")
    with pytest.raises(NodeError, match="f16 or bf16"):
        plan_matmul_sm90((64, 64), (128, 64), "f32")
    nodes = {"matmul_f16_sm90", "matmul_bf16_sm90"}
    assert nodes <= set(bench.NODES) and nodes <= bench.MATMULS
    cases = bench._matmul_cases(bench._Env("emulator"), True, nodes, variants=True)
    assert sorted(c_.node for c_ in cases) == sorted(nodes)
    assert all("sm90" in c_.size and c_.tol == 1e-2 for c_ in cases)


def test_an_unrolled_loop_of_wgmmas_keeps_its_directive_on_the_loop():
    """Regression (s12-fa3's report): the fences before a loop of wgmmas were written
    between ``#pragma unroll`` and the loop, so the directive named the fence."""
    import re
    from gpudsl.codegen import generate
    from gpudsl.schedule import set_unroll
    q = set_unroll(sm90_kernel("f16", **SMALL), "kq")
    src = generate(q.ir, {}).source
    pragmas = [m.end() for m in re.finditer(r"#pragma unroll\n", src)]
    assert pragmas and all(src[i:].lstrip().startswith("for (") for i in pragmas)
    assert "gpudsl_wgmma_fence();" in src
