"""The fast path of a kernel call (``compiler/fast_call.py``): a call with the signature of
an earlier one that passed reuses its checks and launch plan; anything that changes the
result (shape, dtype, strides, sizes, writability, aliasing, scalar ranges) must never
reuse a stale entry.  Each test here fails if the key or the entry omits one of them."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import BLOCKS, THREADS, LaunchError, f32, i32, par, proc, size
from gpudsl.compiler import arguments
from gpudsl.runtime.backends import BACKENDS
from gpudsl.runtime.recording import RecordingBackend


@proc
def saxpy(n: size, a: f32, x: f32[n], y: f32[n]):
    assert n % 256 == 0
    for b in par(0, n // 256) @ BLOCKS:
        for t in par(0, 256) @ THREADS:
            y[256 * b + t] = a * x[256 * b + t] + y[256 * b + t]


@proc
def rows_add(m: size, n: size, k: i32, x: f32[m, n], out: f32[m, n]):
    assert n <= 1024
    for i in par(0, m) @ BLOCKS:
        for j in par(0, n) @ THREADS:
            out[i, j] = x[i, j] + k


@pytest.fixture
def record(monkeypatch):
    monkeypatch.setitem(BACKENDS, "record", RecordingBackend)
    RecordingBackend.log.clear()
    return RecordingBackend.log


@pytest.fixture(scope="module")
def emu():
    return saxpy.compile("emulator")


def _full_path_calls(monkeypatch) -> list:
    """Count the calls that take the full path (bind_arguments)."""
    calls = []
    bind = arguments.bind_arguments

    def counted(*a, **k):
        calls.append(1)
        return bind(*a, **k)
    import gpudsl.compiler.compiled_kernel as kernel_mod
    monkeypatch.setattr(kernel_mod, "bind_arguments", counted)
    return calls


def test_a_repeated_signature_takes_the_fast_path(record, monkeypatch):
    k = saxpy.compile("record")
    full = _full_path_calls(monkeypatch)
    x, y = np.arange(1024, dtype=np.float32), np.ones(1024, np.float32)
    for a in (2.0, 3.0, 4.0):
        k(a=a, x=x, y=y)
    assert len(full) == 1 and len(k._fast) == 1
    first, *later = record
    assert first.kernel == later[-1].kernel and first.grid == later[-1].grid == (4, 1, 1)
    # the scalar is the call's own, in its C type; the arrays are the call's
    assert [r.args[1] for r in record] == [2.0, 3.0, 4.0]
    assert all(type(r.args[1]) is np.float32 for r in record)
    assert record[-1].args[2] is x and record[-1].args[3] is y
    k(1024, 4.0, x, y)    # positional: a signature of its own (the key holds the form)
    k(a=np.float32(5), x=x, y=y)
    assert len(full) == 3 and record[-1].args[1] == 5.0


def test_a_new_shape_is_planned_again(record):
    k = saxpy.compile("record")
    for n in (1024, 2048, 1024, 512):
        k(a=1.0, x=np.zeros(n, np.float32), y=np.zeros(n, np.float32))
        assert record[-1].grid[0] == n // 256 and record[-1].args[0] == n
    assert len(k._fast) == 3


def test_shapes_are_checked_again(emu):
    x, y = np.ones(1024, np.float32), np.ones(1024, np.float32)
    emu(a=2.0, x=x, y=y)
    with pytest.raises(LaunchError, match="shape"):
        emu(a=2.0, x=np.ones(512, np.float32), y=y)
    with pytest.raises(LaunchError, match="precondition"):   # n % 256 == 0
        emu(a=2.0, x=np.ones(1000, np.float32), y=np.ones(1000, np.float32))
    x, y = np.ones(512, np.float32), np.ones(512, np.float32)
    emu(a=2.0, x=x, y=y)            # half the grid: a stale plan would run out of bounds
    assert (y == 3).all()


def test_a_dtype_change_is_refused_after_a_cached_call(emu):
    x, y = np.ones(256, np.float32), np.ones(256, np.float32)
    emu(a=1.0, x=x, y=y)
    with pytest.raises(LaunchError, match="dtype is int32"):   # the same strides
        emu(a=1.0, x=np.ones(256, np.int32), y=y)
    with pytest.raises(LaunchError, match="dtype is float64"):
        emu(a=1.0, x=np.ones(256), y=y)
    with pytest.raises(LaunchError, match="dtype is float64"):
        emu(a=1.0, x=x, y=np.ones(256))


def test_strides_are_part_of_the_signature(emu):
    x = np.arange(512, dtype=np.float32)
    y = np.zeros(512, np.float32)
    emu(a=1.0, x=x[:256], y=y[:256])        # contiguous
    emu(a=1.0, x=x[::2], y=y[::2])          # same shape, strided: copied in and out
    expect = np.zeros(512, np.float32)
    expect[:256] = x[:256]
    expect[::2] += x[::2]
    np.testing.assert_array_equal(y, expect)


def test_writability_and_aliasing_are_checked_at_every_call(emu):
    x, y = np.ones(256, np.float32), np.ones(256, np.float32)
    emu(a=1.0, x=x, y=y)
    frozen = np.ones(256, np.float32)
    frozen.flags.writeable = False
    with pytest.raises(LaunchError, match="read-only"):
        emu(a=1.0, x=x, y=frozen)
    with pytest.raises(LaunchError, match="overlap"):
        emu(a=1.0, x=y, y=y)
    with pytest.raises(LaunchError, match="overlap"):
        emu(a=1.0, x=x, y=x)
    both = np.ones(512, np.float32)
    with pytest.raises(LaunchError, match="overlap"):
        emu(a=1.0, x=both[128:384], y=both[:256])
    emu(a=1.0, x=x, y=y)
    assert (y == 3).all()


def test_scalars_are_checked_at_every_call(record):
    k = rows_add.compile("record")
    x, out = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    k(k=3, x=x, out=out)
    assert any(type(a) is np.int32 and a == 3 for a in record[-1].args)
    with pytest.raises(LaunchError, match="does not fit in i32"):
        k(k=2 ** 40, x=x, out=out)
    with pytest.raises(LaunchError, match="i32"):
        k(k=1.5, x=x, out=out)
    k(k=-7, x=x, out=out)
    assert any(type(a) is np.int32 and a == -7 for a in record[-1].args)


def test_size_arguments_are_part_of_the_signature(record):
    k = rows_add.compile("record")
    x, out = np.ones((4, 8), np.float32), np.zeros((4, 8), np.float32)
    k(m=4, n=8, k=1, x=x, out=out)
    with pytest.raises(LaunchError, match="shape"):
        k(m=2, n=8, k=1, x=x, out=out)
    with pytest.raises(LaunchError, match="bound to 4 at compile time|shape"):
        rows_add.compile("record", m=4)(m=4, n=8, k=1, x=np.ones((3, 8), np.float32),
                                       out=np.zeros((3, 8), np.float32))


def test_other_argument_types_take_the_full_path(record, monkeypatch):
    k = saxpy.compile("record")
    full = _full_path_calls(monkeypatch)
    y = np.zeros(256, np.float32)
    for _ in range(2):
        k(a=1.0, x=np.ones(256, np.float32), y=y)
        k(a=1.0, x=_ArrayLike(np.ones(256, np.float32)), y=y)
    # the array-like's key is unhashable: both of its calls took the full path
    assert len(full) == 3


class _ArrayLike:
    def __init__(self, a):
        self.a = a

    def __array__(self, dtype=None, copy=None):
        return self.a


def test_the_emulator_fast_path_computes_the_same(emu, monkeypatch):
    full = _full_path_calls(monkeypatch)
    x = np.random.default_rng(0).random(1024, dtype=np.float32)
    y = np.ones(1024, np.float32)
    for a in (2.0, -1.0):
        emu(a=a, x=x, y=y)
    np.testing.assert_allclose(y, -1.0 * x + (2.0 * x + 1), rtol=1e-6)
    assert len(full) <= 1   # the module-scoped kernel may have seen this signature
