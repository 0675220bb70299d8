"""Every proc of the corpus: check() accepts it, NVRTC compiles it for sm_90, and the
emulator gives the interpreter's results."""
from __future__ import annotations

import functools

import numpy as np
import pytest

import gpudsl
from gpudsl.runtime.nvrtc import compile_cubin

from .procs import CHECKED, CORPUS


@functools.lru_cache(maxsize=None)
def emulator_kernel(name):
    p, bindings, _ = CORPUS[name]
    return p.compile("emulator", **bindings)


def _copy(args):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def _compare(name, got, want):
    for k, v in want.items():
        if isinstance(v, np.ndarray):
            if v.dtype.kind == "f":
                np.testing.assert_allclose(got[k], v, rtol=1e-5, atol=1e-5,
                                           err_msg=f"{name}: argument {k}")
            else:
                np.testing.assert_array_equal(got[k], v, err_msg=f"{name}: argument {k}")


@pytest.mark.parametrize("name", CHECKED)
def test_check_accepts(name):
    p, bindings, _ = CORPUS[name]
    report = p.check(**bindings)
    assert report.ok, str(report)


@pytest.mark.parametrize("name", list(CORPUS))
def test_nvrtc_sm90(name):
    from gpudsl.codegen import generate

    p, bindings, _ = CORPUS[name]
    if name == "late_block":
        bindings = {"bs": 48}
    m = generate(p, bindings)
    r = compile_cubin(m.source, "sm_90")
    assert r.cubin
    assert set(r.resources) == set(m.kernels)
    for res in r.resources.values():
        assert res.spill_stores_bytes == 0


@pytest.mark.parametrize("name", list(CORPUS))
def test_emulator_matches_interpreter(name):
    p, _, make = CORPUS[name]
    k = emulator_kernel(name)
    args = make(np.random.default_rng(7))
    want = _copy(args)
    gpudsl.interpret(p, **want)
    k(**args)
    _compare(name, args, want)


def test_emulator_second_call_and_other_sizes():
    p, _, _ = CORPUS["saxpy"]
    k = emulator_kernel("saxpy")
    for n in (256, 2048):
        x = np.arange(n, dtype=np.float32)
        y = np.ones(n, np.float32)
        k(a=3.0, x=x, y=y)
        np.testing.assert_array_equal(y, 3.0 * np.arange(n, dtype=np.float32) + 1)


def test_late_bound_thread_extent_specialises_per_size():
    k = emulator_kernel("late_block")
    for bs in (16, 100):
        x = np.ones((3, bs), np.float32)
        y = np.zeros((3, bs), np.float32)
        k(x=x, y=y)
        np.testing.assert_array_equal(y, 3 * x)
        assert f"constexpr int bs = {bs};" in k.source
        (kinfo,) = k.kernels.values()
        assert kinfo.block == (bs, 1, 1)


def test_non_contiguous_numpy_arrays_are_handled():
    k = emulator_kernel("saxpy")
    big = np.zeros(2048, np.float32)
    y = big[::2]  # a strided view: worked on as a contiguous copy, then written back
    x = np.ones(1024, np.float32)
    k(a=2.0, x=x, y=y)
    np.testing.assert_array_equal(big[::2], 2.0)
    np.testing.assert_array_equal(big[1::2], 0.0)


def test_resources_without_gpu():
    k = emulator_kernel("rowsum")
    res = k.resources["rowsum_k0"]
    assert res.shared_bytes == 256 * 4
    assert res.registers > 0


def test_positional_arguments():
    k = emulator_kernel("saxpy")
    x = np.ones(256, np.float32)
    y = np.ones(256, np.float32)
    k(256, 2.0, x, y)
    np.testing.assert_array_equal(y, 3.0)


def test_sixty_four_bit_indices_compile_and_run():
    from gpudsl.codegen import generate
    from gpudsl.runtime.emulator import build_emulator_module
    from gpudsl.compiler import signatures as _signatures

    p, _, make = CORPUS["matmul_tiled"]
    m = generate(p, {}, index_bits=64)
    assert "long long" in m.source and "const int " not in m.source
    compile_cubin(m.source, "sm_90")
    mod = build_emulator_module(m.source, _signatures(m))
    args = make(np.random.default_rng(3))
    want = _copy(args)
    gpudsl.interpret(p, **want)
    (k,) = m.kernels.values()
    (mm, kk), nn = args["a"].shape, args["b"].shape[1]
    env = {"m": mm, "n": nn, "k": kk}
    mod.launch(k.name, (nn // 16, mm // 16, 1), k.block,
               [np.int64(env[q.name]) if q.kind == "size" else args[q.name] for q in k.params])
    _compare("matmul64", args, want)


def test_index_width_choice():
    from gpudsl.codegen import generate, index_bits_for

    p = CORPUS["saxpy"][0]
    m = generate(p)
    assert m.index_bits == 32
    assert index_bits_for(m, {"n": 4096}) == 32
    assert index_bits_for(m, {"n": 2 ** 31 + 256}) == 64
    assert generate(p, {"n": 2 ** 32}).index_bits == 64
