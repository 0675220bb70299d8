"""The autotuner's timing step goes through gpudsl.runtime.timing.measure (issue 16):
written arguments restored before every timed call, emulated figures labelled."""
from __future__ import annotations

import numpy as np

from gpudsl import BLOCKS, THREADS, f32, par, proc
from gpudsl.autotune import candidate_pipeline as pl
from gpudsl.runtime import timing


@proc
def accumulate(x: f32[64], y: f32[64]):
    for b in par(0, 2) @ BLOCKS:
        for t in par(0, 32) @ THREADS:
            y[b * 32 + t] = y[b * 32 + t] + x[b * 32 + t]


def test_timer_uses_the_timing_function_and_restores(monkeypatch):
    k = accumulate.compile("emulator")
    x = np.arange(64, dtype=np.float32)
    y = np.ones(64, dtype=np.float32)
    seen = []
    real = timing.measure

    def spy(fn, **kw):
        seen.append(kw)
        return real(fn, **kw)

    monkeypatch.setattr(timing, "measure", spy)
    timer = pl.Timer(k, "emulator", {"x": x, "y": y}, ["y"])
    times = timer.run(2, 5)
    assert len(times) == 5 and seen and seen[0]["restore"] is not None
    assert timer.last.emulated and timer.last.restored and timer.last.warmup == 2
    # 7 calls in all, each after a restore: y holds one accumulation, not seven
    np.testing.assert_array_equal(timer.work["y"], y + x)
    np.testing.assert_array_equal(y, np.ones(64, np.float32))  # the caller's array untouched
    assert timer.once() > 0 and len(seen) == 2
    assert pl.summarize([1.0, 2.0, 3.0, 4.0, 100.0]) == timing.summarize(
        [1.0, 2.0, 3.0, 4.0, 100.0])
