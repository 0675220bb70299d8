"""Issue 14: the tutorial notebooks of examples/notebooks run top to bottom without an
error (nbclient on an IPython kernel; skipped without the ``notebooks`` extra), and
their displays are the rich HTML ones."""
from __future__ import annotations

import os
from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

ROOT = Path(__file__).parent.parent.parent
NOTEBOOKS = sorted((ROOT / "examples" / "notebooks").glob("*.ipynb"))


def test_there_are_tutorials():
    assert len(NOTEBOOKS) >= 3


@pytest.mark.parametrize("path", NOTEBOOKS, ids=lambda p: p.name)
def test_notebook_runs(path, monkeypatch):
    if path.name.startswith("04"):
        pytest.importorskip("optuna")  # the tuning tutorial needs the tune extra
    monkeypatch.setenv("PYTHONPATH", str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    nb = nbformat.read(path, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     resources={"metadata": {"path": str(path.parent)}})
    client.execute()  # raises CellExecutionError on the first failing cell
    htmls = [o.get("data", {}).get("text/html", "") for c in nb.cells if c.cell_type == "code"
             for o in c.outputs]
    joined = "\n".join(htmls)
    streams = "\n".join(o.get("text", "") for c in nb.cells if c.cell_type == "code"
                        for o in c.outputs)
    if path.name.startswith("01"):
        assert 'class="gpudsl-report"' in joined and 'class="gpudsl-witness"' in joined
        assert 'class="gpudsl-diff"' in joined and 'class="gpudsl-kernel"' in joined
        assert 'class="gpudsl-proc"' in joined
    if path.name.startswith("02"):
        assert "made by insert_sync at Cell In[" in streams
        assert 'class="gpudsl-diff"' in joined and 'class="gpudsl-kernel"' in joined
