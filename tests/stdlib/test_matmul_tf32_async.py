"""The TF32 matmul with a multi-stage async-copy pipeline (``async_stages`` 2 to 4 of
gpudsl/stdlib/matmul_tf32.py): its tiles' 16-byte async copies and the circular buffer
derived by primitives (``make_async``, ``pipeline_loop``), proved by check(), the
instructions' preconditions kept, equal to numpy on the emulator for odd and even
numbers of k tiles (fewer tiles than stages too), NVRTC sm_80/sm_90 without spills,
its sm_90 main loop (LDGSTS, no LDG, one barrier, at most 3 instructions per HMMA),
its stages and shared memory in the performance report, ops.matmul and the space."""
import numpy as np
import pytest

from gpudsl import ops
from gpudsl.ir.nodes import AsyncCopy, AsyncWait
from gpudsl.ir.visitor import walk
from gpudsl.stdlib import matmul_tf32 as mt

RNG = np.random.default_rng(23)
STAGE_BYTES = (128 * 24 + 16 * 132) * 4  # one A tile (pitch 24) and one B tile (pitch 132)


def _nvrtc():
    try:
        from gpudsl.runtime.nvrtc import compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_pipeline_is_derived_proved_and_equals_numpy(stages):
    p = mt.tf32_kernel(async_stages=stages)
    nodes = list(walk(p.ir))
    copies = [n for n in nodes if isinstance(n, AsyncCopy)]
    assert copies and all(c.n == 4 for c in copies)  # 16-byte copies only
    assert {n.depth for n in nodes if isinstance(n, AsyncWait)} == {stages - 2}
    assert p.check().ok and mt.tf32_preconditions_hold(p)
    em = p.compile("emulator")
    for n in (16, 48, 64, 80):  # 1, 3, 4 and 5 k tiles
        a = RNG.standard_normal((128, n)).astype(np.float32)
        b = RNG.standard_normal((n, 256)).astype(np.float32)
        c = np.zeros((128, 256), np.float32)
        em(a=a, b=b, c=c)
        err = np.abs(c - a.astype(np.float64) @ b)
        assert np.all(err <= mt.tf32_tolerance(a, b, truncated=True)), (stages, n)


def test_the_truncated_tolerance_is_needed_and_enough():
    """The async tiles are not rounded: the tensor cores (and the emulator) drop the
    low 13 bits, an error up to 2**-10 per input, which the rounded bound misses."""
    a = np.full((128, 16), 1 + 2.0 ** -11 + 2.0 ** -13, np.float32)
    b = np.ones((16, 128), np.float32)
    c = np.zeros((128, 128), np.float32)
    mt.tf32_kernel(async_stages=2).compile("emulator")(a=a, b=b, c=c)
    err = np.abs(c - a.astype(np.float64) @ b)
    assert np.all(err <= mt.tf32_tolerance(a, b, truncated=True))
    assert not np.all(err <= mt.tf32_tolerance(a, b) * 0.5)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("stages", [2, 3, 4])
def test_nvrtc_compiles_without_spills(stages, arch):
    _nvrtc()
    from gpudsl.runtime.nvrtc import compile_cubin

    p = mt.tf32_kernel(async_stages=stages)
    src = p.cuda_source()
    assert "cp.async.cg.shared.global" in src
    res = compile_cubin(src, arch).resources
    assert res
    for name, r in res.items():
        assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0, (name, r)
        assert r.stack_bytes == 0, (name, r)


@pytest.mark.parametrize("stages", [2, 4])
def test_sm90_main_loop_is_ldgsts_and_hmma(stages):
    _nvrtc()
    from gpudsl.perf.sass import have_disassembler, hot_loop

    if not have_disassembler():
        pytest.skip("nvdisasm absent")
    p, b = mt.matmul_tf32_kernel((4096, 4096), (4096, 4096), async_stages=stages)
    (ks,) = p.compile("emulator", check=False).sass("sm_90", **b).kernels
    hot = hot_loop(ks.figures)
    c = hot.counts
    assert hot.count("HMMA") == 64 and hot.instructions <= 3 * hot.count("HMMA"), c
    assert c.get("LDGSTS") == 8  # 2 x 8 KiB tiles / 128 threads / 16 B
    assert not any(k.startswith("LDG.") or k == "LDG" for k in c), c
    assert c.get("BAR") == 1 and c.get("LDS.64") == 32, c
    assert ks.spill_bytes == 0


@pytest.mark.parametrize("stages", [2, 4])
def test_perf_report_shows_stages_and_shared_memory(stages):
    rep = mt.tf32_kernel(async_stages=stages).perf("H100", m=4096, n=4096, k=4096)
    (kp,) = rep.kernels
    assert kp.async_stages == stages and kp.async_depth == stages - 2
    assert f"{stages}-stage pipeline" in str(rep)
    if any("ptxas figures unavailable" in n for n in rep.notes):
        pytest.skip("ptxas figures unavailable")
    assert kp.shared_bytes == stages * STAGE_BYTES  # 4 stages: dynamic shared memory
    assert kp.spills == 0


def test_ops_matmul_tf32_async_and_the_space():
    a = RNG.standard_normal((128, 48)).astype(np.float32)
    b = RNG.standard_normal((48, 128)).astype(np.float32)
    c = ops.matmul(a, b, precision="tf32", async_stages=3)
    assert np.all(np.abs(c - a.astype(np.float64) @ b) <=
                  mt.tf32_tolerance(a, b, truncated=True))
    space = mt.tf32_space()
    configs = list(space)
    assert {c_.get("async_stages") for c_ in configs} == {0, 2, 3, 4}
    assert not any(c_["async_stages"] and c_["double_buffer"] for c_ in configs)
    p = mt.Tf32Build()(dict(bm=128, bn=128, bk=16, double_buffer=False, async_stages=3))
    assert p.name == "matmul_tf32_128x128x16_a3" and p.check().ok
