"""Issue 14: a user's mistake shows the gpudsl message first (file:line, quoted source,
caret, hint), with no gpudsl frame above it; GPUDSL_TRACEBACK=full shows them."""
from __future__ import annotations

import os
import subprocess
import sys
import types
from pathlib import Path

import pytest

import gpudsl
from gpudsl.errors import SrcLoc, format_user_error

HERE = Path(__file__).parent
SCRIPT = HERE / "mistakes.py"
ROOT = HERE.parent.parent
PKG = str(Path(gpudsl.__file__).parent)

# mistake -> (exception, text that must be in the message)
EXPECTED = {
    "misspelled_name": ("ProcError", "unknown name 'xx'"),
    "race": ("CheckError", "error[race]"),
    "missing_sync": ("CheckError", "SHARED array 's'"),
    "missing_sync_compile": ("CheckError", "not proved safe"),
    "out_of_bounds": ("CheckError", "error[bounds]"),
    "bad_launch_dtype": ("LaunchError", "dtype is float64"),
    "sync_in_thread_loop": ("CheckError", "sync() inside a @ THREADS"),
    "interpret_out_of_bounds": ("InterpError", "out-of-bounds read"),
}


def _run(mistake, **env):
    e = {k: v for k, v in os.environ.items() if k != "GPUDSL_TRACEBACK"}
    e.update(PYTHONPATH=str(ROOT), **env)
    return subprocess.run([sys.executable, str(SCRIPT), mistake], capture_output=True,
                          text=True, env=e, timeout=300)


@pytest.mark.parametrize("mistake", list(EXPECTED))
def test_message_comes_first_without_gpudsl_frames(mistake):
    r = _run(mistake)
    assert r.returncode == 1
    err = r.stderr
    exc, text = EXPECTED[mistake]
    first = err.splitlines()[0]
    assert first.startswith(f"gpudsl.{exc}: "), err
    assert text in err.split("raised from your code")[0], err
    # the message locates the mistake in the user's file, with the source quoted
    assert f"{SCRIPT}:" in err.split("raised from your code")[0], err
    assert "^" in err
    assert "hint:" in err
    assert "Traceback (most recent call last)" not in err
    assert PKG not in err, err  # no frame (nor path) inside gpudsl
    assert "GPUDSL_TRACEBACK=full" in err.splitlines()[-1]
    # the user's own frames are still shown, after the message
    assert f'File "{SCRIPT}", line ' in err


def test_internal_frames_on_request():
    r = _run("misspelled_name", GPUDSL_TRACEBACK="full")
    assert "Traceback (most recent call last)" in r.stderr
    assert os.path.join(PKG, "frontend") in r.stderr


def test_other_exceptions_keep_pythons_display():
    r = subprocess.run([sys.executable, "-c", "import gpudsl; 1/0"], capture_output=True,
                       text=True, env={**os.environ, "PYTHONPATH": str(ROOT)}, timeout=120)
    assert r.stderr.startswith("Traceback (most recent call last)")
    assert "ZeroDivisionError" in r.stderr


class _FakeCompiler:
    def __init__(self, files):
        self.files = files

    def format_code_name(self, name):
        if name in self.files:
            return "Cell", f"In[{self.files[name]}]"
        return None


def test_cell_locations_read_like_ipython(monkeypatch, tmp_path):
    cell = tmp_path / "ipykernel_1234" / "3012345.py"
    cell.parent.mkdir()
    cell.write_text("x = 1\ny = zz + 1\n")
    shell = types.SimpleNamespace(compile=_FakeCompiler({str(cell): 7}))
    fake = types.ModuleType("IPython")
    fake.get_ipython = lambda: shell
    monkeypatch.setitem(sys.modules, "IPython", fake)
    loc = SrcLoc(str(cell), 2, 4)
    assert str(loc) == "Cell In[7], line 2, column 5"
    err = gpudsl.ProcError("unknown name 'zz'", loc, "declare it")
    assert str(err).startswith("Cell In[7], line 2, column 5: unknown name 'zz'")
    assert "y = zz + 1" in str(err)
    assert str(SrcLoc("/elsewhere.py", 3, 0)) == "/elsewhere.py:3:1"


def test_format_user_error_of_a_caught_error():
    try:
        gpudsl.proc_from_source("def k(n: size, x: f32[n]):\n    x[0] = yy\n")
    except gpudsl.Error as e:
        text = format_user_error(e)
    assert text.startswith("gpudsl.ProcError: ")
    assert PKG not in text


RACY = '''
@proc
def racy_{n}(x: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            x[0] = x[t]
'''
OTHER = '''
@proc
def other_{n}(y: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[t] = 1.0
'''


def test_each_proc_from_source_quotes_its_own_lines():
    # two procs parsed from strings: the second's text replaced the first's under
    # "<string>", and the first proc's race was shown at "y[t] = 1.0"
    import random

    n = random.randrange(1 << 30)          # texts no earlier test held
    p = gpudsl.proc_from_source(RACY.format(n=n))
    q = gpudsl.proc_from_source(OTHER.format(n=n))
    report = str(p.check())
    assert "x[0] = x[t]" in report and "y[t] = 1.0" not in report
    assert q.ir.loc.file != p.ir.loc.file and q.ir.loc.file.startswith("<string")
    again = gpudsl.proc_from_source(OTHER.format(n=n))   # the same text: the same name
    assert again.ir.loc.file == q.ir.loc.file
