"""The autotuner end to end on the emulator (a dry run): every failure kind recorded with
its reason and never run, resume without re-timing, a deterministic winner, JSON export."""
from __future__ import annotations

import json

import numpy as np
import pytest

from gpudsl import Error, autotune
from gpudsl.autotune import candidate_pipeline as pl

from .kernels import build, reference

pytest.importorskip("optuna")  # the tuning database is an Optuna study (the tune extra)

VARIANTS = ["tiled", "racy", "uncompilable", "wrong", "crash"]


def space():
    # the failure variants once each; tiled: two good register tiles and one that spills
    return autotune.Space(
        variant=VARIANTS, tm=[4, 8, 16], bps=[2, 8],
        where=lambda c: (c.variant != "tiled" and c.tm == 4 and c.bps == 2)
        or (c.variant == "tiled" and ((c.tm < 16 and c.bps == 2) or (c.tm == 16 and c.bps == 8))))


def full_build(c):
    return build(dict(c, bm=32, bn=32, bk=8, tn=c["tm"]))


def args(seed=0):
    rng = np.random.default_rng(seed)
    return {"a": rng.standard_normal((32, 32)).astype(np.float32),
            "b": rng.standard_normal((32, 32)).astype(np.float32),
            "c": np.zeros((32, 32), np.float32)}


@pytest.fixture(scope="module")
def first(tmp_path_factory):
    db = tmp_path_factory.mktemp("tune") / "tune.sqlite"
    res = autotune.tune(full_build, space(), args(), reference=reference, backend="emulator",
                        strategy="grid", seed=0, db=db, task="test-matmul", reps=5)
    return db, res


def test_space_enumerates_constraints():
    s = space()
    assert len(s) == 7
    assert s.config(variant="tiled", tm=16, bps=8).tm == 16
    with pytest.raises(Error):
        s.config(variant="tiled", tm=16, bps=2)


def test_every_failure_kind_is_recorded_and_never_run(first):
    _, res = first
    by = {(r["params"]["variant"], r["params"]["tm"]): r for r in res.records}
    assert by["racy", 4]["status"] == pl.UNPROVED and "race" in by["racy", 4]["error"]
    assert by["uncompilable", 4]["status"] == pl.COMPILE_ERROR
    assert by["wrong", 4]["status"] == pl.WRONG and "differs" in by["wrong", 4]["error"]
    assert by["crash", 4]["status"] == pl.BUILD_ERROR and "RuntimeError" in by["crash", 4]["error"]
    spill = by["tiled", 16]
    assert spill["status"] == pl.PRUNED and "spills" in spill["error"], spill
    for bad in ("racy", "uncompilable", "wrong", "crash"):
        assert by[bad, 4].get("median_ms") is None  # never timed
    assert by["tiled", 4]["status"] == pl.OK and by["tiled", 8]["status"] == pl.OK
    assert len(by["tiled", 4]["times_ms"]) >= 5
    assert res.best is not None and res.best.config.variant == "tiled"
    assert "EMULATED" in res.table()


def test_winner_proc_is_correct_and_source_builds_it(first):
    _, res = first
    p = res.best.proc
    a = args(1)
    p.compile("emulator")(**a)
    np.testing.assert_allclose(a["c"], a["a"] @ a["b"], rtol=1e-4, atol=1e-4)
    src = res.source()
    assert "CONFIG = " in src and repr(dict(res.best.config)) in src


def test_resume_does_not_retime(first, monkeypatch):
    db, res = first
    # a second tune is a lookup: nothing is compiled, verified or timed again
    monkeypatch.setattr(pl, "prove_and_compile", lambda *a, **k: pytest.fail("re-compiled"))
    monkeypatch.setattr(pl.Timer, "run", lambda *a, **k: pytest.fail("re-timed"))
    again = autotune.tune(full_build, space(), args(), reference=reference, backend="emulator",
                          seed=0, db=db, task="test-matmul", reps=5)
    assert all(r.get("cached") for r in again.records)
    assert [r["status"] for r in again.records] == [r["status"] for r in res.records]
    assert dict(again.best.config) == dict(res.best.config)


def test_other_environment_or_shape_never_used(first):
    db, _ = first
    d = autotune.Database(db)
    shapes = autotune.db.shapes_key({"a": ((32, 32), "float32"), "b": ((32, 32), "float32"),
                                     "c": ((32, 32), "float32")})
    env = autotune.env.env_key("emulator")
    assert d.records("test-matmul", shapes, env)
    assert not d.records("test-matmul", shapes.replace("32", "64"), env)
    assert not d.records("test-matmul", shapes, env.replace("emulator", "cuda"))


def test_export_import_roundtrip(first, tmp_path):
    db, _ = first
    text = autotune.Database(db).export_json(tmp_path / "x.json", task="test-matmul")
    doc = json.loads(text)
    (st,) = doc["studies"]
    assert st["winner"] and any(r["status"] == "ok" for r in st["records"])
    assert len({r["key"] for r in st["records"]}) == len(st["records"]) == 7
    other = autotune.Database(tmp_path / "other.sqlite")
    assert other.import_json(tmp_path / "x.json") == len(st["records"])
    assert other.export_json(task="test-matmul") == text
    assert other.import_json(text) == 7  # importing again adds nothing
    assert other.export_json(task="test-matmul") == text


def test_deterministic_winner_prefers_the_simplest_near_tie():
    def rec(tm, ms, threads):
        return {"params": {"tm": tm}, "status": "ok", "median_ms": ms, "threads": threads}
    recs = [rec(8, 1.00, 16), rec(4, 1.015, 64), rec(2, 1.5, 256), rec(16, 0.9, 4)]
    recs[-1]["status"] = "wrong"
    w = autotune.choose_winner(recs)
    assert w["params"] == {"tm": 8}  # 4 is within 2% but has more threads
    recs[0]["threads"] = 128
    assert autotune.choose_winner(recs)["params"] == {"tm": 4}
    # the re-timing moves the order: the re-timed times count
    w = autotune.choose_winner([rec(8, 1.0, 16), rec(4, 1.3, 64)],
                               retime=lambda head: [[2.0] * 9, [1.0] * 9])
    assert w["params"] == {"tm": 4}


def test_random_strategy_is_seeded():
    s = space()
    assert s.shuffled(3) == s.shuffled(3) and s.shuffled(3) != s.shuffled(4)


def test_reference_required():
    with pytest.raises(Error, match="reference"):
        autotune.tune(full_build, space(), args(), backend="emulator")


def test_tpe_with_optuna(tmp_path):
    pytest.importorskip("optuna")
    s = autotune.Space(variant=["racy", "crash", "wrong"], tm=[4])
    r1 = autotune.tune(full_build, s, args(), reference=reference, backend="emulator",
                       strategy="tpe", seed=0, db=tmp_path / "t.sqlite", task="tpe",
                       budget=autotune.Budget(trials=3))
    assert sorted(r["params"]["variant"] for r in r1.records) == ["crash", "racy", "wrong"]
    assert r1.best is None
