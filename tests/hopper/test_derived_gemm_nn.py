"""The sm_90a ``a @ b`` of ``ops.matmul`` (gpudsl/stdlib/matmul_sm90_nn.py): B staged as it
lies and read MN-major by the wgmma.  Proved for every size its algorithm admits, equal
to numpy on the emulator at odd and even shapes (edges clipped), built by NVRTC for
sm_90a with no spills and a Hopper main loop (TMA boxes, transposed-B HGMMA, no shared
loads), and chosen by ``plan_matmul_half_for`` on an sm_90a device."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl.stdlib.matmul_sm90_nn import plan_matmul_sm90_nn, sm90_nn_kernel

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)
WIDE = dict(bn=256, wgs=2, bk=64, stages=4)


def _operands(m, n, k, dt=np.float16, seed=0):
    rng = np.random.default_rng(seed)
    a = rng.integers(-3, 4, (m, n)).astype(dt)
    b = rng.integers(-3, 4, (n, k)).astype(dt)
    return a, b, (a.astype(np.float32) @ b.astype(np.float32))


@pytest.mark.parametrize("clip", [False, True], ids=["exact", "clipped"])
def test_proved_for_all_sizes(clip):
    p = sm90_nn_kernel("f16", **SMALL, clip=clip)
    assert 'b_major="mn"' in str(p) and "tma_load(Bs[" in str(p)
    r = p.check(target="sm_90a")
    assert r.ok, r


@pytest.mark.parametrize("dt", ["f16", "bf16"])
@pytest.mark.parametrize("clip,shape", [(False, (64, 64, 128)), (True, (1, 32, 8)),
                                        (True, (70, 96, 72)), (True, (128, 64, 64)),
                                        (True, (65, 64, 72)), (True, (100, 96, 136))])
def test_equal_to_numpy_on_the_emulator(dt, clip, shape):
    import ml_dtypes
    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    a, b, want = _operands(*shape, dt=npdt, seed=sum(shape))
    c = np.full((shape[0], shape[2]), 5, npdt)
    sm90_nn_kernel(dt, **SMALL, clip=clip).compile("emulator")(a=a, b=b, c=c)
    assert (c == want.astype(npdt)).all()


@pytest.mark.parametrize("clip", [False, True], ids=["exact", "clipped"])
def test_sm90a_build_reads_b_transposed_by_tma_and_hgmma(clip):
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin
    from tests.hopper.test_derived_gemm import _sass_ops
    r = compile_cubin(generate(sm90_nn_kernel("f16", **WIDE, clip=clip).ir, {}).source,
                      "sm_90a")
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    from tests.hopper.test_derived_gemm import _k_tile
    text = sass.disassemble(r.cubin)
    ops = _sass_ops(text)
    assert ops["HGMMA"] == 4 and text.count(".tnspB") == 4
    assert ops["UTMALDG"] == 1 + 4          # A's 128 x 64 box, B's four 64 x 64 blocks
    tile = _k_tile(text)                    # one group in flight, nothing through SHARED
    assert [x for x in tile if x.startswith("WARPGROUP.DEPBAR")] == \
        ["WARPGROUP.DEPBAR.LE gsb0, 0x1"]
    assert not any(x.startswith(("STS", "LDS", "MEMBAR")) for x in tile)
    assert ops["LDS"] == ops["LDSM"] == ops["LDG"] == 0
    # the epilogue: TMA stores of 64-column slabs, clipped at the edges (clipped: the
    # fragment's writes into the slab guarded, the boxes clipped by the hardware)
    assert ops["UTMASTG"] == 4 and ops["STG"] == 0 and ops["STS"] > 0


@pytest.mark.parametrize("clip,shape", [(False, (2, 64, 64, 64)), (True, (3, 70, 32, 40)),
                                        (True, (2, 1, 32, 8)), (True, (2, 65, 64, 136))])
def test_batched_is_proved_and_equal_to_numpy(clip, shape):
    p = sm90_nn_kernel("f16", **SMALL, clip=clip, batched=True)
    assert "for z in par(0, nb) @ BLOCKS" in str(p) and "tma_load(As[po % 2, 0:64, 0:32], a[z, " in str(p)
    # the epilogue through SHARED and a batch's matrix's boxes (clipped: clipped boxes;
    # unclipped too since s14-tf32b, no thread's direct store)
    assert "tma_store(c[z, 64 * bi:64 * bi + 64, " in str(p)
    assert "c[z, 64 * bi + " not in str(p)
    r = p.check(target="sm_90a")
    assert r.ok, r
    nb, m, n, k = shape
    rng = np.random.default_rng(nb)
    a = rng.integers(-3, 4, (nb, m, n)).astype(np.float16)
    b = rng.integers(-3, 4, (nb, n, k)).astype(np.float16)
    c = np.full((nb, m, k), 5, np.float16)
    p.compile("emulator")(a=a, b=b, c=c)
    assert (c == (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)).all()


def test_plans():
    from gpudsl.stdlib import matmul_sm90
    from gpudsl.stdlib.shapes import NodeError
    wide = {k: v for k, v in matmul_sm90.WIDE.items() if k != "swizzle"}
    p, binds = plan_matmul_sm90_nn((256, 512), (512, 1024), "f16")
    assert p is sm90_nn_kernel("f16", **wide) and binds == dict(m=256, n=512, k=1024)
    assert plan_matmul_sm90_nn((70, 48), (48, 40), "bf16")[0] is \
        sm90_nn_kernel("bf16", **dict(wide, bk=16), clip=True)
    with pytest.raises(NodeError, match="multiple"):
        plan_matmul_sm90_nn((70, 40), (40, 64), "f16")
    with pytest.raises(NodeError, match="multiple"):
        plan_matmul_sm90_nn((70, 64), (64, 42), "f16")


@pytest.mark.gpu
@pytest.mark.parametrize("cfg,shape", [(SMALL, (256, 256, 512)), (WIDE, (256, 256, 512)),
                                       (dict(WIDE, clip=True), (300, 192, 520))],
                         ids=["64x64", "128x256", "128x256-clipped"])
def test_on_the_gpu(cfg, shape):
    from gpudsl.runtime.driver import device_arch
    if device_arch() != "sm_90a":
        pytest.skip("needs an H100/H200")
    a, b, want = _operands(*shape, seed=5)
    c = np.zeros((shape[0], shape[2]), np.float16)
    sm90_nn_kernel("f16", **cfg).compile("cuda")(a=a, b=b, c=c)
    assert (c == want.astype(np.float16)).all()


def test_ops_matmul_takes_the_wgmma_kernel_on_sm90a_after_its_first_run(h100):
    from gpudsl.stdlib.matmul_sm80 import plan_matmul_half_for
    p, binds = plan_matmul_half_for((70, 64), (64, 40), "f16", target="cuda")
    assert p is sm90_nn_kernel("f16", bn=256, wgs=2, bk=64, stages=4, clip=True)
    assert binds == dict(m=70, n=64, k=40)
    pb, bb = plan_matmul_half_for((2, 64, 64), (2, 64, 256), "f16", target="cuda")
    assert pb is sm90_nn_kernel("f16", bn=256, wgs=1, bk=64, stages=4, batched=True) or \
        pb.name.startswith("bmatmul") and 'b_major="mn"' in str(pb)
    assert bb == dict(m=64, n=64, k=256, nb=2)
    # where it does not serve the shape, the other kernels do
    q, _ = plan_matmul_half_for((70, 42), (42, 40), "f16", target="cuda")
    assert "sm90" not in q.name and 'b_major' not in str(q)


def test_a_kernel_failing_its_first_run_is_not_used(h100):
    from gpudsl.stdlib import first_run
    from gpudsl.stdlib.matmul_sm80 import plan_matmul_half_for
    import importlib
    proc_mod = importlib.import_module("gpudsl.proc")
    real = proc_mod.Proc.compile

    def wrong(self, backend=None, **kw):          # a GPU that computes something else
        run = real(self, "emulator", **kw)
        def call(**args):
            run(**args)
            args["c"][0, 0] += 1
        return call
    h100.setattr(proc_mod.Proc, "compile", wrong)
    with pytest.warns(RuntimeWarning, match="failed its first run"):
        p, _ = plan_matmul_half_for((128, 64), (64, 256), "f16", target="cuda")
    assert 'b_major' not in str(p)
    assert list(first_run._RESULTS.values())[0][1] is False
    p2, _ = plan_matmul_half_for((128, 64), (64, 256), "f16", target="cuda")  # no rerun
    assert 'b_major' not in str(p2)
