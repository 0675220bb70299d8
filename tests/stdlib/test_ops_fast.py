"""The fast path of ``gpudsl.ops`` (``stdlib/ops_fast.py``): a call with the signature of
an earlier one replays its recipe; a changed shape, dtype, layout, backend or tuning
database must never reuse a stale one, and refusals stay refusals."""
from __future__ import annotations

import ml_dtypes
import numpy as np
import pytest

import gpudsl
from gpudsl import ops
from gpudsl.stdlib import array_ops as ops_mod
from gpudsl.stdlib import ops_fast

RNG = np.random.default_rng(0)


def _rand(*shape, dtype=np.float32):
    return RNG.standard_normal(shape).astype(dtype)


@pytest.fixture
def planned(monkeypatch):
    """Counts the calls that took the full path (their operands checked)."""
    ops_fast.forget()
    calls = []
    check = ops_mod.check_tensor

    def counted(*a, **k):
        calls.append(a[0])
        return check(*a, **k)
    monkeypatch.setattr(ops_mod, "check_tensor", counted)
    return calls


def test_a_repeated_signature_replays_its_recipe(planned):
    a, b = _rand(8, 64), _rand(8, 64)
    for _ in range(3):
        np.testing.assert_array_equal(ops.add(a, b), a + b)
        np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))
    assert planned == ["a", "b", "x"]   # checked once per signature


def test_shapes_and_broadcasts_are_planned_apart(planned):
    a = _rand(8, 64)
    for b in (_rand(8, 64), _rand(64), _rand(8, 1), _rand(1, 64), _rand(16, 64)[:8]):
        np.testing.assert_array_equal(ops.mul(a, b), a * b)
        np.testing.assert_array_equal(ops.mul(b, a), b * a)
    c = _rand(4, 32)
    np.testing.assert_array_equal(ops.add(c, c), c + c)
    with pytest.raises(gpudsl.Error, match="add"):
        ops.add(a, _rand(8, 32))


def test_dtypes_of_one_size_are_planned_apart(planned):
    x = np.linspace(-2, 2, 256).reshape(4, 64)
    h, b = x.astype(np.float16), x.astype(ml_dtypes.bfloat16)  # the same strides
    assert ops.add(h, h).dtype == np.float16
    out = ops.add(b, b)
    assert out.dtype == ml_dtypes.bfloat16
    np.testing.assert_array_equal(out, b + b)
    i = x.astype(np.int16)
    with pytest.raises(gpudsl.Error, match="int16"):
        ops.add(i, i)
    f = x.astype(np.float32)
    np.testing.assert_array_equal(ops.silu(b).astype(np.float32),
                                  ops.silu(b).astype(np.float32))
    with pytest.raises(gpudsl.Error, match="int32"):
        ops.relu(f.view(np.int32))   # the float32 array's strides, another dtype


def test_strides_are_part_of_the_signature(planned):
    a = _rand(64, 64)
    np.testing.assert_array_equal(ops.add(a, a), a + a)
    t = a.T                                      # the same shape, transposed strides
    np.testing.assert_array_equal(ops.add(t, a), t + a)
    np.testing.assert_array_equal(ops.relu(a[:, ::2][:32]), np.maximum(a[:, ::2][:32], 0))
    np.testing.assert_array_equal(ops.relu(a[:32, :32]), np.maximum(a[:32, :32], 0))


def test_a_new_tuning_database_drops_the_recipes(planned, monkeypatch):
    from gpudsl.autotune import db

    a = _rand(4, 64)
    ops.relu(a)
    ops.relu(a)
    assert planned == ["x"]
    db.wrote()       # a winner written by this process: the kernel choice is read again
    ops.relu(a)
    assert planned == ["x", "x"]
    monkeypatch.setenv("GPUDSL_TUNE_DB", "/nonexistent/other.sqlite")   # another database
    ops.relu(a)
    assert planned == ["x", "x", "x"]


def test_the_backend_is_part_of_the_signature(planned, monkeypatch):
    a = _rand(4, 64)
    ops.relu(a)
    seen = []
    monkeypatch.setattr(ops_mod, "backend", lambda: "elsewhere")
    monkeypatch.setattr(ops_mod, "_run", lambda p, **args: seen.append(p))
    ops.relu(a)          # planned anew for the other backend
    assert planned == ["x", "x"] and len(seen) == 1


def test_torch_cpu_tensors(planned):
    torch = pytest.importorskip("torch")
    a = torch.randn(8, 64)
    for _ in range(2):
        out = ops.add(a, a)
        assert isinstance(out, torch.Tensor)
        torch.testing.assert_close(out, a + a)
    assert planned == ["a", "b"]
    with pytest.raises(gpudsl.Error, match="requires grad"):
        ops.add(a.clone().requires_grad_(), a)
    with torch.no_grad():
        torch.testing.assert_close(ops.add(a.clone().requires_grad_(), a), a + a)


