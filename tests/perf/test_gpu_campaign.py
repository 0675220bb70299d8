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
        assert cmd[0].endswith("compute-sanitizer") and cmd[1:3] == ["--tool", tool]
        assert any(a.endswith("campaign_kernels.py") for a in cmd)
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


# ---------------------------------------------------------------- issue 15, wave 3

RACECHECK_LOG = """\
========= COMPUTE-SANITIZER
@@case stdlib matmul 256^3
ok  stdlib matmul 256^3
@@case corpus own_slot
========= Error: Race reported between Write access at own_slot_k0(float *)+0x90 in x.py:12
=========     and Read access at own_slot_k0(float *)+0xd0 in x.py:13 [4 hazards]
ok  corpus own_slot
@@case corpus tree_reduction[n=512]
BAD corpus tree_reduction[n=512]: LaunchError: boom
@@case corpus host_par_map
SKIP corpus host_par_map: CompileError: the par loop 'i' is not mapped
@@case control shared_scalar_store
========= Error: Race reported between Write access at k(float *)+0x90 in x.py:55
ok  control shared_scalar_store
@@case control two_blocks_same_y
ok  control two_blocks_same_y
========= RACECHECK SUMMARY: 2 hazards displayed (2 errors, 0 warnings)
"""


def test_racecheck_disagreement_with_check_is_a_bug():
    camp = _load("gpu_campaign")
    v = camp.sanitizer_verdict("racecheck", RACECHECK_LOG)
    assert v["cases_run"] == 3
    bugs = {b["case"]: b for b in v["bugs"]}
    assert set(bugs) == {"own_slot", "tree_reduction[n=512]"}
    assert "check() proved" in bugs["own_slot"]["summary"]
    assert "Race reported" in bugs["own_slot"]["findings"][0]
    assert "LaunchError" in bugs["tree_reduction[n=512]"]["summary"]
    # controls are expected to race: never bugs, only counted
    assert v["controls_run"] == 2 and v["controls_detected"] == 1
    assert v["controls_missed"] == ["two_blocks_same_y"]
    assert "matmul 256^3" not in v["cases_with_findings"]
    assert v["skipped"] == ["host_par_map"]


def test_memcheck_and_synccheck_reports_are_attributed():
    camp = _load("gpu_campaign")
    log = ("@@case stdlib relu\n========= Invalid __global__ write of size 4 bytes\n"
           "=========     at relu_k(float *)+0x70\nok  stdlib relu\n"
           "========= ERROR SUMMARY: 1 error\n")
    v = camp.sanitizer_verdict("memcheck", log)
    assert [b["case"] for b in v["bugs"]] == ["relu"]
    assert "invalid memory access" in v["bugs"][0]["summary"]
    sv = camp.sanitizer_verdict("synccheck", "@@case corpus x\n========= Barrier error "
                                "detected. Divergent thread(s) in warp\nok  corpus x\n")
    assert sv["bugs"][0]["tool"] == "synccheck"
    clean = camp.sanitizer_verdict("synccheck", "@@case corpus x\nok  corpus x\n"
                                   "========= ERROR SUMMARY: 0 errors\n")
    assert clean["bugs"] == [] and clean["cases_run"] == 1


def test_sanitizer_program_covers_the_corpus_safe_kernels():
    ck = _load("campaign_kernels")
    import tests.analysis.corpus as corpus
    import tests.analysis.corpus_atomics as atomics

    safe = {c.name for c in corpus.CASES + atomics.CASES if c.expect == "ok"}
    listed = {name for kind, name, _ in ck.corpus_cases() if kind == "corpus"}
    assert listed == safe and len(safe) > 50
    controls = [n for kind, n, _ in ck.corpus_cases(controls=True) if kind == "control"]
    assert "shared_scalar_store" in controls
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "campaign_kernels.py"),
                        "--list", "--controls"], capture_output=True, text=True, timeout=120)
    kinds = {line.split()[0] for line in p.stdout.splitlines()}
    assert p.returncode == 0 and kinds == {"stdlib", "corpus", "control"}


def test_sanitizer_program_marks_each_case_on_the_emulator():
    """The harness itself on the CPU emulator (two stdlib cases, two corpus kernels, one
    control), in the form the campaign parses."""
    import os

    env = {**os.environ, "GPUDSL_NO_GPU": "1", "PYTHONPATH": str(ROOT)}
    outs = []
    for only in ("relu", "own_slot", "shared_scalar_store", "host_par_map"):
        p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "campaign_kernels.py"),
                            "--target", "emulator", "--controls", "--only", only],
                           capture_output=True, text=True, timeout=300, env=env)
        assert p.returncode == 0, p.stdout + p.stderr
        outs.append(p.stdout)
    v = _load("gpu_campaign").sanitizer_verdict("racecheck", "".join(outs))
    assert v["bugs"] == [] and v["cases_run"] >= 2 and v["controls_run"] >= 1
    assert "host_par_map" in v["skipped"]  # proved, but codegen refuses a host par loop


def test_offline_plan_on_a_lent_machine(tmp_path):
    steps = dict(_load("gpu_campaign").plan("python3", tmp_path, venv=False, wheels="/w"))
    assert "venv" not in steps and steps["install"][0] == "python3"
    assert "--no-index" in steps["install"] and "/w" in steps["install"]
    assert steps["sanitizer-racecheck"][-1] == "--controls"
    assert steps["sanitizer-memcheck"][-1].endswith("campaign_kernels.py")
