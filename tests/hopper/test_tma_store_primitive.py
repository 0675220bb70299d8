"""``make_tma_store`` (gpudsl/schedule/tma_store_from_copies.py): one thread's copies of a
SHARED tile into a GLOBAL array become bulk tensor stores, or the primitive refuses; and
the derived sm_90a GEMM's epilogue made with it (gpudsl/stdlib/matmul_sm90.py)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl.schedule import make_tma_store

COPY = '''
@proc
def scale(n: size, x: f32[16 * n, 32], y: f32[16 * n, 32]):
    for b in par(0, n) @ BLOCKS:
        s: f32[16, 32] @ SHARED
        for t in par(0, 32) @ THREADS:
            for r in seq(0, 16):
                s[r, t] = 2.0 * x[16 * b + r, t]
        sync()
        for o in par(0, 1) @ THREADS:
            for r in seq(0, 16):
                for c in seq(0, 32):
                    y[16 * b + r, c] = s[r, c]
'''


def test_one_threads_copies_become_a_tma_store_that_lands_in_its_loop():
    q = make_tma_store(gpudsl.proc_from_source(COPY), "o")
    text = str(q)
    assert "tma_store(y[16 * b:16 * b + 16, 0:32], s[0:16, 0:32])\n" \
           "            tma_commit()\n            tma_wait(0)" in text
    assert q.check(target="sm_90a").ok
    x = np.arange(48 * 32, dtype=np.float32).reshape(48, 32) % 7
    y = np.zeros_like(x)
    q.compile("emulator")(x=x, y=y)
    assert (y == 2 * x).all()


def test_other_loops_select_the_box():
    """Two 16-column halves, each a contiguous tile ``s[h]``: a store per half; half a row
    of a tile is no box (a box lands contiguously)."""
    halves = COPY.replace("s: f32[16, 32] @ SHARED", "s: f32[2, 16, 16] @ SHARED").replace(
        "s[r, t] = 2.0 * x[16 * b + r, t]", "s[t // 16, r, t % 16] = 2.0 * x[16 * b + r, t]"
    ).replace("for c in seq(0, 32):\n                    y[16 * b + r, c] = s[r, c]",
              "for h in seq(0, 2):\n                    for c in seq(0, 16):\n"
              "                        y[16 * b + r, 16 * h + c] = s[h, r, c]")
    p = gpudsl.proc_from_source(halves)
    q = make_tma_store(gpudsl.schedule.reorder_loops(gpudsl.schedule.reorder_loops(
        p, "r #1"), "r #1"), "o")
    assert "tma_store(y[16 * b:16 * b + 16, 16 * h:16 * h + 16], s[h, 0:16, 0:16])" in str(q)
    assert q.check(target="sm_90a").ok
    x = np.arange(32 * 32, dtype=np.float32).reshape(32, 32) % 5
    y = np.zeros_like(x)
    q.compile("emulator")(x=x, y=y)
    assert (y == 2 * x).all()
    cut = COPY.replace("for c in seq(0, 32):\n                    y[16 * b + r, c] = s[r, c]",
                       "for h in seq(0, 2):\n                    for c in seq(0, 16):\n"
                       "                        y[16 * b + r, 16 * h + c] = s[r, 16 * h + c]")
    with pytest.raises(gpudsl.SchedulingError, match="contiguous"):
        make_tma_store(gpudsl.proc_from_source(cut), "o")


@pytest.mark.parametrize("old, new, match", [
    ("for o in par(0, 1)", "for o in par(0, 2)", "one thread"),                  # two issuers
    ("y[16 * b + r, c] = s[r, c]", "s[r, c] = y[16 * b + r, c]", "SHARED tile to a GLOBAL"),
    ("y[16 * b + r, c] = s[r, c]", "y[16 * b + r + 1, c] = s[r, c]", "inside"),  # past the end
    ("y[16 * b + r, c] = s[r, c]", "y[16 * b, c] = s[r, c]", "no two"),         # one row, 16 times
])
def test_copies_a_store_would_not_mean_are_refused(old, new, match):
    p = gpudsl.proc_from_source(COPY.replace(old, new))
    with pytest.raises(gpudsl.SchedulingError, match=match):
        make_tma_store(p, "o")


def test_the_derived_gemm_stores_its_tile_through_shared_memory():
    from gpudsl.stdlib.matmul_sm90 import sm90_kernel
    text = str(sm90_kernel("f16", bn=128, wgs=1, bk=32, stages=2))
    assert "Cs: f16[64, 64] @ SHARED(swizzle=128)" in text
    assert "tma_store(c[64 * bi:64 * bi + 64, 128 * bj + 64 * ch:128 * bj + 64 * ch + 64], " \
           "Cs[0:64, 0:64])" in text
    assert "c[" not in text.split("tma_store(")[0].split("wgmma_wait(0)")[-1]   # no plain store
    # two consumer warpgroups: with a producer warpgroup (setmaxnreg: 232 registers) the
    # slab is swizzled; with a producer thread (257 threads at 168 registers) it is not:
    # the swizzle's addresses spilled
    wide = str(sm90_kernel("f16", bn=256, wgs=2, bk=64, stages=4))
    assert "Cs: f16[128, 64] @ SHARED(swizzle=128)" in wide
    thread = str(sm90_kernel("f16", bn=256, wgs=2, bk=64, stages=4, producer="thread"))
    assert "Cs: f16[128, 64] @ SHARED\n" in thread
    plain = str(sm90_kernel("f16", bn=128, wgs=1, bk=32, stages=2, tma_store=False))
    assert "tma_store" not in plain and "Cs" not in plain


WIDE = COPY.replace("n: size,", "n: size, m: size,").replace(
    "y: f32[16 * n, 32]", "y: f32[16 * n, m]").replace(
    "    for b in", "    assert m >= 32\n    assert m % 4 == 0\n    for b in", 1)


@pytest.mark.parametrize("old, new", [
    ("y: f32[16 * n, 32]", "y: f32[16 * n, 33]"),     # rows 132 bytes apart
    ("    assert m % 4 == 0\n", ""),                   # m = 33 would break it
])
def test_rows_misaligned_for_a_tensor_map_are_refused_by_the_primitive(old, new):
    """The row pitch rule is check()'s (gpudsl/ir/tma_meaning.py, ``pitch_rule``): the
    primitive refuses with the reason and a witness instead of leaving it to check()."""
    src = (COPY if "33" in new else WIDE).replace(old, new)
    with pytest.raises(gpudsl.SchedulingError, match="rows of 'y' \\(f32\\) are a multiple "
                       "of 16 bytes apart") as e:
        make_tma_store(gpudsl.proc_from_source(src), "o")
    assert e.value.primitive == "make_tma_store"
    assert "% 4 == 0" in str(e.value)          # the hint names the fix


def test_check_refuses_the_same_rows_with_the_same_words():
    from gpudsl.ir.tma_meaning import pitch_rule
    from gpudsl.ir.types import f32

    q = make_tma_store(gpudsl.proc_from_source(WIDE), "o")   # m % 4 == 0: proved
    assert q.check(target="sm_90a").ok
    twin = gpudsl.proc_from_source(str(q).replace("    assert m % 4 == 0\n", ""))
    r = twin.check(target="sm_90a")
    rule = pitch_rule("y", f32, q.ir.param("y").shape)
    msgs = [d.message for d in r.diagnostics]
    assert not r.ok and any(rule.broken() in m for m in msgs), msgs
    assert rule.broken() == "the rows of 'y' (f32) are not a multiple of 16 bytes apart"
