"""The GPU campaign's parts that run without a GPU: the plan and the dry run."""
from __future__ import annotations

import importlib.util
import json
import os
import pathlib
import subprocess
import sys

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]


def _load(name):
    spec = importlib.util.spec_from_file_location(name, ROOT / "benchmarks" / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules.pop("campaign_run", None)  # re-imported with the campaign_plan now loaded
    sys.modules[name] = mod  # dataclasses look their module up (a test run alone failed)
    spec.loader.exec_module(mod)
    return mod


def test_part1_runs_the_issue_steps_in_priority_order(tmp_path):
    steps = _load("gpu_campaign").plan("python3", tmp_path, part=1)
    names = [s.name for s, _ in steps]
    assert names == ["install", "environment", "bench", "smoke", "sanitizer-memcheck",
                     "pytest-gpu"]
    argv = {s.name: a for s, a in steps}
    assert "--no-index" in argv["install"] and "--target" in argv["install"]
    assert "-m" in argv["pytest-gpu"] and "gpu" in argv["pytest-gpu"]
    assert "-n" in argv["pytest-gpu"]   # the sm_90a tests prove their kernels first
    mem = argv["sanitizer-memcheck"]
    assert mem[0].endswith("compute-sanitizer") and mem[1:3] == ["--tool", "memcheck"]
    bench = argv["bench"]
    nodes = bench[bench.index("--nodes") + 1].split(",")
    # issue 36: the derived sm_90a GEMMs first, each against cuBLAS, then fp32 SGEMM
    assert nodes[:3] == ["matmul_f16_sm90", "matmul_bf16_sm90", "matmul_tf32_sm90"]
    assert "matmul" in nodes
    steps2 = _load("gpu_campaign").plan("python3", tmp_path, part=2)
    assert [s.name for s, _ in steps2] == ["install", "environment", "sanitizer-racecheck",
                                           "sanitizer-synccheck", "sanitizer-memcheck-sm90",
                                           "bench", "llama"]
    hop = dict((s.name, a) for s, a in steps2)["sanitizer-memcheck-sm90"]
    assert hop[1:3] == ["--tool", "memcheck"] and hop[-1] == "--hopper"
    bench2 = dict((s.name, a) for s, a in steps2)["bench"]
    nodes2 = bench2[bench2.index("--nodes") + 1].split(",")
    # issues 26 and 34: the other precisions, attention, the permutes and pointwise nodes
    assert nodes2[:4] == ["matmul_tf32", "matmul_f16", "matmul_bf16", "attention"]
    assert {"permute2d", "permute3d_021", "permute3d_210", "rms_norm",
            "sliced_softmax"} <= set(nodes2)


def test_plan_fits_the_lent_machines():
    """Issue 26: part 1's step limits sum to at most 8 minutes, each part leaves at most
    8 files in $OUT, and both parts fit the 15-minute window with a machine start."""
    cp = _load("campaign_plan")
    assert sum(s.limit_s for s in cp.PARTS[1]) <= 8 * 60
    for part in cp.PARTS:
        assert cp.check_plan(part, wheels=40 * 2**20, tree=2 * 2**20) == []
        assert len(cp.out_files(part)) <= 8
    assert cp.check_plan(1, wheels=63 * 2**20, tree=2 * 2**20)  # over 64 MiB


def test_only_the_last_step_takes_the_rest_of_the_budget(monkeypatch):
    """The last step of each part (pytest -m gpu, LLaMA) gets what the part has left; a
    step taking the rest anywhere else would starve the ones after."""
    cp = _load("campaign_plan")
    for part in cp.PARTS:
        assert [s.rest for s in cp.PARTS[part]] == [False] * (len(cp.PARTS[part]) - 1) + [True]
    moved = [cp.PARTS[1][-1]] + cp.PARTS[1][:-1]
    monkeypatch.setitem(cp.PARTS, 1, moved)
    assert any("only the last step" in b for b in cp.check_plan(1))


def test_llama_and_suite_figures_come_from_their_json(tmp_path):
    camp = _load("gpu_campaign")
    (tmp_path / "llama.json").write_text(json.dumps({"rows": [
        {"impl": "torch", "variant": "eager", "dtype": "float16",
         "decode_tokens_per_s": 200.0, "passes": [{"prefill_s": 1, "decode_s": 1}]}]}))
    rows = camp.figures("llama", "", tmp_path)["rows"]
    assert rows == [{"impl": "torch", "variant": "eager", "dtype": "float16",
                     "decode_tokens_per_s": 200.0}]
    (tmp_path / "attention_suite.json").write_text(json.dumps({"results": [
        {"node": "attention_suite", "size": "32x16x512x512x64", "status": "ok",
         "ratio": 0.5, "reference": "torch SDPA", "reference_backend": "FLASH_ATTENTION",
         "timing": {"times_ms": [1.0]}}]}))
    (row,) = camp.figures("attention-suite", "", tmp_path)["rows"]
    assert row["reference_backend"] == "FLASH_ATTENTION" and "timing" not in row


def test_check_plan_catches_an_overrun(monkeypatch):
    cp = _load("campaign_plan")
    slow = cp.PARTS[1][:-1] + [cp.Step("sanitizer-memcheck", ("x",), 200)]
    monkeypatch.setitem(cp.PARTS, 1, slow)
    assert any("sum to" in b for b in cp.check_plan(1))
    many = cp.PARTS[2] + [cp.Step(f"s{i}", ("x",), 1, files=(f"f{i}.json",))
                          for i in range(6)]
    monkeypatch.setitem(cp.PARTS, 2, many)
    assert any("output files" in b for b in cp.check_plan(2))


def test_rehearsal_planning_part_runs_in_ci():
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_campaign.py"),
                        "--rehearse", "--plan-only"], capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stdout + p.stderr
    assert "part 1:" in p.stdout and "part 2:" in p.stdout


