"""The GEMMs' block order (``raster=G``, gpudsl/stdlib/raster.py): the sm_90a TN and NN
kernels and the sm_80 kernel with their tiles in the grouped order equal numpy on the
emulator at odd tile counts (G not dividing the rows), build with NVRTC for sm_90a and
sm_80 without spills, with a short integer prologue; the default group is the one that
minimizes a wave's operand bytes."""
from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from gpudsl.stdlib import matmul_sm80 as m8
from gpudsl.stdlib.matmul_sm90 import sm90_kernel, sm90_space
from gpudsl.stdlib.matmul_sm90_nn import sm90_nn_kernel
from gpudsl.stdlib.raster import RASTER, RASTERS, tile_order, wave_bytes

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)
MIB = 2 ** 20


def _ints(shape, seed, dt=np.float16):
    return np.random.default_rng(seed).integers(-3, 4, shape).astype(dt)


def test_the_default_group_minimizes_a_waves_operand_bytes():
    """On 132 SMs at 8192^3 (128 x 256 tiles), 16 rows a group read the least: about
    half of row order's 138 MiB; at 4096^3 it still beats both row order and 8."""
    big = {g: wave_bytes(8192, 8192, 8192, 128, 256, g) for g in (0, 4, 8, 16, 32)}
    assert min(big, key=big.get) == RASTER == 16
    assert big[0] == 138 * MIB and big[16] == 68 * MIB
    mid = {g: wave_bytes(4096, 4096, 4096, 128, 256, g) for g in (0, 8, 16)}
    assert mid[16] < mid[0] and mid[16] < mid[8]
    assert RASTER in RASTERS and 0 in RASTERS


@pytest.mark.parametrize("g", [0, 1, 3, 8])
def test_tile_order_is_a_permutation(g):
    for rows, cols in [(1, 1), (7, 5), (12, 3), (5, 12)]:
        tiles = list(tile_order(rows, cols, g))
        assert sorted(tiles) == [(r, c) for r in range(rows) for c in range(cols)]


def test_the_spaces_offer_the_orders():
    assert {c["raster"] for c in sm90_space()} == set(RASTERS)
    assert {c["raster"] for c in m8.sm80_space()} == set(RASTERS)
    assert m8.config_options(dict(tile=[128, 128], warp=[64, 64], bk=32, stages=3))[
        "raster"] == RASTER


def test_sm90_tn_grouped_equals_numpy_on_the_emulator():
    p = sm90_kernel("f16", **SMALL, raster=2)
    assert "par(0, m // 64, group=2) @ BLOCKS" in str(p)
    assert "group=" not in str(sm90_kernel("f16", **SMALL, raster=0))
    assert p.check(target="sm_90a").ok
    m, n, k = 3 * 64, 5 * 64, 64                 # 3 x 5 tiles: the last group one row
    a, bt = _ints((m, k), 1), _ints((n, k), 2)
    c = np.zeros((m, n), np.float16)
    p.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == (a.astype(np.float32) @ bt.astype(np.float32).T).astype(np.float16)).all()


@pytest.mark.parametrize("batched", [False, True])
def test_sm90_nn_grouped_equals_numpy_on_the_emulator(batched):
    p = sm90_nn_kernel("f16", **SMALL, clip=batched, batched=batched, raster=2)
    assert "group=2" in str(p)
    lead = (2,) if batched else ()
    m, n, k = (3 * 64, 64, 5 * 64) if not batched else (150, 32, 200)   # clipped edges
    a, b = _ints(lead + (m, n), 3), _ints(lead + (n, k), 4)
    c = np.full(lead + (m, k), 5, np.float16)
    p.compile("emulator")(a=a, b=b, c=c)
    assert (c == (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)).all()


def test_sm80_grouped_equals_numpy_on_the_emulator():
    p = m8.sm80_kernel("f16", bn=128, stages=4, raster=2)
    assert "group=2" in str(p) and p.name == "matmul_f16_sm80_128x128x32_s4"
    m, n, k = 3 * 128, 32, 5 * 128
    a, b = _ints((m, n), 5), _ints((n, k), 6)
    c = np.zeros((m, k), np.float16)
    p.compile("emulator")(a=a, b=b, c=c)
    assert (c == (a.astype(np.float32) @ b.astype(np.float32)).astype(np.float16)).all()


