"""``gpudsl tune NODE`` for each bandwidth node on the emulator with a tiny budget; the
final table's roofline fraction; the progress bar; ``Result.plot``."""
from __future__ import annotations

import io

import numpy as np
import pytest

pytest.importorskip("optuna")

from gpudsl import autotune  # noqa: E402
from gpudsl.cli import main  # noqa: E402
from gpudsl.stdlib import tuning  # noqa: E402

NODES = [
    ["permute", "--shape", "40x24", "--param", "tile=16", "--param", "pad=1"],
    ["permute", "--shape", "4x6x8", "--perm", "1,0,2", "--param", "threads=64"],
    ["add", "--shape", "4x8", "--shape", "1x8", "--param", "threads=64"],
    ["mul", "--shape", "4x8", "--shape", "4x8", "--param", "threads=64"],
    ["relu", "--shape", "24", "--param", "threads=64"],
    ["silu", "--shape", "6x4", "--param", "threads=64"],
    ["slice", "--shape", "8x12", "--begin", "2", "--end", "5", "--param", "threads=64"],
    ["replace_slice", "--shape", "8x12", "--begin", "2", "--end", "5", "--param",
     "threads=64"],
]


@pytest.mark.parametrize("argv", NODES, ids=lambda a: a[0] + "-" + a[2])
def test_gpudsl_tune_node(argv, tmp_path, capsys):
    db = tmp_path / "t.sqlite"
    rc = main(["tune", *argv, "--backend", "emulator", "--db", str(db), "--reps", "2",
               "--trials", "2", "--strategy", "random"])
    out = capsys.readouterr().out
    assert rc == 0, out
    assert "EMULATED" in out and "winner:" in out and "GB/s" in out
    recs = autotune.Database(db).records(argv[0])
    assert len(recs) == 2 and all(r["status"] == "ok" for r in recs), recs


def test_node_spaces():
    assert len(tuning.PointwiseTask("relu", (6,)).space()) == 5 * 2  # vec 4 does not divide 6
    t = tuning.PermuteTask((64, 32), (1, 0))
    assert not t.copy and len(t.space()) == 4  # tiles divide: threads not a parameter
    t = tuning.PermuteTask((40, 24), (1, 0))
    assert len(t.space()) == 8  # edges: threads matter
    with pytest.raises(Exception):
        tuning.SliceTask((8, 4), 5, 3)


def test_roofline_fraction_and_progress(tmp_path, capsys):
    t = tuning.PointwiseTask("add", (4, 8), (4, 8))
    space = t.space(threads=[64], vec=[1, 4])
    res = autotune.tune(t, space, t.args(0), reference=t.reference, backend="emulator",
                        db=tmp_path / "t.sqlite", reps=2, bytes_moved=t.bytes_moved,
                        task="add", progress=True)
    err = capsys.readouterr().err
    assert "tuning" in err and "best=" in err  # tqdm's bar with the best time so far
    rec = res.best.record
    assert rec["unit"] == "GB/s"
    assert res.roofline(rec) is None  # emulated times are not compared with a GPU
    frac = res.roofline(rec, device="H100")
    assert frac == pytest.approx(rec["rate"] / 3350.0)
    table = res.table(device="H100")
    assert "roofline" in table and "roofline of H100" in table
    assert f"{100 * frac:.2g}%" in table


def test_plot(tmp_path):
    pytest.importorskip("matplotlib")
    import matplotlib

    matplotlib.use("Agg")
    t = tuning.PointwiseTask("relu", (16,))
    res = autotune.tune(t, t.space(threads=[64, 128], vec=[4]), t.args(0),
                        reference=t.reference, backend="emulator", db=tmp_path / "t.sqlite",
                        reps=2, task="relu")
    ax = res.plot()
    labels = [lbl.get_text() for lbl in ax.get_yticklabels()]
    assert len(labels) == 2 and all("threads" in lbl for lbl in labels)
    assert "EMULATED" in ax.get_xlabel()
    buf = io.BytesIO()
    ax.figure.savefig(buf, format="png")
    assert buf.getvalue()[:4] == b"\x89PNG"
    np.testing.assert_array_less(0, [p.get_width() for p in ax.patches])
