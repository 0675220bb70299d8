"""Device arrays in and out, and the evaluation replayed as one CUDA graph (issue 17).

On this machine (no GPU): the model's one launch list, which both executors run, is
checked on the host executor (its steps are ``model.kernels``, its procs the model's
unit; results equal to ``gpudsl.ops`` node by node and to numpy; buffers persisting),
the buffers' one state across a host and a device path (a fake device executor holding
its own copy), and the capture logic of CapturedGraph against a recording fake driver
(the order of driver calls, capture once, replay, cleanup on a failure).  The GPU tests run the real thing and skip without a driver."""
import ctypes
import importlib.util
import pathlib

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.compiler.unit import compile_unit
from gpudsl.stdlib import array_ops as ops
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


def _by_ops(model, values, buffers):
    """The graph evaluated node by node through ``gpudsl.ops`` (each op picking and
    compiling its own kernel, allocating its outputs): the reference path."""
    nodes, vals = model.graph.nodes, {}
    bufs = iter(buffers)
    for n in nodes:
        a = [vals[id(m)] for m in n.inputs]
        op = n.op
        if op == "InputTensor":
            v = values[n.attrs["name"]]
        elif op == "ConstantTensor":
            v = model.constants[n.attrs["name"]]
        elif op == "BufferTensor":
            v = next(bufs)
        elif op == "ReshapeNode":
            v = ops.reshape(a[0], n.attrs["shape"])
        elif op == "SliceNode":
            v = a[0][n.attrs["begin"]:n.attrs["end"]]
        elif op == "ReplaceSliceNode":
            v = ops.replace_slice(*a)
        elif op == "SlicedSoftmaxNode":
            v = ops.sliced_softmax(a[0], a[1] if len(a) == 2 else n.attrs["prefix"])
        elif op == "PermuteNode":
            v = ops.permute(a[0], n.attrs["perm"])
        else:
            v = {"SumNode": ops.add, "HadamardProductNode": ops.mul, "MatMulNode": ops.matmul,
                 "ReLUNode": ops.relu, "SiLUNode": ops.silu, "RMSNormNode": ops.rms_norm,
                 "ComplexHadamardProductNode": ops.complex_hadamard_product}[op](*a)
        vals[id(n)] = v
    return np.array(vals[id(model.graph.result)])


def test_the_launch_list_is_the_models_kernels_all_in_its_unit():
    y, reference = _mnist(batch=4)
    model = graph.compile(y, device="emulator")
    ll = model.launches
    assert [s.name for s in ll.steps] == [k.name for k in model.kernels]
    assert [s.nodes for s in ll.steps] == [k.nodes for k in model.kernels]
    assert all(s.fused for s in ll.steps) and len(ll.steps) == 2
    assert sorted(model.unit.names) == sorted(model.unit.name_of(p) for p in ll.procs)
    assert compile_unit(ll.procs, "emulator").key == model.unit.key  # a cache hit
    assert list(ll.inputs) == ["input"] and ll.result.kind == "arena"
    images = np.random.default_rng(1).standard_normal((4, 28, 28)).astype(np.float32)
    out = model.evaluate({"input": images})
    np.testing.assert_allclose(out, reference(images), atol=1e-3, rtol=1e-3)
    np.testing.assert_allclose(out, _by_ops(model, {"input": images}, []), atol=1e-4,
                               rtol=1e-4)


def test_host_executor_against_the_ops_path_with_buffers_across_runs():
    """The KV graph (matmul into a buffer by ReplaceSliceNode, permute, reshape view,
    fused mul+relu): the launch list on the host executor against ``gpudsl.ops`` node
    by node, on a copy of the buffers, over three calls."""
    y, w = _kv_graph()
    model = graph.compile(y, device="emulator")
    assert [(k.ops, k.fused) for k in model.kernels] == [
        (("MatMulNode",), False), (("ReplaceSliceNode",), False), (("PermuteNode",), False),
        (("HadamardProductNode", "ReLUNode"), True)]
    rng = np.random.default_rng(3)
    cache = np.zeros((6, 8), np.float32)
    ops_buffers = [np.zeros((6, 8), np.float32)]
    for start in (0, 2, 4):
        v = {"x": rng.standard_normal((2, 8)).astype(np.float32),
             "b": np.array([start]), "e": np.array([start + 2])}
        got = model.evaluate(v)
        cache[start:start + 2] = v["x"] @ w
        np.testing.assert_allclose(got, np.maximum(cache.T * 0.5, 0), rtol=1e-5, atol=1e-5)
        np.testing.assert_allclose(got, _by_ops(model, v, ops_buffers), rtol=1e-6,
                                   atol=1e-6)
    np.testing.assert_allclose(model.buffers[0], cache, rtol=1e-5, atol=1e-5)
    np.testing.assert_array_equal(model.buffers[0], ops_buffers[0])


