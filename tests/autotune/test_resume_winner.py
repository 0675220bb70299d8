"""Regression: a resumed tune keeps the stored winner.  The first run picks its winner
after an interleaved re-timing whose times are not stored; a resume recomputed it from
the stored medians alone, so a near tie could flip the winner (seen under CPU load:
``{'tm': 4} != {'tm': 8}``)."""
from __future__ import annotations

import pytest

from gpudsl import autotune
from gpudsl.autotune import candidate_pipeline as pl

from .test_tune import args, full_build, reference, space

pytest.importorskip("optuna")


def test_resume_keeps_the_stored_winner(tmp_path, monkeypatch):
    db = tmp_path / "tune.sqlite"
    kw = dict(reference=reference, backend="emulator", strategy="grid", seed=0, db=db,
              task="resume-winner", reps=3)
    res = autotune.tune(full_build, space(), args(), **kw)
    ok = [r for r in res.records if r["status"] == pl.OK]
    assert len(ok) >= 2
    # as if the first run's re-timing had preferred the slower of the good configs
    slower = max(ok, key=lambda r: r["median_ms"])
    d = autotune.Database(db)
    shapes = autotune.db.shapes_key({k: (v.shape, v.dtype.name) for k, v in args().items()})
    env = autotune.env.env_key("emulator")
    d.set_winner("resume-winner", shapes, env, slower["params"], slower["median_ms"])
    monkeypatch.setattr(pl.Timer, "run", lambda *a, **k: pytest.fail("re-timed"))
    again = autotune.tune(full_build, space(), args(), **kw)
    assert dict(again.best.config) == dict(slower["params"])
