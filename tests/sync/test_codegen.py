"""CUDA for ranged and split barriers (docs/language.md (synchronization)): named barriers and mbarriers that
NVRTC compiles for sm_80 and sm_90 (no GPU needed), a clear refusal on older targets,
and the emulator: equal to the interpreter on random inputs, a deadlock a LaunchError."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CompileError, LaunchError, proc_from_source
from gpudsl.codegen import generate
from gpudsl.runtime.artifact_cache import Cache
from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.nvrtc import compile_cubin
from gpudsl.runtime.signature import KernelSig

from .cases import EXPECT, PROCS
from .test_language import _args

RANGED = proc_from_source("""
@proc
def ranged(x: f32[128], y: f32[128]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[64] @ SHARED
        u: f32[64] @ SHARED
        for t in par(0, 128) @ THREADS:
            if t < 64:
                s[t] = x[t]
            else:
                u[t - 64] = x[t]
        sync(0, 64)
        sync(64, 128)
        for t in par(0, 128) @ THREADS:
            if t < 64:
                y[t] = s[63 - t]
            else:
                y[t] = u[127 - t]
""")


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("name", sorted(PROCS) + ["ranged"])
def test_nvrtc_compiles(name, arch):
    p = RANGED if name == "ranged" else PROCS[name]
    m = generate(p, {})
    r = compile_cubin(m.source, arch)
    assert r.cubin and set(r.resources) == set(m.kernels)


def test_lowering_text():
    src = generate(RANGED, {}).source
    assert "gpudsl_bar_sync(1, 64)" in src and "gpudsl_bar_sync(2, 64)" in src
    assert "bar.sync %0, %1" in src
    src = generate(PROCS["pc_split"], {}).source
    assert "mbarrier.init.shared.b64" in src and "mbarrier.arrive.shared.b64" in src
    assert "mbarrier.try_wait.parity" in src and "mbarrier.test_wait.parity" in src
    assert "gpudsl_mbar_init(&full, 32)" in src
    # the whole block's range is the block barrier
    whole = proc_from_source(str(RANGED).replace("sync(0, 64)", "sync(0, 128)"))
    assert "__syncthreads();" in generate(whole, {}).source


def test_split_barrier_refused_before_sm_80():
    m = generate(PROCS["pc_split"], {})
    with pytest.raises(CompileError, match="sm_80"):
        compile_cubin(m.source, "sm_75")


def test_more_than_15_ranges_are_refused():
    body = "".join(f"        sync({32 * k}, {32 * k + 32})\n" for k in range(16))
    p = proc_from_source(f"""
@proc
def many(x: f32[512]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 512) @ THREADS:
            x[t] = 1.0
{body}""")
    with pytest.raises(CompileError, match="16 named barriers"):
        generate(p, {})


@pytest.mark.parametrize("name", [n for n, v in sorted(EXPECT.items()) if v == "ok"])
def test_emulator_matches_interpreter(name):
    p = PROCS[name]
    k = p.compile("emulator")
    for seed, n in ((1, 1), (2, 2), (3, 7)):
        a, b = _args(p, n=n, seed=seed), _args(p, n=n, seed=seed)
        k(**a)
        gpudsl.interpret(p, **b)
        for q in a:
            assert np.array_equal(a[q], b[q]), (name, n, q)


def test_emulator_ranged_barriers():
    k = RANGED.compile("emulator")
    x = np.random.default_rng(0).random(128, dtype=np.float32)
    y, y2 = np.zeros_like(x), np.zeros_like(x)
    k(x=x, y=y)
    gpudsl.interpret(RANGED, x=x, y=y2)
    assert np.array_equal(y, y2)


@pytest.mark.parametrize("name", ["wait_never", "pc_split_noempty"])
def test_emulator_reports_deadlocks(name):
    """Compiled without the proof: the emulator stops with a LaunchError (the parity
    overrun of pc_split_noempty deadlocks there as on the hardware)."""
    p = PROCS[name]
    k = p.compile("emulator", check=False)
    with pytest.raises(LaunchError, match="deadlock"):
        k(**_args(p, n=6))


SOURCE = r"""
extern "C" __global__ void part_range(float* x) {
  if (threadIdx.x < 32) gpudsl_bar_sync(1, 64);
  x[threadIdx.x] = 1.0f;
}
extern "C" __global__ void too_wide(float* x) {
  gpudsl_bar_sync(1, 128);
  x[threadIdx.x] = 1.0f;
}
"""


def test_emulator_named_barrier_deadlocks(tmp_path):
    mod = build_emulator_module(SOURCE, [KernelSig("part_range", ["float*"]),
                                         KernelSig("too_wide", ["float*"])],
                                cache=Cache(tmp_path))
    x = np.zeros(64, np.float32)
    with pytest.raises(LaunchError, match="deadlock"):
        mod.launch("part_range", grid=(1, 1, 1), block=(64, 1, 1), args=[x])
    with pytest.raises(LaunchError, match="deadlock"):
        mod.launch("too_wide", grid=(1, 1, 1), block=(64, 1, 1), args=[x])
