"""A GPU model whose kernels read through TMA tensor maps (float16 GEMMs on sm_90a do),
captured as one CUDA graph, on the recording fake driver (an sm_90a device; the
kernel compiled for real by NVRTC, nothing run).  An H200 refused the capture:
building a map at its first use allocates device memory, and a capture forbids that
(``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``).  The executor builds every map of its
launches when it binds them, before any capture, and holds them for as long as it and
its graph live, so an eviction from the maps' cache never frees one the graph reads.
A small TMA tile copy stands in for the GEMM (a node declared here, as a user would)."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import graph, proc_from_source
from gpudsl.runtime import fake_driver, tensor_maps
from gpudsl.stdlib.node_registry import Launch, Node, register, unregister
from tests.hopper.test_tma import TILE


@pytest.fixture
def fake():
    with fake_driver.installed("sm_90a") as drv:
        yield drv


@pytest.fixture
def tma_copy():
    """``TmaCopyNode(x)``: a float16 copy whose kernel reads ``x`` by ``tma_load``."""
    p = proc_from_source(TILE)

    def launch(shapes, attrs, backend):
        return Launch(p, (("a", ("in", 0, shapes[0])), ("y", ("out", shapes[0]))), shapes[0])

    register(Node("tma_copy", lambda ops, attrs: ("float16", tuple(ops[0].shape)), launch,
                  lambda x: x, graph="TmaCopyNode", script=(("ref", "x"),),
                  operands=("x",), dtypes=("float16",)))
    yield
    unregister("tma_copy")


def _model():
    x = graph.InputTensor("x", "float16", [32, 64])
    return graph.compile(graph.TmaCopyNode(x))


def _during_capture(calls):
    i = calls.index("cuStreamBeginCapture_v2")
    return calls[i + 1:calls.index("cuStreamEndCapture", i)]


def test_the_capture_allocates_nothing(fake, tma_copy):
    model = _model()
    x = np.ones((32, 64), np.float16)
    for _ in range(2):
        model.evaluate({"x": x})
    assert fake.calls.count("cuStreamBeginCapture_v2") == 1 and fake.replays == 2
    inside = _during_capture(fake.calls)
    assert fake.allocated_while_capturing == [] and "cuMemAlloc_v2" not in inside
    assert "cuTensorMapEncodeTiled" not in inside and "cuCtxSynchronize" not in inside
    assert len(fake.kernel_launches(captured=True)) == len(model.kernels)


def test_the_map_the_graph_reads_outlives_an_eviction(fake, tma_copy, monkeypatch):
    from gpudsl.runtime.device import DeviceBuffer

    model = _model()
    x = np.ones((32, 64), np.float16)
    model.evaluate({"x": x})
    (work, _), = model._device_exec.prepared
    arrays = {v.ptr for v in work.values()}
    (launched,) = fake.kernel_launches(captured=True)
    (held,) = [s for s in launched.slots if s in fake.allocated and s not in arrays]
    # other calls' maps fill the cache: it is synchronized and emptied
    monkeypatch.setattr(tensor_maps, "_CACHE_MAX", 1)
    ref = tensor_maps.TensorMapRef("a", (32, 64), (16, 64), 2, "float16")
    for _ in range(2):
        tensor_maps.resolve_cuda(ref, DeviceBuffer((32, 64), np.float16))
    assert "cuCtxSynchronize" in fake.calls and fake.freed
    assert held not in fake.freed    # the graph still reads it: the executor holds it
    model.evaluate({"x": x})
    assert fake.replays == 2 and fake.calls.count("cuStreamBeginCapture_v2") == 1
