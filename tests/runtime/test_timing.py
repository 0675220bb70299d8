"""gpudsl.runtime.timing: the logic (median/spread, flush size, restoring arguments) and
the emulator path in CI; the CUDA-event path against a fake libcuda whose clock the test
controls (launch 1 ms, memset 100 ms, host-to-device copy 1 s: only the launch may be
timed); the real GPU in tests marked gpu."""
import ctypes

import numpy as np
import pytest

from gpudsl.runtime import device, timing
from gpudsl.runtime.signature import KernelSig

from .test_device import fake_driver  # noqa: F401  (the fixture)


def test_summarize_median_and_iqr():
    assert timing.summarize([3.0, 1.0, 2.0]) == (2.0, 2.0)  # < 4 values: max - min
    med, iqr = timing.summarize([1, 2, 3, 4, 5, 6, 7, 100])
    assert med == 4.5
    assert iqr == pytest.approx(6.75 - 2.25)  # quartiles of the exclusive method
    with pytest.raises(ValueError):
        timing.summarize([])


def test_flush_size_from_the_l2():
    mb = 1024 * 1024
    assert timing.flush_bytes(None) == 256 * mb
    assert timing.flush_bytes(50 * mb) == 256 * mb  # H100: at least the notes' 256 MB
    assert timing.flush_bytes(60 * mb) == 256 * mb  # H200
    assert timing.flush_bytes(126 * mb) == 4 * 126 * mb  # a larger L2: four times it
    assert timing.flush_bytes(126 * mb) > 126 * mb


def test_emulator_path_times_restores_and_labels():
    x = np.zeros(4)
    calls = []

    def fn():
        assert x[0] == 0, "not restored before this call"
        x[0] += 1
        calls.append(1)

    t = timing.measure(fn, backend="emulator", warmup=2, reps=5, restore=lambda: x.fill(0))
    assert len(calls) == 7 and len(t.times_ms) == 5
    assert t.emulated and t.method == "perf_counter" and t.flush_bytes == 0 and t.restored
    assert t.min_ms <= t.median_ms <= t.max_ms
    assert "emulated" in t.notes[0]
    d = t.to_dict()
    assert d["emulated"] is True and d["reps"] == 5
    assert t.rate(1e6) == pytest.approx(1e6 / (t.median_ms * 1e-3))


def test_emulator_inner_divides():
    import time

    t = timing.measure(lambda: time.sleep(0.002), backend="emulator", warmup=0, reps=2, inner=3)
    assert 1.5 < t.median_ms < 50


def test_measure_refuses_bad_arguments():
    with pytest.raises(ValueError, match="unknown backend 'tpu'"):
        timing.measure(lambda: None, backend="tpu")
    with pytest.raises(ValueError):
        timing.measure(lambda: None, backend="emulator", reps=0)


def test_measure_target_is_the_old_name_of_backend():
    """issue 41: "target" means an architecture; measure's backend keyword was once
    called target, which still works with a DeprecationWarning."""
    with pytest.warns(DeprecationWarning, match="backend='emulator'"):
        t = timing.measure(lambda: None, target="emulator", warmup=0, reps=1)
    assert t.emulated
    with pytest.raises(ValueError, match="disagree"), pytest.warns(DeprecationWarning):
        timing.measure(lambda: None, backend="cuda", target="emulator")