def test_whole_model_nodes_on_the_launch_list_against_the_ops_path():
    rng = np.random.default_rng(4)
    x = graph.InputTensor("x", "float32", [3, 8])
    p = graph.InputTensor("p", "int64", [1])
    nw = rng.standard_normal(8).astype(np.float32)
    rot = rng.standard_normal((1, 4, 2)).astype(np.float32)
    h = x.rms_norm(graph.ConstantTensor(nw))
    c = h.reshape([3, 4, 2]).complex_hadamard_product(graph.ConstantTensor(rot))
    y = c.reshape([3, 8]).sliced_softmax(p).sliced_softmax(5)
    model = graph.compile(y, device="emulator")
    assert [k.ops for k in model.kernels] == [
        ("RMSNormNode",), ("ComplexHadamardProductNode",), ("SlicedSoftmaxNode",),
        ("SlicedSoftmaxNode",)]
    for prefix in (0, 3, 8):
        v = {"x": rng.standard_normal((3, 8)).astype(np.float32), "p": np.array([prefix])}
        np.testing.assert_allclose(model.evaluate(v), _by_ops(model, v, []), rtol=1e-6,
                                   atol=1e-6)


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


def test_numpy_inputs_on_a_gpu_model_run_on_the_device_executor(monkeypatch):
    """On a GPU model, numpy in and numpy out still runs where the constants and
    buffers live: the device executor (one upload of the inputs, its CUDA graph, one
    download), never the host executor, which copies every array in and out around
    every launch (the first GPU campaign: LLaMA at 8.6 tokens/s against numpy's 223)."""
    from gpudsl.graph import executors

    runs = []

    class Recording:
        def __init__(self, model, ll, unit, cuda_graph=True):
            self.cuda_graph = cuda_graph

        def upload(self, host):
            runs.append("upload")

        def run(self, values, device_out):
            runs.append(("run", sorted(values), device_out))
            return np.zeros((8, 6), np.float32)
    monkeypatch.setattr(executors, "DeviceExecutor", Recording)
    monkeypatch.setattr(ops, "backend", lambda: "cuda")  # NVRTC compiles without a GPU
    y, _ = _kv_graph()
    model = graph.compile(y, device="cuda")
    monkeypatch.setattr(model._host, "run", lambda *a: pytest.fail("host executor used"))
    x = np.ones((2, 8), np.float32)
    out = model.evaluate({"x": x, "b": np.array([0]), "e": np.array([2])})
    assert isinstance(out, np.ndarray) and out.shape == (8, 6)
    model.evaluate({"x": x, "b": np.array([2]), "e": np.array([4])})
    assert runs == ["upload", ("run", ["b", "e", "x"], False), ("run", ["b", "e", "x"], False)]
    with pytest.raises(graph.GraphError, match="range"):  # still checked on the host first
        model.evaluate({"x": x, "b": np.array([5]), "e": np.array([7])})
    assert len(runs) == 3


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
    np.testing.assert_allclose(model.buffers[0], cache, rtol=1e-4, atol=1e-4)


@pytest.mark.gpu
def test_numpy_inputs_on_the_gpu_equal_the_emulator_and_keep_the_buffers():
    from gpudsl.graph.executors import check_inputs

    y, _ = _kv_graph()
    gpu, ref = graph.compile(y, device="cuda"), graph.compile(y, device="cuda")
    rng = np.random.default_rng(4)
    for k in range(3):
        v = {"x": rng.standard_normal((2, 8)).astype(np.float32),
             "b": np.array([2 * k]), "e": np.array([2 * k + 2])}
        want = ref._host.run(check_inputs(ref, v))  # launch by launch, copies around each
        np.testing.assert_allclose(gpu.evaluate(v), want, rtol=1e-5, atol=1e-6)
    assert gpu._device_exec is not None and gpu._device_exec.graph.replays == 3
    np.testing.assert_allclose(gpu.buffers[0], ref.buffers[0], rtol=1e-5, atol=1e-6)
