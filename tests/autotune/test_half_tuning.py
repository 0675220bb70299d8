"""``gpudsl tune matmul --dtype float16|bfloat16``: the half GEMM ``ops.matmul`` runs on
the device (gpudsl/stdlib/half_tuning.py): the sm_90a NN wgmma kernel's tiles on an
H100/H200, the sm_80 kernel's elsewhere; ``ops.matmul`` reads the winner."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import autotune
from gpudsl.stdlib import half_tuning as ht
from gpudsl.stdlib.matmul_sm90 import sm90_space
from gpudsl.stdlib.matmul_sm90_nn import sm90_nn_kernel

pytest.importorskip("optuna")


def test_the_sm90_space_is_sm90_space_reduced_to_the_nn_kernels_parameters():
    space = ht.sm90_nn_space()
    configs = list(space)
    from gpudsl.stdlib.matmul_sm90_nn import nn_keywords
    names = nn_keywords()
    want = {tuple(sorted((k, v) for k, v in c.items() if k in names)) for c in sm90_space()}
    assert {tuple(sorted(c.items())) for c in configs} == want
    assert {"bn", "wgs", "bk", "stages"} <= set(space.domains) <= names
    assert len(ht.sm90_nn_space(100 * 1024)) < len(configs)   # the ring must fit


def test_the_task_tunes_what_ops_runs_on_the_device(h100):
    t = ht.HalfMatmulTask((70, 64), (64, 40), "f16", "cuda")
    assert t.kind == "sm90" and t.task == "matmul_sm90_nn"
    cfg = autotune.space.Config(bn=128, wgs=1, bk=64, stages=3)
    assert t(cfg) is sm90_nn_kernel("f16", bn=128, wgs=1, bk=64, stages=3, clip=True)
    assert set(t.space(bn=[64]).domains["bn"]) == {64}
    with pytest.raises(TypeError, match="unknown parameter"):
        t.space(tm=[4])
    e = ht.HalfMatmulTask((128, 32), (32, 128), "bf16", "emulator")
    assert e.kind == "sm80" and e.task == "matmul_sm80"
    assert e.shapes()["c"] == ((128, 128), "bfloat16")


def test_ops_takes_the_tuned_tile_on_sm90a_and_the_defaults_without_one(h100):
    from gpudsl.autotune import db
    from gpudsl.stdlib import first_run, matmul_sm90_nn, node_registry
    from gpudsl.stdlib.matmul_sm80 import plan_matmul_half_for

    # the choice is the subject: kernels are named by their keywords, not derived (other
    # tests derive them), and every first run passes (first_run's tests' subject)
    h100.setattr(matmul_sm90_nn, "_kernel", lambda *key: ("kernel",) + key)
    h100.setattr(first_run, "checked_on_device", lambda p, make_case: True)
    seen = []

    def winner(task, shapes, env, db_=None):
        seen.append((task, shapes["a"], env))
        return dict(bn=64, wgs=1, bk=32, stages=2) if task == "matmul_sm90_nn" else None

    def plan(a, b, lookup):
        h100.setattr(node_registry, "_TUNED", {})
        h100.setattr(db, "lookup_winner", lookup)
        return plan_matmul_half_for(a, b, "f16", target="cuda")[0]
    # (dt, bn, wgs, bk, stages, clip, batched, raster)
    assert plan((128, 64), (64, 256), winner) == ("kernel", "f16", 64, 1, 32, 2, False, False, 16)
    assert seen[0][:2] == ("matmul_sm90_nn", ((128, 64), "float16"))
    # a winner that does not serve the shape (bk 64 does not divide 48): the defaults
    assert plan((128, 48), (48, 256), lambda *a, **k: dict(bn=64, wgs=1, bk=64, stages=2)) \
        == ("kernel", "f16", 256, 2, 16, 4, True, False, 16)
    # a winner of other parameters (an older store): the defaults
    assert plan((128, 64), (64, 256), lambda *a, **k: dict(bm=64, tm=4)) \
        == ("kernel", "f16", 256, 2, 64, 4, False, False, 16)
    # no store: the defaults
    assert plan((256, 64), (64, 512), lambda *a, **k: None) \
        == ("kernel", "f16", 256, 2, 64, 4, False, False, 16)


def test_emulated_dry_run_tunes_the_sm80_kernel_and_stores_it(tmp_path):
    dbp = tmp_path / "tune.sqlite"
    t = ht.HalfMatmulTask((128, 32), (32, 128), "f16", "emulator")
    space = t.space(tile=[[128, 128]], warp=[[64, 64]], bk=[32], stages=[2], raster=[16])
    res = autotune.tune(t, space, t.args(0), reference=t.reference, backend="emulator",
                        db=str(dbp), reps=1, rtol=1e-3, atol=1e-3, task=t.task, **t.rate)
    assert res.best is not None and len(res.records) == 1
    assert all(r["status"] == "ok" for r in res.records)
    w = autotune.Database(str(dbp)).winner(
        "matmul_sm80", autotune.db.shapes_key(t.shapes()), autotune.env.env_key("emulator"))
    assert w == dict(tile=[128, 128], warp=[64, 64], bk=32, stages=2, raster=16)


def test_cli_dtype_is_for_matmul_only(capsys):
    from gpudsl.cli import main
    with pytest.raises(SystemExit, match="matmul only"):
        main(["tune", "relu", "--shape", "64", "--dtype", "float16", "--backend", "emulator"])


def test_reference_rounds_once_to_the_half_type():
    t = ht.HalfMatmulTask((128, 32), (32, 128), "f16", "emulator")
    args = t.args(3)
    assert args["a"].dtype == np.float16
    want = (args["a"].astype(np.float64) @ args["b"].astype(np.float64)).astype(np.float16)
    assert np.array_equal(t.reference(**args), want)
