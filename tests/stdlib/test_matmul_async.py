"""The fp32 matmul pipelined with async copies (issue 23): derived by primitives from the
single-stage schedule (stdlib.matmul_parts.async_pipeline: lift_alloc, make_async,
pipeline_loop), proved, equal to numpy on the emulator for several k-step counts
(fewer steps than stages included), one barrier per k step, compiled by NVRTC for
sm_80 and sm_90 with cp.async (LDGSTS) in the machine code."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl.ir.nodes import AsyncWait, Sync
from gpudsl.stdlib.matmul import big_kernel, matmul_space, options_kernel


def _loop(p):
    return p.find_loop("po").node()


@pytest.mark.parametrize("stages", [2, 3, 4])
def test_proved_circular_buffer(stages):
    p = big_kernel(False, async_stages=stages)
    assert p.name == f"matmul_128x128x8_a{stages}"
    text = str(p)
    assert f"As: f32[{stages}, 8, 132] @ SHARED" in text
    assert f"Bs: f32[{stages}, 8, 128] @ SHARED" in text
    body = _loop(p).body
    assert sum(isinstance(s, Sync) for s in body) == 1
    assert [s.depth for s in body if isinstance(s, AsyncWait)] == [stages - 2]
    assert text.count("async_copy(") == 2 * stages   # A and B: prologue and loop
    assert p.check().ok


@pytest.mark.parametrize("stages", [2, 3])
@pytest.mark.parametrize("m,n,k", [(128, 8, 128), (256, 24, 128), (128, 40, 256)])
def test_equal_numpy_on_the_emulator(stages, m, n, k):
    g = np.random.default_rng(m + n + k + stages)
    a = g.standard_normal((m, n), np.float32)
    b = g.standard_normal((n, k), np.float32)
    p, bind = options_kernel((m, n), (n, k), async_stages=stages)
    assert p is big_kernel(False, 128, 128, 8, 8, 8, 4, 0, 0, 1, stages)
    c = np.zeros((m, k), np.float32)
    p.compile("emulator")(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_cp_async_in_the_machine_code(arch):
    from gpudsl.codegen.generate import cuda_source
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    r = compile_cubin(cuda_source(big_kernel(False, async_stages=2)), arch)
    for res in r.resources.values():
        assert res.spill_stores_bytes == 0 and res.spill_loads_bytes == 0
        assert res.shared_bytes == 2 * 4 * (8 * 132 + 8 * 128)
    if sass.have_disassembler():
        text = sass.disassemble(r.cubin)
        assert sum("LDGSTS" in ln for ln in text.splitlines()) == 10   # 4 A + 1 B, twice
        assert sum("BAR.SYNC" in ln for ln in text.splitlines()) == 2


def test_async_stages_in_the_tuning_space():
    sp = matmul_space(bm=(128,), bn=(128,), bk=(8,), tm=(8,), tn=(8,), wm=(0,), wn=(0,),
                      min_blocks=(2,))
    pairs = sorted((c["stages"], c["async_stages"]) for c in sp)
    assert pairs == [(1, 0), (1, 2), (1, 3), (1, 4), (2, 0)]


def test_perf_reports_stages_shared_memory_and_copies_in_flight():
    rows = {}
    for stages in (2, 4):
        r = big_kernel(False, async_stages=stages).perf(m=1024, n=1024, k=1024)
        k = r.kernels[0]
        text = str(r)
        assert k.async_stages == stages and k.async_depth == stages - 2
        assert f"{stages}-stage pipeline (async_wait({stages - 2})" in text
        assert k.shared_bytes == stages * 4 * (8 * 132 + 8 * 128)
        rows[stages] = k.bytes_in_flight
        # the B tile's copies are one 16-byte request per lane (x4), no bank conflict
        b = [a for a in k.accesses if a.buffer == "Bs" and a.kind == "write"]
        assert b and all(a.vector_width == 4 and a.ok for a in b)
    if rows[2] is not None:
        assert rows[4] == 3 * rows[2]   # three groups of copies in flight instead of one
