"""`.ci/run` runs exactly the README's test command, and that command runs the suite
in parallel (pytest-xdist, from the ``test`` extra) with a file kept in one process."""
from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def _readme_command() -> str:
    lines = [l.strip() for l in (ROOT / "README.md").read_text().splitlines()
             if "pip install" in l and "-m pytest" in l]
    assert len(lines) == 1, lines
    return lines[0]


def test_ci_runs_exactly_the_readme_command():
    script = (ROOT / ".ci" / "run").read_text().splitlines()
    commands = [l.strip() for l in script if "-m pytest" in l]
    assert commands == [_readme_command()]


def test_the_command_runs_the_files_on_every_core():
    cmd = _readme_command()
    assert re.search(r"-m pytest -q -n auto --dist loadfile$", cmd), cmd
    extras = re.search(r"-e '\.\[([^\]]*)\]'", cmd).group(1).split(",")
    assert "test" in extras
    test_extra = (ROOT / "pyproject.toml").read_text().split("test = [", 1)[1].split("]", 1)[0]
    assert '"pytest-xdist' in test_extra