# ------------------------------------------------------------------ machine code


def _build(p, arch, **sizes):
    from gpudsl.codegen import generate
    from gpudsl.runtime.nvrtc import compile_cubin

    r = compile_cubin(generate(p.ir, sizes).source, arch)
    (res,) = r.resources.values()
    assert res.spill_stores_bytes == res.spill_loads_bytes == res.stack_bytes == 0, res
    return r


def _ops(cubin) -> Counter:
    from gpudsl.perf import sass

    ops = Counter()
    for ln in sass.disassemble(cubin).splitlines():
        body = ln.split("*/", 1)[-1].strip() if ln.strip().startswith("/*") else ln.strip()
        words = [w for w in body.split() if not w.startswith("@")]
        if words and ";" in body:
            ops[words[0].split(".")[0]] += 1
    return ops


INTEGER = {"IMAD", "IADD3", "UIADD3", "UIMAD", "LEA", "ULEA", "SHF", "USHF", "LOP3", "ULOP3",
           "ISETP", "UISETP", "IABS", "I2F", "F2I", "MUFU", "SEL", "USEL", "IMNMX", "VIADD",
           "S2R", "S2UR", "R2UR", "MOV", "UMOV"}


def _orders(kernel, arch, **sizes):
    """The opcode counts of the kernel in row order and in the grouped order."""
    from gpudsl.perf import sass

    r0, r1 = _build(kernel(0), arch, **sizes), _build(kernel(RASTER), arch, **sizes)
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")
    return _ops(r0.cubin), _ops(r1.cubin)


def _integer(ops) -> int:
    return sum(v for k, v in ops.items() if k in INTEGER)


@pytest.mark.parametrize("sizes", [{}, dict(m=4096, n=4096, k=4096)], ids=["any", "4096"])
def test_sm90a_builds_and_the_prologue_is_short(sizes):
    """The main loop is untouched; the index mapping costs a few integer instructions
    once per block (two divisions by a size when the sizes are not fixed), and the row
    order's grid-stride loop over blockIdx.y, with its closing barrier, is gone."""
    wide = dict(bn=256, wgs=2, bk=64, stages=4, producer="thread")
    o0, o1 = _orders(lambda g: sm90_kernel("f16", **wide, raster=g), "sm_90a", **sizes)
    for op in ("HGMMA", "UTMALDG", "UTMASTG", "SYNCS"):
        assert o0[op] == o1[op], op
    assert o1["BAR"] == o0["BAR"] - 1
    assert _integer(o1) - _integer(o0) <= (80 if not sizes else 32), (o1 - o0, o0 - o1)


def test_the_default_wide_kernel_keeps_the_row_order_where_ptxas_would_serialize():
    """With a producer warpgroup (roles written apart) the grouped order made ptxas
    serialize the unclipped 128 x 256 kernel's wgmmas (C7514); its default is the row
    order, the clipped kernel's and a producer thread's the grouped one."""
    import re

    from gpudsl.codegen import generate
    from gpudsl.runtime.nvrtc import compile_cubin
    wide = dict(bn=256, wgs=2, bk=64, stages=4)
    assert sm90_kernel("f16", **wide) is sm90_kernel("f16", **wide, raster=0)
    assert sm90_kernel("f16", **wide, clip=True) is sm90_kernel("f16", **wide, clip=True,
                                                                    raster=16)
    assert sm90_kernel("f16", **wide, producer="thread") is \
        sm90_kernel("f16", **wide, producer="thread", raster=16)
    for p in (sm90_kernel("f16", **wide), sm90_kernel("f16", **wide, clip=True)):
        log = compile_cubin(generate(p.ir, {}).source, "sm_90a").log
        assert not re.search(r"C751[4689]", log), log


def test_sm80_builds_and_the_prologue_is_short():
    o0, o1 = _orders(lambda g: m8.sm80_kernel("f16", raster=g), "sm_80",
                     m=4096, n=4096, k=4096)
    for op in ("HMMA", "LDGSTS", "LDSM"):
        assert o0[op] == o1[op], op
    assert o1["BAR"] == o0["BAR"] - 1
    assert _integer(o1) - _integer(o0) <= 32, (o1 - o0, o0 - o1)
