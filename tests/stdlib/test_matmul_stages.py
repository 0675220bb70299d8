"""The double-buffered big-tile fp32 matmul (issue 23): derived by primitives from the
single-stage schedule (stdlib.matmul_parts.double_buffer), proved, equal to numpy on the
emulator, one barrier per k step, compiled by NVRTC for sm_80 and sm_90 without spills."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import ops
from gpudsl.ir.nodes import Sync
from gpudsl.stdlib.matmul import big_kernel, matmul_space, options_kernel


def _barriers_per_step(p):
    loop = p.find_loop("po").node()
    return sum(isinstance(s, Sync) for s in loop.body)


def test_two_stages_proved_with_one_barrier_per_k_step():
    one, two = big_kernel(False, stages=1), big_kernel(False)
    assert _barriers_per_step(one) == 2 and _barriers_per_step(two) == 1
    assert two.check().ok
    assert "As: f32[2, 8, 132] @ SHARED" in str(two)
    assert "(po + 1) % 2" in str(two)


@pytest.mark.parametrize("m,n,k", [(128, 8, 128), (256, 24, 128), (128, 40, 256)])
def test_two_stages_equal_numpy_on_the_emulator(m, n, k):
    g = np.random.default_rng(m + n + k)
    a = g.standard_normal((m, n), np.float32)
    b = g.standard_normal((n, k), np.float32)
    for stages in (1, 2):
        got = ops.matmul(a, b, stages=stages)
        np.testing.assert_allclose(got, a @ b, rtol=1e-4, atol=1e-4)
    p, _ = options_kernel((m, n), (n, k), stages=1)
    assert p.name.endswith("_s1")
    # the default: two stages (one barrier per k step)
    assert _barriers_per_step(options_kernel((m, n), (n, k))[0]) == 1


def test_batched_two_stages_on_request():
    """The batched kernel keeps one stage by default (two spill 16 B on sm_90)."""
    g = np.random.default_rng(1)
    a = g.standard_normal((2, 128, 16), np.float32)
    b = g.standard_normal((2, 16, 128), np.float32)
    np.testing.assert_allclose(ops.matmul(a, b, stages=2), a @ b, rtol=1e-4, atol=1e-4)
    assert _barriers_per_step(big_kernel(True)) == 2
    assert _barriers_per_step(options_kernel(a.shape, b.shape, stages=2)[0]) == 1


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_two_stages_compile_without_spills(arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.runtime.nvrtc import compile_cubin

    res = compile_cubin(cuda_source(big_kernel(False)), arch).resources
    for r in res.values():
        assert r.spill_stores_bytes == 0 and r.spill_loads_bytes == 0
        assert r.shared_bytes == 2 * 4 * (8 * 132 + 8 * 128)


def test_stages_are_in_the_tuning_space_and_checked():
    sp = matmul_space(bm=(128,), bn=(128,), bk=(8,), tm=(8,), tn=(8,), wm=(0,), wn=(0,),
                      min_blocks=(2,))
    assert sorted(c["stages"] for c in sp if not c["async_stages"]) == [1, 2]
    with pytest.raises(Exception, match="stages must be 1 or 2"):
        ops.matmul(np.ones((128, 8), np.float32), np.ones((8, 128), np.float32), stages=3)
