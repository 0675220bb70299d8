"""Issue 17: the range pre-check covers sliced_softmax prefixes given as tensors, the
kernels' fault flags behind it, and the buffers as ONE state across the host and the
device paths."""
import numpy as np
import pytest

from gpudsl import graph
from gpudsl.graph.executors import BufferState

rng = np.random.default_rng(9)


def _cache_then_softmax():
    """A cache write (ReplaceSliceNode into a buffer) before a sliced softmax whose
    prefix is a graph input."""
    x = graph.InputTensor("x", "float32", [1, 8])
    b, e = graph.InputTensor("b", "int64", [1]), graph.InputTensor("e", "int64", [1])
    p = graph.InputTensor("p", "int64", [1])
    cache = graph.BufferTensor("float32", [4, 8]).replace(x, b, e)
    return cache.sliced_softmax(p)


def _inputs(pos, prefix):
    return {"x": rng.standard_normal((1, 8)).astype(np.float32),
            "b": np.array([pos]), "e": np.array([pos + 1]), "p": np.array([prefix])}


def _softmax_prefix(a, k):
    out = a.copy()
    if k:
        z = np.exp(a[:, :k] - a[:, :k].max(1, keepdims=True))
        out[:, :k] = z / z.sum(1, keepdims=True)
    return out


def test_a_bad_softmax_prefix_input_is_refused_before_the_cache_write():
    model = graph.compile(_cache_then_softmax(), device="emulator")
    good = _inputs(0, 3)
    out = model.evaluate(good)
    cache = np.zeros((4, 8), np.float32)
    cache[0] = good["x"]
    np.testing.assert_allclose(out, _softmax_prefix(cache, 3), rtol=1e-5, atol=1e-6)
    before = model.buffers[0].copy()
    for prefix in (-1, 9):
        with pytest.raises(graph.GraphError, match=rf"prefix {prefix} is outside \[0, 8\]"):
            model.evaluate(_inputs(1, prefix))
        np.testing.assert_array_equal(model.buffers[0], before)  # the write did not run
    # the boundaries are accepted
    for prefix in (0, 8):
        model.evaluate(_inputs(1, prefix))


def test_a_bad_prefix_in_a_script_is_refused_at_the_node():
    text = ("$1 = InputTensor(x, float32, [2, 4]);\n"
            "$2 = InputTensor(p, int64, [1]);\n"
            "$3 = SlicedSoftmaxNode($1, $2);\n"
            "result = $3;\n")
    model = graph.compile(text, device="emulator")
    with pytest.raises(graph.GraphError) as e:
        model.evaluate({"x": np.zeros((2, 4), np.float32), "p": np.array([5])})
    assert e.value.line == 3 and "outside [0, 4]" in str(e.value), str(e.value)


def test_the_kernels_fault_flags_back_the_pre_check(monkeypatch):
    """With the pre-check skipped, the kernels' own flags still refuse a bad prefix or
    range (at the node), and are cleared for the next call."""
    model = graph.compile(_cache_then_softmax(), device="emulator")
    monkeypatch.setattr(model, "_check_ranges", lambda values: None)
    with pytest.raises(graph.GraphError, match="SlicedSoftmaxNode: the prefix"):
        model.evaluate(_inputs(0, 9))
    with pytest.raises(graph.GraphError, match="ReplaceSliceNode: the range"):
        model.evaluate(_inputs(3, 2) | {"e": np.array([6])})
    model.evaluate(_inputs(1, 2))  # flags cleared: a good call passes


# ------------------------------------------------------------------ one buffer state


class EmulatedDevice:
    """A stand-in for the device executor: the buffers in memory of its own (as device
    memory would be: garbage until the state uploads them), the model's launch list run
    on them by the host executor; counts the state's copies."""

    def __init__(self, model):
        self.model = model
        self.mem = [np.full(b.shape, np.nan, np.float32) for b in model._state._host]
        self.uploads = self.downloads = 0

    def upload(self, host):
        self.uploads += 1
        for d, h in zip(self.mem, host):
            d[...] = h

    def download(self, host):
        self.downloads += 1
        for d, h in zip(self.mem, host):
            h[...] = d

    def run(self, values, device_out):
        return self.model._host.run(values, self.mem)


def test_buffer_state_moves_once_per_switch():
    st = BufferState([(2, 3)])
    dev = EmulatedDevice.__new__(EmulatedDevice)
    dev.mem, dev.uploads, dev.downloads = [np.zeros((2, 3), np.float32)], 0, 0
    host = st.host()
    host[0][...] = 1
    st.to_device(dev)
    st.to_device(dev)  # already there
    assert (dev.uploads, dev.downloads) == (1, 0) and (dev.mem[0] == 1).all()
    dev.mem[0][...] = 2  # the device writes
    assert st.host() is host and (host[0] == 2).all()  # same arrays, brought back
    st.host()
    assert (dev.uploads, dev.downloads) == (1, 1)


def test_mixing_host_and_device_calls_keeps_one_buffer_state():
    """Alternate host evaluations and (emulated) device ones on a KV-cache graph: every
    result and the buffers equal an all-host run; ``model.buffers`` shows what the
    device wrote; ``reset_buffers`` reaches the device."""
    y = _cache_then_softmax()
    mixed = graph.compile(y, device="emulator")
    plain = graph.compile(y, device="emulator")
    dev = EmulatedDevice(mixed)
    calls = [_inputs(pos, prefix) for pos, prefix in [(0, 2), (1, 8), (2, 0), (3, 5)]]
    for k, v in enumerate(calls):
        want = plain.evaluate(v)
        got = mixed._run_on(dev, v) if k % 2 else mixed.evaluate(v)
        np.testing.assert_array_equal(got, want)
        np.testing.assert_array_equal(mixed.buffers[0], plain.buffers[0])
    assert (dev.uploads, dev.downloads) == (2, 2)
    # two device calls in a row: one upload, the buffers stay on the device
    mixed._run_on(dev, calls[0])
    mixed._run_on(dev, calls[1])
    assert dev.uploads == 3
    mixed.reset_buffers()
    assert not mixed.buffers[0].any()
    mixed._run_on(dev, _inputs(0, 8))
    assert dev.uploads == 4 and not dev.mem[0][1:].any()  # the zeros reached it


@pytest.mark.gpu
def test_mixing_host_and_device_calls_on_the_gpu():
    torch = pytest.importorskip("torch")
    y = _cache_then_softmax()
    mixed = graph.compile(y, device="cuda")
    plain = graph.compile(y, device="cuda")
    for k, (pos, prefix) in enumerate([(0, 2), (1, 8), (2, 0), (3, 5)]):
        v = _inputs(pos, prefix)
        want = plain.evaluate(v)
        if k % 2:
            out = mixed.evaluate({n: torch.from_numpy(a).cuda() for n, a in v.items()})
            got = torch.as_tensor(out, device="cuda").cpu().numpy()
        else:
            got = mixed.evaluate(v)
        np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
        np.testing.assert_allclose(mixed.buffers[0], plain.buffers[0], rtol=1e-6)
