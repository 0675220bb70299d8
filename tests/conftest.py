"""Shared pytest configuration: tests marked ``gpu`` are skipped without a CUDA driver."""
import os
import sys
from pathlib import Path

import pytest

_ROOT = str(Path(__file__).resolve().parents[1])
if _ROOT not in sys.path:  # run from a source tree without `pip install -e .`
    sys.path.insert(0, _ROOT)


def pytest_collection_modifyitems(config, items):
    if os.environ.get("PYTEST_XDIST_WORKER"):
        # under pytest-xdist only: the heaviest files first (HEAVY_FIRST, below; a stable
        # sort: a file's own tests keep their order)
        items.sort(key=_heavy_rank)
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
os.environ.setdefault("GPUDSL_GRAPH_CACHE", "0")


# The disk cache of derived stdlib kernels (gpudsl.stdlib.derivation_cache) is one folder
# per test run, made by the first process and shared with its xdist workers and the
# subprocesses they start (the environment passes it on): a kernel derived by one
# process is read back by the others, and no test reads an entry that an earlier run,
# or a user's session, wrote.  Tests that watch a derivation run call the builder's
# ``cache_clear()`` (this process then derives it afresh).
_OWN_DERIVED = None
if "GPUDSL_DERIVATION_CACHE" not in os.environ:
    import tempfile

    _OWN_DERIVED = tempfile.mkdtemp(prefix="gpudsl-derived-")
    os.environ["GPUDSL_DERIVATION_CACHE"] = _OWN_DERIVED


def pytest_unconfigure(config):
    if _OWN_DERIVED is not None:
        import shutil

        shutil.rmtree(_OWN_DERIVED, ignore_errors=True)


# The files that take longest (seconds of `pytest --durations` on 2 cores, 2026-11-29),
# heaviest first.  Under pytest-xdist (`-n auto --dist loadfile`: README) a process takes
# whole files in collection order, so these go first and the cheap files fill in around
# them; xdist's own order (by number of tests) would leave the differential test, two
# tests and five minutes, to run alone at the end.  The order changes no test's outcome,
# and a file missing from the list only runs later.
HEAVY_FIRST = [
    "tests/hopper/test_swizzled_wgmma.py",        # 414
    "tests/schedule/test_differential.py",        # 300 (its time cap, loaded)
    "tests/stdlib/test_matmul_tf32_async.py",     # 211
    "tests/stdlib/test_matmul_sm80.py",           # 177
    "tests/stdlib/test_attention_paged.py",       # 168
    "tests/hopper/test_derived_gemm.py",          # 155
    "tests/hopper/test_tma.py",                   # 153
    "tests/stdlib/test_attention_split.py",       # 131
    "tests/stdlib/test_attention.py",             # 129
    "tests/stdlib/test_attention_gqa_mma.py",     # 117
    "tests/stdlib/test_attention_mma.py",         # 114
    "tests/ux/test_notebooks.py",                 # 114
    "tests/stdlib/test_attention_options.py",     # 97
    "docs/hopper.md",                             # 83
    "tests/hopper/test_ring_gemm.py",             # 81
    "tests/robustness/test_cache_robustness.py",  # 79
    "tests/sync/test_soundness.py",               # 65
    "tests/schedule/test_warp_specialize.py",     # 62
    "tests/stdlib/test_matmul_async.py",          # 59
    "tests/wgmma/test_check.py",                  # 56
]


def _heavy_rank(item) -> int:
    path = item.nodeid.split("::", 1)[0]
    return HEAVY_FIRST.index(path) if path in HEAVY_FIRST else len(HEAVY_FIRST)


@pytest.hookimpl(tryfirst=True)
def pytest_configure(config):
    # under xdist, keep the collection order (the heaviest files first, below) rather
    # than xdist's order by number of tests per file
    if getattr(config.option, "dist", "no") in ("loadfile", "loadscope"):
        config.option.loadscopereorder = False


@pytest.fixture
def h100(monkeypatch):
    """A faked sm_90a GPU (an H100/H200) whose kernels run on the emulator (no driver
    here): ``device_arch`` says sm_90a, ``ops`` runs on the "cuda" backend, and
    ``Proc.compile("cuda")`` builds for the emulator.  Every first run is checked afresh
    (``first_run._RESULTS`` empty) and the ops kernel cache starts empty: a "cuda"
    kernel cached by one test (perhaps a fake's broken one) is not another's.
    Everything is undone after the test (``monkeypatch``, which it returns)."""
    import importlib

    proc_mod = importlib.import_module("gpudsl.proc")   # gpudsl.proc is the decorator
    from gpudsl.runtime import driver
    from gpudsl.stdlib import array_ops, first_run
    monkeypatch.setattr(driver, "device_arch", lambda device=0: "sm_90a")
    monkeypatch.setattr(first_run, "_RESULTS", {})
    monkeypatch.setattr(array_ops, "backend", lambda: "cuda")
    monkeypatch.setattr(array_ops, "_compiled", {})
    real = proc_mod.Proc.compile
    monkeypatch.setattr(proc_mod.Proc, "compile",
                        lambda self, backend=None, **kw: real(self, "emulator", **kw)
                        if backend == "cuda" else real(self, backend, **kw))
    return monkeypatch
