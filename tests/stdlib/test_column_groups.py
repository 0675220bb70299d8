"""Column groups (gpudsl/stdlib/raster.py ``with_column_groups``): the sm_90a GEMMs whose
grouped order ptxas serializes (the unclipped 128 x 256 kernel with a producer warpgroup)
keep the row order's code and get the grouped order's L2 footprint from the grid's shape:
``bj`` divided by ``divide_loop`` on a BLOCKS loop, its outer part outermost, the grid
``(G, rows, groups)``.  Proved for all sizes the precondition admits, equal to numpy on
the emulator, the planner's default where the groups divide the columns, and built by
NVRTC for sm_90a with the wgmmas chained (no C7514)."""
from __future__ import annotations

import re
from collections import Counter

import numpy as np
import pytest

from gpudsl.stdlib.matmul_sm90 import choose_sm90, sm90_kernel
from gpudsl.stdlib.matmul_sm90_tf32 import choose_sm90_tf32, sm90_tf32_kernel
from gpudsl.stdlib.raster import COLUMNS, tile_order, wave_bytes

SMALL = dict(bn=64, wgs=1, bk=32, stages=2)
WIDE = dict(bn=256, wgs=2, bk=64, stages=4)
MIB = 2 ** 20


def test_column_groups_have_the_grouped_orders_footprint():
    """At 8192^3 (128 x 256 tiles, 132 SMs) a wave of column groups of 8 reads 66 MiB, the
    grouped order's 68, not row order's 138; at 4096^3 33 MiB against 41."""
    assert wave_bytes(8192, 8192, 8192, 128, 256, 0) == 138 * MIB
    assert wave_bytes(8192, 8192, 8192, 128, 256, 0, columns=COLUMNS) == 66 * MIB
    assert wave_bytes(4096, 4096, 4096, 128, 256, 0, columns=COLUMNS) < \
        wave_bytes(4096, 4096, 4096, 128, 256, 0)
    for rows, cols, g in [(3, 4, 2), (5, 8, 8), (1, 6, 3)]:
        tiles = list(tile_order(rows, cols, 0, g))
        assert sorted(tiles) == [(r, c) for r in range(rows) for c in range(cols)]


def test_the_planner_takes_column_groups_where_they_divide():
    for n in (4096, 8192):
        assert choose_sm90((n, n), (n, n), "f16")[0]["columns"] == COLUMNS
        assert choose_sm90_tf32((n, n), (n, n))[0]["columns"] == COLUMNS
    assert "columns" not in choose_sm90((4096, 4096), (1536, 4096), "f16")[0]  # 6 columns
    assert "columns" not in choose_sm90((4096, 4096), (4000, 4096), "f16")[0]  # clipped
    assert "columns" not in choose_sm90((2, 4096, 4096), (2, 4096, 4096), "f16")[0]
    assert "columns" not in choose_sm90((4096, 4096), (4096, 4096), "f16", raster=16)[0]
    assert "columns" not in choose_sm90_tf32((4096, 4096), (1536, 4096))[0]


@pytest.mark.parametrize("tf32", [False, True], ids=["f16", "tf32"])
def test_column_groups_are_proved_and_equal_numpy_on_the_emulator(tf32):
    p = (sm90_tf32_kernel(bn=64, wgs=1, bk=32, stages=2, columns=2) if tf32 else
         sm90_kernel("f16", **SMALL, columns=2))
    text = str(p)
    assert "assert n // 64 % 2 == 0" in text
    assert "for bjo in par(0, n // 64 // 2) @ BLOCKS:" in text
    assert "for bji in par(0, 2) @ BLOCKS:" in text
    assert p.check(target="sm_90a").ok
    m, n, k = 3 * 64, 8 * 64, 96               # 3 rows of tiles, 4 groups of 2 columns
    rng = np.random.default_rng(4)
    dt = np.float32 if tf32 else np.float16
    a = rng.integers(-3, 4, (m, k)).astype(dt)
    bt = rng.integers(-3, 4, (n, k)).astype(dt)
    c = np.zeros((m, n), dt)
    p.compile("emulator")(a=a, bt=bt, c=c)
    assert (c == (a.astype(np.float32) @ bt.astype(np.float32).T).astype(dt)).all()


def test_column_groups_refuse_what_they_do_not_order():
    from gpudsl.stdlib.shapes import NodeError
    for bad in (dict(batched=True), dict(raster=16), dict(clip=True)):
        with pytest.raises(NodeError, match="column groups"):
            sm90_kernel("f16", **SMALL, columns=2, **bad)


def test_the_wide_kernel_in_column_groups_keeps_its_wgmmas_chained():
    """The unclipped 128 x 256 kernel with a producer warpgroup: in the grouped order
    ptxas serializes its wgmmas (C7514, docs/decisions.md); in column groups it builds as
    in row order: no C7514, the four HGMMA of a slot chained (one wait after them),
    registers and instruction mix of the main loop unchanged."""
    from gpudsl.codegen import generate
    from gpudsl.perf import sass
    from gpudsl.runtime.nvrtc import compile_cubin

    p = sm90_kernel("f16", **WIDE, columns=COLUMNS)
    assert p.check(target="sm_90a").ok
    rows = compile_cubin(generate(sm90_kernel("f16", **WIDE).ir, {}).source, "sm_90a")
    cols = compile_cubin(generate(p.ir, {}).source, "sm_90a")
    assert not re.search(r"C751[4689]", cols.log), cols.log
    assert "grid (8, m // 128, n // 256 // 8)" in generate(p.ir, {}).source
    (r0,), (r1,) = rows.resources.values(), cols.resources.values()
    assert r1.registers == r0.registers and r1.spill_stores_bytes == 0
    if not sass.have_disassembler():
        pytest.skip("no nvdisasm/cuobjdump")

    def waits(cubin):
        return Counter(m.group(0) for ln in sass.disassemble(cubin).splitlines()
                       for m in [re.search(r"HGMMA\S*|WARPGROUP\.DEPBAR\S*", ln)] if m)
    assert waits(cols.cubin) == waits(rows.cubin)
    assert waits(cols.cubin)["HGMMA.64x256x16.F32"] == 4