def test_wheel_folder_is_checked_against_the_list(tmp_path):
    cp = _load("campaign_plan")
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import campaign_rehearse as cr

    for spec in cr.listed_wheels():
        name, version = spec.split("==")
        (tmp_path / f"{name.replace('-', '_')}-{version}-py3-none-any.whl").write_bytes(b"")
    assert cr.wheel_problems(tmp_path) == []
    (tmp_path / "optuna-4.0.0-py3-none-any.whl").write_bytes(b"")
    (tmp_path / "rich-13.0.0-py3-none-any.whl").write_bytes(b"")
    bad = " ".join(cr.wheel_problems(tmp_path))
    assert "optuna" in bad and "rich" in bad
    assert cp.WHEELS == ".whl"


def test_readme_quotes_the_device_call():
    cp = _load("campaign_plan")
    text = (ROOT / "benchmarks" / "README.md").read_text()
    for part in cp.PARTS:
        assert cp.DEVICE_COMMAND[part] in text
        assert f"timeout_s={cp.DEVICE_TIMEOUT_S[part]}" in text
    assert 'carry=[".whl", ".derived"]' in text and "derive_ahead.py" in text
    assert "bash benchmarks/wheels.sh" in text


def test_a_step_past_its_limit_is_stopped_and_the_json_kept(tmp_path, monkeypatch):
    """Each step within its own limit (its process group stopped), results written as the
    run goes: a step that hangs is 'timeout', the next still runs."""
    camp = _load("gpu_campaign")
    cp = sys.modules["campaign_plan"]
    steps = [cp.Step("environment", ("{py}", "-c", "import json; "
                                     "print('@@env ' + json.dumps(dict(device='x')))"), 10),
             cp.Step("smoke", ("{py}", "-c", "import time; print('ok  stdlib a'); "
                               "time.sleep(60)"), 2),
             cp.Step("pytest-gpu", ("{py}", "-c", "print('3 passed in 0.1s')"), 10)]
    monkeypatch.setitem(camp.PARTS, 1, steps)
    res = camp.run_part(1, sys.executable, tmp_path, str(tmp_path / "site"), "emulator",
                        False, set(), "test")
    status = {s["name"]: s["status"] for s in res["steps"]}
    assert status == {"environment": "ok", "smoke": "timeout", "pytest-gpu": "ok"}
    data = json.loads((tmp_path / "campaign.json").read_text())
    assert data["device"] == "x" and data["steps"][1]["figures"]["ok"] == 1
    assert data["steps"][2]["figures"]["summary"] == "3 passed in 0.1s"
    assert "stopped after 2 s" in (tmp_path / "campaign.log").read_text()


