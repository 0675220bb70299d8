"""Trials as Ray tasks on a local Ray cluster started here (emulator target: one CPU per
task).  CI installs the ``distributed`` extra (the README's test command), so this runs
there; it is skipped only where Ray (or Optuna) is not installed."""
from __future__ import annotations

import pytest

pytest.importorskip("optuna")
ray = pytest.importorskip("ray")

import gpudsl  # noqa: E402
from gpudsl import autotune  # noqa: E402
from gpudsl.stdlib import tuning  # noqa: E402


@pytest.fixture(scope="module")
def cluster():
    """A local cluster of two CPUs, no dashboard; shut down after the module."""
    if ray.is_initialized():
        ray.shutdown()
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield ray.cluster_resources()
    ray.shutdown()


def test_trials_as_ray_tasks(cluster, tmp_path, monkeypatch):
    from gpudsl.autotune import trial

    assert cluster.get("CPU") == 2
    ex = autotune.RayExecutor(backend="emulator")   # joins the running cluster
    try:
        assert ex.num_gpus == 0 and ex._max_workers == 2 and not ex._started
        t = tuning.PointwiseTask("relu", (16,))
        space = t.space(threads=[64, 128], vec=[1, 4])
        # nothing is measured in this process: every trial is a Ray task
        monkeypatch.setattr(trial, "measure", lambda *a, **k: pytest.fail("measured here"))
        res = autotune.tune(t, space, t.args(0), reference=t.reference, backend="emulator",
                            db=tmp_path / "t.sqlite", reps=2, task="relu", executor=ex,
                            bytes_moved=t.bytes_moved)
    finally:
        ex.shutdown()
    assert ray.is_initialized()   # the executor leaves a cluster it did not start
    assert len(res.records) == 4 and all(r["status"] == "ok" for r in res.records), \
        res.records
    assert res.best is not None
    recs = autotune.Database(tmp_path / "t.sqlite").records("relu")
    assert len(recs) == 4 and all(len(r["times_ms"]) == 2 for r in recs)


def test_a_cluster_without_gpus_is_refused_for_cuda(cluster):
    with pytest.raises(gpudsl.Error, match="has no GPU"):
        autotune.RayExecutor(backend="cuda")
