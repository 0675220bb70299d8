"""Issue 34: a results folder's README is generated from its JSON
(``benchmarks/results_readme.py``), and no committed README contradicts its JSON."""
from __future__ import annotations

import importlib.util
import json
import pathlib
import shutil

import pytest

from gpudsl.cli import main as cli_main

ROOT = pathlib.Path(__file__).resolve().parents[2]
RESULTS = ROOT / "benchmarks" / "results"

# Folders that predate generation: their README.md was written by hand after the run
# (or, for the dry run, there is none).  No folder is added here: new campaign folders
# get a generated README (python3 benchmarks/results_readme.py FOLDER).
LEGACY = {
    "2026-11-26-h100": "hand-written, before issue 34",
    "2026-11-26-h100-run2": "hand-written, before issue 34",
    "2026-11-26-h100-run3": "hand-written, before issue 34 (its JSON lacks commit, "
                            "versions, clocks and backends)",
    "2026-11-26-h200": "hand-written, before issue 34",
    "2026-11-26-h200-run2": "hand-written, before issue 34",
    "2026-11-26-no-gpu": "a dry run: plans only, no README",
}


def _gen():
    spec = importlib.util.spec_from_file_location(
        "results_readme", ROOT / "benchmarks" / "results_readme.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_committed_readme_is_generated_from_its_json():
    gen = _gen()
    folders = sorted(p for p in RESULTS.iterdir() if p.is_dir())
    assert set(LEGACY) <= {p.name for p in folders}, "a legacy entry names no folder"
    for folder in folders:
        if folder.name in LEGACY:
            continue
        readme = folder / "README.md"
        assert readme.is_file(), f"{folder.name}: no README (results_readme.py writes it)"
        assert readme.read_text() == gen.generate(folder), \
            f"{folder.name}/README.md contradicts its JSON: regenerate it"


def test_legacy_json_still_renders():
    """The generator tolerates the older JSON (no commit, no backends)."""
    text = _gen().generate(RESULTS / "2026-11-26-h100-run3")
    assert "| matmul | 4096^3 | cold | float32 | 3.0602 |" in text
    assert "Commit: not recorded" in text


@pytest.fixture(scope="module")
def folder(tmp_path_factory):
    """A results folder as the campaign leaves it, from an emulator bench run."""
    root = tmp_path_factory.mktemp("results") / "2026-12-01-emulator"
    part1 = root / "part1"
    part1.mkdir(parents=True)
    assert cli_main(["bench", "--target", "emulator", "--nodes", "matmul,attention,add",
                     "--reps", "1", "--warmup", "0", "--out", str(part1 / "bench.json")]) == 0
    camp = {"device": "emulator", "driver": None, "date": "2026-12-01", "command": "x",
            "steps": [{"name": "bench", "status": "ok", "seconds": 3.0, "limit_s": 180}]}
    (part1 / "campaign.json").write_text(json.dumps(camp))
    part2 = root / "part2"
    part2.mkdir()
    (part2 / "campaign.json").write_text(json.dumps({**camp, "steps": []}))
    (part2 / "llama.json").write_text(json.dumps({"prompt": 4, "tokens": 3, "rows": [
        {"impl": "torch", "variant": "compile", "dtype": "bfloat16",
         "prefill_tokens_per_s": 1234.5, "decode_tokens_per_s": 321.0, "tokens_agree": True,
         "passes": [{"prefill_s": 1, "decode_s": 1}] * 3},
        {"impl": "torch", "variant": "graph", "dtype": "float16",
         "skipped": "CUDA graphs need a GPU"}]}))
    return root


def test_generated_readme_names_each_rows_reference_and_backend(folder):
    gen = _gen()
    text = gen.generate(folder)
    bench = json.loads((folder / "part1" / "bench.json").read_text())
    assert bench["commit"] in text
    for r in bench["results"]:
        line = next(ln for ln in text.splitlines()
                    if ln.startswith(f"| {r['node']} | {r['size']} | {r['l2']} |"))
        assert f"{r['reference']} ({r['reference_backend']})" in line
        assert f"| {r['ratio']:.3f} |" in line
    assert "| torch | compile | bfloat16 | 1234.5 | 321.0 | 3 |" in text
    assert "CUDA graphs need a GPU" in text


def test_check_refuses_a_readme_that_contradicts_its_json(folder, tmp_path):
    gen = _gen()
    copy = tmp_path / folder.name
    shutil.copytree(folder, copy)
    assert gen.main([str(copy)]) == 0 and gen.main([str(copy), "--check"]) == 0
    readme = copy / "README.md"
    readme.write_text(readme.read_text().replace("1234.5", "2234.5"))
    assert gen.main([str(copy), "--check"]) == 1


SMI = """==============NVSMI LOG==============

Driver Version                            : 580.159.04
CUDA Version                              : 13.0

Attached GPUs                             : 1
GPU 00000000:18:00.0
    Performance State                     : P0
    Clocks Event Reasons
        Idle                              : Not Active
        SW Power Cap                      : Active
        HW Slowdown                       : Not Active
    Clocks
        Graphics                          : 1755 MHz
        SM                                : 1755 MHz
        Memory                            : 2619 MHz
    Max Clocks
        Graphics                          : 1980 MHz
    GPU Power Readings
        Average Power Draw                : 512.33 W
        Current Power Limit               : 700.00 W
        Default Power Limit               : 700.00 W
"""


def test_readme_shows_clocks_power_state_and_throttling(monkeypatch, tmp_path):
    from gpudsl.bench import meta as bench_meta

    monkeypatch.setattr(bench_meta, "_run", lambda argv, timeout=30: (0, SMI))
    st = bench_meta.gpu_state()
    part = tmp_path / "x" / "part1"
    part.mkdir(parents=True)
    (part / "campaign.json").write_text(json.dumps(
        {"device": "H100", "steps": [], "gpu_state_start": st, "gpu_state_end": st}))
    text = _gen().generate(tmp_path / "x")
    line = next(ln for ln in text.splitlines() if ln.startswith("- GPU state at start"))
    for want in ("Performance State P0", "Clocks/SM 1755 MHz", "Max Clocks/Graphics 1980",
                 "Average Power Draw 512.33 W", "Current Power Limit 700.00 W",
                 "Event Reasons/SW Power Cap Active"):
        assert want in line, line
    assert "HW Slowdown" not in line and "Default Power Limit" not in line


def _table_column(text: str, header: str, column: str) -> list[str]:
    """The cells of ``column`` in the markdown table whose header row starts ``header``."""
    lines = text.splitlines()
    start = next(i for i, ln in enumerate(lines) if ln.startswith(header))
    names = [c.strip() for c in lines[start].strip().strip("|").split("|")]
    cells = []
    for ln in lines[start + 2:]:
        if not ln.lstrip().startswith("|"):
            break
        cells.append([c.strip() for c in ln.strip().strip("|").split("|")][names.index(column)])
    return cells


def test_the_legacy_run3_readme_quotes_only_ratios_its_json_has():
    """The hand-written run-3 README predates generation; its tables are still checked:
    every ratio it quotes is a ratio of its bench.json (3 decimals) or half_gpu.json
    (2 significant digits)."""
    import re

    folder = RESULTS / "2026-11-26-h100-run3"
    text = (folder / "README.md").read_text()
    bench = json.loads((folder / "part1" / "bench.json").read_text())["results"]
    have = {f"{r['ratio']:.3f}" for r in bench if "ratio" in r}
    quoted = [x for cell in _table_column(text, "| node | size | ratio |", "ratio")
              for x in re.findall(r"\d\.\d{3}", cell)]
    assert len(quoted) >= 12 and set(quoted) <= have, sorted(set(quoted) - have)
    half = json.loads((folder / "extra" / "half_gpu.json").read_text())
    have = {f"{r['ratio']:#.2g}" for r in half if "ratio" in r}
    quoted = _table_column(text, "  | case | dtype |", "torch/gpudsl")
    assert len(quoted) == 6 and set(quoted) <= have, sorted(set(quoted) - have)