def test_a_strided_operand_is_made_contiguous_each_time(planned, monkeypatch):
    from gpudsl.runtime.backends import BACKENDS
    from gpudsl.runtime.recording import RecordingBackend

    monkeypatch.setitem(BACKENDS, "record", RecordingBackend)
    monkeypatch.setattr(ops_mod, "backend", lambda: "record")
    x, y = _rand(128), _rand(64)
    for operand in (x[:64], x[::2], x[:64], x[::2]):   # one shape, two layouts
        ops.add(operand, y)
        arrays = [a for a in RecordingBackend.log[-1].args if isinstance(a, np.ndarray)]
        assert len(arrays) == 3 and all(a.flags.c_contiguous for a in arrays)
    assert planned == ["a", "b", "a", "b"]


# ------------------------------------------------- the merged ops: ranks to 6, halves, layouts

BF16 = ml_dtypes.bfloat16


def _layouts(v):
    """What a kernel is given: the array's type, shape, strides and dtype (a size: its
    value)."""
    if not hasattr(v, "shape"):
        return v
    return type(v), tuple(v.shape), tuple(v.strides), str(v.dtype)


@pytest.fixture
def launches(monkeypatch):
    """Every launch of the ops (proc and arguments' layouts); the kernels still run."""
    log, run = [], ops_mod._run

    def recorded(p, **args):
        log.append((p, {k: _layouts(v) for k, v in args.items()}))
        run(p, **args)
    monkeypatch.setattr(ops_mod, "_run", recorded)
    return log


def _strided(x):
    """``x``'s values in a layout that is not contiguous (every other element)."""
    wide = np.repeat(x, 2, axis=-1)
    return wide[..., ::2]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("sa, sb", [((2, 3, 4, 5), (2, 1, 4, 1)),      # four axes
                                    ((2, 2, 3, 2, 2, 3), (2, 1, 3, 1, 2, 1)),   # six
                                    ((3, 1, 2), (2, 1, 3, 4, 2)),      # lifted, swapped
                                    ((4, 1), (4, 5))])                 # swapped
def test_a_replay_launches_what_the_first_call_did(planned, launches, sa, sb, dtype):
    a, b = _rand(*sa, dtype=dtype), _strided(_rand(*sb, dtype=dtype))
    for op, args, want in ((ops.add, (a, b), a + b), (ops.mul, (b, a), b * a),
                           (ops.relu, (b,), np.maximum(b, 0))):
        first, again = op(*args), op(*args)
        assert launches[-1] == launches[-2]   # the same kernel, on the same layouts
        for out in (first, again):
            assert out.dtype == want.dtype and out.shape == want.shape
            np.testing.assert_array_equal(out, want)
    assert planned == ["a", "b", "a", "b", "x"]   # each signature checked once


def test_torch_cpu_tensors_of_five_axes_in_bfloat16(planned):
    torch = pytest.importorskip("torch")
    a = torch.randn(2, 3, 1, 4, 5).bfloat16()
    b = torch.randn(5, 2, 4, 1, 3).bfloat16().permute(1, 4, 3, 2, 0)   # not contiguous
    for _ in range(2):
        out = ops.add(a, b)
        assert isinstance(out, torch.Tensor) and out.dtype == torch.bfloat16
        np.testing.assert_array_equal(out.float().numpy(), (a + b).float().numpy())
    assert planned == ["a", "b"]


def test_refusals_are_refused_each_time(planned):
    f, h = _rand(2, 64), _rand(2, 64, dtype=np.float16)
    for _ in range(2):
        with pytest.raises(gpudsl.Error, match="add: mixed precisions"):
            ops.add(f, h)
        with pytest.raises(gpudsl.Error, match="7 dimension"):
            ops.relu(f.reshape(1, 1, 1, 1, 1, 2, 64))
    assert len(ops_fast._RECIPES) == 0


@pytest.mark.filterwarnings("ignore::PendingDeprecationWarning")   # np.matrix
def test_an_ndarray_subclass_is_made_an_ndarray_each_time(planned):
    f = _rand(3, 64)
    m = np.matrix(f)   # reshaped, a matrix stays two-dimensional: the kernel needs an ndarray
    for _ in range(2):
        for out, want in ((ops.relu(m), np.maximum(f, 0)), (ops.add(m, f), f + f)):
            assert type(out) is np.ndarray
            np.testing.assert_array_equal(out, want)


def test_a_failed_call_keeps_no_recipe(planned, monkeypatch):
    a = _rand(4, 64)
    run = ops_mod._run

    def failing(p, **args):
        raise RuntimeError("the launch failed")
    monkeypatch.setattr(ops_mod, "_run", failing)
    with pytest.raises(RuntimeError):
        ops.relu(a)
    monkeypatch.setattr(ops_mod, "_run", run)
    np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))   # planned again
    np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))   # its recipe
    assert planned == ["x", "x"]


