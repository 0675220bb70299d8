"""``proc.compile(..., trace=dict(block=..., thread=...))`` (docs/running.md): the kernel
prints, from that one thread only, each assignment it executes; on the emulator the lines
reach Python's ``sys.stdout`` (not the C stdout, which a notebook does not show)."""
from __future__ import annotations

import inspect

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, THREADS, atomic_add, f16, f32, i32, i64, par, proc, seq, size)
from gpudsl.codegen import generate
from gpudsl.runtime.nvrtc import compile_cubin

FILE = "test_trace.py"


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def rowsum(n: size, x: i32[n, 4], s: i64[n], c: i32[1]):
    assert n % 32 == 0
    for b in par(0, n // 32) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            s[32 * b + t] = 0
            for k in seq(0, 4):
                s[32 * b + t] += x[32 * b + t, k]
            atomic_add(c[0], 1)


@proc
def halves(n: size, x: f16[n], y: f16[n]):
    assert n % 64 == 0
    for b in par(0, n // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[64 * b + t] = x[64 * b + t] * 2.0


def _source_line(text: str) -> int:
    for k, ln in enumerate(open(__file__).read().splitlines(), 1):
        if ln.strip() == text:
            return k
    raise AssertionError(text)


SAXPY_LINE = _source_line("y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]")


def test_traced_saxpy_prints_one_threads_assignment(capfd):
    k = saxpy.compile("emulator", trace=dict(block=(0, 0), thread=(3, 0)))
    x = np.arange(1024, dtype=np.float32)
    y = np.ones(1024, np.float32)
    k(a=2.0, x=x, y=y)
    out = capfd.readouterr().out  # Python's and the C stdout: each line exactly once
    assert out == f"{FILE}:{SAXPY_LINE}: y[3] = 7\n"
    assert k.trace_output == out
    np.testing.assert_array_equal(y, 2 * np.arange(1024, dtype=np.float32) + 1)


def test_trace_goes_to_python_stdout(capsys, monkeypatch):
    """What a notebook captures is sys.stdout: the lines must arrive there."""
    import io
    import sys

    buf = io.StringIO()
    monkeypatch.setattr(sys, "stdout", buf)
    k = saxpy.compile("emulator", trace=dict(block=1, thread=(255,)))
    x = np.zeros(1024, np.float32)
    y = np.full(1024, 5.0, np.float32)
    k(a=1.0, x=x, y=y)
    assert buf.getvalue() == f"{FILE}:{SAXPY_LINE}: y[511] = 5\n"


def test_other_threads_print_nothing_with_many_workers(capfd, monkeypatch):
    monkeypatch.setenv("GPUDSL_EMU_WORKERS", "4")
    k = saxpy.compile("emulator", trace=dict(block=(37,), thread=(0,)))
    n = 256 * 64  # enough threads that the emulator starts several workers
    x = np.ones(n, np.float32)
    y = np.zeros(n, np.float32)
    k(a=3.0, x=x, y=y)
    assert capfd.readouterr().out == f"{FILE}:{SAXPY_LINE}: y[{256 * 37}] = 3\n"
    # a second call: only that call's lines
    k(a=3.0, x=x, y=y)
    assert k.trace_output == f"{FILE}:{SAXPY_LINE}: y[{256 * 37}] = 6\n"
    assert capfd.readouterr().out == k.trace_output
    # a thread no kernel runs prints nothing, and a block past the grid neither
    k2 = saxpy.compile("emulator", trace=dict(block=(70,), thread=(0,)))
    k2(a=3.0, x=x, y=y)
    assert k2.trace_output == "" and capfd.readouterr().out == ""


def test_trace_inside_a_seq_loop_prints_each_iteration(capfd):
    k = rowsum.compile("emulator", trace=dict(block=(1,), thread=(2,)))
    n = 64
    x = np.arange(4 * n, dtype=np.int32).reshape(n, 4)
    s = np.zeros(n, np.int64)
    c = np.zeros(1, np.int32)
    k(x=x, s=s, c=c)
    i = 34
    init = _source_line("s[32 * b + t] = 0")
    red = _source_line("s[32 * b + t] += x[32 * b + t, k]")
    atom = _source_line("atomic_add(c[0], 1)")
    want = [f"{FILE}:{init}: s[{i}] = 0"]
    acc = 0
    for kk in range(4):
        acc += int(x[i, kk])
        want.append(f"{FILE}:{red}: s[{i}] += {x[i, kk]} (now {acc})")
    want.append(f"{FILE}:{atom}: atomic_add(c[0], 1)")
    assert capfd.readouterr().out.splitlines() == want
    assert s[i] == acc and c[0] == n


def test_half_values_are_printed_through_float(capfd):
    k = halves.compile("emulator", trace=dict(thread=(5,)))
    x = np.arange(64, dtype=np.float16) / 4
    y = np.zeros(64, np.float16)
    k(x=x, y=y)
    line = _source_line("y[64 * b + t] = x[64 * b + t] * 2.0")
    assert capfd.readouterr().out == f"{FILE}:{line}: y[5] = 2.5\n"


@pytest.mark.parametrize("p,bind", [(saxpy, {}), (rowsum, {}), (halves, {}),
                                    (saxpy, {"n": 4096})])
def test_traced_kernels_compile_with_nvrtc(p, bind):
    m = generate(p, bind, trace=dict(block=(0, 0), thread=(3, 0)))
    assert "printf(" in m.source
    r = compile_cubin(m.source, "sm_90")
    assert r.cubin[:4] == b"\x7fELF"


def test_without_trace_the_source_is_unchanged():
    for p in (saxpy, rowsum, halves):
        plain = generate(p, {}).source
        assert "printf" not in plain
        assert generate(p, {}, trace=None).source == plain
        assert plain != generate(p, {}, trace=dict(thread=(0,))).source
    k = saxpy.compile("emulator")
    assert k.source == generate(saxpy, {}).source and k.trace is None


def test_traced_kernel_is_a_separate_cache_entry():
    plain = saxpy.compile("emulator")
    traced = saxpy.compile("emulator", trace=dict(thread=(1,)))
    assert plain._last.backend.mod.path != traced._last.backend.mod.path
    x = np.ones(256, np.float32)
    y = np.zeros(256, np.float32)
    plain(a=1.0, x=x, y=y)
    assert plain.trace_output == ""


@pytest.mark.parametrize("trace", [
    5, "block=0", [(0,), (1,)], dict(block=(0,), threads=(1,)), dict(thread=(1.5,)),
    dict(thread=(True,)), dict(thread=(0, 0, 0, 0)), dict(thread=()), dict(thread=(-1,)),
    dict(block="0"), dict(block=(0, 70000)), dict(thread=(2000,)), dict(thread=None),
])
def test_bad_trace_arguments_are_refused(trace):
    with pytest.raises(gpudsl.Error, match=r"\btrace[= ]"):
        saxpy.compile("emulator", trace=trace)


def test_a_thread_outside_every_block_is_refused():
    with pytest.raises(gpudsl.CompileError, match="outside the block"):
        saxpy.compile("emulator", trace=dict(thread=(256,)))
    with pytest.raises(gpudsl.CompileError, match="outside the block"):
        saxpy.compile("cuda", trace=dict(thread=(0, 1)))


def test_numpy_integers_are_accepted():
    k = saxpy.compile("emulator", trace=dict(block=(np.int64(1),), thread=np.int32(2)))
    assert k.trace == ((1, 0, 0), (2, 0, 0))


@pytest.mark.gpu
def test_traced_saxpy_on_the_gpu(capsys):
    k = saxpy.compile("cuda", trace=dict(block=(0, 0), thread=(3, 0)))
    x = np.arange(1024, dtype=np.float32)
    y = np.ones(1024, np.float32)
    k(a=2.0, x=x, y=y)
    assert capsys.readouterr().out == f"{FILE}:{SAXPY_LINE}: y[3] = 7\n"
    assert k.trace_output == f"{FILE}:{SAXPY_LINE}: y[3] = 7\n"
