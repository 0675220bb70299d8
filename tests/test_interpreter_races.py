"""detect_races=True: racy procs raise RaceError naming both accesses (file:line),
both threads and the element; their corrected twins run clean and compute the
same as without detection."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

from gpudsl import (BLOCKS, REGISTER, SHARED, THREADS, InterpError, RaceError, atomic_add,
                    f32, i32, interpret, par, proc, seq, size, sync)  # noqa: F401

FILE = inspect.getsourcefile(lambda: None)
_LINES = open(FILE).read().splitlines()


def line_of(marker: str) -> int:
    hits = [k + 1 for k, text in enumerate(_LINES) if text.rstrip().endswith("# " + marker)]
    assert len(hits) == 1, marker
    return hits[0]


def expect_race(p, markers, *words, **args):
    with pytest.raises(RaceError) as info:
        interpret(p, detect_races=True, **args)
    msg = str(info.value)
    for m in markers:
        assert f"{FILE}:{line_of(m)}:" in msg, (m, msg)
    for w in words:
        assert w in msg, (w, msg)
    return info.value


def clean(p, **args):
    """Runs without a race, and computes what the plain interpreter computes."""
    plain = {k: v.copy() if isinstance(v, np.ndarray) else v for k, v in args.items()}
    interpret(p, detect_races=True, **args)
    interpret(p, **plain)
    for k, v in args.items():
        if isinstance(v, np.ndarray):
            np.testing.assert_array_equal(v, plain[k], err_msg=k)


def x256():
    return np.arange(256, dtype=np.float32)


# -------------------------------------------- 1. every thread writes one shared scalar


@proc
def shared_scalar_racy(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32 @ SHARED
        for t in par(0, 256) @ THREADS:
            s = x[t]  # r1
        sync()
        for t in par(0, 256) @ THREADS:
            y[t] = s


@proc
def shared_scalar_fixed(x: f32[256], y: f32[256]):
    for b in par(0, 1) @ BLOCKS:
        s: f32 @ SHARED
        for t in par(0, 256) @ THREADS:
            if t == 0:
                s = x[t]
        sync()
        for t in par(0, 256) @ THREADS:
            y[t] = s


def test_all_threads_write_one_shared_scalar():
    err = expect_race(shared_scalar_racy, ["r1"], "SHARED s", "thread (t=0)", "thread (t=1)",
                      x=x256(), y=x256())
    assert err.element == ("s", ())
    clean(shared_scalar_fixed, x=x256(), y=np.zeros(256, np.float32))


# -------------------------------------------- 2. neighbour read and write in one phase


@proc
def neighbour_racy(x: f32[257]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[257] @ SHARED
        for t in par(0, 257) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 256) @ THREADS:
            s[t] = s[t] + s[t + 1]  # r2
        sync()
        for t in par(0, 257) @ THREADS:
            x[t] = s[t]


@proc
def neighbour_fixed(x: f32[257]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[257] @ SHARED
        r: f32[256] @ REGISTER
        for t in par(0, 257) @ THREADS:
            s[t] = x[t]
        sync()
        for t in par(0, 256) @ THREADS:
            r[t] = s[t] + s[t + 1]
        sync()
        for t in par(0, 256) @ THREADS:
            s[t] = r[t]
        sync()
        for t in par(0, 257) @ THREADS:
            x[t] = s[t]


def test_neighbour_update_in_one_phase():
    err = expect_race(neighbour_racy, ["r2"], "SHARED s[1]", "thread (t=0)", "thread (t=1)",
                      x=np.arange(257, dtype=np.float32))
    assert err.element == ("s", (1,))
    x = np.arange(257, dtype=np.float32)
    clean(neighbour_fixed, x=x)
    np.testing.assert_array_equal(x[:256], np.arange(256) * 2 + 1)


# -------------------------------------------- 3. a reduction missing its sync


@proc
def reduction_racy(n: size, x: f32[n], out: f32[n // 64]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[64 * b + t]  # r3a
        for k in seq(0, 6):
            for t in par(0, 32) @ THREADS:
                if t < (32 >> k):
                    s[t] += s[t + (32 >> k)]  # r3b
            sync()
        for t in par(0, 1) @ THREADS:
            out[b] = s[0]


@proc
def reduction_fixed(n: size, x: f32[n], out: f32[n // 64]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[64 * b + t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 32) @ THREADS:
                if t < (32 >> k):
                    s[t] += s[t + (32 >> k)]
            sync()
        for t in par(0, 1) @ THREADS:
            out[b] = s[0]


@proc
def reduction_inner_sync_missing(n: size, x: f32[n], out: f32[n // 64]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        s: f32[64] @ SHARED
        for t in par(0, 64) @ THREADS:
            s[t] = x[64 * b + t]
        sync()
        for k in seq(0, 6):
            for t in par(0, 32) @ THREADS:
                if t < (32 >> k):
                    s[t] += s[t + (32 >> k)]  # r3c
        sync()
        for t in par(0, 1) @ THREADS:
            out[b] = s[0]


def test_reduction_missing_its_sync():
    x = np.arange(128, dtype=np.float32)
    out = np.zeros(2, np.float32)
    expect_race(reduction_racy, ["r3a", "r3b"], "SHARED s[32]", "block (b=0)", x=x, out=out)
    # Phases span seq-loop iterations: iteration k=1 reads what k=0 wrote.
    expect_race(reduction_inner_sync_missing, ["r3c"], "SHARED s[", x=x, out=out)
    clean(reduction_fixed, x=x, out=out)
    np.testing.assert_array_equal(out, x.reshape(2, 64).sum(1))


# -------------------------------------------- 4. two blocks write the same global element


@proc
def blocks_racy(x: f32[512], y: f32[256]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[t] = x[256 * b + t]  # r4


@proc
def blocks_fixed(x: f32[512], y: f32[512]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = x[256 * b + t]


@proc
def blocks_read_neighbour(y: f32[512]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            if b == 0:
                y[t] = y[t + 256]  # r4r
            else:
                y[t + 256] = 0.0  # r4w
        sync()


@proc
def blocks_read_neighbour_two_kernels(y: f32[512], z: f32[256]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            z[128 * b + t] = y[128 * b + t + 256]
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 128) @ THREADS:
            y[128 * b + t + 256] = 0.0


def test_two_blocks_conflict_on_global_memory():
    x = np.arange(512, dtype=np.float32)
    err = expect_race(blocks_racy, ["r4"], "GLOBAL y[0]", "two blocks", "block (b=0)",
                      "block (b=1)", x=x, y=np.zeros(256, np.float32))
    assert err.threads == (((("b", 0),), (0, 0, 0)), ((("b", 1),), (0, 0, 0)))
    # A barrier does not order blocks.
    expect_race(blocks_read_neighbour, ["r4r", "r4w"], "GLOBAL y[256]",
                y=np.arange(512, dtype=np.float32))
    clean(blocks_fixed, x=x, y=np.zeros(512, np.float32))
    clean(blocks_read_neighbour_two_kernels, y=np.arange(512, dtype=np.float32),
          z=np.zeros(256, np.float32))


# -------------------------------------------- 5. a plain read of an atomically updated counter


@proc
def counter_racy(cnt: f32[1], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            atomic_add(cnt[0], 1.0)  # r5a
            y[t] = cnt[0]  # r5b


@proc
def counter_fixed(cnt: f32[1], y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            atomic_add(cnt[0], 1.0)
        sync()
        for t in par(0, 64) @ THREADS:
            y[t] = cnt[0]


@proc
def counter_across_blocks(cnt: f32[1]):
    for b in par(0, 8) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            atomic_add(cnt[0], 1.0)


def test_plain_read_of_an_atomic_counter():
    err = expect_race(counter_racy, ["r5a", "r5b"], "atomic update", "read",
                      cnt=np.zeros(1, np.float32), y=np.zeros(64, np.float32))
    assert err.element == ("cnt", (0,))
    cnt = np.zeros(1, np.float32)
    y = np.zeros(64, np.float32)
    clean(counter_fixed, cnt=cnt, y=y)
    assert (y == 64).all()
    cnt = np.zeros(1, np.float32)
    clean(counter_across_blocks, cnt=cnt)  # atomics never conflict with atomics
    assert cnt[0] == 256


# -------------------------------------------- 6. block-level REGISTER rows


@proc
def register_rows_racy(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        r: f32[64] @ REGISTER
        for t in par(0, 64) @ THREADS:
            r[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            x[t] = r[63 - t]  # r6


@proc
def register_rows_fixed(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        r: f32[64] @ REGISTER
        for t in par(0, 64) @ THREADS:
            r[t] = x[t]
        sync()
        for t in par(0, 64) @ THREADS:
            x[t] = r[t] * 2.0


@proc
def register_2d_rows(x: f32[4, 8]):
    for b in par(0, 1) @ BLOCKS:
        acc: f32[8] @ REGISTER
        for ty in par(0, 4) @ THREADS:
            for tx in par(0, 8) @ THREADS:
                acc[tx] = x[ty, tx]  # r6b


def test_block_level_register_rows_belong_to_threads():
    expect_race(register_rows_racy, ["r6"], "REGISTER array r", "thread (t=0)", "thread (t=63)",
                x=np.arange(64, dtype=np.float32))
    # Two thread dimensions: rows are indexed by (ty, tx), not by tx alone.
    expect_race(register_2d_rows, ["r6b"], "thread (ty=0, tx=0)", "thread (ty=1, tx=0)",
                x=np.zeros((4, 8), np.float32))
    x = np.arange(64, dtype=np.float32)
    clean(register_rows_fixed, x=x)
    np.testing.assert_array_equal(x, np.arange(64) * 2)


# -------------------------------------------- 7. strict: the same value written twice


@proc
def same_value_racy(flag: i32[1], x: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if x[t] > 0.0:
                flag[0] = 1  # r7


@proc
def same_value_fixed(flag: i32[1], x: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if x[t] > 0.0:
                atomic_add(flag[0], 1)


def test_same_value_written_by_two_threads_is_a_race():
    expect_race(same_value_racy, ["r7"], "GLOBAL flag[0]", flag=np.zeros(1, np.int32),
                x=np.ones(32, np.float32))
    # Only one thread takes the branch: no race (the detector sees real executions).
    x = -np.ones(32, np.float32)
    x[5] = 1
    clean(same_value_racy, flag=np.zeros(1, np.int32), x=x)
    clean(same_value_fixed, flag=np.zeros(1, np.int32), x=np.ones(32, np.float32))


# -------------------------------------------- 8. block-level code runs on every thread


@proc
def block_level_write(y: f32[4]):
    for b in par(0, 4) @ BLOCKS:
        s: f32[1] @ SHARED
        s[0] = 1.0  # r8
        for t in par(0, 32) @ THREADS:
            if t == 0:
                y[b] = s[0]


@proc
def block_level_write_single_thread(y: f32[4]):
    for b in par(0, 4) @ BLOCKS:
        s: f32[1] @ SHARED
        s[0] = 1.0
        y[b] = s[0]


def test_block_level_code_is_executed_by_every_thread():
    expect_race(block_level_write, ["r8"], "all threads (block-level code)",
                y=np.zeros(4, np.float32))
    # A block without thread loops has one thread.
    y = np.zeros(4, np.float32)
    clean(block_level_write_single_thread, y=y)
    assert (y == 1).all()


# -------------------------------------------- 9. races through windows and sub-procs


@proc
def put_first(w: [f32][4] @ SHARED, v: f32):
    w[0] = v  # r9


@proc
def window_racy(y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16] @ SHARED
        for t in par(0, 8) @ THREADS:
            put_first(s[t:t + 4], 1.0)
            y[t] = s[t + 1]  # r9b


@proc
def window_fixed(y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[32] @ SHARED
        for t in par(0, 8) @ THREADS:
            put_first(s[4 * t:4 * t + 4], 1.0)
        sync()
        for t in par(0, 8) @ THREADS:
            y[t] = s[4 * t]


def test_races_through_windows():
    # put_first writes s[t] through a window; thread t reads s[t + 1] in the same phase.
    err = expect_race(window_racy, ["r9", "r9b"], "SHARED s[1]", y=np.zeros(64, np.float32))
    assert err.element == ("s", (1,))  # named in the coordinates of the allocation
    y = np.zeros(64, np.float32)
    clean(window_fixed, y=y)
    assert (y[:8] == 1).all()


# -------------------------------------------- 10. 2-D blocks and narrow loops


@proc
def two_d_racy(y: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16] @ SHARED
        for ty in par(0, 4) @ THREADS:
            for tx in par(0, 16) @ THREADS:
                s[tx] = 1.0  # r10
        sync()
        for t in par(0, 16) @ THREADS:
            y[t] = s[t]


@proc
def narrow_fixed(y: f32[16]):
    for b in par(0, 1) @ BLOCKS:
        s: f32[16] @ SHARED
        for ty in par(0, 4) @ THREADS:
            for tx in par(0, 16) @ THREADS:
                if ty == 0:
                    s[tx] = 1.0
        sync()
        for t in par(0, 16) @ THREADS:
            y[t] = s[t]


def test_two_dimensional_blocks():
    expect_race(two_d_racy, ["r10"], "thread (ty=0, tx=0)", "thread (ty=1, tx=0)",
                y=np.zeros(16, np.float32))
    clean(narrow_fixed, y=np.zeros(16, np.float32))


def test_sync_inside_a_thread_loop_is_refused():
    @proc
    def bad(y: f32[4]):
        for b in par(0, 1) @ BLOCKS:
            for t in par(0, 4) @ THREADS:
                y[t] = 0.0
                sync()

    with pytest.raises(InterpError, match="sync\\(\\) inside a THREADS loop"):
        interpret(bad, detect_races=True, y=np.zeros(4, np.float32))
    interpret(bad, y=np.zeros(4, np.float32))  # without detection it means what it says


def test_host_level_code_is_not_a_race():
    @proc
    def host(n: size, y: f32[n]):
        for i in seq(0, n):
            y[0] += 1.0
        for b in par(0, 2) @ BLOCKS:
            for t in par(0, 4) @ THREADS:
                y[4 * b + t + 1] = y[0]

    y = np.zeros(9, np.float32)
    clean(host, y=y)
    assert (y[1:] == 9).all()


@proc
def host_temporary(y: f32[2]):
    tmp: f32[4]
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 2) @ THREADS:
            tmp[t] = 1.0  # r11
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[b] = tmp[b]


@proc
def host_temporary_fixed(y: f32[2]):
    tmp: f32[4]
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 2) @ THREADS:
            tmp[2 * b + t] = 1.0
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            y[b] = tmp[b]


def test_host_level_temporaries_are_global_memory():
    expect_race(host_temporary, ["r11"], "GLOBAL tmp[0]", "two blocks", y=np.zeros(2, np.float32))
    y = np.zeros(2, np.float32)
    clean(host_temporary_fixed, y=y)
    assert (y == 1).all()
