"""The GPU campaign's parts that run without a GPU: the plan and the dry run."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_plan_covers_the_issue(tmp_path):
    steps = dict(_load("gpu_campaign").plan("python3", tmp_path))
    assert list(steps)[:3] == ["venv", "install", "pytest-gpu"]
    assert "-m" in steps["pytest-gpu"] and "gpu" in steps["pytest-gpu"]
    for tool in ("memcheck", "racecheck", "synccheck"):
        cmd = steps[f"sanitizer-{tool}"]
        assert cmd[:3] == ["compute-sanitizer", "--tool", tool]
        assert cmd[-1].endswith("campaign_kernels.py")
    assert steps["bench"][-3:-1] == ["bench", "--out"]


def test_dry_run_writes_the_results_json(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_campaign.sh")
                        .replace(".sh", ".py"), "--dry-run", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "campaign.json").read_text())
    assert {"device", "driver", "date", "command", "steps"} <= set(data)
    assert data["dry_run"] is True
    assert [s["status"] for s in data["steps"]] == ["dry-run"] * len(data["steps"])
    assert len(data["steps"]) == 7


def test_sanitizer_program_lists_every_node():
    names = _load("campaign_kernels").cases()
    listed = " ".join(n for n, _ in names)
    for node in ("matmul", "add", "mul", "relu", "silu", "permute", "slice", "replace_slice"):
        assert node in listed


@pytest.mark.gpu
def test_campaign_kernels_run():  # on the GPU when there is one, else skipped
    assert _load("campaign_kernels").main([]) == 0
