"""Issue 14/25: every python block of README.md and docs/ is a test (Sybil); gpudsl --version; py.typed; every
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


def _python_blocks():
    """(file, line) of every ```python block of README.md and docs/*.md."""
    out = []
    for f in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for n, line in enumerate(f.read_text().splitlines(), 1):
            if line.strip() == "```python":
                out.append((f.relative_to(ROOT).as_posix(), n))
    return out


def test_every_python_block_of_the_docs_runs_as_a_test():
    """The root conftest.py (Sybil) makes each ```python block of README.md and docs/ a
    test of the plain `pytest -q`; none is left out, and skipped fragments are rare."""
    r = subprocess.run([sys.executable, "-m", "pytest", "--collect-only", "-q",
                        "-p", "no:cacheprovider", "README.md", "docs"],
                       capture_output=True, text=True, cwd=ROOT, env=_env(), timeout=300)
    assert r.returncode == 0, r.stdout + r.stderr
    collected = {line.split("::")[0] + ":" + line.split("line:")[1].split(",")[0]
                 for line in r.stdout.splitlines() if "::line:" in line}
    blocks = _python_blocks()
    assert len(blocks) >= 77
    for file, n in blocks:  # sybil's line is the fence's
        assert f"{file}:{n}" in collected, (file, n)
    skips = sum(f.read_text().count("<!-- skip: next")
                for f in [ROOT / "README.md", *(ROOT / "docs").glob("*.md")])
    assert skips <= 3
    assert "testpaths" in (ROOT / "pyproject.toml").read_text()
    assert '"README.md", "docs"' in (ROOT / "pyproject.toml").read_text()


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


def test_cli_help_is_plain_text():
    """`gpudsl --help` and every command's help: no reStructuredText roles or
    double backticks."""
    commands = [[], ["demo"], ["check"], ["cuda"], ["run"], ["perf"], ["bench"], ["tune"]]
    for cmd in commands:
        r = subprocess.run([sys.executable, "-m", "gpudsl.cli", *cmd, "--help"],
                           capture_output=True, text=True, env=_env(), timeout=120)
        assert r.returncode == 0, (cmd, r.stderr)
        assert "usage: gpudsl" in r.stdout
        assert not re.search(r":(class|func|mod|meth):|``", r.stdout), (cmd, r.stdout)
