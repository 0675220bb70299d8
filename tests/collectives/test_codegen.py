"""Warp collectives in CUDA: the intrinsics with full masks, NVRTC compiles every
generated kernel for sm_80 and sm_90 (no GPU needed), and the emulator gives the
interpreter's results on random inputs, bit for bit."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.codegen import generate
from gpudsl.runtime.nvrtc import compile_cubin

from . import procs as P

RNG = np.random.default_rng(11)


def _args(p, rng):
    n = 3
    f = lambda *s: rng.standard_normal(s).astype(np.float32)  # noqa: E731
    return {
        "shuffles": lambda: dict(x=f(64), y=np.zeros((64, 4), np.float32)),
        "reductions": lambda: dict(x=f(64), q=rng.integers(-2 ** 31, 2 ** 31, 64).astype(
            np.int32), y=np.zeros((64, 3), np.float32), r=np.zeros((64, 3), np.int32)),
        "votes": lambda: dict(x=rng.random(64, dtype=np.float32), m=np.zeros(64, np.int64),
                              c=np.zeros((64, 2), np.int32)),
        "wide_types": lambda: dict(a=rng.standard_normal(32),
                                   b=rng.integers(-10 ** 12, 10 ** 12, 32),
                                   y=np.zeros(32), z=np.zeros(32, np.int64)),
        "block_sum": lambda: dict(n=n, x=f(n, 256), out=np.zeros(n, np.float32)),
        "butterfly": lambda: dict(n=64, x=f(64), y=np.zeros(64, np.float32)),
        "nested": lambda: dict(x=f(4, 32), y=np.zeros((4, 32), np.float32)),
    }[p.name]()


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
@pytest.mark.parametrize("p", P.GOOD, ids=lambda p: p.name)
def test_nvrtc_compiles(p, arch):
    m = generate(p, {"n": 64} if p.name == "butterfly" else {})
    r = compile_cubin(m.source, arch)
    assert r.cubin


def test_intrinsics_and_masks():
    src = P.shuffles.cuda_source() + P.votes.cuda_source() + P.reductions.cuda_source()
    for name in ("__shfl_sync", "__shfl_xor_sync", "__shfl_down_sync", "__shfl_up_sync",
                 "__ballot_sync", "__any_sync", "__all_sync", "__reduce_add_sync",
                 "__reduce_max_sync", "__reduce_min_sync"):
        assert f"{name}(0xffffffffu, " in src, name


@pytest.mark.parametrize("seed", [1, 2])
@pytest.mark.parametrize("p", P.GOOD, ids=lambda p: p.name)
def test_emulator_equals_interpreter(p, seed):
    args = _args(p, np.random.default_rng(seed))
    want = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    gpudsl.interpret(p, **want)
    bind = {"n": 64} if p.name == "butterfly" else {}
    p.compile("emulator", **bind)(**args)
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(args[k], v, err_msg=f"{p.name}: {k}")


def test_perf_counts_shuffles():
    from gpudsl.stdlib.rms_norm import rms_norm_kernel

    k = rms_norm_kernel(256).perf(r=4, n=4096).kernels[0]
    # 4 rows x 8 warps x 2 float warp_sums x 5 butterfly shuffles
    assert k.shuffles == 320
    assert "warp shuffles: 320 warp instructions" in str(rms_norm_kernel(256).perf(r=4, n=4096))
    r = P.reductions.perf().kernels[0]
    # 2 warps x (3 float reductions x 5 + 3 i32 reductions x 1)
    assert r.shuffles == 2 * (3 * 5 + 3)
