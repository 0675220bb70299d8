"""Several processes tune into one study through one database URL: every configuration
is measured by exactly one of them, and each ends with every record."""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from gpudsl import autotune  # noqa: E402

from .shared_worker import space  # noqa: E402

ROOT = Path(__file__).parent.parent.parent


def test_two_processes_one_sqlite_url(tmp_path):
    url = f"sqlite:///{tmp_path / 'shared.sqlite'}"
    autotune.Database(url)  # the schema exists before the two start
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    procs = [subprocess.Popen([sys.executable, "-m", "tests.autotune.shared_worker", url,
                               str(seed)], cwd=ROOT, env=env, stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True) for seed in (0, 1)]
    outs = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err[-3000:]
        outs.append(json.loads(out.strip().splitlines()[-1]))
    n = len(space())
    for recs in outs:  # each process ends with every configuration's record
        assert len(recs) == n
        assert sorted(json.dumps(r["params"], sort_keys=True) for r in recs) == \
            sorted(c.key() for c in space())
    # each configuration measured by exactly one process
    measured = [json.dumps(r["params"], sort_keys=True) for recs in outs for r in recs
                if not r["cached"]]
    assert sorted(measured) == sorted(c.key() for c in space())
    # one record per configuration in the store, and one winner
    db = autotune.Database(url)
    recs = db.records("shared-matmul")
    assert len(recs) == n
    assert {r["status"] for r in recs} == {"ok", "wrong"}
    (study,) = json.loads(db.export_json(task="shared-matmul"))["studies"]
    assert study["winner"]["params"]["variant"] == "tiled"
