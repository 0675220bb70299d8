"""Shared pytest configuration: tests marked ``gpu`` are skipped without a CUDA driver."""
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # run from a source tree without `pip install -e .`
    sys.path.insert(0, _ROOT)


def pytest_collection_modifyitems(config, items):
    from gpudsl.runtime.driver import driver_available
    if driver_available():
        return
    skip = pytest.mark.skip(reason="needs an NVIDIA GPU and driver (none found)")
    for item in items:
        if "gpu" in item.keywords:
            item.add_marker(skip)