def test_a_replaced_node_drops_the_recipes(planned):
    import dataclasses

    from gpudsl.stdlib.node_registry import get, register

    a = _rand(4, 64)
    ops.relu(a)
    decl, seen = get("relu"), []

    def launch(shapes, attrs, backend):
        seen.append(shapes)
        return decl.launch(shapes, attrs, backend)
    register(dataclasses.replace(decl, launch=launch))
    try:
        np.testing.assert_array_equal(ops.relu(a), np.maximum(a, 0))
        assert seen == [((4, 64),)]   # the new declaration's kernel choice
    finally:
        register(decl)
    ops.relu(a)
    assert planned == ["x", "x", "x"]


def test_a_recipe_allocates_cuda_results_with_the_dtype_found_once():
    """The result of a recipe on CUDA tensors: ``new_empty`` with the torch dtype the
    first call found (a stand-in tensor: no GPU here); CPU-side arrays as before."""
    torch = pytest.importorskip("torch")

    class Cuda:
        is_cuda = True

        def new_empty(self, shape, dtype):
            return ("empty", shape, dtype)
    alloc = ops_fast.allocator(Cuda(), np.float16)
    assert alloc(Cuda(), (2, 3)) == ("empty", (2, 3), torch.float16)
    assert ops_fast.allocator(Cuda(), ml_dtypes.bfloat16)(Cuda(), (4,))[2] == torch.bfloat16
    out = ops_fast.allocator(np.zeros(2, np.float32), np.float32)(None, (5,))
    assert type(out) is np.ndarray and out.shape == (5,) and out.dtype == np.float32


def test_a_replay_runs_the_kernels_kept_entry_and_falls_back_on_a_miss(planned, monkeypatch):
    """From the second call of a signature, a recipe runs the entry its kernel kept for
    the first call (skipping the kernel's own key), with results as before; when the
    entry cannot take a call (Miss), the kernel's full call runs."""
    from gpudsl.compiler.fast_call import Miss
    from gpudsl.compiler.compiled_kernel import Kernel

    a, b = _rand(4, 64), _rand(4, 64)
    np.testing.assert_array_equal(ops.add(a, b), a + b)   # planned, its recipe kept
    np.testing.assert_array_equal(ops.add(a, b), a + b)   # the kernel's entry found
    calls = []
    real = Kernel.__call__
    monkeypatch.setattr(Kernel, "__call__", lambda self, *args, **kw: (
        calls.append(len(args)), real(self, *args, **kw))[1])
    for _ in range(3):
        c = _rand(4, 64)
        np.testing.assert_array_equal(ops.add(a, c), a + c)
    assert calls == []
    recipe = ops_fast.lookup("add", ops_mod.backend(), (a, b))
    kept = next(cell.cell_contents for cell in recipe.__closure__
                if isinstance(cell.cell_contents, list) and len(cell.cell_contents) == 2)
    entry = kept[1]

    def miss(args):
        raise Miss
    kept[1] = miss
    np.testing.assert_array_equal(ops.add(a, b), a + b)
    assert len(calls) == 1   # through the kernel
    kept[1] = entry
    assert planned == ["a", "b"]


@pytest.mark.parametrize("dtype", [np.float32, np.float16, BF16])
@pytest.mark.parametrize("form", ["plain", "vector", "w.T", "strided"])
def test_matmul_replays_its_recipe(planned, launches, dtype, form):
    """H200 bench: ``ops.matmul`` took 0.28-0.52 ms of host time per call (checks and
    planning each time; torch 0.04).  A repeated signature now replays the first
    call's kernel on the same views, checking nothing again."""
    a, w = _rand(32, 64, dtype=dtype), _rand(48, 64, dtype=dtype)
    b = {"plain": w.T.copy(), "vector": w.T.copy(), "w.T": w.T, "strided": _strided(w.T)}[form]
    if form == "vector":
        a = a[0].copy()
    want = (a.astype(np.float32) @ b.astype(np.float32))
    first = ops.matmul(a, b)
    again = ops.matmul(a, b)
    assert launches[-1] == launches[-2]   # the same kernel, on the same layouts
    assert first.dtype == again.dtype == np.dtype(dtype) and first.shape == want.shape
    np.testing.assert_array_equal(first, again)
    tol = 1e-4 if dtype == np.float32 else 2e-2
    np.testing.assert_allclose(first.astype(np.float32), want, rtol=tol, atol=tol * 8)
    assert planned == ["a", "b"]          # checked once
    other = ops.matmul(a, b[:, :16].copy())   # another shape: planned on its own
    assert other.shape == want[..., :16].shape and planned == ["a", "b", "a", "b"]


def test_matmul_with_options_is_checked_each_time(planned):
    a, b = _rand(32, 64), _rand(64, 32)
    for _ in range(2):
        ops.matmul(a, b, stages=1)   # an option: planned each time
        ops.matmul(a, b, "fp32")     # the default precision: the plain call's recipe
    assert planned == ["a", "b"] * 3
    with pytest.raises(gpudsl.Error, match="matmul"):
        ops.matmul(a, _rand(32, 32))
    with pytest.raises(gpudsl.Error, match="matmul"):
        ops.matmul(a.astype(np.float16), b)
