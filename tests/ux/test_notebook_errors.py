"""Issue 14: in a notebook (run by nbclient on an IPython kernel) a user's mistake shows
the gpudsl message first, located as ``Cell In[n], line l``, with no gpudsl frame."""
from __future__ import annotations

from pathlib import Path

import pytest

nbformat = pytest.importorskip("nbformat")
nbclient = pytest.importorskip("nbclient")
pytest.importorskip("ipykernel")

import gpudsl  # noqa: E402

ROOT = Path(__file__).parent.parent.parent
PKG = str(Path(gpudsl.__file__).parent)

CELLS = [
    f"import sys; sys.path.insert(0, {str(ROOT)!r})\n"
    "from __future__ import annotations\n"
    "import numpy as np\n"
    "from gpudsl import proc, par, BLOCKS, THREADS, SHARED, f32, size, sync",
    # [2] a misspelled name
    "@proc\n"
    "def k(n: size, x: f32[n]):\n"
    "    for i in par(0, n) @ THREADS:\n"
    "        x[i] = xx[i]\n",
    # [3] a race, seen by compile()
    "@proc\n"
    "def r(n: size, x: f32[n]):\n"
    "    assert n % 32 == 0\n"
    "    for b in par(0, n // 32) @ BLOCKS:\n"
    "        for t in par(0, 32) @ THREADS:\n"
    "            x[32 * b] = x[32 * b + t]\n"
    "r.compile('emulator')\n",
    # [4] a good proc, then a bad launch
    "@proc\n"
    "def c(n: size, x: f32[n], y: f32[n]):\n"
    "    assert n % 32 == 0\n"
    "    for b in par(0, n // 32) @ BLOCKS:\n"
    "        for t in par(0, 32) @ THREADS:\n"
    "            y[32 * b + t] = x[32 * b + t]\n"
    "c.compile('emulator')(x=np.zeros(64), y=np.zeros(64, np.float32))\n",
]


@pytest.fixture(scope="module")
def outputs():
    nb = nbformat.v4.new_notebook()
    nb.cells = [nbformat.v4.new_code_cell(c) for c in CELLS]
    client = nbclient.NotebookClient(nb, timeout=600, kernel_name="python3",
                                     allow_errors=True)
    client.execute()
    return [c.outputs for c in nb.cells]


def _error(outs):
    errs = [o for o in outs if o.output_type == "error"]
    assert len(errs) == 1, outs
    return errs[0]


@pytest.mark.parametrize("cell, exc, text", [
    (1, "ProcError", "Cell In[2], line 4, column 16: unknown name 'xx'"),
    (2, "CheckError", "--> Cell In[3], line 6"),
    (3, "LaunchError", "Cell In[4], line 2, column 16: 'x' of c holds f32"),
])
def test_notebook_shows_the_gpudsl_message_first(outputs, cell, exc, text):
    assert not [o for o in outputs[0] if o.output_type == "error"], outputs[0]
    err = _error(outputs[cell])
    assert err.ename == exc
    tb = "\n".join(err.traceback)
    assert err.traceback[0].startswith(f"gpudsl.{exc}: "), tb
    assert text in tb
    assert PKG not in tb, tb
    assert "Cell In[" in tb.split("raised from your code")[-1]
