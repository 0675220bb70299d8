"""Issue 13 (language): atomics that return the old value, atomic_sub / exch / cas /
and / or / xor / inc, and read-only CONST memory, through the frontend, printer,
interpreter (and its race detector), check(), schedule primitives, CUDA codegen
(NVRTC) and the emulator."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, CONST, SHARED, THREADS, atomic_add, atomic_and, atomic_cas,  # noqa
                    atomic_exch, atomic_inc, atomic_max, atomic_min, atomic_or, atomic_sub,
                    atomic_xor, f32, f64, i32, i64, par, proc, proc_from_source, seq, size,
                    sync)
from gpudsl.errors import InterpError, ProcError
from gpudsl.ir.nodes import Atomic


@proc
def ops_i32(n: size, a: i32[n], c: i32[10], old: i32[n, 10]):
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if b * 32 + t < n:
                k: i32
                k = atomic_add(c[0], a[b * 32 + t])
                old[b * 32 + t, 0] = k
                k = atomic_sub(c[1], a[b * 32 + t])
                old[b * 32 + t, 1] = k
                k = atomic_min(c[2], a[b * 32 + t])
                old[b * 32 + t, 2] = k
                k = atomic_max(c[3], a[b * 32 + t])
                old[b * 32 + t, 3] = k
                k = atomic_exch(c[4], a[b * 32 + t])
                old[b * 32 + t, 4] = k
                k = atomic_cas(c[5], 0, a[b * 32 + t])
                old[b * 32 + t, 5] = k
                k = atomic_and(c[6], a[b * 32 + t])
                old[b * 32 + t, 6] = k
                k = atomic_or(c[7], a[b * 32 + t])
                old[b * 32 + t, 7] = k
                k = atomic_xor(c[8], a[b * 32 + t])
                old[b * 32 + t, 8] = k
                k = atomic_inc(c[9], 6)
                old[b * 32 + t, 9] = k


@proc
def ops_i64(n: size, a: i64[n], c: i64[10], old: i64[n, 10]):
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if b * 32 + t < n:
                k: i64 = atomic_add(c[0], a[b * 32 + t])
                old[b * 32 + t, 0] = k
                k = atomic_sub(c[1], a[b * 32 + t])
                old[b * 32 + t, 1] = k
                k = atomic_min(c[2], a[b * 32 + t])
                old[b * 32 + t, 2] = k
                k = atomic_max(c[3], a[b * 32 + t])
                old[b * 32 + t, 3] = k
                k = atomic_exch(c[4], a[b * 32 + t])
                old[b * 32 + t, 4] = k
                k = atomic_cas(c[5], 0, a[b * 32 + t])
                old[b * 32 + t, 5] = k
                k = atomic_and(c[6], a[b * 32 + t])
                old[b * 32 + t, 6] = k
                k = atomic_or(c[7], a[b * 32 + t])
                old[b * 32 + t, 7] = k
                k = atomic_xor(c[8], a[b * 32 + t])
                old[b * 32 + t, 8] = k
                k = atomic_inc(c[9], 6)
                old[b * 32 + t, 9] = k


@proc
def ops_f32(n: size, a: f32[n], c: f32[5], old: f32[n, 5]):
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if b * 32 + t < n:
                k: f32 = atomic_add(c[0], a[b * 32 + t])
                old[b * 32 + t, 0] = k
                k = atomic_sub(c[1], a[b * 32 + t])
                old[b * 32 + t, 1] = k
                k = atomic_min(c[2], a[b * 32 + t])
                old[b * 32 + t, 2] = k
                k = atomic_max(c[3], a[b * 32 + t])
                old[b * 32 + t, 3] = k
                k = atomic_exch(c[4], a[b * 32 + t])
                old[b * 32 + t, 4] = k


@proc
def ops_f64(n: size, a: f64[n], c: f64[5], old: f64[n, 5]):
    for b in par(0, (n + 31) // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if b * 32 + t < n:
                k: f64 = atomic_add(c[0], a[b * 32 + t])
                old[b * 32 + t, 0] = k
                k = atomic_sub(c[1], a[b * 32 + t])
                old[b * 32 + t, 1] = k
                k = atomic_min(c[2], a[b * 32 + t])
                old[b * 32 + t, 2] = k
                k = atomic_max(c[3], a[b * 32 + t])
                old[b * 32 + t, 3] = k
                k = atomic_exch(c[4], a[b * 32 + t])
                old[b * 32 + t, 4] = k


@proc
def const_scale(n: size, w: f32[n] @ CONST, x: f32[n], y: f32[n]):
    for b in par(0, (n + 63) // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if b * 64 + t < n:
                y[b * 64 + t] = x[b * 64 + t] * w[b * 64 + t] + w[0]


@proc
def const_write(n: size, w: f32[n] @ CONST, y: f32[n]):
    for i in seq(0, n):
        if i == 3:
            w[i] = y[i]


OPS = [ops_i32, ops_i64, ops_f32, ops_f64]
N = 70


def _inputs(p, rng):
    ty = p.ir.param("a").ty.numpy
    if ty.startswith("i"):
        a = rng.integers(1, 50, N).astype(ty)
    else:
        a = rng.integers(-20, 20, N).astype(ty)  # integer-valued: sums are exact
    width = p.ir.param("c").shape[0].val
    c = np.zeros(width, ty)
    c[2] = 1000  # min starts high
    return dict(n=N, a=a, c=c, old=np.zeros((N, width), ty))


def _deterministic(p, got, want):
    """What every order of the atomics agrees on."""
    ic = p is ops_i32 or p is ops_i64
    np.testing.assert_array_equal(got["c"][:4], want["c"][:4])  # add sub min max
    if ic:
        np.testing.assert_array_equal(got["c"][6:], want["c"][6:])  # and or xor inc
        # inc's old values: 0..6 repeated, in some order
        np.testing.assert_array_equal(np.sort(got["old"][:, 9]), np.sort(want["old"][:, 9]))
        # exactly one thread's compare-and-swap found the 0
        assert (got["old"][:, 5] == 0).sum() == 1
        assert got["c"][5] in got["a"]
    # exch: the old values and the final value are the initial 0 and every a
    ex = np.sort(np.concatenate([got["old"][:, 4], got["c"][4:5]]))
    np.testing.assert_array_equal(ex, np.sort(np.concatenate([[0], got["a"]])))
    # add's old values are the prefix sums of some order: distinct when a > 0
    if ic:
        assert len(set(got["old"][:, 0].tolist())) == N


def test_interpreter_semantics_in_order():
    rng = np.random.default_rng(1)
    args = _inputs(ops_i32, rng)
    a = args["a"].astype(np.int64)
    gpudsl.interpret(ops_i32, **args)
    c, old = args["c"], args["old"]
    assert c[0] == a.sum() and c[1] == -a.sum()
    assert c[2] == min(1000, a.min()) and c[3] == a.max()
    np.testing.assert_array_equal(old[:, 0], np.concatenate([[0], np.cumsum(a)[:-1]]))
    np.testing.assert_array_equal(old[:, 4], np.concatenate([[0], a[:-1]]))
    assert old[0, 5] == 0 and c[5] == a[0] and (old[1:, 5] == a[0]).all()
    and_ = np.bitwise_and.accumulate(np.concatenate([[0], a]))
    assert c[6] == 0 and (old[:, 6] == 0).all() and and_[-1] == 0
    assert c[7] == np.bitwise_or.reduce(a) and c[8] == np.bitwise_xor.reduce(a)
    np.testing.assert_array_equal(old[:, 9], np.arange(N) % 7)  # wraps after 6
    assert c[9] == N % 7


def test_interpreter_wraps_and_casts():
    @proc
    def wrap(c: i32[2], old: i32[2]):
        for i in seq(0, 1):
            k: i32 = atomic_add(c[0], 1)
            old[0] = k
            k = atomic_inc(c[1], 5)
            old[1] = k

    c = np.array([2 ** 31 - 1, -4], np.int32)
    old = np.zeros(2, np.int32)
    gpudsl.interpret(wrap, c=c, old=old)
    assert c[0] == -2 ** 31 and old[0] == 2 ** 31 - 1
    assert c[1] == -3 and old[1] == -4  # signed comparison: -4 < 5, so old + 1


@pytest.mark.parametrize("p", OPS, ids=lambda p: p.name)
def test_roundtrip_check_and_race_free(p):
    assert proc_from_source(str(p)).ir == p.ir
    assert p.check().ok, str(p.check())
    gpudsl.interpret(p, detect_races=True, **_inputs(p, np.random.default_rng(0)))


def test_printer_forms():
    text = str(ops_i32)
    assert "k = atomic_cas(c[5], 0, a[b * 32 + t])" in text
    assert "atomic_inc(c[9], 6)" in text
    assert "w: f32[n] @ CONST" in str(const_scale)
    assert proc_from_source(str(const_scale)).ir == const_scale.ir
    s = next(x for x in ops_i32.ir.body[0].body[0].body[0].body if isinstance(x, Atomic))
    assert s.result == "k" and s.op == "add"


@pytest.mark.parametrize("p", OPS + [const_scale], ids=lambda p: p.name)
def test_nvrtc_compiles(p):
    from gpudsl.codegen import generate
    from gpudsl.runtime.nvrtc import compile_cubin

    try:
        m = generate(p, {})
        r = compile_cubin(m.source, "sm_90")
    except gpudsl.errors.CompileError as e:
        if "NVRTC" in str(e) and "not" in str(e) and "found" in str(e):
            pytest.skip(str(e))
        raise
    assert r.cubin[:4] == b"\x7fELF"


def test_cuda_text():
    src = ops_i64.cuda_source()
    assert "k = (long long)atomicCAS((unsigned long long*)&" in src
    assert "k = (long long)atomicAdd((unsigned long long*)&c[1], (unsigned long long)(0ull - " \
        "(unsigned long long)(a[b * 32 + t])));" in src
    assert "gpudsl_atomic_inc(&c[9], 6" in src
    src = ops_f32.cuda_source()
    assert "k = gpudsl_atomic_min_old(&c[2], " in src and "k = atomicExch(&c[4], " in src
    src = const_scale.cuda_source()
    assert "const float* __restrict__ w" in src


@pytest.mark.parametrize("p", OPS, ids=lambda p: p.name)
def test_emulator_agrees_with_interpreter(p):
    k = p.compile("emulator")
    rng = np.random.default_rng(3)
    got = _inputs(p, rng)
    want = {k_: (v.copy() if isinstance(v, np.ndarray) else v) for k_, v in got.items()}
    gpudsl.interpret(p, **want)
    k(**got)
    _deterministic(p, got, want)


def test_const_memory_runs_everywhere():
    rng = np.random.default_rng(0)
    w = rng.standard_normal(100).astype(np.float32)
    x = rng.standard_normal(100).astype(np.float32)
    y1, y2 = np.zeros(100, np.float32), np.zeros(100, np.float32)
    gpudsl.interpret(const_scale, n=100, w=w, x=x, y=y1, detect_races=True)
    np.testing.assert_allclose(y1, x * w + w[0], rtol=1e-6)
    const_scale.compile("emulator")(n=100, w=w, x=x, y=y2)
    np.testing.assert_array_equal(y1, y2)


def test_const_write_refused_by_interpreter_check_and_codegen():
    gpudsl.interpret(const_write, n=2, w=np.zeros(2, np.float32),
                     y=np.ones(2, np.float32))  # the write never runs: fine
    y = np.ones(8, np.float32)
    w = np.zeros(8, np.float32)
    with pytest.raises(InterpError, match="CONST"):
        gpudsl.interpret(const_write, n=8, w=w, y=y)
    rep = const_write.check()
    assert "mapping" in rep.kinds() and "CONST" in str(rep)
    with pytest.raises(gpudsl.errors.CompileError, match="CONST"):
        from gpudsl.codegen import generate
        generate(const_write, {})


def test_detector_finds_atomic_result_races():
    @proc
    def racy(c: i32[1], out: i32[64]):
        for b in par(0, 1) @ BLOCKS:
            k: i32 @ SHARED
            for t in par(0, 64) @ THREADS:
                k = atomic_add(c[0], 1)
                out[t] = k

    with pytest.raises(gpudsl.RaceError):
        gpudsl.interpret(racy, c=np.zeros(1, np.int32), out=np.zeros(64, np.int32),
                         detect_races=True)
    assert "race" in racy.check().kinds()


@pytest.mark.parametrize("src, msg", [
    ("x[0] = atomic_add(c[0], 1)", "local scalar"),
    ("k = atomic_add(c[0], 1) + 1", "is a statement"),
    ("k = atomic_cas(c[0], 1)", "takes 3 arguments"),
    ("atomic_and(f[0], 1.0)", "does not take f32"),
    ("atomic_cas(f[0], 1.0, 2.0)", "does not take f32"),
    ("g = atomic_add(c[0], 1)", "is f32"),
    ("k = atomic_add(k, 1)", "GLOBAL or SHARED"),
])
def test_frontend_errors(src, msg):
    text = f"""
