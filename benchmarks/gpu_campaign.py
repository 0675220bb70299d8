"""The GPU campaign in one command (issue 15): on a machine with an NVIDIA GPU,

1. install gpudsl with its test and bench extras into a fresh virtual environment;
2. ``pytest -m gpu``;
3. compute-sanitizer memcheck, racecheck and synccheck over every standard-library
   node (``benchmarks/campaign_kernels.py``);
4. ``gpudsl bench --out ...`` for every node;

and write ``benchmarks/results/<date>-<device>/campaign.json`` (device, driver, date,
command, each step's command, exit status, seconds and output tail) next to each
step's full log.  ``--dry-run`` runs nothing: it prints the plan and writes the
JSON with every step marked ``"dry-run"`` (CI tests that).

    python benchmarks/gpu_campaign.py [--dry-run] [--out DIR] [--skip install,...]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shlex
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = ("memcheck", "racecheck", "synccheck")


def plan(py: str, out: pathlib.Path) -> list[tuple[str, list[str]]]:
    """The steps, in order: (name, argv)."""
    venv = out / "venv"
    vpy = str(venv / "bin" / "python")
    steps = [
        ("venv", [py, "-m", "venv", str(venv)]),
        ("install", [vpy, "-m", "pip", "install", "-q", "-e", f"{ROOT}[test,bench]"]),
        ("pytest-gpu", [vpy, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                        f"--junitxml={out / 'pytest-gpu.xml'}", str(ROOT / "tests")]),
    ]
    for tool in TOOLS:
        steps.append((f"sanitizer-{tool}", ["compute-sanitizer", "--tool", tool,
                                            "--error-exitcode", "99", vpy,
                                            str(ROOT / "benchmarks" / "campaign_kernels.py")]))
    steps.append(("bench", [vpy, "-m", "gpudsl.cli", "bench", "--out",
                            str(out / "bench.json")]))
    return steps


def _query(argv) -> str:
    try:
        return subprocess.run(argv, capture_output=True, text=True, timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return ""


def device_info() -> dict:
    q = _query(["nvidia-smi", "--query-gpu=name,driver_version", "--format=csv,noheader"])
    name, _, driver = q.partition(",")
    return {"device": name.strip() or None, "driver": driver.strip() or None}


def run(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    ap.add_argument("--out", help="results folder (default benchmarks/results/DATE-DEVICE)")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip")
    ap.add_argument("--python", default=sys.executable)
    ns = ap.parse_args(argv)
    info = device_info()
    if not ns.dry_run and info["device"] is None:
        print("gpu_campaign: no NVIDIA GPU (nvidia-smi found none); use --dry-run to see the "
              "plan", file=sys.stderr)
        return 2
    date = datetime.date.today().isoformat()
    tag = (info["device"] or "dry-run").replace(" ", "-")
    out = pathlib.Path(ns.out or ROOT / "benchmarks" / "results" / f"{date}-{tag}")
    out.mkdir(parents=True, exist_ok=True)
    skip = {s for s in ns.skip.split(",") if s}
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    results = {**info, "date": date, "command": " ".join(map(shlex.quote, sys.argv)),
               "dry_run": ns.dry_run, "steps": []}
    failed = 0
    for name, cmd in plan(ns.python, out):
        step = {"name": name, "command": " ".join(map(shlex.quote, cmd))}
        if ns.dry_run or name in skip:
            step["status"] = "dry-run" if ns.dry_run else "skipped"
            print(f"[{step['status']}] {name}: {step['command']}")
        elif name.startswith("sanitizer") and shutil.which("compute-sanitizer") is None:
            step["status"] = "missing compute-sanitizer"
            failed += 1
        else:
            t0 = time.monotonic()
            p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT)
            log = p.stdout + p.stderr
            (out / f"{name}.log").write_text(log)
            step.update(rc=p.returncode, seconds=round(time.monotonic() - t0, 1),
                        tail=log[-2000:], status="ok" if p.returncode == 0 else "failed")
            failed += p.returncode != 0
            print(f"[{step['status']}] {name} ({step['seconds']} s)")
        results["steps"].append(step)
        (out / "campaign.json").write_text(json.dumps(results, indent=1))
    print(f"results: {out / 'campaign.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())
