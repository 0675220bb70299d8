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


# The disk cache of compiled graphs (gpudsl.graph.graph_cache) is off in the tests: many patch
# the compile path (fusion, kernels) and must see it run.  tests/graph/test_graph_cache.py
# turns it on where it is the subject.
import os  # noqa: E402

os.environ.setdefault("GPUDSL_GRAPH_CACHE", "0")
