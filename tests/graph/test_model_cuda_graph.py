"""A GPU model's evaluation as one CUDA graph, on the recording fake driver
(``gpudsl/runtime/fake_driver.py``: the model compiled for real by NVRTC, nothing run;
device memory reads as zeros): captured at the first call and replayed after, the
result copied out at every call (never a view of the arena the graph writes), no
module loaded while capturing, ``cuda_graph=False`` launching every kernel, the
constants the model's own and changed only by ``update_constants`` (in place on the
device: the graph is replayed, not captured again), and the LLaMA decode step
through it.  The values are checked on the emulator."""
from __future__ import annotations

import importlib.util
import pathlib
import sys
from dataclasses import replace

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.runtime import fake_driver

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _graph(w):
    x = graph.InputTensor("x", "float32", [4, 8])
    return (x @ graph.ConstantTensor(w, name="w")).relu()


@pytest.fixture
def fake():
    with fake_driver.installed() as drv:
        yield drv


def _between(calls, start, end):
    i = calls.index(start)
    return calls[i + 1:calls.index(end, i)]


def test_captured_at_the_first_call_and_replayed_after(fake):
    w = np.ones((8, 8), np.float32)
    model = graph.compile(_graph(w))
    assert model.device == "cuda" and model.cuda_graph
    x = np.ones((4, 8), np.float32)
    outs = [model.evaluate({"x": x}) for _ in range(3)]
    steps = len(model.kernels)
    assert fake.calls.count("cuStreamBeginCapture_v2") == 1 and fake.replays == 3
    assert len(fake.kernel_launches()) == steps   # only while capturing
    assert all(ln.captured for ln in fake.launches)
    assert "cuModuleLoadData" not in _between(fake.calls, "cuStreamBeginCapture_v2",
                                              "cuStreamEndCapture")
    # each result is a new array, copied out of the arena after each replay
    assert len({id(o) for o in outs}) == 3 and not np.shares_memory(outs[0], outs[1])
    assert fake.calls.count("cuMemcpyDtoHAsync_v2") >= 3
    last = fake.calls[len(fake.calls) - fake.calls[::-1].index("cuGraphLaunch"):]
    assert "cuMemcpyDtoHAsync_v2" in last and last[-1] == "cuStreamSynchronize"


def test_without_cuda_graph_every_call_launches_every_kernel(fake):
    model = graph.compile(_graph(np.ones((8, 8), np.float32)), cuda_graph=False)
    x = np.ones((4, 8), np.float32)
    for _ in range(2):
        model.evaluate({"x": x})
    assert fake.replays == 0 and "cuStreamBeginCapture_v2" not in fake.calls
    assert len(fake.kernel_launches(captured=False)) == 2 * len(model.kernels)
    model.cuda_graph = True   # switched on later: captured at the next call
    model.evaluate({"x": x})
    model.evaluate({"x": x})
    assert fake.replays == 2 and fake.calls.count("cuStreamBeginCapture_v2") == 1


def test_update_constants_overwrites_the_device_copy_and_replays(fake):
    w = np.ones((8, 8), np.float32)
    model = graph.compile(_graph(w))
    x = np.ones((4, 8), np.float32)
    model.evaluate({"x": x})
    ex = model._device_exec
    ptr = ex.constants["w"].ptr
    assert any(ptr in ln.slots for ln in fake.launches)   # the graph reads it there
    n = len(fake.calls)
    model.update_constants({"w": np.full((8, 8), 2.0, np.float32)})
    assert "cuMemcpyHtoDAsync_v2" in fake.calls[n:] and ex.constants["w"].ptr == ptr
    model.evaluate({"x": x})
    assert fake.calls.count("cuStreamBeginCapture_v2") == 1 and fake.replays == 2
    np.testing.assert_array_equal(model.constants["w"], 2.0)


