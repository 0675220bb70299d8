"""Issue 14: the README's first snippet runs; gpudsl --version; py.typed; every
environment variable the code reads is documented; the NameError of a missing
``from __future__ import annotations`` gets a hint."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import gpudsl

ROOT = Path(__file__).parent.parent.parent
PKG = Path(gpudsl.__file__).parent


def _env():
    return {**os.environ, "PYTHONPATH": str(ROOT)}


def test_readme_first_snippet_runs(tmp_path):
    text = (ROOT / "README.md").read_text()
    snippet = re.search(r"```python\n(.*?)```", text, re.S).group(1)
    assert "import gpudsl" in snippet
    script = tmp_path / "first.py"
    script.write_text(snippet)
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=_env(), timeout=300)
    assert r.returncode == 0, r.stderr
    assert "check(saxpy): ok" in r.stdout


def test_version():
    r = subprocess.run([sys.executable, "-c", "from gpudsl.cli import main; main()",
                        "--version"], capture_output=True, text=True, env=_env(), timeout=120)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == f"gpudsl {gpudsl.__version__}"


def test_py_typed_is_shipped():
    assert (PKG / "py.typed").exists()
    assert "py.typed" in (ROOT / "pyproject.toml").read_text()


def test_environment_variables_are_documented():
    used = set()
    for f in PKG.rglob("*.py"):
        used |= set(re.findall(r"environ(?:\.get)?[(\[]\s*\"(GPUDSL_[A-Z_]+)\"", f.read_text()))
    used.add("GPUDSL_TRACEBACK")
    assert {"GPUDSL_NO_GPU", "GPUDSL_CXX", "GPUDSL_EMU_WORKERS", "GPUDSL_CACHE_DIR"} <= used
    readme = (ROOT / "README.md").read_text()
    docs = (ROOT / "docs" / "environment.md").read_text()
    for name in used:
        assert f"`{name}" in readme, name
        assert f"`{name}" in docs, name


def test_public_api_has_docstrings():
    for obj in (gpudsl.Proc, gpudsl.Proc.compile, gpudsl.Proc.cuda_source, gpudsl.Proc.check,
                gpudsl.Proc.interpret, gpudsl.Proc.find, gpudsl.Proc.find_loop,
                gpudsl.Proc.find_alloc, gpudsl.proc, gpudsl.interpret, gpudsl.check):
        assert obj.__doc__ and len(obj.__doc__.strip()) > 20, obj


def test_missing_future_import_gets_a_hint(tmp_path):
    script = tmp_path / "noann.py"
    script.write_text("from gpudsl import proc, par, THREADS, f32, size\n\n@proc\n"
                      "def k(n: size, x: f32[n]):\n    for i in par(0, n) @ THREADS:\n"
                      "        x[i] = 0.0\n")
    r = subprocess.run([sys.executable, str(script)], capture_output=True, text=True,
                       env=_env(), timeout=120)
    assert "NameError: name 'n' is not defined" in r.stderr
    assert "from __future__ import annotations" in r.stderr.split("NameError")[-1]
