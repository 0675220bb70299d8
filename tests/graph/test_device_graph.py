"""Device arrays in and out, and the evaluation replayed as one CUDA graph (issue 17).

On this machine (no GPU): the node-by-node launch list that the GPU executor runs is
checked on the emulator (same kernels as the ops path: the same unit key; the same
results; buffers persisting), and the capture logic of CapturedGraph is checked against
a recording fake driver (the order of driver calls, capture once, replay, cleanup on a
failure).  The GPU tests run the real thing and skip without a driver."""
import ctypes
import importlib.util
import pathlib

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.compiler.unit import compile_unit
from gpudsl.graph.launches import HostExecutor, launch_list
from gpudsl.runtime import graphs

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _mnist(batch=128):
    spec = importlib.util.spec_from_file_location("mnist_mlp", ROOT / "examples/mnist_mlp.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod.build(np.random.default_rng(0), batch=batch)


def _kv_graph():
    """A tiny attention-like step with a KV cache in a buffer written by
    ReplaceSliceNode at positions given as int64 inputs."""
    rng = np.random.default_rng(2)
    w = rng.standard_normal((8, 8)).astype(np.float32)
    x = graph.InputTensor("x", "float32", [2, 8])
    b, e = graph.InputTensor("b", "int64", [1]), graph.InputTensor("e", "int64", [1])
    cache = graph.BufferTensor("float32", [6, 8]).replace(x @ graph.ConstantTensor(w), b, e)
    y = (cache.permute([1, 0]).reshape([8, 6]) * graph.ConstantTensor(
        np.full((1, 6), 0.5, np.float32))).relu()
    return y, w


def test_launch_list_runs_the_same_kernels_with_the_same_results():
    y, reference = _mnist(batch=4)
    model = graph.compile(y, device="emulator")
    ll = launch_list(model)
    assert [s.name for s in ll.steps] == [model.unit.entries[model.unit.name_of(p)].ir.name
                                          for p in model.kernel_procs()]
    unit = compile_unit(ll.procs, "emulator")
    assert unit.key == model.unit.key  # the same translation unit: a cache hit
    images = np.random.default_rng(1).standard_normal((4, 28, 28)).astype(np.float32)
    out = HostExecutor(model, ll, unit).run({"input": images})
    np.testing.assert_allclose(out, reference(images), atol=1e-3, rtol=1e-3)
    np.testing.assert_array_equal(out, model.evaluate({"input": images}))


def test_launch_list_writes_buffers_in_place_across_runs():
    y, w = _kv_graph()
    model = graph.compile(y, device="emulator")
    ll = launch_list(model)
    ex = HostExecutor(model, ll, compile_unit(ll.procs, "emulator"))
    rng = np.random.default_rng(3)
    cache = np.zeros((6, 8), np.float32)
    for start in (0, 2, 4):
        x = rng.standard_normal((2, 8)).astype(np.float32)
        got = ex.run({"x": x, "b": np.array([start]), "e": np.array([start + 2])})
        cache[start:start + 2] = x @ w
        np.testing.assert_allclose(got, np.maximum(cache.T * 0.5, 0), rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(model.buffers[0], cache, rtol=1e-5, atol=1e-5)


class FakeDriver:
    """Records the stream and graph calls; hands out handles; can fail one call."""

    def __init__(self, fail=None):
        self.calls, self.fail, self.next = [], fail, 100

    def __getattr__(self, name):
        def call(*args):
            self.calls.append(name)
            if name == self.fail:
                return 999
            for a in args:  # out-parameters: a fresh handle
                if isinstance(a, type(ctypes.byref(ctypes.c_void_p()))):
                    a._obj.value = self.next
                    self.next += 1
            return 0
        return call


@pytest.fixture
def fake(monkeypatch):
    drv = FakeDriver()
    monkeypatch.setattr(graphs, "_api", lambda: drv)
    monkeypatch.setattr(graphs, "check", lambda res, what: None if res == 0 else
                        (_ for _ in ()).throw(RuntimeError(what)))
    return drv


def test_capture_once_then_replay(fake):
    s = graphs.Stream()
    enqueued = []

    def enqueue(stream):
        assert fake.calls[-1] == "cuStreamBeginCapture_v2"  # inside the capture
        enqueued.append(int(stream))
    g = graphs.CapturedGraph(s, enqueue)
    assert enqueued == [int(s)] and fake.calls == [
        "cuStreamCreate", "cuStreamBeginCapture_v2", "cuStreamEndCapture",
        "cuGraphInstantiateWithFlags"]
    for _ in range(3):
        g.replay()
    assert g.replays == 3 and len(enqueued) == 1  # replays launch the graph only
    assert fake.calls[4:] == ["cuGraphLaunch"] * 3
    g.close()
    assert fake.calls[-2:] == ["cuGraphExecDestroy", "cuGraphDestroy"]


def test_a_failure_while_capturing_ends_the_capture_and_raises(fake):
    s = graphs.Stream()

    def enqueue(stream):
        raise ValueError("a launch failed")
    with pytest.raises(ValueError):
        graphs.CapturedGraph(s, enqueue)
    assert fake.calls[-2:] == ["cuStreamEndCapture", "cuGraphDestroy"]
    assert "cuGraphInstantiateWithFlags" not in fake.calls


def test_a_failed_instantiation_destroys_the_graph(fake):
    fake.fail = "cuGraphInstantiateWithFlags"
    s = graphs.Stream()
    with pytest.raises(RuntimeError):
        graphs.CapturedGraph(s, lambda s: None)
    assert fake.calls[-2:] == ["cuGraphInstantiateWithFlags", "cuGraphDestroy"]


def test_device_inputs_on_the_emulator_are_refused():
    class Dev:
        __cuda_array_interface__ = {"shape": (2, 8), "typestr": "<f4", "data": (0, False),
                                    "version": 3}
    y, _ = _kv_graph()
    model = graph.compile(y, device="emulator")
    with pytest.raises(graph.GraphError, match="emulator"):
        model.evaluate({"x": Dev(), "b": np.array([0]), "e": np.array([2])})


# ------------------------------------------------------------------ on a GPU


@pytest.mark.gpu
def test_mnist_on_device_arrays_replayed_as_a_cuda_graph():
    torch = pytest.importorskip("torch")
    y, reference = _mnist()
    model = graph.compile(y, device="cuda")
    images = np.random.default_rng(1).standard_normal((128, 28, 28)).astype(np.float32)
    x = torch.from_numpy(images).cuda()
    out = model.evaluate({"input": x})
    assert hasattr(out, "__cuda_array_interface__")  # a device array out
    got = torch.as_tensor(out, device="cuda").cpu().numpy()
    np.testing.assert_allclose(got, reference(images), atol=1e-3, rtol=1e-3)
    ex = model._device_exec
    assert ex.graph is not None and ex.graph.replays == 1
    out2 = model.evaluate({"input": x * 2})
    assert ex.graph.replays == 2  # captured once, replayed
    got2 = torch.as_tensor(out2, device="cuda").cpu().numpy()
    np.testing.assert_allclose(got2, reference(images * 2), atol=1e-3, rtol=1e-3)


@pytest.mark.gpu
def test_buffers_persist_on_the_device_and_ranges_are_checked():
    torch = pytest.importorskip("torch")
    y, w = _kv_graph()
    model = graph.compile(y, device="cuda")
    rng = np.random.default_rng(3)
    cache = np.zeros((6, 8), np.float32)
    for start in (0, 2, 4):
        x = rng.standard_normal((2, 8)).astype(np.float32)
        out = model.evaluate({"x": torch.from_numpy(x).cuda(),
                              "b": torch.tensor([start]).cuda(),
                              "e": torch.tensor([start + 2]).cuda()})
        cache[start:start + 2] = x @ w
        got = torch.as_tensor(out, device="cuda").cpu().numpy()
        np.testing.assert_allclose(got, np.maximum(cache.T * 0.5, 0), rtol=1e-4, atol=1e-4)
    with pytest.raises(graph.GraphError, match="nothing was written"):
        model.evaluate({"x": torch.zeros(2, 8).cuda(), "b": torch.tensor([5]).cuda(),
                        "e": torch.tensor([7]).cuda()})
    np.testing.assert_allclose(model._device_exec.buffer_values()[0], cache, rtol=1e-4,
                               atol=1e-4)