def test_update_constants_on_the_emulator_changes_the_result():
    rng = np.random.default_rng(0)
    w, w2 = (rng.standard_normal((8, 8)).astype(np.float32) for _ in range(2))
    model = graph.compile(_graph(w), device="emulator")
    x = rng.standard_normal((4, 8)).astype(np.float32)
    np.testing.assert_allclose(model.evaluate({"x": x}), np.maximum(x @ w, 0), rtol=1e-5,
                               atol=1e-5)
    model.update_constants({"w": w2})
    np.testing.assert_allclose(model.evaluate({"x": x}), np.maximum(x @ w2, 0), rtol=1e-5,
                               atol=1e-5)


def test_constants_are_the_models_own_and_bad_updates_are_refused():
    w = np.ones((8, 8), np.float32)
    model = graph.compile(_graph(w), device="emulator")
    x = np.ones((4, 8), np.float32)
    want = model.evaluate({"x": x})
    w[...] = 5   # the caller's array: not the model's
    np.testing.assert_array_equal(model.evaluate({"x": x}), want)
    with pytest.raises(ValueError):   # read-only: a change would not reach a GPU copy
        model.constants["w"][0, 0] = 3
    with pytest.raises(graph.GraphError, match="no constant"):
        model.update_constants({"v": w})
    with pytest.raises(graph.GraphError, match="declares float32"):
        model.update_constants({"w": np.ones((8, 4), np.float32)})
    assert model._baked == frozenset()   # nothing here is built into a kernel ...
    model._baked = frozenset({"w"})        # ... as an attention's fused scale would be
    with pytest.raises(graph.GraphError, match="compile read"):
        model.update_constants({"w": np.zeros((8, 8), np.float32)})
    np.testing.assert_array_equal(model.evaluate({"x": x}), want)


def _llama():
    spec = importlib.util.spec_from_file_location("llama_example", ROOT / "examples/llama.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up
    spec.loader.exec_module(mod)
    return mod


def test_the_llama_decode_step_is_one_graph_replayed_per_token(fake):
    llama = _llama()
    cfg = replace(llama.STORIES15M, n_layers=1, dim=32, hidden_dim=64, n_heads=4,
                  vocab_size=64, seq_len=16)
    w = llama.random_weights(cfg)
    model = graph.compile(llama.build_graph(cfg, w))
    step = llama.gpudsl_stepper(cfg, w, model)
    for pos in range(3):
        assert step(1, pos).shape == (cfg.vocab_size,)
    assert fake.replays == 3 and fake.calls.count("cuStreamBeginCapture_v2") == 1
    assert len(fake.kernel_launches(captured=True)) == len(model.kernels)
    assert fake.kernel_launches(captured=False) == []


def test_the_llama_example_flag_launches_every_kernel(fake, capsys):
    llama = _llama()
    argv = ["--layers", "1", "--dim", "32", "--hidden", "64", "--heads", "4", "--vocab",
            "64", "--seq", "16", "--tokens", "2"]
    llama.main(argv + ["--no-cuda-graph"])   # the fake's zeros: the tokens disagree
    assert fake.replays == 0 and fake.kernel_launches(captured=True) == []
    assert "launched kernel by kernel" in capsys.readouterr().out
    llama.main(argv)
    assert fake.replays == 3 and "one CUDA graph replayed" in capsys.readouterr().out


def test_device_inputs_are_copied_after_the_callers_stream_wrote_them(fake):
    """The model's stream is non-blocking: before it copies a device input it waits
    (an event, no host synchronization) for the work the caller's stream holds now."""
    from gpudsl.runtime.device import DeviceBuffer

    model = graph.compile(_graph(np.ones((8, 8), np.float32)))
    x = DeviceBuffer((4, 8))
    for _ in range(2):
        n = len(fake.calls)
        out = model.evaluate({"x": x})
        calls = fake.calls[n:]
        assert calls.index("cuEventRecord") < calls.index("cuStreamWaitEvent") < \
            calls.index("cuMemcpyDtoDAsync_v2") < calls.index("cuGraphLaunch")
        assert isinstance(out, DeviceBuffer) and out.shape == (4, 8)
    model.evaluate({"x": np.ones((4, 8), np.float32)})   # host inputs: no wait needed
    assert fake.calls.count("cuStreamWaitEvent") == 2
