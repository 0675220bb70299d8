"""issue 16: ``gpudsl.ops`` runs the tuning database's winner for the bandwidth nodes
(add/mul/relu/silu, permute, slice, replace_slice) and the defaults otherwise; it never
tunes, and an unreadable database never stops an op."""
from __future__ import annotations

import numpy as np
import pytest

from gpudsl import ops
from gpudsl.cli import main
from gpudsl.stdlib import array_ops as ops_mod
from gpudsl.stdlib import tuning
from gpudsl.stdlib.permute import permute_kernel
from gpudsl.stdlib.pointwise import binary_kernel, plan_binary, plan_unary, unary_kernel
from gpudsl.stdlib.slices import plan_replace_slice, plan_slice, replace_slice_kernel, slice_kernel

pytest.importorskip("optuna")  # the tuning database is an Optuna study (the tune extra)


@pytest.fixture()
def tune_db(tmp_path, monkeypatch):
    path = tmp_path / "tune.sqlite"
    monkeypatch.setenv("GPUDSL_TUNE_DB", str(path))
    monkeypatch.setattr(ops_mod, "backend", lambda: "emulator")
    return path


def _launched(fn, *args):
    """The procs an op launches (recorded, not run) and its result when run."""
    seen = []
    run = ops_mod._run
    ops_mod._run = lambda p, **a: seen.append(p)  # every op launches through _run
    try:
        fn(*args)
    finally:
        ops_mod._run = run
    return seen


def _geometry(p, **sizes):
    """The block of each kernel of ``p``, from code generation."""
    from gpudsl.codegen import generate

    return [k.block for k in generate(p.ir, sizes).kernels.values()]


def _tune(*argv):
    rc = main(["tune", *argv, "--backend", "emulator", "--reps", "2"])
    assert rc == 0


def test_relu_runs_the_tuned_kernel(tune_db, capsys):
    x = np.random.default_rng(0).standard_normal((8, 64)).astype(np.float32)
    default = plan_unary("relu", x.size)
    assert _launched(ops.relu, x) == [default]  # no database: the defaults
    _tune("relu", "--shape", "8x64", "--param", "threads=64", "--param", "vec=2")
    assert "gpudsl.ops uses it" in capsys.readouterr().out
    tuned = unary_kernel("relu", 2, 64)
    assert tuned != default
    (p,) = _launched(ops.relu, x)
    assert p == tuned
    # the launched kernel is the tuned schedule: 64 threads a block, 2-wide vectors
    # (the defaults: 256 threads, float4)
    assert _geometry(p, n=x.size) == [(64, 1, 1)] and p.name == "relu_v2"
    assert _geometry(default, n=x.size) == [(256, 1, 1)] and default.name == "relu_v4"
    ops_mod._compiled.pop((tuned, "emulator"), None)
    out = ops.relu(x)  # and runs it, correctly
    assert (tuned, "emulator") in ops_mod._compiled
    np.testing.assert_array_equal(out, np.maximum(x, 0))
    # another shape, or the GPU's environment: no winner, the defaults
    y = np.ones((4, 64), np.float32)
    assert _launched(ops.relu, y) == [plan_unary("relu", y.size)]
    monkey_cuda = tuning.tuned_kernel(lambda: tuning.PointwiseTask("relu", (512,)), "cuda")
    assert monkey_cuda is None  # emulated records are never used on a GPU


def test_add_slice_replace_slice_permute_tuned(tune_db):
    rng = np.random.default_rng(1)
    a = rng.standard_normal((16, 32)).astype(np.float32)
    b = rng.standard_normal((1, 32)).astype(np.float32)
    assert _launched(ops.add, a, b) == [plan_binary("add", a.shape, b.shape)[0]]
    _tune("add", "--shape", "16x32", "--shape", "1x32", "--param", "threads=64",
          "--param", "vec=1")
    full = tuning.PointwiseTask("add", a.shape, b.shape).full
    assert _launched(ops.add, a, b) == [binary_kernel("add", full, 1, 64)]
    np.testing.assert_allclose(ops.add(a, b), a + b, rtol=1e-6)

    x = rng.standard_normal((32, 16)).astype(np.float32)
    assert _launched(ops.slice, x, 4, 12) == [plan_slice(16)]
    _tune("slice", "--shape", "32x16", "--begin", "0", "--end", "8", "--param", "threads=64",
          "--param", "vec=2")
    assert _launched(ops.slice, x, 4, 12) == [slice_kernel(2, 64)]  # key: shapes, not begin
    np.testing.assert_array_equal(ops.slice(x, 4, 12), x[4:12])

    r = rng.standard_normal((8, 16)).astype(np.float32)
    assert _launched(ops.replace_slice, x.copy(), r, 2, 10) == [plan_replace_slice(16)]
    _tune("replace_slice", "--shape", "32x16", "--begin", "0", "--end", "8",
          "--param", "threads=64", "--param", "vec=1")
    assert _launched(ops.replace_slice, x.copy(), r, 2, 10) == [replace_slice_kernel(1, 64)]
    y = x.copy()
    ops.replace_slice(y, r, 2, 10)
    ref = x.copy()
    ref[2:10] = r
    np.testing.assert_array_equal(y, ref)

    z = rng.standard_normal((8, 4, 16)).astype(np.float32)
    default = permute_kernel(z.shape, (1, 0, 2))[0]
    assert _launched(ops.permute, z, (1, 0, 2)) == [default]
    _tune("permute", "--shape", "8x4x16", "--perm", "1,0,2", "--param", "threads=64",
          "--param", "vec=2")
    tuned = tuning.PermuteTask(z.shape, (1, 0, 2))({"threads": 64, "vec": 2})
    assert tuned != default
    assert _launched(ops.permute, z, (1, 0, 2)) == [tuned]
    np.testing.assert_array_equal(ops.permute(z, (1, 0, 2)), np.transpose(z, (1, 0, 2)))


def test_unreadable_database_keeps_the_defaults(tune_db):
    tune_db.write_bytes(b"not a database" * 10)
    x = np.ones(256, np.float32)
    assert _launched(ops.silu, x) == [plan_unary("silu", 256)]
    assert _launched(ops.slice, np.ones((4, 8), np.float32), 0, 2) == [plan_slice(8)]


def test_ops_never_tunes(tune_db):
    x = np.ones((4, 32), np.float32)
    ops.relu(x)
    ops.permute(x)
    assert not tune_db.exists()  # no database appears: a lookup never creates one
