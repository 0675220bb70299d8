"""Bad launches raise gpudsl.LaunchError (a gpudsl.Error) before anything runs."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import gpudsl
from gpudsl import LaunchError

from .procs import CORPUS


@functools.lru_cache(maxsize=None)
def kernel(name, target="emulator"):
    p, bindings, _ = CORPUS[name]
    return p.compile(target, **bindings)


def _saxpy_args(n=512):
    return dict(a=2.0, x=np.ones(n, np.float32), y=np.zeros(n, np.float32))


def _refused(kern, match, /, **args):
    before = {n: v.copy() for n, v in args.items() if isinstance(v, np.ndarray)}
    with pytest.raises(LaunchError, match=match) as info:
        kern(**args)
    assert isinstance(info.value, gpudsl.Error)
    for n, v in before.items():  # nothing ran
        np.testing.assert_array_equal(args[n], v)
    return info.value


@pytest.mark.parametrize("target", ["emulator", "cuda"])
def test_wrong_dtype(target):
    args = _saxpy_args()
    args["x"] = args["x"].astype(np.float64)
    e = _refused(kernel("saxpy", target), "'x' of saxpy holds f32, but the array's dtype is "
                 "float64", **args)
    assert "astype" in str(e)


@pytest.mark.parametrize("target", ["emulator", "cuda"])
def test_shape_mismatch(target):
    args = _saxpy_args()
    args["y"] = np.zeros(256, np.float32)
    _refused(kernel("saxpy", target), r"'y' of saxpy must have shape \[n\] = \(512,\) with "
             r"n=512 \(from x.shape\[0\]\), but its shape is \(256,\)", **args)


def test_wrong_number_of_dimensions():
    args = _saxpy_args()
    args["x"] = np.ones((512, 1), np.float32)
    _refused(kernel("saxpy"), "has 1 dimension", **args)


@pytest.mark.parametrize("target", ["emulator", "cuda"])
def test_violated_assert(target):
    _refused(kernel("saxpy", target), r"precondition of saxpy fails: `assert n % 256 == 0` "
             "with n=300", **_saxpy_args(300))


@pytest.mark.parametrize("target", ["emulator", "cuda"])
def test_aliasing_arrays(target):
    buf = np.zeros(1024, np.float32)
    _refused(kernel("saxpy", target), "'x' and 'y' of saxpy overlap in memory",
             a=1.0, x=buf[0:512], y=buf[256:768])
    same = np.zeros(512, np.float32)
    _refused(kernel("saxpy", target), "overlap", a=1.0, x=same, y=same)


def test_disjoint_views_of_one_buffer_are_fine():
    buf = np.zeros(1024, np.float32)
    kernel("saxpy")(a=1.0, x=buf[0:512], y=buf[512:1024])


@pytest.mark.parametrize("target", ["emulator", "cuda"])
def test_missing_argument(target):
    args = _saxpy_args()
    del args["y"]
    _refused(kernel("saxpy", target), "missing array argument 'y' of saxpy", **args)
    args = _saxpy_args()
    del args["a"]
    _refused(kernel("saxpy", target), r"missing argument 'a' \(f32\) of saxpy", **args)


def test_unknown_argument_and_bad_scalar():
    _refused(kernel("saxpy"), "saxpy has no parameter 'z'", z=1, **_saxpy_args())
    args = _saxpy_args()
    args["a"] = "two"
    _refused(kernel("saxpy"), "scalar 'a' of saxpy is f32", **args)


def test_index_parameter_missing_and_not_int():
    args = CORPUS["floor_ops"][2](np.random.default_rng(0))
    del args["k"]
    _refused(kernel("floor_ops"), "index 'k' of floor_ops is not given", **args)
    args["k"] = 1.5
    _refused(kernel("floor_ops"), "must be an integer", **args)


def test_inconsistent_sizes():
    k = kernel("matmul_tiled")
    a = np.ones((32, 48), np.float32)
    b = np.ones((32, 16), np.float32)  # k is 48 from a, 32 from b
    c = np.zeros((32, 16), np.float32)
    _refused(k, r"'b' of matmul_tiled must have shape \[k, n\]", a=a, b=b, c=c)


def test_explicit_size_disagreeing_with_shape():
    _refused(kernel("saxpy"), "must have shape", n=1024, **_saxpy_args())


def test_read_only_output():
    args = _saxpy_args()
    args["y"].flags.writeable = False
    _refused(kernel("saxpy"), "written by the proc but the array is read-only", **args)


def test_compile_time_binding_checked_at_launch():
    p = CORPUS["saxpy"][0]
    k = p.compile("emulator", n=512)
    k(**_saxpy_args(512))
    _refused(k, "bound to 512 at compile time", n=1024, **_saxpy_args(1024))
    _refused(k, "must have shape", **_saxpy_args(1024))


def test_gpu_array_on_emulator_is_refused():
    class FakeGpuArray:
        __cuda_array_interface__ = {"shape": (512,), "typestr": "<f4", "data": (4096, False),
                                    "version": 3}

    args = _saxpy_args()
    args["x"] = FakeGpuArray()
    _refused(kernel("saxpy"), "is a GPU array, but this kernel runs on the emulator", **args)


def test_cuda_target_without_driver_refuses_after_checks(monkeypatch):
    from gpudsl.runtime import driver

    monkeypatch.setattr(driver, "_available", False)
    k = kernel("saxpy", "cuda")
    # argument errors come first
    _refused(k, "precondition", **_saxpy_args(300))
    _refused(k, "no CUDA driver or GPU", **_saxpy_args())
