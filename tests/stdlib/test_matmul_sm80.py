"""The sm_80 half GEMM (issue 36, gpudsl/stdlib/matmul_sm80.py): derived by primitives,
proved by check() with its instruction's preconditions kept, equal to float64 within the
stated bound on the emulator (even and odd numbers of k tiles, fewer tiles than
stages, batched; other shapes through the planner's fallbacks), NVRTC sm_80/86/89
without spills, its sm_80 main loop (HMMA fed by shared fragments, LDGSTS, one
barrier) against today's kernel, conflict-free ldmatrix phases, the picker by target
and the autotuning space."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

from gpudsl.ir.nodes import AsyncCopy, AsyncWait
from gpudsl.ir.visitor import walk
from gpudsl.stdlib import matmul_f16 as mh
from gpudsl.stdlib import matmul_sm80 as m8
from gpudsl.stdlib.shapes import NodeError

RNG = np.random.default_rng(36)
NP = {"f16": np.float16, "bf16": ml_dtypes.bfloat16}


def _nvrtc():
    try:
        from gpudsl.runtime.nvrtc import compiler_version

        compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")


def _sass():
    _nvrtc()
    from gpudsl.perf.sass import have_disassembler

    if not have_disassembler():
        pytest.skip("nvdisasm absent")


def _within_bound(a, b, c, dt):
    ref = a.astype(np.float64) @ b.astype(np.float64)
    err = np.abs(c.astype(np.float64) - ref)
    tol = mh.half_tolerance(a, b, dt)
    assert np.all(err <= tol), (err.max(), tol.max())


# the kernels the tests build (each about half a minute to derive)
KERNELS = {
    "f16 128x256 s3": dict(dt="f16"),
    "f16 128x128 s4": dict(dt="f16", bn=128, stages=4),
    "bf16 128x128 s3 batched": dict(dt="bf16", bn=128, batched=True),
}


def _kernel(key):
    o = dict(KERNELS[key])
    return m8.sm80_kernel(o.pop("dt"), **o), KERNELS[key]["dt"]


@pytest.mark.parametrize("key", list(KERNELS))
def test_derived_proved_and_keeps_the_preconditions(key):
    p, dt = _kernel(key)
    nodes = list(walk(p.ir))
    copies = [n for n in nodes if isinstance(n, AsyncCopy)]
    assert copies and all(c.n == 8 for c in copies)  # 16-byte copies of 8 halves
    stages = KERNELS[key].get("stages", 3)
    assert {n.depth for n in nodes if isinstance(n, AsyncWait)} == {stages - 2}
    r = p.check()
    assert r.ok, str(r)
    assert m8.sm80_preconditions_hold(p, dt)
    assert f"mma_{dt}_warp4x8(" in str(p)
    src = p.cuda_source()
    assert "ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16" in src
    assert "cp.async.cg.shared.global" in src


def test_a_guarded_call_breaks_the_precondition():
    """The checker is not vacuous: the warp instruction under an ``if`` inside the
    thread loops (lanes that may take different branches) fails it."""
    from gpudsl.schedule import specialize

    p, _dt = _kernel("f16 128x256 s3")
    q = specialize(p, p.find_loop("ks"), "g < 4")
    assert q.check().ok  # the same meaning: the checker's rule is the hardware's
    assert not m8.sm80_preconditions_hold(q, "f16")
    assert not m8.sm80_preconditions_hold(mh.half_kernel("f16"), "f16")  # no such call


@pytest.mark.parametrize("n", [32, 64, 96, 160])  # 1, 2, 3 and 5 k tiles
def test_emulator_equals_float64_2d(n):
    p, dt = _kernel("f16 128x256 s3")
    a = RNG.uniform(-1, 1, (128, n)).astype(NP[dt])
    b = RNG.uniform(-1, 1, (n, 256)).astype(NP[dt])
    c = np.zeros((128, 256), NP[dt])
    p.compile("emulator")(a=a, b=b, c=c)
    _within_bound(a, b, c, dt)


def test_emulator_equals_float64_batched():
    p, dt = _kernel("bf16 128x128 s3 batched")
    for nb, m, n, k in ((2, 128, 96, 256), (1, 256, 32, 128)):
        a = RNG.uniform(-1, 1, (nb, m, n)).astype(NP[dt])
        b = RNG.uniform(-1, 1, (nb, n, k)).astype(NP[dt])
        c = np.zeros((nb, m, k), NP[dt])
        p.compile("emulator")(a=a, b=b, c=c)
        _within_bound(a, b, c, dt)


def test_the_warp_instr_body_equals_its_emulated_code():
    """The interpreter (the body, per lane) and the emulator agree bit for bit."""
    import gpudsl

    p, _dt = _kernel("f16 128x256 s3")
    a = RNG.uniform(-1, 1, (128, 32)).astype(np.float16)
    b = RNG.uniform(-1, 1, (32, 256)).astype(np.float16)
    c1, c2 = np.zeros((128, 256), np.float16), np.zeros((128, 256), np.float16)
    gpudsl.interpret(p, a=a, b=b, c=c1)
    p.compile("emulator")(a=a, b=b, c=c2)
    np.testing.assert_array_equal(c1, c2)


@pytest.mark.parametrize("shapes", [((5, 40), (40, 33)), ((3, 5, 7), (3, 7, 9)),
                                    ((128, 32), (32, 128)), ((1, 40), (40, 128))])
def test_the_planner_serves_odd_shapes_and_equals_float64(shapes):
    sa, sb = shapes
    p, binds = m8.plan_matmul_sm80(sa, sb, "f16", "sm_80", stages=4)
    a = RNG.uniform(-1, 1, sa).astype(np.float16)
    b = RNG.uniform(-1, 1, sb).astype(np.float16)
    c = np.zeros(sa[:-1] + sb[-1:], np.float16)
    p.compile("emulator")(a=a, b=b, c=c, **binds)
    _within_bound(a, b, c, "f16")
    divides = sa[-2] % 128 == 0 and sb[-1] % 128 == 0 and sa[-1] % 32 == 0
    assert ("_sm80_" in p.name) == divides, p.name


def test_shapes_the_tiles_do_not_divide_are_refused():
    with pytest.raises(NodeError, match="m % 128 == 0"):
        m8.matmul_sm80_kernel((96, 64), (64, 256), "f16")
    with pytest.raises(NodeError, match="inner dimensions"):
        m8.matmul_sm80_kernel((128, 64), (32, 256), "f16")


@pytest.mark.parametrize("arch", ["sm_80", "sm_86", "sm_89"])
def test_nvrtc_builds_without_spills(arch):
    _nvrtc()
    from gpudsl.runtime.nvrtc import compile_cubin

    for key in KERNELS:
        p, _dt = _kernel(key)
        res = compile_cubin(p.cuda_source(), arch).resources
        assert res
        for name, r in res.items():
            assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0, (name, r)
            assert r.stack_bytes == 0 and r.registers <= 255, (name, r)


def test_sm80_main_loop_against_todays_kernel():
    """Per k tile of 32 (one warp, sm_80): 64 HMMA fed by 16 LDSM (today's kernel: 32
    HMMA, 64 LDSM: ptxas does not share its per-mma fragment loads on sm_80), 6
    LDGSTS and no LDG/STS (the async ring), one barrier (today's: two)."""
    _sass()
    p, b = m8.matmul_sm80_kernel((4096, 4096), (4096, 4096), "f16")
    (new,) = p.compile("emulator", check=False).sass("sm_80", **b).kernels
    p0, b0 = mh.matmul_half_kernel((4096, 4096), (4096, 4096), "f16")
    (old,) = p0.compile("emulator", check=False).sass("sm_80", **b0).kernels
    from gpudsl.perf.sass import hot_loop

    h, h0 = hot_loop(new.figures), hot_loop(old.figures)
    assert h.count("HMMA") == 64 and h.counts.get("LDSM") == 16, h.counts
    assert h0.count("HMMA") == 32 and h0.counts.get("LDSM") == 64, h0.counts
    assert h.count("LDGSTS") == 6 and h.count("BAR") == 1 and h0.count("BAR") == 2
    assert not any(k.startswith(("LDG.", "STS")) or k == "LDG" for k in h.counts), h.counts
    assert h.instructions <= 2.5 * h.count("HMMA"), h.counts
    assert new.spill_bytes == 0 and new.shared_bytes == 3 * m8.stage_bytes(128, 256, 32)


def _ldmatrix_phases(pitch, rows_of_lane, col_of_lane):
    """The perf module's bank-conflict degree of an ldmatrix.x4 (four phases of 8
    lanes, each a 16-byte row address) into a tile of ``pitch`` halves."""
    from gpudsl.perf.warp import Request, bank_conflict

    lanes = {l: [rows_of_lane(l) * pitch + col_of_lane(l) + e for e in range(8)]
             for l in range(32)}
    return bank_conflict(Request(lanes), 2)


@pytest.mark.parametrize("bn,bk", [(256, 32), (128, 32), (128, 64)])
def test_the_padded_tiles_make_ldmatrix_conflict_free(bn, bk):
    """A's x4 (lane l: row (l & 7) + 8 ((l >> 3) & 1), column 8 (l >> 4)) and B's
    x4.trans (k row likewise, column 8 (l >> 4)) at the padded pitches: one word per
    bank per phase; the unpadded pitches conflict 8-way."""
    row = lambda l: (l & 7) + 8 * ((l >> 3) & 1)  # noqa: E731
    col = lambda l: 8 * (l >> 4)  # noqa: E731
    assert _ldmatrix_phases(bk + 8, row, col) == 1
    assert _ldmatrix_phases(bn + 8, row, col) == 1
    assert _ldmatrix_phases(bk, row, col) > 1 and _ldmatrix_phases(bn, row, col) == 8


def test_the_target_picks_the_kernel():
    for t in ("sm_80", "sm_86", "sm_89"):
        assert m8.uses_sm80(t)
        p, _ = m8.plan_matmul_half_for((256, 64), (64, 256), "f16", t)
        assert p is m8.sm80_kernel("f16")  # one cached kernel, however it is asked for
    assert not m8.uses_sm80("sm_90a") and not m8.uses_sm80("sm_75")
    p, _ = m8.plan_matmul_half_for((256, 64), (64, 256), "f16", "sm_90a")
    assert p.name == mh.half_kernel("f16").name  # today's kernel kept
    p, binds = m8.plan_matmul_half_for((2, 128, 32), (2, 32, 128), "bf16", "sm_90a")
    assert p.name == "bmatmul_bf16_sm80_128x128x32_s3" and binds["nb"] == 2
    # a run target: the emulator proves for sm_90a (today's kernel for 2-D shapes)
    assert m8.arch_of("emulator") == m8.arch_of(None) == "sm_90a"
    p, _ = m8.plan_matmul_half_for((256, 64), (64, 256), "f16", "emulator")
    assert p.name == mh.half_kernel("f16").name


def test_the_space_fits_each_target():
    from gpudsl.targets import target

    for t in ("sm_80", "sm_86", "sm_89"):
        configs = list(m8.sm80_space(target=t))
        assert configs
        for c in configs:
            o = m8.config_options(c)
            shared = o["stages"] * m8.stage_bytes(o["bm"], o["bn"], o["bk"])
            assert shared <= target(t).max_shared_bytes
        assert {c["stages"] for c in configs} >= {2, 3}
    big = [dict(c) for c in m8.sm80_space(target="sm_80") if c["stages"] == 4]
    assert {"tile": [128, 256], "warp": [64, 64], "bk": 32, "stages": 4, "raster": 16} in big
    small = [dict(c) for c in m8.sm80_space(target="sm_86") if c["stages"] == 4]
    assert all(c["tile"] == [128, 128] for c in small)  # 99 KB: no 4-stage 128 x 256
    p = m8.Sm80Build("f16")(dict(tile=[128, 128], warp=[64, 64], bk=32, stages=4))
    assert p.name == "matmul_f16_sm80_128x128x32_s4" and p is _kernel("f16 128x128 s4")[0]
    # check() agrees with the pruning: the 3-stage 128 x 256 ring fits sm_86
    assert m8.sm80_kernel("f16").check(target="sm_86").ok


def test_matmul_sm80_runs_where_ops_run_and_the_bench_rows():
    """``matmul_sm80`` (what gpudsl bench's sm80 rows time) gives the kernel's result
    through the ops machinery; the bench has the rows, in both half types."""
    from gpudsl import bench

    a = RNG.uniform(-1, 1, (128, 64)).astype(np.float16)
    b = RNG.uniform(-1, 1, (64, 128)).astype(np.float16)
    c = m8.matmul_sm80(a, b, stages=4)  # the 128 x 128, 4-stage kernel
    assert c.dtype == np.float16 and c.shape == (128, 128)
    _within_bound(a, b, c, "f16")
    with pytest.raises(NodeError, match="float16 or bfloat16"):
        m8.matmul_sm80(a.astype(np.float32), b.astype(np.float32))
    nodes = {"matmul_f16_sm80", "matmul_bf16_sm80"}
    assert nodes <= set(bench.NODES) and nodes <= bench.MATMULS
    env = bench._Env("emulator")
    cases = bench._matmul_cases(env, True, nodes, variants=True)  # the emulator's sizes
    got = sorted((c_.node, c_.size) for c_ in cases)
    assert got == sorted((n, f"{s}^3 sm80") for n in nodes for s in bench.EMU_GEMM_SIZES)
    for c_ in cases:
        assert c_.extra["dtype"] == ("float16" if c_.node.startswith("matmul_f16") else
                                     "bfloat16")
        assert c_.tol == 1e-2 and c_.kind == "flops"
