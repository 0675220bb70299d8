"""Every construct of docs/language.md through the interpreter, against numpy,
and the printer round trip on every proc of this file."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, GLOBAL, REGISTER, SHARED, THREADS, atomic_add, atomic_max,
                    atomic_min, exp, f32, f64, i32, i64, index, instr, interpret, log, par,
                    proc, proc_from_source, select, seq, size, sqrt, sync, tanh)  # noqa: F401

RNG = np.random.default_rng(0)


def rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


# ----------------------------------------------------------------- procs


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def saxpy_seq(n: size, a: f32, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = a * x[i] + y[i]


@proc
def block_sum(n: size, x: f32[n], out: f32[n // 256]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        s: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[256 * b + t]
        sync()
        for k in seq(0, 8):
            for t in par(0, 128) @ THREADS:
                if t < (128 >> k):
                    s[t] += s[t + (128 >> k)]
            sync()
        for t in par(0, 1) @ THREADS:
            out[b] = s[0]


@proc
def tiled_mm(n: size, a: f32[n, n], b: f32[n, n], c: f32[n, n]):
    assert n % 16 == 0
    for bi in par(0, n // 16) @ BLOCKS:
        for bj in par(0, n // 16) @ BLOCKS:
            ta: f32[16, 16] @ SHARED
            tb: f32[16, 16] @ SHARED
            acc: f32[16, 16] @ REGISTER
            for ty in par(0, 16) @ THREADS:
                for tx in par(0, 16) @ THREADS:
                    acc[ty, tx] = 0.0
            for ko in seq(0, n // 16):
                for ty in par(0, 16) @ THREADS:
                    for tx in par(0, 16) @ THREADS:
                        ta[ty, tx] = a[16 * bi + ty, 16 * ko + tx]
                        tb[ty, tx] = b[16 * ko + ty, 16 * bj + tx]
                sync()
                for ty in par(0, 16) @ THREADS:
                    for tx in par(0, 16) @ THREADS:
                        for kk in seq(0, 16):
                            acc[ty, tx] += ta[ty, kk] * tb[kk, tx]
                sync()
            for ty in par(0, 16) @ THREADS:
                for tx in par(0, 16) @ THREADS:
                    c[16 * bi + ty, 16 * bj + tx] = acc[ty, tx]


@proc
def naive_mm(n: size, m: size, k: size, a: f32[n, k], b: f32[k, m], c: f32[n, m]):
    for i in par(0, n):
        for j in par(0, m):
            for kk in seq(0, k):
                c[i, j] += a[i, kk] * b[kk, j]


@proc
def add_row(m: size, dst: [f32][m] @ GLOBAL, src: [f32][m] @ GLOBAL):
    for j in seq(0, m):
        dst[j] += src[j]


@proc
def add_rows(n: size, m: size, x: f32[n, m], y: f32[n, m]):
    for i in seq(0, n):
        add_row(m, y[i, 0:m], x[i, :])


@proc
def fill_col(v: f32, col: [f32][4] @ GLOBAL):
    for r in seq(0, 4):
        col[r] = v + f32(r)


@proc
def fill_columns(m: size, x: f32[4, m]):
    for j in seq(0, m):
        fill_col(f32(j) * 10.0, x[0:4, j])


@instr("/* add4 */ for (int q = 0; q < 4; q++) {dst}[q] += {src}[q];")
def add4(dst: [f32][4] @ SHARED, src: [f32][4] @ GLOBAL):
    for q in seq(0, 4):
        dst[q] += src[q]


@proc
def staged_add(n: size, x: f32[n], y: f32[n]):
    assert n % 16 == 0
    for b in par(0, n // 16) @ BLOCKS:
        s: f32[16] @ SHARED
        for t in par(0, 16) @ THREADS:
            s[t] = 1.0
        sync()
        for t in par(0, 4) @ THREADS:
            add4(s[4 * t:4 * t + 4], x[16 * b + 4 * t:16 * b + 4 * t + 4])
        sync()
        for t in par(0, 16) @ THREADS:
            y[16 * b + t] = s[t]


@proc
def histogram(n: size, nb: size, x: i32[n], h: i32[nb]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            atomic_add(h[x[64 * b + t]], 1)


@proc
def minmax(n: size, x: f32[n], lo: f32[1], hi: f32[1], total: f32[1]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            atomic_min(lo[0], x[32 * b + t])
            atomic_max(hi[0], x[32 * b + t])
            atomic_add(total[0], x[32 * b + t])


@proc
def builtins(n: size, x: f32[n], y: f32[n, 10], z: i32[n, 3]):
    for i in seq(0, n):
        y[i, 0] = min(x[i], 0.5)
        y[i, 1] = max(x[i], -0.5)
        y[i, 2] = abs(x[i])
        y[i, 3] = exp(x[i])
        y[i, 4] = log(abs(x[i]) + 1.0)
        y[i, 5] = sqrt(abs(x[i]))
        y[i, 6] = tanh(x[i])
        y[i, 7] = select(x[i] > 0.0, x[i], 0.0)
        y[i, 8] = f32(i) * 0.5
        y[i, 9] = -x[i]
        z[i, 0] = i32(x[i] * 10.0)
        z[i, 1] = min(i, 3)
        z[i, 2] = abs(i - 5)


@proc
def grid2d(h: size, w: size, x: f32[h, w], y: f32[h, w]):
    assert h % 8 == 0 and w % 16 == 0
    for by in par(0, h // 8) @ BLOCKS:
        for bx in par(0, w // 16) @ BLOCKS:
            for ty in par(0, 8) @ THREADS:
                for tx in par(0, 16) @ THREADS:
                    y[8 * by + ty, 16 * bx + tx] = x[8 * by + ty, 16 * bx + tx] * 2.0 + f32(ty)


@proc
def narrow(n: size, x: f32[n], y: f32[n // 256]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        s: f32[256] @ SHARED
        for t in par(0, 256) @ THREADS:
            s[t] = x[256 * b + t]
        sync()
        for t in par(0, 16) @ THREADS:
            for j in seq(1, 16):
                s[t] += s[t + 16 * j]
        sync()
        for t in par(0, 1) @ THREADS:
            for j in seq(1, 16):
                s[0] += s[j]
            y[b] = s[0]


@proc
def gather(n: size, m: size, idx: i64[n], x: f32[m], y: f32[n]):
    for i in seq(0, n):
        y[i] = x[idx[i]]


@proc
def slice_copy(n: size, m: size, begin: i64[1], x: f32[n], y: f32[m]):
    for i in seq(0, m):
        if begin[0] + i < n:
            y[i] = x[begin[0] + i]
        else:
            y[i] = 0.0


@proc
def shift(n: size, k: index, x: f32[n], y: f32[n]):
    assert k < n and -n < k
    for i in range(0, n):
        if i - k >= 0 and i - k < n:
            y[i] = x[i - k]
        else:
            y[i] = -1.0


@proc
def intops(n: size, k: index, q: i64[n, 9]):
    for i in seq(0, n):
        q[i, 0] = (i - k) // 3
        q[i, 1] = (i - k) % 3
        q[i, 2] = (k - i) // (-4)
        q[i, 3] = (k - i) % (-4)
        q[i, 4] = i & 5
        q[i, 5] = i | 8
        q[i, 6] = i ^ 3
        q[i, 7] = i << 2
        q[i, 8] = (i * 37) >> 2


@proc
def f64_and_ints(n: size, x: f64[n], a: i32[n], y: f64[n], b: i64[n]):
    for i in seq(0, n):
        t: f64
        t = x[i] * 0.1
        if a[i] % 2 == 0 or a[i] < 0:
            t += 1.0
        else:
            t -= 1.0
        y[i] = t
        b[i] = a[i] * 3 + 1


@proc
def scalars(n: size, x: f32[n], y: f32[n]):
    acc: f32
    acc = 0.0
    for i in seq(0, n):
        acc += x[i]
        y[i] = acc
    cnt: i32 = 0
    for i in seq(0, n):
        if not x[i] < 0.0:
            cnt += 1
    y[0] = f32(cnt)


@proc
def unmapped_par(n: size, x: f32[n], y: f32[n]):
    tmp: f32[n]
    for i in par(0, n):
        tmp[i] = x[i] * x[i]
    for i in par(0, n):
        y[i] = tmp[n - 1 - i]


@proc
def float_rounding(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = x[i] * 3.0 + 0.1 - x[i] / 7.0


@proc
def f32_int_mix(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        y[i] = x[i] * i + 16777217


@proc
def wrap32(n: size, a: i32[n]):
    for i in seq(0, n):
        a[i] = a[i] * 65536


ALL = [saxpy, saxpy_seq, block_sum, tiled_mm, naive_mm, add_row, add_rows, fill_col,
       fill_columns, add4, staged_add, histogram, minmax, builtins, grid2d, narrow, gather,
       slice_copy, shift, intops, f64_and_ints, scalars, unmapped_par, float_rounding,
       f32_int_mix, wrap32]


# ----------------------------------------------------------------- tests


@pytest.mark.parametrize("race", [False, True])
def test_saxpy(race):
    x, y = rand(1024), rand(1024)
    want = np.float32(2.5) * x + y
    interpret(saxpy, detect_races=race, a=2.5, x=x, y=y)
    assert np.array_equal(y, want)
    y2 = rand(512)
    want = np.float32(-1.0) * x[:512] + y2
    interpret(saxpy_seq, a=-1, x=x[:512].copy(), y=y2)
    assert np.array_equal(y2, want)


@pytest.mark.parametrize("race", [False, True])
def test_block_reduction_with_sync_and_shifts(race):
    x = rand(4096)
    out = np.zeros(16, np.float32)
    interpret(block_sum, detect_races=race, x=x, out=out)
    np.testing.assert_allclose(out, x.reshape(16, 256).sum(1), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("race", [False, True])
def test_tiled_matmul_shared_and_block_registers(race):
    a, b = rand(32, 32), rand(32, 32)
    c = np.zeros((32, 32), np.float32)
    interpret(tiled_mm, detect_races=race, a=a, b=b, c=c)
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)


def test_naive_matmul_rectangular():
    a, b = rand(5, 7), rand(7, 3)
    c = np.ones((5, 3), np.float32)
    interpret(naive_mm, a=a, b=b, c=c)
    np.testing.assert_allclose(c, 1 + a @ b, rtol=1e-5, atol=1e-5)


def test_windows_alias_the_callers_array():
    x, y = rand(6, 5), rand(6, 5)
    want = x + y
    interpret(add_rows, x=x, y=y)
    np.testing.assert_array_equal(y, want)
    # A column window: strided.
    m = np.zeros((4, 3), np.float32)
    interpret(fill_columns, x=m)
    np.testing.assert_array_equal(m, 10.0 * np.arange(3)[None, :] + np.arange(4)[:, None])
    # A window parameter of the top-level proc.
    d, s = rand(5), rand(5)
    want = d + s
    interpret(add_row, dst=d, src=s)
    np.testing.assert_array_equal(d, want)


@pytest.mark.parametrize("race", [False, True])
def test_instr_with_shared_window(race):
    x = rand(64)
    y = np.zeros(64, np.float32)
    interpret(staged_add, detect_races=race, x=x, y=y)
    np.testing.assert_array_equal(y, x + np.float32(1.0))


@pytest.mark.parametrize("race", [False, True])
def test_atomics(race):
    x = RNG.integers(0, 10, 256).astype(np.int32)
    h = np.zeros(10, np.int32)
    interpret(histogram, detect_races=race, x=x, h=h)
    np.testing.assert_array_equal(h, np.bincount(x, minlength=10))
    v = rand(128)
    lo, hi, tot = (np.array([np.inf], np.float32), np.array([-np.inf], np.float32),
                   np.zeros(1, np.float32))
    interpret(minmax, detect_races=race, x=v, lo=lo, hi=hi, total=tot)
    assert lo[0] == v.min() and hi[0] == v.max()
    want = np.float32(0)
    for e in v:
        want = np.float32(want + e)
    assert tot[0] == want  # sequential order, float32 rounding


def test_builtins_and_casts():
    x = rand(17)
    y = np.zeros((17, 10), np.float32)
    z = np.zeros((17, 3), np.int32)
    interpret(builtins, x=x, y=y, z=z)
    ax = np.abs(x)
    cols = [np.minimum(x, 0.5), np.maximum(x, -0.5), ax, np.exp(x), np.log(ax + np.float32(1)),
            np.sqrt(ax), np.tanh(x), np.where(x > 0, x, 0), np.arange(17) * 0.5, -x]
    for k, col in enumerate(cols):
        np.testing.assert_allclose(y[:, k], col.astype(np.float32), rtol=1e-6, err_msg=str(k))
    np.testing.assert_array_equal(z[:, 0], np.trunc(x * np.float32(10)).astype(np.int32))
    np.testing.assert_array_equal(z[:, 1], np.minimum(np.arange(17), 3))
    np.testing.assert_array_equal(z[:, 2], np.abs(np.arange(17) - 5))


@pytest.mark.parametrize("race", [False, True])
def test_2d_grid(race):
    x = rand(16, 32)
    y = np.zeros_like(x)
    interpret(grid2d, detect_races=race, x=x, y=y)
    np.testing.assert_array_equal(
        y, x * np.float32(2) + (np.arange(16)[:, None] % 8).astype(np.float32))


@pytest.mark.parametrize("race", [False, True])
def test_narrow_thread_loops(race):
    x = rand(1024)
    y = np.zeros(4, np.float32)
    interpret(narrow, detect_races=race, x=x, y=y)
    np.testing.assert_allclose(y, x.reshape(4, 256).sum(1), rtol=1e-5, atol=1e-5)


def test_data_dependent_indices():
    x = rand(10)
    idx = RNG.integers(0, 10, 25).astype(np.int64)
    y = np.zeros(25, np.float32)
    interpret(gather, idx=idx, x=x, y=y)
    np.testing.assert_array_equal(y, x[idx])
    y = np.full(4, 7, np.float32)
    interpret(slice_copy, begin=np.array([8]), x=x, y=y)
    np.testing.assert_array_equal(y, [x[8], x[9], 0, 0])


@pytest.mark.parametrize("k", [-3, 0, 2])
def test_index_params(k):
    x = rand(8)
    y = np.zeros(8, np.float32)
    interpret(shift, k=k, x=x, y=y)
    want = np.array([x[i - k] if 0 <= i - k < 8 else -1 for i in range(8)], np.float32)
    np.testing.assert_array_equal(y, want)


def test_floor_division_modulo_and_bitwise():
    q = np.zeros((12, 9), np.int64)
    interpret(intops, k=5, q=q)
    i = np.arange(12)
    want = np.stack([(i - 5) // 3, (i - 5) % 3, (5 - i) // -4, (5 - i) % -4, i & 5, i | 8,
                     i ^ 3, i << 2, (i * 37) >> 2], axis=1)
    np.testing.assert_array_equal(q, want)


def test_f64_i32_i64_and_if_else():
    x = rand(9, dtype=np.float64)
    a = np.array([-3, -2, -1, 0, 1, 2, 3, 4, 5], np.int32)
    y = np.zeros(9, np.float64)
    b = np.zeros(9, np.int64)
    interpret(f64_and_ints, x=x, a=a, y=y, b=b)
    want = x * 0.1 + np.where((a % 2 == 0) | (a < 0), 1.0, -1.0)
    np.testing.assert_array_equal(y, want)
    np.testing.assert_array_equal(b, a.astype(np.int64) * 3 + 1)


def test_local_scalars():
    x = rand(10)
    y = np.zeros(10, np.float32)
    interpret(scalars, x=x, y=y)
    want = np.cumsum(x, dtype=np.float32)
    want[0] = np.count_nonzero(~(x < 0))
    np.testing.assert_allclose(y, want, rtol=1e-6)


def test_unmapped_par_and_global_temporaries():
    x = rand(7)
    y = np.zeros(7, np.float32)
    interpret(unmapped_par, x=x, y=y)
    np.testing.assert_array_equal(y, (x * x)[::-1])


def test_float32_arithmetic_rounds_like_float32():
    x = rand(100)
    y = np.zeros(100, np.float32)
    interpret(float_rounding, x=x, y=y)
    f = np.float32
    want = np.array([f(f(f(v * f(3.0)) + f(0.1)) - f(v / f(7.0))) for v in x], np.float32)
    np.testing.assert_array_equal(y, want)
    # An integer operand converts to f32 first (rounding 16777217 to 16777216).
    y = np.zeros(3, np.float32)
    interpret(f32_int_mix, x=np.ones(3, np.float32), y=y)
    np.testing.assert_array_equal(y, np.float32(16777216) + np.arange(3, dtype=np.float32))


def test_int32_stores_wrap():
    a = np.array([1, 40000, -40000], np.int32)
    interpret(wrap32, a=a)
    # 40000 * 65536 = 2621440000 wraps to 2621440000 - 2**32 (two's complement).
    np.testing.assert_array_equal(a, [65536, 2621440000 - (1 << 32), (1 << 32) - 2621440000])


def test_non_contiguous_arguments_are_updated_in_place():
    big = rand(8, 10)
    x = big[:, 3]  # strided view
    y = np.zeros(8, np.float32)
    interpret(saxpy_seq, a=1.0, x=x, y=y)
    np.testing.assert_array_equal(y, big[:, 3])
    interpret(saxpy_seq, a=1.0, x=y.copy(), y=x)
    np.testing.assert_array_equal(big[:, 3], 2 * y)


def test_explicit_sizes_and_numpy_scalars():
    x, y = rand(256), rand(256)
    want = np.float32(3) * x + y
    interpret(saxpy, n=np.int64(256), a=np.float32(3), x=x, y=y)
    np.testing.assert_array_equal(y, want)


def test_compiled_code_is_cached():
    from gpudsl.interpreter.compiler import compiled

    f1 = compiled(saxpy.ir, False, True)
    interpret(saxpy, a=1.0, x=rand(256), y=rand(256))
    assert compiled(saxpy.ir, False, True) is f1


# ----------------------------------------------------------------- printer round trip


@pytest.mark.parametrize("p", ALL, ids=lambda p: p.name)
def test_printer_round_trip(p):
    ns = {q.name: q for q in ALL}
    q = proc_from_source(str(p), ns)
    assert q == p
    assert str(q) == str(p)
    assert q.is_instr == p.is_instr
