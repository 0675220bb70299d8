"""Trials as Ray tasks on a local Ray instance (emulator target: one CPU per task).
Skipped without the ``distributed`` extra; run locally with
``pip install -e '.[distributed]' && pytest tests/autotune/test_ray.py``."""
from __future__ import annotations

import pytest

pytest.importorskip("optuna")
pytest.importorskip("ray")

from gpudsl import autotune  # noqa: E402
from gpudsl.stdlib import tuning  # noqa: E402


def test_trials_as_ray_tasks(tmp_path, monkeypatch):
    from gpudsl.autotune import trial

    ex = autotune.RayExecutor(target="emulator", num_cpus=2)
    try:
        assert ex.num_gpus == 0 and ex._max_workers >= 1
        t = tuning.PointwiseTask("relu", (16,))
        space = t.space(threads=[64, 128], vec=[1, 4])
        # nothing is measured in this process: every trial is a Ray task
        monkeypatch.setattr(trial, "measure", lambda *a, **k: pytest.fail("measured here"))
        res = autotune.tune(t, space, t.args(0), reference=t.reference, target="emulator",
                            db=tmp_path / "t.sqlite", reps=2, task="relu", executor=ex,
                            bytes_moved=t.bytes_moved)
    finally:
        ex.shutdown()
    assert len(res.records) == 4 and all(r["status"] == "ok" for r in res.records), \
        res.records
    assert res.best is not None
    recs = autotune.Database(tmp_path / "t.sqlite").records("relu")
    assert len(recs) == 4 and all(len(r["times_ms"]) == 2 for r in recs)
