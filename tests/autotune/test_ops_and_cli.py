"""``gpudsl tune matmul`` on the emulator, and ops running the tuned kernel."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import autotune, ops
from gpudsl.cli import main
from gpudsl.stdlib import array_ops as ops_mod
from gpudsl.stdlib.matmul import MatmulBuild, matmul_kernel

pytest.importorskip("optuna")  # the tuning database is an Optuna study (the tune extra)


@pytest.fixture()
def tune_db(tmp_path, monkeypatch):
    path = tmp_path / "tune.sqlite"
    monkeypatch.setenv("GPUDSL_TUNE_DB", str(path))
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    return path


def test_cli_tune_then_ops_runs_the_tuned_kernel(tune_db, capsys):
    a = np.random.default_rng(0).standard_normal((32, 32)).astype(np.float32)
    b = np.random.default_rng(1).standard_normal((32, 32)).astype(np.float32)
    default_proc = matmul_kernel(a.shape, b.shape)[0]
    # no winner: the defaults (128-wide tiles do not fit 32x32: the guarded kernel)
    ops.matmul(a, b)
    assert (default_proc, "emulator") in ops_mod._compiled
    rc = main(["tune", "matmul", "--shape", "32x32", "--shape", "32x32", "--target",
               "emulator", "--param", "bm=32", "--param", "bn=32", "--param", "bk=8",
               "--param", "tm=4,8", "--param", "tn=4", "--param", "stages=1",
               "--param", "async_stages=0", "--param", "min_blocks=2", "--reps", "3",
               "--export", str(tune_db.parent / "x.json")])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "EMULATED" in out and "winner:" in out
    win = autotune.Database(tune_db).records("matmul")
    # tm 4 and 8, each without a warp tile and with those that fit 32x32 (wm x wn:
    # 16x32, 32x16 for tm 4; 32x32 for tm 8)
    assert len(win) == 5 and all(r["status"] == "ok" for r in win)
    tuned = autotune.Database(tune_db).winner(
        "matmul", autotune.db.shapes_key({k: ((32, 32), "float32") for k in "abc"}),
        autotune.env.env_key("emulator"))
    tuned_proc = MatmulBuild(a.shape, b.shape)(tuned)
    assert tuned_proc != default_proc
    ops_mod._compiled.pop((tuned_proc, "emulator"), None)
    c = ops.matmul(a, b)
    assert (tuned_proc, "emulator") in ops_mod._compiled  # it ran the tuned kernel
    np.testing.assert_allclose(c, a @ b, rtol=1e-4, atol=1e-4)
    # another shape has no winner: the defaults
    from gpudsl.stdlib.matmul import tuned_options

    assert tuned_options((32, 32), (32, 32), "emulator") == dict(tuned)
    assert tuned_options((16, 32), (32, 32), "emulator") == {}
    assert tuned_options((32, 32), (32, 32), "cuda") == {}  # never an emulated winner on a GPU


def test_cli_tune_bad_shape():
    with pytest.raises(SystemExit):
        main(["tune", "matmul", "--shape", "3xq", "--shape", "3x3"])
