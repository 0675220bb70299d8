"""issue 15: warp tiling of the big-tile matmul (``schedule_matmul(..., warp_tile=(wm,
wn))``, siboehm's kernel 10): each warp owns a ``wm x wn`` tile of C made of its 32
threads' register tiles.  Proved by check(), equal to numpy on the emulator, the
performance report's figures at their minimum (no bank conflict, minimum sectors) and no
ptxas spills; the autotuning space's warp-tile configurations and ``MatmulBuild``."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl.stdlib import matmul as ms

OK_TILE = [("a", "16 sectors (min 16)", 4), ("As", "no bank conflict", 1),
           ("b", "16 sectors (min 16)", 4), ("Bs", "no bank conflict", 4),
           ("As", "no bank conflict", 4), ("Bs", "no bank conflict", 4),
           ("c", "16 sectors (min 16)", 4)]

# (bm, bn, bk, tm, tn, wm, wn)
CONFIGS = [(128, 128, 8, 8, 8, 32, 64), (128, 128, 8, 8, 8, 64, 32),
           (64, 64, 8, 4, 4, 32, 16), (64, 128, 8, 8, 4, 32, 32)]
_IDS = ["x".join(map(str, c)) for c in CONFIGS]


def _warp(cfg, batched=False):
    bm, bn, bk, tm, tn, wm, wn = cfg
    return ms.schedule_matmul(ms.matmul_algorithm(batched, (bm, bn, bk)), bm=bm, bn=bn,
                              bk=bk, tm=tm, tn=tn, warp_tile=(wm, wn))


def _figs(k):
    return [(a.buffer, a.figure(), a.vector_width) for a in k.accesses]


@pytest.mark.parametrize("cfg", CONFIGS, ids=_IDS)
def test_warp_tiled_proved_and_report_at_minimum(cfg):
    bm, bn, bk, tm, tn, wm, wn = cfg
    p = _warp(cfg)
    assert p.check().ok
    (k,) = p.perf(m=1024, n=1024, k=1024).kernels
    assert k.block == (32, (bm // wm) * (bn // wn), 1)  # x: the lanes, y: the warps
    assert _figs(k) == OK_TILE
    assert all(a.ok for a in k.accesses)
    assert k.flops == 2 * 1024 ** 3 and k.bound == "compute"
    if k.registers is not None:  # NVRTC present: no spills (ptxas)
        assert k.spills == 0 and k.registers <= 128


def test_warp_thread_arrangement():
    """Lane (li, lj) of warp (wi, wj): rows wm*wi + tm*li + ri, columns wn*wj +
    (wn // 2)*rjg + 4*lj + rj (two float4 column groups, as without warp tiles)."""
    text = str(_warp(CONFIGS[0]))
    assert "for ti in par(0, 8) @ THREADS" in text and "for tj in par(0, 32) @ THREADS" in text
    assert "As[pi, 32 * (ti // 2) + 8 * (tj // 8)" in text
    assert "Bs[pi, 32 * rjg + 64 * (ti % 2) + 4 * (tj % 8)" in text


@pytest.mark.parametrize("cfg", [CONFIGS[0], CONFIGS[2]], ids=[_IDS[0], _IDS[2]])
def test_warp_tiled_equals_numpy_on_the_emulator(cfg):
    bm, bn, bk, tm, tn, wm, wn = cfg
    k = _warp(cfg).compile("emulator")
    rng = np.random.default_rng(7)
    m, n, kk = 2 * bm, 3 * bk, bn
    a = rng.standard_normal((m, n)).astype(np.float32)
    b = rng.standard_normal((n, kk)).astype(np.float32)
    c = np.full((m, kk), np.nan, np.float32)
    k(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_warp_tiled_batched():
    cfg = CONFIGS[2]
    p = _warp(cfg, batched=True)
    assert p.check().ok
    rng = np.random.default_rng(3)
    a = rng.standard_normal((2, 64, 16)).astype(np.float32)
    b = rng.standard_normal((2, 16, 64)).astype(np.float32)
    c = np.zeros((2, 64, 64), np.float32)
    p.compile("emulator")(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("wt", [(64, 64), (48, 32), (32, 48), (16, 16)])
def test_bad_warp_tiles_are_refused(wt):
    with pytest.raises(ValueError, match="warp_tile"):
        ms.schedule_matmul(ms.matmul_algorithm(False, (128, 128, 8)), warp_tile=wt)


def test_default_is_not_warp_tiled():
    """Off by default (the report's figures are the same either way: decisions.md)."""
    p, b = ms.matmul_kernel((1024, 1024), (1024, 1024))
    assert p is ms.big_kernel(False, 128, 128, 8, 8, 8, 4)  # the picker's call
    (k,) = p.perf(**b).kernels
    assert k.block == (16, 16, 1)


def test_autotune_space_has_warp_tiles():
    space = ms.matmul_space()
    cfgs = list(space)
    warp = [c for c in cfgs if c.wm]
    assert warp and any(not c.wm for c in cfgs)
    for c in warp:
        assert (c.wm // c.tm) * (c.wn // c.tn) == 32
        assert c.bm % c.wm == 0 and c.bn % c.wn == 0
    assert all(bool(c.wm) == bool(c.wn) for c in cfgs)


def test_matmul_build_applies_the_warp_tile():
    build = ms.MatmulBuild((128, 16), (16, 128))
    cfg = dict(bm=128, bn=128, bk=8, tm=8, tn=8, wm=32, wn=64)
    p = build(cfg)
    assert p is ms.big_kernel(False, 128, 128, 8, 8, 8, 4, 32, 64)
    assert "tj // 8" in str(p)
    rng = np.random.default_rng(5)
    a = rng.standard_normal((128, 16)).astype(np.float32)
    b = rng.standard_normal((16, 128)).astype(np.float32)
    c = np.zeros((128, 128), np.float32)
    p.compile("emulator")(a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # a shape the big tile does not serve: the picker's kernel, unchanged
    small = ms.MatmulBuild((100, 16), (16, 100))(cfg)
    assert small is ms.matmul_kernel((100, 16), (16, 100))[0]


def test_space_keeps_the_64_high_warp_tiles_at_bk16():
    """Warp tiles 64 rows high with bk = 16 read the A tile one float at a time with a
    2-way bank conflict while its pitch was bm + 2; with the float4-aligned pad
    (matmul_parts.a_pad, issue 36) the reads are float4 without conflict and the
    transposing stores take the 2-way conflict: in the space."""
    p = _warp((64, 32, 16, 4, 8, 64, 16))
    assert p.check().ok
    (k,) = p.perf(m=256, n=64, k=256).kernels
    assert [(a.buffer, a.kind, a.figure()) for a in k.accesses if not a.ok] == \
        [("As", "write", "2-way bank conflict")]
    cfgs = list(ms.matmul_space())
    assert any(c.wm == 64 and c.bk == 16 for c in cfgs)
    assert any(c.wm == 64 and c.bk == 8 for c in cfgs)