@proc
def bad(c: i32[4], f: f32[4], x: i32[4]):
    for i in seq(0, 1):
        k: i32
        g: f32
        {src}
"""
    with pytest.raises(ProcError, match=msg):
        proc_from_source(text)


def test_const_cannot_be_allocated():
    with pytest.raises(ProcError, match="CONST"):
        proc_from_source("@proc\ndef bad(n: size):\n    w: f32[4] @ CONST\n")


def test_schedule_primitives_see_the_old_value():
    """Moving the read of the old value above the atomic is refused; the inliner
    renames the old value's local with the rest of the callee."""
    from gpudsl.errors import SchedulingError
    from gpudsl.ir.stmt_effects import collect
    from gpudsl.ir.inline import written_names

    @proc
    def take(c: i32[1], o: [i32][1] @ SHARED):
        k: i32
        k = atomic_add(c[0], 1)
        o[0] = k

    @proc
    def caller(c: i32[1], out: i32[4]):
        for b in par(0, 1) @ BLOCKS:
            s: i32[1] @ SHARED
            k: i32[1] @ SHARED
            for t in par(0, 1) @ THREADS:
                take(c, s)
                out[0] = s[0]

    body = caller.ir.body[0].body[2].body
    assert "k" not in written_names(body) and "s" in written_names(body)
    accs = collect(body)
    assert any(a.mode == "w" and isinstance(a.stmt, type(body[0])) for a in accs)
    from gpudsl.schedule import expand_dim, inline

    inl = inline(caller, "take(_)")
    text = str(inl)
    assert "k_1 = atomic_add(c[0], 1)" in text and "s[0] = k_1" in text
    assert proc_from_source(text).ir == inl.ir
    for q in (caller, inl):
        c, out = np.zeros(1, np.int32), np.zeros(4, np.int32)
        c[0] = 5
        gpudsl.interpret(q, c=c, out=out, detect_races=True)
        assert c[0] == 6 and out[0] == 5
    with pytest.raises(SchedulingError, match="old value"):
        expand_dim(inl, "k_1 : _", "2", "0")
