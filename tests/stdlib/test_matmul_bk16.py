"""The fp32 big-tile matmul at bk = 16 (issue 36): the transposed A tile keeps float4
reads of the register cache (its pad), the k tile is proved and equal to numpy on the
emulator (2-D, batched, odd shapes through the planner), the resident blocks per SM are
an option (``min_blocks``) and a tuning parameter, and NVRTC builds the variants of the
bench rows without spills."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl.stdlib import matmul as ms
from gpudsl.stdlib.matmul_parts import a_pad, store_conflicts


def test_a_pad_keeps_the_tile_rows_float4_aligned():
    # bk = 8: two float4 column groups a warp, pitch bm + 4, no conflict (as before)
    assert a_pad(128, 4, 2, 4) == 4 and store_conflicts(132, 4, 2) == 1
    # bk = 16: four groups; a conflict-free pitch (bm + 2) is no multiple of 4, so the
    # pad takes bm + 4, a 2-way conflict of the stores, and keeps float4 reads
    assert store_conflicts(130, 4, 4) == 1 and store_conflicts(132, 4, 4) == 2
    assert a_pad(128, 4, 4, 4) == 4
    # nothing reads it wide: the conflict-free pitch
    assert a_pad(128, 4, 4, 1) == 2
    # scalar copies (the one-kernel and async variants): 16 groups of one float
    assert a_pad(64, 1, 16, 4) == 4 and a_pad(64, 1, 8, 4) == 4


def test_bk16_reads_the_a_tile_with_float4():
    """Before: the bk = 16 tile had pitch 130 and the register cache read it one float
    at a time (LDS.64 pairs in the SASS of sm_90)."""
    p = ms.big_kernel(False, bk=16)
    assert "As: f32[2, 16, 132] @ SHARED" in str(p)
    src = p.cuda_source(m=4096, n=4096, k=4096)
    assert "reinterpret_cast<const float4*>(&As[" in src
    assert p.check().ok
    # the one-kernel variant of any shape: the same pitch, proved for all sizes
    t = ms.guarded_tiles_kernel(False, bk=16)
    assert "As: f32[16, 132] @ SHARED" in str(t)
    assert "reinterpret_cast<const float4*>(&As[" in t.cuda_source()
    assert t.check().ok


def test_bk16_batched_and_one_block_variants_proved():
    for p in (ms.big_kernel(True, bk=16), ms.big_kernel(False, bk=16, min_blocks=1),
              ms.big_kernel(False, bk=16, wm=64, wn=32, min_blocks=1)):
        assert p.check().ok, p.name


@pytest.mark.parametrize("sa, sb", [((128, 16), (16, 128)), ((256, 48), (48, 128)),
                                    ((2, 128, 32), (2, 32, 128)), ((130, 40), (40, 129)),
                                    ((128, 24), (24, 256))], ids=str)
@pytest.mark.parametrize("mb", [2, 1])
def test_bk16_equal_numpy_on_the_emulator(sa, sb, mb):
    g = np.random.default_rng(sum(sa) + sum(sb) + mb)
    a = g.standard_normal(sa, np.float32)
    b = g.standard_normal(sb, np.float32)
    got = ms.matmul_with(a, b, bk=16, min_blocks=mb)
    np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)


def test_min_blocks_is_the_launch_bound_and_a_tuning_parameter():
    p, bind = ms.options_kernel((256, 32), (32, 256), bk=16, min_blocks=1)
    assert p.name == "matmul_128x128x16_b1"
    assert p.check(**bind).ok
    assert "__launch_bounds__(256, 1)" in p.cuda_source(**bind)
    assert "__launch_bounds__(256, 2)" in ms.big_kernel(False, bk=16).cuda_source()
    # the default: unchanged (2 blocks per SM, the same cached kernel)
    assert ms.options_kernel((256, 32), (32, 256))[0] is \
        ms.matmul_kernel((256, 32), (32, 256))[0]
    sp = ms.matmul_space(bm=(128,), bn=(128,), bk=(16,), tm=(8,), tn=(8,), wm=(0,),
                         wn=(0,), stages=(2,), async_stages=(0,))
    assert sorted(c["min_blocks"] for c in sp) == [1, 2]
    build = ms.MatmulBuild((256, 32), (32, 256))
    assert build(dict(bm=128, bn=128, bk=16, tm=8, tn=8, min_blocks=1)) is p


def test_bk16_warp_tiles_64_high_are_in_the_space():
    """With the float4-aligned pad the 64-row warp tiles at bk = 16 read the A tile
    without conflict (before: one float at a time, 2-way): the space keeps them."""
    cfgs = list(ms.matmul_space())
    assert any(c.wm == 64 and c.bk == 16 for c in cfgs)
    p = ms.schedule_matmul(ms.matmul_algorithm(False, (64, 32, 16)), bm=64, bn=32, bk=16,
                           tm=4, tn=8, warp_tile=(64, 16))
    (k,) = p.perf(m=256, n=64, k=256).kernels
    assert [(a.buffer, a.kind, a.figure()) for a in k.accesses if not a.ok] == \
        [("As", "write", "2-way bank conflict")]


@pytest.mark.parametrize("arch, mb", [("sm_90", 1), ("sm_80", 1), ("sm_80", 2)])
def test_bk16_compiles_without_spills(arch, mb):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    p = ms.big_kernel(False, bk=16, min_blocks=mb)
    (r,) = compile_cubin(cuda_source(p), arch).resources.values()
    assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0
    assert r.registers <= 65536 // (256 * mb)
    assert r.shared_bytes == 2 * 4 * (16 * 132 + 16 * 128)


def test_bk16_main_loop_in_sass():
    """Per k tile of 16 (sm_90, 1 block per SM): 1024 FFMA, 64 LDS.128 (the minimum for
    8 x 8 per thread), one barrier, 4 LDG.128, FFMA at least 89% of the loop."""
    from gpudsl.perf import running_module
    from gpudsl.perf.sass import have_disassembler, hot_loop
    from gpudsl.perf.sass_report import sass_report

    if not have_disassembler():
        pytest.skip("needs nvdisasm (gpudsl[sass])")
    p, bind = ms.options_kernel((4096, 4096), (4096, 4096), bk=16, min_blocks=1)
    (k,) = sass_report(running_module(p.ir, bind), "sm_90").kernels
    f = hot_loop(k.figures)
    assert f.count("FFMA") == 1024 and f.counts.get("LDS.128", 0) == 64
    assert f.count("BAR") == 1 and f.counts.get("LDG.128", 0) == 4
    assert f.count("FFMA") / f.instructions >= 0.89
    assert k.spill_bytes == 0


# ---------------------------------------------------------------- 4 warps of 64x64 (W64)


def test_w64_proved_and_in_the_space():
    p, bind = ms.options_kernel((256, 32), (32, 256), **ms.W64)
    assert p.check().ok
    src = p.cuda_source(**bind)  # 4 warps of 32 lanes, 2 blocks per SM
    assert "block (32, 4, 1)" in src and "__launch_bounds__(128, 2)" in src
    cfgs = list(ms.matmul_space(bm=(128,), bn=(128,), bk=(16,), tm=(8,), tn=(16,),
                                wm=(64,), wn=(64,), stages=(2,), async_stages=(0,),
                                min_blocks=(2,)))
    assert len(cfgs) == 1 and str(ms.MatmulBuild((256, 32), (32, 256))(cfgs[0])) == str(p)


@pytest.mark.parametrize("sa, sb", [((256, 48), (48, 128)), ((2, 128, 32), (2, 32, 128)),
                                    ((130, 40), (40, 129)), ((128, 24), (24, 256))], ids=str)
def test_w64_equal_numpy_on_the_emulator(sa, sb):
    g = np.random.default_rng(sum(sa) * 7 + sum(sb))
    a = g.standard_normal(sa, np.float32)
    b = g.standard_normal(sb, np.float32)
    np.testing.assert_allclose(ms.matmul_with(a, b, **ms.W64), a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_90", "sm_80"])
def test_w64_compiles_without_spills(arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    p, _ = ms.options_kernel((4096, 4096), (4096, 4096), **ms.W64)
    (r,) = compile_cubin(cuda_source(p), arch).resources.values()
    assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0
    assert r.registers <= 65536 // (128 * 2)  # 2 blocks of 128 threads per SM


def test_w64_main_loop_in_sass():
    """Per k tile of 16 (sm_90): 2048 FFMA, 96 LDS.128 (24 floats a k step for 128 FFMA),
    one barrier, FFMA at least 92% of the loop (the default: 88%)."""
    from gpudsl.perf import running_module
    from gpudsl.perf.sass import have_disassembler, hot_loop
    from gpudsl.perf.sass_report import sass_report

    if not have_disassembler():
        pytest.skip("needs nvdisasm (gpudsl[sass])")
    p, bind = ms.options_kernel((4096, 4096), (4096, 4096), **ms.W64)
    (k,) = sass_report(running_module(p.ir, bind), "sm_90").kernels
    f = hot_loop(k.figures)
    assert f.count("FFMA") == 2048 and f.counts.get("LDS.128", 0) == 96
    assert f.count("BAR") == 1 and k.spill_bytes == 0
    assert f.count("FFMA") / f.instructions >= 0.92
