"""Fixtures of the scheduling tests.

Golden files: ``golden(name, text)`` compares ``text`` with
``tests/schedule/golden/<name>.txt``.  A missing golden fails; refresh them with
``pytest tests/schedule --update-goldens`` (or ``GPUDSL_UPDATE_GOLDENS=1``).
"""
from __future__ import annotations

import os
from pathlib import Path

import pytest

GOLDEN_DIR = Path(__file__).parent / "golden"


def pytest_addoption(parser):
    parser.addoption("--update-goldens", action="store_true", default=False,
                     help="rewrite tests/schedule/golden/*.txt from the current output")


@pytest.fixture
def golden(request):
    update = request.config.getoption("--update-goldens") or \
        os.environ.get("GPUDSL_UPDATE_GOLDENS") == "1"

    def check(name: str, text: str):
        path = GOLDEN_DIR / f"{name}.txt"
        text = str(text)
        if update:
            GOLDEN_DIR.mkdir(exist_ok=True)
            path.write_text(text)
            return
        if not path.exists():
            pytest.fail(f"golden file {path} is missing; run pytest with --update-goldens "
                        "to create it")
        want = path.read_text()
        assert text == want, f"printed proc differs from {path}:\n{text}"

    return check


# the examples are imported by the tests
import sys  # noqa: E402

_ROOT = str(Path(__file__).resolve().parents[2])
if _ROOT not in sys.path:
    sys.path.insert(0, _ROOT)
