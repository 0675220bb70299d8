"""The two example derivations: checked at every milestone, equal to numpy."""
from __future__ import annotations

import gpudsl


def test_transpose_derivation():
    from examples.transpose_schedule import derive

    p, log = derive(verify=True)
    assert [n for n, _ in log] == ["naive", "tiles", "shared", "coalesced", "padded"]
    assert gpudsl.check(p).ok
    assert "tile: f32[32, 33] @ SHARED" in str(p)


def test_matmul_derivation():
    from examples.matmul_schedule import derive, timed_derivation

    p, log = derive(check=True, interp=True)
    assert len(log) == 5
    assert gpudsl.check(p).ok
    text = str(p)
    assert text.count("sync()") == 2 and "As: f32[16, 16] @ SHARED" in text
    assert min(timed_derivation() for _ in range(2)) < 5.0  # target: under 1 s


def _emulator_available():
    import shutil

    return shutil.which("g++") is not None or shutil.which("c++") is not None


import pytest  # noqa: E402


@pytest.mark.skipif(not _emulator_available(), reason="no C++ compiler for the emulator")
def test_scheduled_kernels_run_on_the_emulator():
    import numpy as np

    from examples.matmul_schedule import derive as derive_mm
    from examples.transpose_schedule import derive as derive_tr
    from gpudsl.schedule import vectorize

    from . import procs as P

    p, _ = derive_mm(check=False, interp=False)
    rng = np.random.default_rng(1)
    A = rng.standard_normal((32, 16)).astype(np.float32)
    B = rng.standard_normal((16, 48)).astype(np.float32)
    C = np.zeros((32, 48), np.float32)
    p.compile("emulator")(A=A, B=B, C=C)
    np.testing.assert_allclose(C, A @ B, rtol=1e-4, atol=1e-4)

    t, _ = derive_tr(verify=False)
    x = rng.standard_normal((32, 64)).astype(np.float32)
    y = np.zeros((64, 32), np.float32)
    t.compile("emulator")(x=x, y=y)
    np.testing.assert_array_equal(y, x.T)

    v = vectorize(P.tiled_copy, "v", 4)
    assert "float4" in v.cuda_source()
    x = rng.standard_normal((3, 64)).astype(np.float32)
    y = np.zeros_like(x)
    v.compile("emulator")(x=x, y=y)
    np.testing.assert_array_equal(y, x)
