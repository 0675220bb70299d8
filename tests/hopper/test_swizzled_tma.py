"""Bulk tensor copies into and out of swizzled tiles (issue 35, docs/hopper.md "TMA loads"):
the tensor map has the tile's swizzle mode, the emulator's copy puts each element at its
swizzled offset (where the tile's other accesses find it), check() requires what the
hardware requires (a box row of at most the swizzle's bytes, the tile's side at a multiple
of the swizzle's period), with witnesses; the interpreter's meaning is unchanged."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CompileError, proc_from_source


def tile_src(w: int = 128, first: int = 0, rows: int = 16) -> str:
    """Boxes of 16 rows of ``a`` (rows of ``w`` bytes of f16) through a tile swizzled with
    ``w`` bytes (``first``: the tile row the box lands at), read back by 64 threads."""
    cols = (w or 128) // 2
    lay = f"(swizzle={w})" if w else ""
    return f'''
@proc
def tile(m: size, a: f16[m, {cols}], y: f16[m, {cols}]):
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f16[{first + rows}, {cols}] @ SHARED{lay}
        bar: barrier @ SHARED
        for t in par(0, 1) @ THREADS:
            tma_load(s[{first}:{first + 16}, 0:{cols}], a[16 * b:16 * b + 16, 0:{cols}], bar=bar)
        arrive(bar, 0, 1)
        wait(bar, 0, 64)
        for t in par(0, 64) @ THREADS:
            for r in seq(0, 16):
                for j in seq(0, {cols}):
                    if 16 * b + r < m and t == 0:
                        y[16 * b + r, j] = s[{first} + r, j]
'''


@pytest.mark.parametrize("w", [32, 64, 128])
def test_a_box_lands_swizzled_where_plain_reads_find_it(w):
    p = proc_from_source(tile_src(w))
    assert p.check(target="sm_90a").ok
    a = (np.arange(37 * (w // 2)).reshape(37, w // 2) % 251 - 100).astype(np.float16)
    y = np.zeros_like(a)
    gpudsl.interpret(p, a=a, y=y, detect_races=True)
    assert (y == a).all()
    y = np.zeros_like(a)
    p.compile("emulator")(a=a, y=y)       # the copy and the reads both swizzled
    assert (y == a).all()


STORE = '''
@proc
def scale(m: size, x: f32[m, 32], y: f32[m, 32]):
    for b in par(0, (m + 15) // 16) @ BLOCKS:
        s: f32[16, 32] @ SHARED(swizzle=128)
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                if 16 * b + r < m:
                    s[r, t] = 2.0 * x[16 * b + r, t]
                else:
                    s[r, t] = 0.0
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[16 * b:16 * b + 16, 0:32], s[0:16, 0:32])
            tma_commit()
            tma_wait(0)
'''


def test_a_store_reads_the_swizzled_tile():
    p = proc_from_source(STORE)
    assert p.check(target="sm_90a").ok
    x = (np.arange(37 * 32).reshape(37, 32) % 13).astype(np.float32)
    for run in ("interpret", "emulator"):
        y = np.zeros_like(x)
        if run == "interpret":
            gpudsl.interpret(p, x=x, y=y, detect_races=True)
        else:
            p.compile("emulator")(x=x, y=y)
        assert (y == 2 * x).all(), run


def test_one_box_into_a_plain_and_a_swizzled_tile_has_two_tensor_maps():
    src = '''
@proc
def two(a: f16[16, 64], y: f16[16, 64], z: f16[16, 64]):
    for b in par(0, 1) @ BLOCKS:
        p: f16[16, 64] @ SHARED
        q: f16[16, 64] @ SHARED(swizzle=128)
        bar: barrier @ SHARED
        for t in par(0, 1) @ THREADS:
            tma_load(p[0:16, 0:64], a[0:16, 0:64], bar=bar)
            tma_load(q[0:16, 0:64], a[0:16, 0:64], bar=bar)
        arrive(bar, 0, 1)
        wait(bar, 0, 64)
        for t in par(0, 64) @ THREADS:
            for r in seq(0, 16):
                y[r, t] = p[r, t]
                z[r, t] = q[r, t]
'''
    from gpudsl.codegen import generate
    p = proc_from_source(src)
    assert p.check(target="sm_90a").ok
    code = generate(p.ir, {}).source
    assert "gpudsl_tmap_a_16x64," in code.replace(")", ",") and "gpudsl_tmap_a_16x64_s128" in code
    a = (np.arange(16 * 64).reshape(16, 64) % 199).astype(np.float16)
    y, z = np.zeros_like(a), np.zeros_like(a)
    p.compile("emulator")(a=a, y=y, z=z)
    assert (y == a).all() and (z == a).all()


def test_the_tensor_map_carries_the_swizzle_mode():
    """What cuTensorMapEncodeTiled gets (a fake driver function: no GPU here), and the
    emulator's record."""
    from gpudsl.runtime.tensor_maps import TensorMapRef, cuda_map, emulator_map
    got = {}

    def fake(out, dt, rank, addr, dims, strides, box, es, il, sw, l2, oob):
        got["sw"] = sw
        return 0

    for w, mode in ((0, 0), (32, 1), (64, 2), (128, 3)):
        ref = TensorMapRef("a", (70, 64), (64, w // 2 or 64), 2, "float16", w)
        cuda_map(ref, 4096, fake)
        assert got["sw"] == mode
        host = np.zeros((70, 64), np.float16)
        assert int(emulator_map(ref, host)[18]) == w


def test_a_box_row_wider_than_the_swizzle_is_refused():
    src = tile_src(128).replace("SHARED(swizzle=128)", "SHARED(swizzle=64)")
    p = proc_from_source(src)
    rep = p.check(target="sm_90a")
    assert "mapping" in rep.kinds() and "more than the 64-byte swizzle" in str(rep)
    with pytest.raises(CompileError, match="64-byte swizzle"):
        p.compile("emulator", check=False)


def test_a_copy_off_the_swizzle_period_is_refused_with_a_witness():
    """Row 4 of a tile with rows of 128 bytes is 512 bytes in: a multiple of 128 (enough
    for a plain tile), not of the 128-byte swizzle's period of 1024."""
    assert proc_from_source(tile_src(128, first=8)).check(target="sm_90a").ok
    assert proc_from_source(tile_src(0, first=4)).check(target="sm_90a").ok
    rep = proc_from_source(tile_src(128, first=4)).check(target="sm_90a")
    d = next(d for d in rep.diagnostics if d.kind == "bounds")
    assert "1024 bytes" in d.message and "period" in d.message
    assert "thread1" in d.witness
    store = STORE.replace("f32[16, 32] @ SHARED(swizzle=128)", "f32[20, 32] @ SHARED(swizzle=128)")
    store = store.replace("s[0:16, 0:32])", "s[4:20, 0:32])")
    rep = proc_from_source(store).check(target="sm_90a")
    assert "bounds" in rep.kinds() and "1024 bytes" in str(rep)


def test_a_name_allocated_plain_and_swizzled_in_two_scopes_gets_both_maps():
    """Regression: the kernel's tensor map parameters took one swizzle per tile name, so
    the copy into the other scope's tile named a map the kernel did not have."""
    p = proc_from_source('''
@proc
def two(a: f16[32, 64], y: f16[32, 64]):
    for b in par(0, 2) @ BLOCKS:
        bar: barrier @ SHARED
        if b == 0:
            s: f16[16, 64] @ SHARED
            for t in par(0, 1) @ THREADS:
                tma_load(s[0:16, 0:64], a[0:16, 0:64], bar=bar)
            arrive(bar, 0, 1)
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                for r in seq(0, 16):
                    y[r, t] = s[r, t]
        else:
            s: f16[16, 64] @ SHARED(swizzle=128)
            for t in par(0, 1) @ THREADS:
                tma_load(s[0:16, 0:64], a[16:32, 0:64], bar=bar)
            arrive(bar, 0, 1)
            wait(bar, 0, 64)
            for t in par(0, 64) @ THREADS:
                for r in seq(0, 16):
                    y[16 + r, t] = s[r, t]
''')
    assert p.check(target="sm_90a").ok
    a = (np.arange(32 * 64).reshape(32, 64) % 251).astype(np.float16)
    y = np.zeros_like(a)
    p.compile("emulator")(a=a, y=y)
    assert (y == a).all()
