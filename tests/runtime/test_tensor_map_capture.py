"""Tensor maps (TMA) and CUDA-graph capture, on the recording fake driver
(``runtime/fake_driver.py``: an sm_90a device, the kernel compiled by NVRTC, nothing
run).  A map lives in device memory that ``resolve_cuda`` allocates on its first use and
keeps in a bounded cache; a graph captured with a launch reading it keeps its address.
So, while the launch's stream is capturing: a map not built yet is refused (building it
would allocate, which a capture forbids: the H200's ``CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED``),
with no synchronization; a map built before is pinned, and no later eviction frees it
(a replay would read freed memory).  Every path that launches says which stream it
launches on: ``enqueue`` (a model's executor, a capture), ``_run_async`` (device arrays:
the caller's stream), the full path (the legacy stream)."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import LaunchError, proc_from_source
from gpudsl.runtime import fake_driver, tensor_maps
from tests.hopper.test_tma import TILE


@pytest.fixture
def fake():
    with fake_driver.installed("sm_90a") as drv:
        yield drv


def _unit():
    """The TMA tile copy (one map, of ``a``) compiled for the CUDA backend."""
    from gpudsl.compiler.unit import compile_unit

    p = proc_from_source(TILE)
    return compile_unit([p], "cuda"), p.name


def _prepared(unit, name, m=32):
    """``(work, launches)`` of the tile copy on fresh device arrays (as an executor
    binds them)."""
    from gpudsl.runtime.device import DeviceBuffer

    a, y = DeviceBuffer((m, 64), np.float16), DeviceBuffer((m, 64), np.float16)
    _ARRAYS.extend((a, y))
    b, temporaries, launches = unit.prepare(name, a=a, y=y)
    assert not temporaries
    return {n: arg.device for n, arg in b.arrays.items()}, launches


def _map_slot(fake, launched):
    """The map's address a launch passed: the one device allocation among its slots
    that is not an array of the call (the tile copy has one map)."""
    arrays = {a.ptr for a in _ARRAYS}
    (ptr,) = [s for s in launched.slots if s in fake.allocated and s not in arrays]
    return ptr


_ARRAYS: list = []   # every device array the tests made (cleared per test)


@pytest.fixture(autouse=True)
def _arrays():
    yield
    _ARRAYS.clear()


def _during_capture(calls):
    i = calls.index("cuStreamBeginCapture_v2")
    return calls[i + 1:calls.index("cuStreamEndCapture", i)]


def test_a_map_first_needed_inside_a_capture_is_refused_and_nothing_allocated(fake,
                                                                              monkeypatch):
    from gpudsl.runtime.graphs import CapturedGraph, Stream

    monkeypatch.setattr(tensor_maps, "_CACHE_MAX", 1)
    unit, name = _unit()
    unit.backend.load()
    stream = Stream()
    full = _prepared(unit, name)
    unit.backend.enqueue(*full, stream)     # the cache is full now: a miss would evict
    work, launches = _prepared(unit, name)
    with pytest.raises(LaunchError, match="not built before the capture") as e:
        CapturedGraph(stream, lambda s: unit.backend.enqueue(work, launches, s))
    assert "run the call once before capturing" in e.value.hint
    assert "tensor map of 'a' (dims [32, 64], box [16, 64])" in str(e.value)
    inside = _during_capture(fake.calls)
    assert fake.allocated_while_capturing == [] and "cuMemAlloc_v2" not in inside
    assert "cuCtxSynchronize" not in inside and "cuLaunchKernel" not in inside
    assert not fake.capturing   # the capture was ended
    # the remedy: one call before capturing, then the capture finds the map
    unit.backend.enqueue(work, launches, stream)
    graph = CapturedGraph(stream, lambda s: unit.backend.enqueue(work, launches, s))
    graph.replay()
    assert fake.allocated_while_capturing == []
    assert len(fake.kernel_launches(captured=True)) == 1


def test_a_map_a_capture_used_survives_an_eviction(fake, monkeypatch):
    from gpudsl.runtime.graphs import CapturedGraph, Stream

    monkeypatch.setattr(tensor_maps, "_CACHE_MAX", 2)
    unit, name = _unit()
    unit.backend.load()
    stream = Stream()
    work, launches = _prepared(unit, name)
    unit.backend.enqueue(work, launches, stream)     # the warm-up builds the map
    graph = CapturedGraph(stream, lambda s: unit.backend.enqueue(work, launches, s))
    (captured,) = fake.kernel_launches(captured=True)
    held = _map_slot(fake, captured)
    for _ in range(3):   # other arrays' maps fill the cache: it is emptied, synchronized
        unit.backend.enqueue(*_prepared(unit, name), stream)
    assert fake.calls.count("cuCtxSynchronize") >= 1 and fake.freed
    assert held not in fake.freed    # the graph still reads it
    graph.replay()
    # the same map is found again (it was pinned, not rebuilt)
    n = len(fake.allocated)
    unit.backend.enqueue(work, launches, stream)
    assert len(fake.allocated) == n and _map_slot(fake, fake.launches[-1]) == held


def test_an_unpinned_map_is_still_evicted(fake, monkeypatch):
    """The cache stays bounded for maps no capture used."""
    from gpudsl.runtime.graphs import Stream

    monkeypatch.setattr(tensor_maps, "_CACHE_MAX", 2)
    unit, name = _unit()
    unit.backend.load()
    stream = Stream()
    unit.backend.enqueue(*_prepared(unit, name), stream)
    first = _map_slot(fake, fake.launches[-1])
    for _ in range(2):
        unit.backend.enqueue(*_prepared(unit, name), stream)
    assert first in fake.freed and len(tensor_maps._CACHE) <= 2
    assert tensor_maps._PINNED == {}


def _capture_pins_a_built_map_and_refuses_a_miss(fake, k, stream, a, y, fresh):
    """While ``stream`` captures: ``k(a, y)``, whose map was built, pins it; ``k(fresh,
    y)``, whose map was not, is refused with nothing allocated."""
    fake.cuStreamBeginCapture_v2(stream.handle, 1)
    try:
        k(a=a, y=y)
        assert len(tensor_maps._PINNED) == 1
        n = len(fake.allocated)
        with pytest.raises(LaunchError, match="not built before the capture"):
            k(a=fresh, y=y)
        assert len(fake.allocated) == n
    finally:
        fake.cuStreamEndCapture(stream.handle, None)


def test_device_arrays_resolve_maps_for_the_callers_stream(fake, monkeypatch):
    """``_run_async`` (every argument on the device) launches on the caller's stream
    (PyTorch's current one): a capture there is seen, a miss refused."""
    from gpudsl.runtime import launch as launch_mod
    from gpudsl.runtime import prepared
    from gpudsl.runtime.device import DeviceBuffer
    from gpudsl.runtime.graphs import Stream

    k = proc_from_source(TILE).compile("cuda")
    a, y, fresh = (DeviceBuffer((32, 64), np.float16) for _ in range(3))
    stream = Stream()
    # the full path's stream (the first call) and the prepared launcher's (later ones)
    monkeypatch.setattr(launch_mod, "caller_stream", lambda values: int(stream))
    monkeypatch.setattr(prepared, "stream_getter", lambda values: lambda: int(stream))
    k(a=a, y=y)                                  # outside a capture: built
    assert fake.launches[-1].stream == int(stream)
    _capture_pins_a_built_map_and_refuses_a_miss(fake, k, stream, a, y, fresh)


def test_the_legacy_stream_is_asked_on_the_full_path(fake):
    """A call with host arrays copies them in and launches on the legacy stream: the
    capture of another stream does not concern it."""
    from gpudsl.runtime.graphs import Stream

    k = proc_from_source(TILE).compile("cuda")
    other = Stream()
    fake.cuStreamBeginCapture_v2(other.handle, 1)
    try:
        k(a=np.ones((32, 64), np.float16), y=np.zeros((32, 64), np.float16))
    finally:
        fake.cuStreamEndCapture(other.handle, None)
    assert fake.launches[-1].stream == 0 and len(tensor_maps._CACHE) == 1


def test_a_tma_kernel_takes_the_prepared_path(fake, monkeypatch):
    """H200 bench: 0.3-0.7 ms of host time per call of the sm_90a GEMMs, against 0.04
    for torch: a launch with a tensor map always took the full path (every check, the
    plan, the map looked up).  Now the second call of a signature is prepared: it packs
    what the full path packs, the map found by its array's address (the same buffer
    for the same array, a new one for another), and a miss while the caller's stream
    captures is still refused with nothing allocated."""
    from gpudsl.runtime import prepared
    from gpudsl.runtime.device import DeviceBuffer
    from gpudsl.runtime.graphs import Stream

    stream = Stream()
    monkeypatch.setattr(prepared, "stream_getter", lambda values: lambda: int(stream))
    k = proc_from_source(TILE).compile("cuda")
    a, y, other, fresh = (DeviceBuffer((32, 64), np.float16) for _ in range(4))
    _ARRAYS.extend((a, y, other, fresh))
    k(a=a, y=y)                       # the full path: checks, plan, map built
    full = fake.launches[-1]
    assert len(k._fast) == 1
    monkeypatch.setattr(type(k), "bind", lambda *a, **kw: pytest.fail("full path taken"))
    n = len(fake.allocated)
    k(a=a, y=y)
    fast = fake.launches[-1]
    assert fast.slots == full.slots and fast.grid == full.grid and fast.stream == int(stream)
    assert len(fake.allocated) == n   # the same map
    k(a=other, y=y)                   # another array: its own map, built once
    mine = _map_slot(fake, fake.launches[-1])
    assert mine != _map_slot(fake, full) and len(fake.allocated) == n + 1
    k(a=other, y=y)
    assert _map_slot(fake, fake.launches[-1]) == mine and len(fake.allocated) == n + 1
    _capture_pins_a_built_map_and_refuses_a_miss(fake, k, stream, a, y, fresh)
