"""``pipeline_wgmma`` (gpudsl/schedule/wgmma_pipeline.py): the consumers of a barrier ring
keep one wgmma group in flight and release the previous slot after ``wgmma_wait(1)``;
and the code of such a loop (gpudsl/codegen/warp_roles.py): role branches on a
warp-uniform index, so that ptxas does not serialize the wgmmas."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.schedule import pipeline_wgmma
from gpudsl.stdlib.matmul_sm90 import sm90_kernel

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)


def _waiting():
    return sm90_kernel("f16", **SMALL, inflight=False)


def test_the_primitive_keeps_one_group_in_flight_and_releases_the_previous_slot():
    q = pipeline_wgmma(_waiting(), "po")
    text = str(q)
    assert "wgmma_wait(1)\n                arrive(empty[(po + 1) % 2], 0, 128)" in text
    assert "for j in seq(0, 1):\n                arrive(empty[j], 0, 128)" in text
    assert "            wgmma_wait(0)\n            sync()" in text      # after the loop
    assert text.count("wgmma_commit()") == 1 and "wgmma_wait(0)\n                arrive" \
        not in text
    assert q.check(target="sm_90a").ok
    assert str(q) == str(sm90_kernel("f16", **SMALL))   # the default derivation


def test_the_pipelined_loop_equals_numpy_on_the_emulator():
    rng = np.random.default_rng(11)
    a = rng.integers(-3, 4, (128, 96)).astype(np.float16)
    bt = rng.integers(-3, 4, (64, 96)).astype(np.float16)
    c = np.zeros((128, 64), np.float16)
    pipeline_wgmma(_waiting(), "po").compile("emulator")(a=a, bt=bt, c=c)
    assert (c == (a.astype(np.float32) @ bt.astype(np.float32).T).astype(np.float16)).all()


def test_a_read_of_the_accumulator_in_the_loop_is_refused():
    """The accumulator read after the release, in the same k step: in flight once the
    wait keeps a group pending (the input, which waits for 0, is proved)."""
    src = str(_waiting()).replace(
        "                arrive(empty[po % 2], 0, 128)\n",
        "                arrive(empty[po % 2], 0, 128)\n"
        "                for u in par(0, 128) @ THREADS:\n"
        "                    s[u, 0] = s[u, 0] * 1.0\n")
    p = gpudsl.proc_from_source(src)
    assert p.check(target="sm_90a").ok
    with pytest.raises(gpudsl.SchedulingError, match="pipeline_wgmma"):
        pipeline_wgmma(p, "po")


def test_a_loop_without_a_ring_release_is_refused():
    src = str(_waiting()).replace("            for j in seq(0, 2):\n"
                                  "                arrive(empty[j], 0, 128)\n", "")
    p = gpudsl.proc_from_source(src)
    with pytest.raises(gpudsl.SchedulingError, match="arrive"):
        pipeline_wgmma(p, "po")


def test_block_level_groups_run_in_the_consumers_warps_on_a_uniform_index():
    from gpudsl.codegen import generate
    src = generate(sm90_kernel("f16", **SMALL).ir, {}).source
    assert "__shfl_sync(__activemask(), (int)(threadIdx.x / 32), 0)" in src
    assert "if (gpudsl_warp < 4) gpudsl_wgmma_commit();" in src
    assert "if (gpudsl_warp < 4) gpudsl_wgmma_wait<1>();\n" in src   # no register fence
    assert "if (4 <= gpudsl_warp) {" in src and "threadIdx.x < 128" not in src


def test_a_group_in_flight_across_the_producers_branch_is_not_serialized():
    """Regression: with role branches on ``threadIdx.x`` and the block-level commit run by
    every warp, ptxas committed an empty group of its own in the producer's path (an
    ``HGMMA.64x8x16`` on ``RZ``) or waited after every wgmma (C7518, "in divergent
    path"): the group left in flight was not the k tile's."""
    from tests.hopper.test_derived_gemm import _k_tile, _sass
    _, text, log = _sass(SMALL)
    tile = _k_tile(text)
    assert [x.split()[0] for x in tile if "HGMMA." in x] == ["HGMMA.64x64x16.F32"] * 2, tile
    assert [x for x in tile if x.startswith("WARPGROUP.DEPBAR")] == \
        ["WARPGROUP.DEPBAR.LE gsb0, 0x1"], tile
    assert "C7518" not in log and "serialized" not in log, log
