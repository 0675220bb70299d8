"""Loop-invariant reads of read-only GLOBAL arrays are loaded once before their loop
(gpudsl/codegen/hoist.py), and only where that keeps the meaning: the array is written
nowhere in the kernel and the element is proved in bounds wherever the loop stands.
Each case runs in the interpreter and on the emulator; the cases where hoisting must
not apply use an index far out of bounds, so a hoisted load would fault on the
emulator instead of being skipped."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl

NS = vars(gpudsl)
FAR = 10 ** 9  # an element a billion floats past the array: a load there faults


def _run(p, **args):
    def copy(v):
        return np.array(v, copy=True) if isinstance(v, np.ndarray) else v

    ref = {k: copy(v) for k, v in args.items()}
    emu = {k: copy(v) for k, v in args.items()}
    gpudsl.interpret(p, **ref)
    p.compile("emulator")(**emu)
    for k in args:
        np.testing.assert_array_equal(emu[k], ref[k], err_msg=k)
    return ref


def _loop_lines(src: str, var: str) -> list[str]:
    """The lines of the generated loop over ``var`` (its header to its closing brace)."""
    lines = src.split("\n")
    start = next(k for k, ln in enumerate(lines) if f"for (int {var} =" in ln)
    depth, out = 0, []
    for ln in lines[start:]:
        out.append(ln)
        depth += ln.count("{") - ln.count("}")
        if depth == 0:
            break
    return out


def test_guard_of_a_one_element_array_is_loaded_once_before_the_loop():
    p = gpudsl.proc_from_source('''
def f(n: size, x: f32[n], lim: i64[1], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            for j in seq(0, n):
                if j < lim[0]:
                    y[t] += x[j] * f32(t)
''', namespace=NS)
    assert p.check().ok
    src = p.cuda_source()
    assert "const long long gpudsl_h0 = lim[0];" in src
    assert not any("lim[" in ln for ln in _loop_lines(src, "j"))
    for n, lim in ((5, 3), (8, 8), (1, 0)):
        x = np.arange(n, dtype=np.float32) + 1
        out = _run(p, x=x, lim=np.array([lim], np.int64), y=np.zeros(32, np.float32))
        np.testing.assert_allclose(out["y"], x[:lim].sum() * np.arange(32), rtol=1e-6)


def test_element_of_a_matrix_row_with_sizes_as_parameters():
    """``x[i, 0]`` is in bounds because sizes are >= 1 and ``i`` ranges over rows."""
    p = gpudsl.proc_from_source('''
def f(r: size, n: size, x: f32[r, n], y: f32[r, n]):
    for i in par(0, r) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            for jo in seq(0, (n + 31) // 32):
                if 32 * jo + t < n:
                    y[i, 32 * jo + t] = x[i, 32 * jo + t] - x[i, 0]
''', namespace=NS)
    assert p.check().ok
    src = p.cuda_source()
    assert "gpudsl_h0 = x[i * n + 0];" in src.replace("x[i * n]", "x[i * n + 0]")
    for r, n in ((3, 70), (2, 64), (1, 1)):
        x = np.random.default_rng(n).standard_normal((r, n)).astype(np.float32)
        out = _run(p, x=x, y=np.zeros((r, n), np.float32))
        np.testing.assert_array_equal(out["y"], x - x[:, :1])


def test_not_hoisted_when_the_loop_writes_the_array():
    p = gpudsl.proc_from_source('''
def f(x: f32[8], c: f32[1]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            for j in seq(0, 8):
                c[0] = c[0] * 0.5 + x[j]
''', namespace=NS)
    assert p.check().ok
    assert "gpudsl_h" not in p.cuda_source()
    x = np.arange(8, dtype=np.float32)
    out = _run(p, x=x, c=np.ones(1, np.float32))
    want = np.float32(1)
    for v in x:
        want = want * np.float32(0.5) + v
    assert out["c"][0] == want


def test_not_hoisted_when_another_thread_of_the_kernel_writes_it():
    """Thread 0 writes ``w[0]`` before the barrier, every thread reads it in a loop
    after: the array is written in the kernel, so its reads stay where they are."""
    p = gpudsl.proc_from_source('''
def f(x: f32[4], w: f32[1], y: f32[32]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            if t == 0:
                w[0] = x[3] + 1.0
        sync()
        for t in par(0, 32) @ THREADS:
            for j in seq(0, 4):
                y[t] += x[j] * w[0]
''', namespace=NS)
    assert p.check().ok
    src = p.cuda_source()
    assert "= w[0];" not in src
    out = _run(p, x=np.arange(4, dtype=np.float32), w=np.zeros(1, np.float32),
               y=np.zeros(32, np.float32))
    np.testing.assert_array_equal(out["y"], np.full(32, 6 * 4, np.float32))


def test_not_hoisted_when_the_loop_may_run_zero_times_with_the_index_out_of_bounds():
    """``x[k]`` is in bounds only when the loop runs (the assert): hoisted, it would
    load ``x[10**9]`` when ``cnt == 0``."""
    p = gpudsl.proc_from_source('''
def f(cnt: index, k: index, x: f32[4], y: f32[32]):
    assert cnt <= 0 or (k >= 0 and k < 4)
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            for j in seq(0, cnt):
                y[t] += x[k]
''', namespace=NS)
    assert p.check().ok
    assert "gpudsl_h" not in p.cuda_source()
    x = np.arange(4, dtype=np.float32) + 1
    out = _run(p, cnt=0, k=FAR, x=x, y=np.zeros(32, np.float32))
    assert not out["y"].any()
    out = _run(p, cnt=3, k=2, x=x, y=np.zeros(32, np.float32))
    np.testing.assert_array_equal(out["y"], np.full(32, 9, np.float32))


def test_not_hoisted_when_only_a_condition_in_the_loop_keeps_it_in_bounds():
    p = gpudsl.proc_from_source('''
def f(k: index, x: f32[4], y: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 1) @ THREADS:
            for j in seq(0, 4):
                if k >= 0 and k < 4:
                    y[j] = x[k] + f32(j)
''', namespace=NS)
    assert p.check().ok
    assert "gpudsl_h" not in p.cuda_source()
    x = np.arange(4, dtype=np.float32) + 1
    out = _run(p, k=FAR, x=x, y=np.zeros(4, np.float32))
    assert not out["y"].any()
    out = _run(p, k=1, x=x, y=np.zeros(4, np.float32))
    np.testing.assert_array_equal(out["y"], 2 + np.arange(4, dtype=np.float32))


def test_not_hoisted_when_the_index_changes_in_the_loop():
    p = gpudsl.proc_from_source('''
def f(x: f32[4, 8], y: f32[4]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            for j in seq(0, 8):
                for jj in seq(0, 2):
                    y[t] += x[t, j]
''', namespace=NS)
    src = p.cuda_source()
    # invariant in the inner loop (hoisted there), not in the outer one
    assert "gpudsl_h0 = x[t * 8 + j];" in src
    assert src.index("for (int j") < src.index("gpudsl_h0 = x[t * 8 + j];")
    x = np.arange(32, dtype=np.float32).reshape(4, 8)
    out = _run(p, x=x, y=np.zeros(4, np.float32))
    np.testing.assert_array_equal(out["y"], 2 * x.sum(axis=1))


@pytest.mark.parametrize("k", [0, 3])
def test_hoisted_in_a_one_thread_host_kernel(k):
    p = gpudsl.proc_from_source('''
def f(k: index, x: f32[4], y: f32[8]):
    assert k >= 0 and k < 4
    for j in seq(0, 8):
        y[j] = x[k] * f32(j)
''', namespace=NS)
    src = p.cuda_source()
    assert "gpudsl_h0 = x[k];" in src
    x = np.arange(4, dtype=np.float32) + 1
    out = _run(p, k=k, x=x, y=np.zeros(8, np.float32))
    np.testing.assert_array_equal(out["y"], x[k] * np.arange(8, dtype=np.float32))


def test_differential_cases():
    """A few random cases of tests/codegen/hoist_differential.py: the interpreter and
    the emulator agree, and some of the C hoisted a read (the long mode runs more)."""
    from .hoist_differential import run

    out = run(seed=5, cases=6)
    assert not out.mismatches, out.mismatches[0]
    assert out.hoisting > 0 and out.cases > out.skipped
