"""One translation unit per model (issue 17): several procs' kernels in ONE CUDA source,
compiled once (one g++ run for the emulator, one NVRTC run for the GPU) and cached: a
second compile of the same set builds nothing."""
import importlib.util
import pathlib

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.compiler import unit as unit_mod
from gpudsl.compiler.unit import clear_memory_cache, compile_unit
from gpudsl.errors import LaunchError
from gpudsl.stdlib import array_ops as ops
from gpudsl.stdlib.pointwise import plan_binary, plan_unary

ROOT = pathlib.Path(__file__).resolve().parents[2]


@pytest.fixture
def fresh_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDSL_CACHE_DIR", str(tmp_path / "cache"))
    clear_memory_cache()
    yield
    clear_memory_cache()


def _count(monkeypatch, module, name):
    calls = []
    real = getattr(module, name)

    def counted(*a, **k):
        calls.append(1)
        return real(*a, **k)
    monkeypatch.setattr(module, name, counted)
    return calls


def _procs():
    p, dims, bdims = plan_binary("add", (4, 6), (1, 6))
    return p, dims, bdims, plan_unary("relu", 24), plan_unary("silu", 24)


def test_one_emulator_build_for_the_unit_then_cache_hits(fresh_cache, monkeypatch):
    from gpudsl.runtime import emulator

    builds = _count(monkeypatch, emulator, "_compile")  # each g++ run
    add, dims, bdims, relu, silu = _procs()
    u = compile_unit([add, relu, silu], "emulator")
    assert len(builds) == 1 and u.names == ["add_bf_v2", "relu_v4", "silu_v4"]
    assert u.source.count("__global__") == 3
    # the same set again: found in memory, nothing built, not even loaded
    before = dict(unit_mod.stats)
    u2 = compile_unit([add, relu, silu], "emulator")
    assert len(builds) == 1 and u2.key == u.key and u2.backend is u.backend
    assert unit_mod.stats["memory_hits"] == before["memory_hits"] + 1
    # a new process (memory forgotten): the disk cache has the shared object
    clear_memory_cache()
    compile_unit([add, relu, silu], "emulator")
    assert len(builds) == 1
    # a different set is a different unit
    compile_unit([add, relu], "emulator")
    assert len(builds) == 2


def test_launch_by_name_and_by_proc_matches_numpy(fresh_cache):
    add, dims, bdims, relu, silu = _procs()
    u = compile_unit([add, relu, silu], "emulator")
    rng = np.random.default_rng(0)
    x = rng.standard_normal(24).astype(np.float32)
    y = np.empty_like(x)
    u.launch("relu_v4", x=x, out=y)
    np.testing.assert_array_equal(y, np.maximum(x, 0))
    u.launch(silu, x=x, out=y)
    np.testing.assert_allclose(y, x / (1 + np.exp(-x)), rtol=1e-5, atol=1e-6)
    a = rng.standard_normal((4, 6)).astype(np.float32)
    b = rng.standard_normal((1, 6)).astype(np.float32)
    o = np.empty_like(a)
    u.kernel(add)(a=a.reshape(dims), b=b.reshape(bdims), out=o.reshape(dims))
    np.testing.assert_allclose(o, a + b, rtol=1e-6)
    # arguments are checked as a Kernel call checks them
    with pytest.raises(LaunchError):
        u.launch("relu_v4", x=x, out=np.empty(23, np.float32))
    with pytest.raises(LaunchError, match="no proc named"):
        u.launch("nope", x=x)


def test_same_proc_with_different_bindings_gets_its_own_kernel_names(fresh_cache):
    relu = plan_unary("relu", 24)
    u = compile_unit([(relu, dict(n=24)), (relu, dict(n=48))], "emulator")
    assert len(u.names) == 2 and len(set(u.kernels)) == 2
    for n in (24, 48):
        x = np.linspace(-1, 1, n, dtype=np.float32)
        y = np.empty_like(x)
        u.launch(u.name_of(relu, n=n), x=x, out=y)
        np.testing.assert_array_equal(y, np.maximum(x, 0))
    with pytest.raises(LaunchError):  # the bound size is enforced
        u.launch(u.name_of(relu, n=24), x=np.zeros(48, np.float32),
                 out=np.zeros(48, np.float32))


def test_one_nvrtc_compile_for_the_unit_then_cache_hits(fresh_cache, monkeypatch):
    pytest.importorskip("cuda.bindings.nvrtc")
    from gpudsl.runtime import nvrtc

    runs = _count(monkeypatch, nvrtc, "_compile")
    add, dims, bdims, relu, silu = _procs()
    from gpudsl.stdlib.matmul import matmul_kernel
    mm, _ = matmul_kernel((128, 784), (784, 1000))
    u = compile_unit([mm, add, relu, silu], "cuda")  # NVRTC needs no GPU
    assert len(runs) == 1 and len(u.backend.cubin) > 0
    assert set(u.backend.resources) >= set(u.kernels)  # ptxas saw every kernel
    clear_memory_cache()
    compile_unit([mm, add, relu, silu], "cuda")
    assert len(runs) == 1  # the cubin came from the disk cache


def _mnist():
    spec = importlib.util.spec_from_file_location("mnist_mlp", ROOT / "examples/mnist_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(np.random.default_rng(0))


def test_model_kernels_come_from_one_unit_compiled_once(fresh_cache, monkeypatch):
    from gpudsl.runtime import emulator

    builds = _count(monkeypatch, emulator, "_compile")
    y, reference = _mnist()
    model = graph.compile(y, device="emulator")
    assert len(builds) == 1  # every kernel of the model in one g++ run
    # the unit holds exactly the launch list's procs: the two fused kernels
    assert model.unit is not None and model.launches.procs == [fk.proc for fk in
                                                              model._fused.values()]
    assert [model.unit.name_of(p) for p in model.launches.procs] == model.unit.names
    assert len(model.unit.names) == 2 and [k.fused for k in model.kernels] == [True, True]

    def no_own_kernels(*a, **k):  # a kernel compiled on its own would be a second unit
        raise AssertionError("a proc compiled outside the model's unit")
    monkeypatch.setattr(ops, "_kernel", no_own_kernels)
    from gpudsl.compiler import compiled_kernel as kernel_mod
    monkeypatch.setattr(kernel_mod, "Kernel", no_own_kernels)
    images = np.random.default_rng(1).standard_normal((128, 28, 28)).astype(np.float32)
    out = model.evaluate({"input": images})
    np.testing.assert_allclose(out, reference(images), atol=1e-3, rtol=1e-3)
    # a second compile of the same model is a cache hit: nothing is built
    before = unit_mod.stats["built"]
    again = graph.compile(y, device="emulator")
    assert len(builds) == 1 and again.unit.key == model.unit.key
    assert unit_mod.stats["built"] == before and again.unit.backend is model.unit.backend
    np.testing.assert_array_equal(again.evaluate({"input": images}), out)