def test_cuda_path_with_a_fake_driver(fake_driver, monkeypatch):  # noqa: F811
    """Events around each repetition; the flush (memset) and the restore (host-to-device
    copy) happen outside the timed region; the flush is sized from the L2 attribute."""
    monkeypatch.setattr(timing, "_FLUSHER", None)
    mod = device.DeviceModule(b"fake", [KernelSig("scale", ["float*", "int", "float"])])
    host = np.arange(8, dtype=np.float32)
    buf = device.DeviceBuffer.from_numpy(host)
    n0 = fake_driver.fake_memsets(ctypes.byref(ctypes.c_size_t()))
    t = timing.measure(lambda: mod.launch("scale", 1, 8, [buf, np.int32(8), np.float32(2)]),
                       warmup=1, reps=4, restore=lambda: buf.copy_from(host))
    assert t.times_ms == [1.0] * 4, t.times_ms
    assert t.method == "cuda-events" and not t.emulated
    assert t.flush_bytes == 256 * 1024 * 1024  # fake L2 = 50 MB -> 256 MB
    last = ctypes.c_size_t()
    assert fake_driver.fake_memsets(ctypes.byref(last)) - n0 == 4  # one flush per rep
    assert last.value == t.flush_bytes
    np.testing.assert_array_equal(buf.to_numpy(), host * 2)  # restored, then one launch
    # inner launches per repetition; no flush when asked
    t2 = timing.measure(lambda: mod.launch("scale", 1, 8, [buf, np.int32(8), np.float32(1)]),
                        warmup=0, reps=3, inner=4, flush=False)
    assert t2.times_ms == [1.0] * 3 and t2.flush_bytes == 0
    # a spin before each repetition's start event, and each one covered the host's work
    assert fake_driver.fake_spins() >= 4 + 3
    assert t.covered == 4 and t2.covered == 3 and t.notes == [] and t.host_ms >= 0
    # a spin that had ended before the calls returned: counted and said
    fake_driver.fake_set_event_query(0)
    t3 = timing.measure(lambda: mod.launch("scale", 1, 8, [buf, np.int32(8), np.float32(1)]),
                        warmup=0, reps=3)
    assert t3.covered == 0 and "3 of 3 repetitions include host time" in t3.notes[0]
    # a call that waits for the GPU (its host time covers the probe's spin, which has
    # ended): no spin before its repetitions, which would only be waited for, and a note
    import time as _time

    spins = fake_driver.fake_spins()
    t4 = timing.measure(lambda: _time.sleep(0.021), warmup=0, reps=2)
    fake_driver.fake_set_event_query(600)
    assert fake_driver.fake_spins() == spins + 1  # the probe's only
    assert t4.covered == 0 and "waits for the GPU" in t4.notes[0] and t4.host_ms >= 20
    facts = timing.device_facts()
    assert facts["device"] == "Fake H100" and facts["driver_cuda_version"] == "13.0"
    assert facts["l2_bytes"] == 50 * 1024 * 1024 and facts["sms"] == 132
    monkeypatch.setattr(timing, "_FLUSHER", None)


def test_device_facts_without_a_driver(monkeypatch):
    from gpudsl.runtime import driver

    monkeypatch.setattr(driver, "_available", False)
    assert timing.device_facts()["device"] is None
    assert timing.l2_bytes() is None


@pytest.mark.gpu
def test_gpu_copy_rate_is_plausible():
    """A 1 GiB device copy, timed with events and the flush: between 0.3 and 10 TB/s."""
    src = device.DeviceBuffer.zeros(256 * 1024 * 1024, np.float32)
    dst = device.DeviceBuffer(256 * 1024 * 1024, np.float32)
    lib = device._cu()
    t = timing.measure(lambda: device.check(lib.cuMemcpyDtoD_v2(dst.ptr, src.ptr, src.nbytes),
                                            "copy"), warmup=2, reps=5)
    rate = t.rate(2 * src.nbytes)
    assert 0.3e12 < rate < 10e12, rate
    assert t.flush_bytes >= timing.MIN_FLUSH_BYTES and t.spread_ms >= 0


@pytest.mark.gpu
def test_gpu_flush_makes_an_l2_resident_read_slower():
    """Reading 8 MB that fits in L2: with the flush it comes from HBM (slower) than
    without; evidence that the flush evicts."""
    n = 2 * 1024 * 1024
    src = device.DeviceBuffer.zeros(n, np.float32)
    dst = device.DeviceBuffer(n, np.float32)
    lib = device._cu()

    def copy():
        device.check(lib.cuMemcpyDtoD_v2(dst.ptr, src.ptr, src.nbytes), "copy")

    cold = timing.measure(copy, warmup=3, reps=21)
    warm = timing.measure(copy, warmup=3, reps=21, flush=False)
    # the spin hides the launch latency (the first campaign, without it: the idle
    # GPU's launch latency made the warm copy 13.8 us against the cold one's 11.1 us)
    assert warm.covered == warm.reps and cold.covered == cold.reps, (warm.notes, cold.notes)
    assert cold.median_ms > warm.median_ms, (cold.median_ms, warm.median_ms)