def test_dry_run_writes_the_results_json(tmp_path):
    p = subprocess.run([sys.executable, str(ROOT / "benchmarks" / "gpu_campaign.py"),
                        "--dry-run", "--out", str(tmp_path)],
                       capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    data = json.loads((tmp_path / "campaign.json").read_text())
    assert {"device", "driver", "date", "command", "steps"} <= set(data)
    assert data["dry_run"] is True
    assert [s["status"] for s in data["steps"]] == ["dry-run"] * len(data["steps"])
    assert len(data["steps"]) == 6


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


def test_every_main_dependency_reaches_the_gpu_machines():
    # the campaign installs offline: a main dependency that is neither carried
    # (wheels.txt) nor on the machines (wheels-image.txt) fails the install there
    import re

    tomllib = pytest.importorskip("tomllib")   # Python 3.11+

    root = pathlib.Path(__file__).resolve().parents[2]
    deps = tomllib.loads((root / "pyproject.toml").read_text())["project"]["dependencies"]

    def names(path):
        out = set()
        for line in (root / "benchmarks" / path).read_text().splitlines():
            line = line.split("#")[0].strip()
            if line:
                out.add(re.split(r"[=<>\[ ]", line)[0].lower().replace("_", "-"))
        return out

    have = names("wheels.txt") | names("wheels-image.txt")
    want = {re.split(r"[=<>\[ ]", d)[0].lower().replace("_", "-") for d in deps}
    assert not want - have, f"main dependencies the GPU machines lack: {sorted(want - have)}"


def test_rehearsal_checks_every_issue_34_field(tmp_path):
    """The rehearsal fails when a result lacks what issue 34 asks: the run-3 JSON of
    2026-11-26 (before it) lacks the provenance, the backends and the warm 256 MB rows."""
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import campaign_rehearse as cr

    bad = " | ".join(cr.field_problems(tmp_path))
    assert "bench.json: missing" in bad and "llama.json: missing" in bad
    run3 = ROOT / "benchmarks" / "results" / "2026-11-26-h100-run3"
    bad = cr.field_problems(run3)
    assert "bench.json: no commit" in bad and "bench.json: no gpu_state_end" in bad
    assert any("no reference_backend" in b for b in bad)
    assert any("('add', '8192x8192') lacks a cold or warm row" in b for b in bad)


def test_kernels_derived_ahead_are_read_on_the_machine(tmp_path, monkeypatch):
    # benchmarks/derive_ahead.py fills .derived/ here; carried with the tree, the
    # campaign's steps read the derivation cache there instead of deriving on device time
    _load("gpu_campaign")
    cr = sys.modules["campaign_run"]
    monkeypatch.delenv("GPUDSL_DERIVATION_CACHE", raising=False)
    monkeypatch.setattr(cr, "ROOT", tmp_path)
    assert "GPUDSL_DERIVATION_CACHE" not in cr._environment("/site", "cuda")
    (tmp_path / ".derived").mkdir(mode=0o775)        # as a copy may arrive
    (tmp_path / ".derived" / "k.pickle").write_bytes(b"")
    os.chmod(tmp_path / ".derived" / "k.pickle", 0o664)
    assert cr._environment("/site", "cuda")["GPUDSL_DERIVATION_CACHE"] == str(
        tmp_path / ".derived")
    assert (tmp_path / ".derived").stat().st_mode & 0o777 == 0o700
    assert (tmp_path / ".derived" / "k.pickle").stat().st_mode & 0o777 == 0o600
    monkeypatch.setenv("GPUDSL_DERIVATION_CACHE", "/mine")   # the caller's own wins
    assert cr._environment("/site", "cuda")["GPUDSL_DERIVATION_CACHE"] == "/mine"
    ahead = _load("derive_ahead")
    labels = [label for label, _ in ahead.plans()]
    assert len(labels) == len(set(labels)) >= 20
    assert any("8192" in x and "tf32" in x for x in labels)
