"""The primitives that turn a readable kernel into a Hopper main loop: ``divide_dim``
(a tile cut into the canonical wgmma layout), ``make_wgmma`` (per-thread product loops
become one wgmma) and ``make_tma`` (a thread's box copies become TMA loads), and
``warp_specialize`` with a one-thread producer.  Each keeps the meaning (the
interpreter agrees before and after) and refuses what it cannot prove."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import REGISTER, SchedulingError, proc_from_source
from gpudsl.schedule import divide_dim, make_tma, make_wgmma, warp_specialize

ROW = "16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2)"
COL = "8 * (i // 4) + 2 * (t % 4) + i % 2"

PRODUCT = f'''
@proc
def product(a: f16[2, 64, 8], b: f16[2, 16, 8], y: f32[128, 8]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 8] @ REGISTER
        a_s: f16[2, 64, 8] @ SHARED
        b_s: f16[2, 16, 8] @ SHARED
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 8):
                acc[t, i] = 0.0
            for j in seq(0, 8):
                a_s[t % 2, t // 2, j] = a[t % 2, t // 2, j]
            if t < 32:
                for j in seq(0, 8):
                    b_s[t % 2, t // 2, j] = b[t % 2, t // 2, j]
        sync()
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 8):
                for kk in seq(0, 16):
                    acc[t, i] += f32(a_s[kk // 8, {ROW}, kk % 8]) * f32(b_s[kk // 8, {COL}, kk % 8])
        sync()
        for t in par(0, 128) @ THREADS:
            for i in seq(0, 8):
                y[t, i] = acc[t, i]
'''


def _run(p, **arrays):
    out = {k: v.copy() for k, v in arrays.items()}
    gpudsl.interpret(p, **out)
    return out


def _product_args(seed=0):
    rng = np.random.default_rng(seed)
    return dict(a=rng.integers(-3, 4, (2, 64, 8)).astype(np.float16),
                b=rng.integers(-3, 4, (2, 16, 8)).astype(np.float16),
                y=np.zeros((128, 8), np.float32))


def test_make_wgmma_keeps_the_meaning_and_proves():
    p = proc_from_source(PRODUCT)
    q = make_wgmma(p, "t #1")
    assert "wgmma(acc[t, 0:8], a_s[0:2, 0:64, 0:8], b_s[0:2, 0:16, 0:8])" in str(q)
    assert "wgmma_commit()" in str(q) and "wgmma_wait(0)" in str(q)
    assert q.check(target="sm_90a").ok
    args = _product_args()
    assert (_run(p, **args)["y"] == _run(q, **args)["y"]).all()
    a = args["a"].astype(np.float32)
    A = np.concatenate([a[0], a[1]], axis=1)           # 64 x 16
    B = np.concatenate([args["b"][0], args["b"][1]], axis=1).astype(np.float32).T  # 16 x 16
    y2 = np.zeros_like(args["y"])
    q.compile("emulator")(a=args["a"], b=args["b"], y=y2)
    D = A @ B
    t, i = np.meshgrid(np.arange(128), np.arange(8), indexing="ij")
    rows = 16 * (t // 32) + t % 32 // 4 + 8 * (i // 2 % 2)
    cols = 8 * (i // 4) + 2 * (t % 4) + i % 2
    assert (y2 == D[rows, cols]).all()


@pytest.mark.parametrize("old,new,why", [
    # a lane reading another row than its fragment's
    ("t % 32 // 4 + 8 * (i // 2 % 2), kk % 8]) * f32(b_s", "t % 32 // 4 + 8 * (i % 2), kk % 8]) * f32(b_s",
     "fails for the witness"),
    # the columns of B swapped for its rows' halves
    ("f32(b_s[kk // 8, 8 * (i // 4)", "f32(b_s[kk % 2, 8 * (i // 4)", "fails for the witness"),
    # 8 steps of k, not 16
    ("for kk in seq(0, 16):", "for kk in seq(0, 8):", "not a multiple of 16"),
])
def test_make_wgmma_refuses_a_nest_that_is_not_the_fragment(old, new, why):
    twin = proc_from_source(PRODUCT.replace(old, new))
    with pytest.raises(SchedulingError, match=why):
        make_wgmma(twin, "t #1")


def test_make_wgmma_refuses_k_summed_out_of_order():
    # k = 8 kh + kj, but kj runs outside kh: each element's products in another order
    twin = proc_from_source(PRODUCT.replace(
        "                for kk in seq(0, 16):\n",
        "                for kj in seq(0, 8):\n                  for kh in seq(0, 2):\n").replace(
        "kk // 8", "kh").replace("kk % 8", "kj"))
    with pytest.raises(SchedulingError):
        make_wgmma(twin, "t #1")


def test_make_wgmma_refuses_a_partial_warpgroup():
    twin = proc_from_source(PRODUCT.replace("for t in par(0, 128) @ THREADS:\n            for i in seq(0, 8):\n                for kk",
                                            "for t in par(0, 64) @ THREADS:\n            for i in seq(0, 8):\n                for kk"))
    with pytest.raises(SchedulingError, match="whole warpgroups"):
        make_wgmma(twin, "t #1")


def test_make_wgmma_keeps_a_racy_input_racy():
    # no barrier between the tiles' writes and the products: the rewrite keeps the
    # sequential meaning, and check() refuses the result as it refused the input
    twin = proc_from_source(PRODUCT.replace("        sync()\n        for t in par(0, 128) @ THREADS:\n            for i in seq(0, 8):\n                for kk",
                                            "        for t in par(0, 128) @ THREADS:\n            for i in seq(0, 8):\n                for kk", 1))
    assert "race" in twin.check(target="sm_90a").kinds()
    assert "race" in make_wgmma(twin, "t #1").check(target="sm_90a").kinds()


TWO_TILES = f'''
@proc
def two_tiles(a: f16[2, 128, 8], b: f16[2, 16, 8], y: f32[128, 2, 8]):
    for blk in par(0, 1) @ BLOCKS:
        acc: f32[128, 2, 8] @ REGISTER
        a_s: f16[2, 128, 8] @ SHARED
        b_s: f16[2, 16, 8] @ SHARED
        for t in par(0, 128) @ THREADS:
            for mi in seq(0, 2):
                for i in seq(0, 8):
                    acc[t, mi, i] = 0.0
            for h in seq(0, 2):
                for j in seq(0, 8):
                    a_s[h, t, j] = a[h, t, j]
            if t < 32:
                for j in seq(0, 8):
                    b_s[t % 2, t // 2, j] = b[t % 2, t // 2, j]
        sync()
        for t in par(0, 128) @ THREADS:
            for mi in seq(0, 2):
                for i in seq(0, 8):
                    for kk in seq(0, 16):
                        acc[t, mi, i] += f32(a_s[kk // 8, 64 * mi + {ROW}, kk % 8]) * f32(b_s[kk // 8, {COL}, kk % 8])
        sync()
        for t in par(0, 128) @ THREADS:
            for mi in seq(0, 2):
                for i in seq(0, 8):
                    y[t, mi, i] = acc[t, mi, i]
'''


def _two_tile_args(seed=1):
    rng = np.random.default_rng(seed)
    return dict(a=rng.integers(-3, 4, (2, 128, 8)).astype(np.float16),
                b=rng.integers(-3, 4, (2, 16, 8)).astype(np.float16),
                y=np.zeros((128, 2, 8), np.float32))


def test_make_wgmma_makes_one_wgmma_per_tile_of_the_accumulator():
    """A loop that only the accumulator's leading index names (a warpgroup's second 64
    rows: a 256 x 128 block tile) stays a loop around one wgmma per tile (issue 36)."""
    p = proc_from_source(TWO_TILES)
    q = make_wgmma(p, "t #1")
    assert ("for mi in seq(0, 2):\n                wgmma(acc[t, mi, 0:8], "
            "a_s[0:2, 64 * mi:64 * mi + 64, 0:8], b_s[0:2, 0:16, 0:8])") in str(q), q
    assert q.check(target="sm_90a").ok
    args = _two_tile_args()
    want = _run(p, **args)["y"]
    assert (want == _run(q, **args)["y"]).all()
    y2 = np.zeros_like(args["y"])
    q.compile("emulator")(a=args["a"], b=args["b"], y=y2)
    assert (y2 == want).all()


def test_make_wgmma_refuses_a_tile_loop_inside_the_fragment():
    twin = proc_from_source(TWO_TILES.replace(
        "            for mi in seq(0, 2):\n                for i in seq(0, 8):\n"
        "                    for kk",
        "            for i in seq(0, 8):\n                for mi in seq(0, 2):\n"
        "                    for kk"))
    with pytest.raises(SchedulingError, match="loop mi names only the accumulator's leading"):
        make_wgmma(twin, "t #1")


def test_make_wgmma_refuses_tiles_reading_the_wrong_rows():
    # odd lanes read the second tile's rows, even lanes the first's: no wgmma's window
    twin = proc_from_source(TWO_TILES.replace("64 * mi + 16", "64 * mi * (t % 2) + 16"))
    with pytest.raises(SchedulingError, match="fails for the witness"):
        make_wgmma(twin, "t #1")


RING = '''
@proc
def ring(n: size, x: f16[2 * n, 64], y: f32[2 * n, 64]):
    assert n >= 1
    for b in par(0, 1) @ BLOCKS:
        s: f16[4, 64] @ SHARED
        full: barrier[2] @ SHARED
        empty: barrier[2] @ SHARED
        for j in seq(0, 2):
            arrive(empty[j], 0, 64)
        for ks in seq(0, n):
            wait(empty[ks % 2], 64, 65)
            for q in par(64, 65) @ THREADS:
                for r in seq(0, 2):
                    for c in seq(0, 64):
                        s[2 * (ks % 2) + r, c] = x[2 * ks + r, c]
            arrive(full[ks % 2], 64, 65)
            wait(full[ks % 2], 0, 64)
            for t in par(0, 64) @ THREADS:
                for r in seq(0, 2):
                    y[2 * ks + r, t] = f32(s[2 * (ks % 2) + r, 63 - t]) * 2.0
            arrive(empty[ks % 2], 0, 64)
'''


def _ring_args(n=3):
    rng = np.random.default_rng(1)
    return dict(x=rng.integers(-9, 9, (2 * n, 64)).astype(np.float16),
                y=np.zeros((2 * n, 64), np.float32))


def test_make_tma_keeps_the_meaning_and_proves():
    p = proc_from_source(RING)
    assert p.check(target="sm_90a").ok
    q = make_tma(p, "q")
    assert ("tma_load(s[2 * (ks % 2):2 * (ks % 2) + 2, 0:64], x[2 * ks:2 * ks + 2, 0:64], "
            "bar=full[ks % 2])") in str(q)
    assert q.check(target="sm_90a").ok
    args = _ring_args()
    want = _run(p, **args)["y"]
    assert (_run(q, **args)["y"] == want).all()
    y = np.zeros_like(want)
    q.compile("emulator")(x=args["x"], y=y)
    assert (y == want).all()


def test_make_tma_keeps_selector_loops_around_the_boxes():
    # r moves the row of the tile by 64 elements in a [4, 64] tile viewed as [2, 2, 64]:
    # a loop that does not run along one index of each side picks the box
    p = proc_from_source(RING.replace("s: f16[4, 64] @ SHARED", "s: f16[2, 2, 64] @ SHARED")
                         .replace("s[2 * (ks % 2) + r, c]", "s[ks % 2, r, c]")
                         .replace("s[2 * (ks % 2) + r, 63 - t]", "s[ks % 2, r, 63 - t]"))
    q = make_tma(p, "q")
    assert "tma_load(s[ks % 2, 0:2, 0:64], x[2 * ks:2 * ks + 2, 0:64]" in str(q)


@pytest.mark.parametrize("old,new,why", [
    # reads past the array's end (a TMA box would read zeros there)
    ("x[2 * ks + r, c]", "x[2 * ks + r + 1, c]", "reads inside its array"),
    # two copies of one element
    ("s[2 * (ks % 2) + r, c] = x", "s[2 * (ks % 2), c] = x", "no two copies write one element"),
    # not linear
    ("x[2 * ks + r, c]", "x[2 * ks + r, c * c % 64]", "not linear"),
    # no arrive of the thread after the copies
    ("            arrive(full[ks % 2], 64, 65)\n", "", "arrives on no barrier"),
    # two threads
    ("for q in par(64, 65) @ THREADS:", "for q in par(64, 66) @ THREADS:", "one thread"),
    # rows 136 bytes apart: no tensor map's pitch (check()'s rule, gpudsl/ir/tma_meaning.py)
    ("x: f16[2 * n, 64]", "x: f16[2 * n, 68]", "are a multiple of 16 bytes apart"),
])
def test_make_tma_refuses_what_a_box_is_not(old, new, why):
    twin = proc_from_source(RING.replace(old, new, 1))
    with pytest.raises(SchedulingError, match=why):
        make_tma(twin, "q")


def test_make_tma_refuses_a_result_that_reads_the_tile_in_flight():
    # the consumers' wait is gone: the plain copy was raced too, so the input is refused
    twin = proc_from_source(RING.replace("            wait(full[ks % 2], 0, 64)\n", ""))
    with pytest.raises(SchedulingError):
        make_tma(twin, "q")


def test_divide_dim_keeps_the_meaning():
    p = proc_from_source(RING)
    q = divide_dim(p, "s", 1, 8)
    assert "s: f16[4, 8, 8] @ SHARED" in str(q)
    assert "s[2 * (ks % 2) + r, c // 8, c % 8] = x[2 * ks + r, c]" in str(q)
    args = _ring_args()
    assert (_run(p, **args)["y"] == _run(q, **args)["y"]).all()


@pytest.mark.parametrize("dim,q,why", [(1, 3, "not a constant multiple of 3"),
                                       (2, 2, "has no dimension 2")])
def test_divide_dim_refuses_what_does_not_divide(dim, q, why):
    with pytest.raises(SchedulingError, match=why):
        divide_dim(proc_from_source(RING), "s", dim, q)


def test_divide_dim_refuses_a_window_across_the_cut():
    p = make_tma(proc_from_source(RING), "q")
    with pytest.raises(SchedulingError, match="window"):
        divide_dim(p, "s", 1, 8)


def test_warp_specialize_takes_one_producer_thread_and_not_two():
    src = '''
@proc
def staged(n: size, x: f16[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        s: f16[64] @ SHARED
        for ks in seq(0, n):
            sync()
            for q in par(0, 1) @ THREADS:
                for c in seq(0, 64):
                    s[c] = x[ks, c]
            sync()
            for t in par(0, 64) @ THREADS:
                y[ks, t] = f32(s[t])
'''
    p = proc_from_source(src)
    q = warp_specialize(p, "ks", producers=(64, 65), consumers=(0, 64), stages=2, ring=True)
    assert "for q in par(64, 65) @ THREADS:" in str(q)
    q = make_tma(q, "q")
    assert "tma_load(s[ks % 2, 0:64], x[ks, 0:64], bar=full[ks % 2])" in str(q)
    assert q.check(target="sm_90a").ok
    with pytest.raises(SchedulingError, match="whole warps"):
        warp_specialize(p, "ks", producers=(64, 66), consumers=(0, 64), stages=2, ring=True)


def test_set_swizzle_keeps_the_meaning_and_the_layout_rules():
    from gpudsl.schedule import set_swizzle

    src = '''
@proc
def flip(x: f32[32, 32], y: f32[32, 32]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 32):
                s[r, t] = x[r, t]
        sync()
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 32):
                y[t, r] = s[r, t]
'''
    p = proc_from_source(src)
    q = set_swizzle(p, "s", 128)
    assert "s: f32[32, 32] @ SHARED(swizzle=128)" in str(q) and q.check().ok
    x = np.arange(1024, dtype=np.float32).reshape(32, 32)
    y = np.zeros_like(x)
    q.compile("emulator")(x=x, y=y)
    assert (y == x.T).all()
    with pytest.raises(SchedulingError, match="32, 64 or 128"):
        set_swizzle(p, "s", 96)
    # rows of 40 bytes do not fit a 32-byte swizzle... nor 128: refused by the layout rule
    narrow = proc_from_source(src.replace("f32[32, 32] @ SHARED", "f32[32, 10] @ SHARED")
                              .replace("for t in par(0, 32) @ THREADS:\n            for r in seq(0, 32):\n                s[r, t]",
                                       "for t in par(0, 10) @ THREADS:\n            for r in seq(0, 32):\n                s[r, t]")
                              .replace("y[t, r] = s[r, t]", "y[t, r] = s[r, t % 10]"))
    with pytest.raises(SchedulingError, match="swizzle"):
        set_swizzle(narrow, "s", 128)


def test_a_rewritten_tma_copy_prints_and_parses_back_equal():
    """Regression (differential test, tma family, case 8 of seed 0): rotate_loop normalized
    the array shape a TMA statement keeps (``1 * n`` -> ``n``), which the printer does not
    write, so ``str(p)`` parsed back to a proc that compared unequal."""
    from gpudsl.schedule import rotate_loop

    p = proc_from_source('''
@proc
def rows(n: size, x: f32[1 * n, 64], y: f32[1 * n, 64]):
    assert n >= 1
    for b in par(0, 1) @ BLOCKS:
        o: f32[8, 32] @ SHARED
        for ks in seq(0, n):
            for t in par(0, 32) @ THREADS:
                o[0, t] = x[ks, t]
            sync()
            for t in par(0, 1) @ THREADS:
                tma_store(y[1 * ks:1 * ks + 1, 32:64], o[0:1, 0:32])
                tma_commit()
                tma_wait(0)
            sync()
''')
    q = rotate_loop(p, "ks", 1)
    assert proc_from_source(str(q)).ir == q.ir


def test_stage_mem_refuses_an_array_a_tma_copy_uses():
    """Regression (differential test, tma family, seed 7401 case 878): stage_mem staged
    ``y`` around a block whose ``tma_store`` writes ``y`` itself; the store was left on
    ``y`` and the copy-out then overwrote what it stored with the stale staged values."""
    from gpudsl.schedule import stage_mem
    from gpudsl.schedule.cursors import Cursor

    p = proc_from_source('''
@proc
def store(n: size, x: f32[n, 64], y: f32[n, 64]):
    for b in par(0, 1) @ BLOCKS:
        o: f32[8, 8] @ SHARED(swizzle=32)
        for t in par(0, 8) @ THREADS:
            o[0, t] = 1.0
        sync()
        for ks in seq(0, n):
            for t in par(0, 1) @ THREADS:
                tma_store(y[ks:ks + 1, 0:8], o[0:1, 0:8])
                tma_commit()
                tma_wait(0)
''')
    with pytest.raises(SchedulingError, match="TMA copy in the block copies 'y'"):
        stage_mem(p, Cursor(p, "block", (0,), 1), "y", "st0", REGISTER)


def test_pad_dim_refuses_a_tile_a_tma_copy_uses():
    """Regression (differential test, tma family, seed 7501 case 2268): pad_dim grew the
    rows of a tile that a tma_store reads, so its window was no longer contiguous and the
    result did not parse."""
    from gpudsl.schedule import pad_dim
    from gpudsl.schedule.cursors import Cursor

    p = proc_from_source('''
@proc
def rows(n: size, y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        o: f32[1, 64] @ SHARED
        for t in par(0, 64) @ THREADS:
            o[0, t] = 1.0
        sync()
        for t in par(0, 1) @ THREADS:
            tma_store(y[b:b + 1, 0:64], o[0:1, 0:64])
            tma_commit()
            tma_wait(0)
''')
    with pytest.raises(SchedulingError, match="TMA copy or a wgmma uses 'o'"):
        pad_dim(p, Cursor(p, "stmt", (0, "body", 0), None), 1, "65")
    q = proc_from_source(str(p).replace("tma_store(y[b:b + 1, 0:64], o[0:1, 0:64])\n"
                                        "            tma_commit()\n            tma_wait(0)",
                                        "y[b, 0] = o[0, 0]"))
    assert "o: f32[1, 65]" in str(pad_dim(q, Cursor(q, "stmt", (0, "body", 0), None), 1, "65"))


def test_rearrange_dim_of_a_scalar_is_the_identity():
    """Regression (the differential test in CI, seed 0 case 99): after rearrange_dim and
    divide_dim shared one reindexing transformer, an empty permutation (a scalar) raised
    IndexError instead of leaving the proc as it was."""
    from gpudsl.schedule import rearrange_dim

    p = proc_from_source('''
@proc
def scalar(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        acc: f32
        acc = x[i] + 1.0
        y[i] = acc
''')
    q = rearrange_dim(p, "acc", [])
    assert str(q) == str(p)


def test_make_tma_refuses_a_barrier_allocated_after_the_copies():
    """Regression (differential test, tma family, seed 7601 case 467): after reorder_stmts
    put the barrier's allocation after the copy loop, make_tma named a barrier not yet
    allocated (the result faulted and did not parse)."""
    p = proc_from_source('''
@proc
def late(n: size, x: f32[2 * n, 64], y: f32[2 * n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[8, 8] @ SHARED
        for t in par(0, 1) @ THREADS:
            for r in seq(0, 2):
                for c in seq(0, 8):
                    s[r, c] = x[2 * b + r, 56 + c]
        full: barrier @ SHARED
        arrive(full, 0, 1)
''')
    with pytest.raises(SchedulingError, match="allocated after the loop"):
        make_tma(p, "t")
