"""The GPU campaign in one command (issue 15): on a machine with an NVIDIA GPU,

1. install gpudsl with its test and bench extras into a fresh virtual environment;
2. ``pytest -m gpu``;
3. compute-sanitizer memcheck, racecheck and synccheck over every standard-library
   node and every kernel of check()'s corpus that check() proves safe
   (``benchmarks/campaign_kernels.py``; racecheck also runs the corpus's racy kernels
   as controls);
4. ``gpudsl bench --out ...`` for every node;

and write ``benchmarks/results/<date>-<device>/campaign.json`` (device, driver, date,
command, each step's command, exit status, seconds and output tail) next to each
step's full log.  Each sanitizer report is attributed to the case that was running
(the program prints ``@@case KIND NAME`` before each); a report on a kernel check()
proved (racecheck: a hazard; memcheck: an invalid access; synccheck: a barrier error)
is a disagreement with check() and is listed under ``"bugs"`` in the JSON.  Racy
controls only say whether racecheck saw them (it sees shared-memory races only).  ``--dry-run`` runs nothing: it prints the plan and writes the
JSON with every step marked ``"dry-run"`` (CI tests that).

    python benchmarks/gpu_campaign.py [--dry-run] [--out DIR] [--skip install,...]
        [--no-venv] [--wheels DIR]

On a lent machine without network whose python already holds PyTorch (the H100/H200
machines here), carry wheels of what it lacks (``pip download z3-solver syrupy -d
.whl`` on a machine with network) and run
``bash benchmarks/gpu_campaign.sh --no-venv --wheels .whl``.  Each step has a time
limit (``TIMEOUTS``) so that the whole campaign ends within about 20 minutes.
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import re
import pathlib
import shlex
import shutil
import subprocess
import sys
import time

ROOT = pathlib.Path(__file__).resolve().parent.parent
TOOLS = ("memcheck", "racecheck", "synccheck")
TIMEOUTS = {"venv": 60, "install": 180, "pytest-gpu": 300, "sanitizer-memcheck": 150,
            "sanitizer-racecheck": 200, "sanitizer-synccheck": 150, "bench": 300}


def plan(py: str, out: pathlib.Path, venv: bool = True,
         wheels: str | None = None) -> list[tuple[str, list[str]]]:
    """The steps, in order: (name, argv).  ``venv=False`` installs into ``py``'s own
    environment (a lent machine whose python already holds PyTorch); ``wheels`` installs
    offline from that folder of wheels (``pip download z3-solver syrupy -d DIR``)."""
    vpy = str(out / "venv" / "bin" / "python") if venv else py
    offline = ["--no-index", "--find-links", str(wheels), "--no-build-isolation"] \
        if wheels else []
    steps = [("venv", [py, "-m", "venv", str(out / "venv")])] if venv else []
    steps += [
        ("install", [vpy, "-m", "pip", "install", "-q", *offline, "-e",
                     f"{ROOT}[test,bench]"]),
        ("pytest-gpu", [vpy, "-m", "pytest", "-q", "-m", "gpu", "-p", "no:cacheprovider",
                        f"--junitxml={out / 'pytest-gpu.xml'}", str(ROOT / "tests")]),
    ]
    for tool in TOOLS:
        extra = ["--controls"] if tool == "racecheck" else []
        steps.append((f"sanitizer-{tool}", [sanitizer(), "--tool", tool,
                                            "--error-exitcode", "99", vpy,
                                            str(ROOT / "benchmarks" / "campaign_kernels.py"),
                                            *extra]))
    steps.append(("bench", [vpy, "-m", "gpudsl.cli", "bench", "--out",
                            str(out / "bench.json")]))
    return steps


def sanitizer() -> str:
    """compute-sanitizer on the PATH, else where the CUDA toolkit puts it."""
    found = shutil.which("compute-sanitizer")
    if found:
        return found
    for p in ("/usr/local/cuda/bin/compute-sanitizer",
              "/usr/local/cuda/compute-sanitizer/compute-sanitizer"):
        if os.path.exists(p):
            return p
    return "compute-sanitizer"


_FINDING = re.compile(r"^=+ +(Error|Invalid|Race reported|Barrier error|Warning: .*(hazard|"
                      r"race)|Uninitialized|Program hit)", re.I)
MARK = "@@case"
_RESULT = re.compile(r"^(ok|BAD|SKIP)\s+\S+\s+(.*)$")


def sanitizer_findings(log: str) -> dict:
    """Parse a compute-sanitizer log of campaign_kernels.py: for each case (in the order
    run) its report lines and whether the program said it passed; reports printed before
    the first marker go under ``"(startup)"``."""
    cases: dict = {}
    cur = "(startup)"
    for line in log.splitlines():
        text = line.strip()
        if text.startswith(MARK + " "):
            _, kind, name = text.split(" ", 2)
            cur = name
            cases[cur] = {"kind": kind, "findings": [], "result": None}
        elif cur in cases and (m := _RESULT.match(text)) and \
                (m.group(2) == cur or m.group(2).startswith(cur + ":")):
            cases[cur]["result"] = text
        elif _FINDING.match(text) and "SUMMARY" not in text:
            cases.setdefault(cur, {"kind": "?", "findings": [], "result": None})
            cases[cur]["findings"].append(text.lstrip("= ").strip()[:400])
    return cases


def sanitizer_verdict(tool: str, log: str) -> dict:
    """What one sanitizer step says: per-case findings, bugs (reports on kernels check()
    proved, and cases that failed to run), and for racecheck which controls it saw."""
    cases = sanitizer_findings(log)
    bugs, controls = [], {}
    for name, c in cases.items():
        if c["kind"] == "control":
            controls[name] = bool(c["findings"])
            continue
        if c["findings"]:
            what = {"racecheck": "a shared-memory hazard", "memcheck": "an invalid memory "
                    "access", "synccheck": "a barrier error"}.get(tool, "an error")
            bugs.append({"tool": tool, "case": name, "kind": c["kind"],
                         "summary": f"{tool} reports {what} in {name}, which check() proved "
                                    "safe: a disagreement with check()",
                         "findings": c["findings"][:10]})
        if c["result"] and c["result"].startswith("BAD"):
            bugs.append({"tool": tool, "case": name, "kind": c["kind"],
                         "summary": f"{name} failed under {tool}: {c['result']}"})
    skipped = sorted(n for n, c in cases.items() if (c["result"] or "").startswith("SKIP"))
    out = {"cases_run": sum(1 for n, c in cases.items() if c["kind"] in ("stdlib", "corpus")
                            and n not in skipped),
           "skipped": skipped,
           "cases_with_findings": sorted(n for n, c in cases.items() if c["findings"]),
           "bugs": bugs}
    if controls:
        out["controls_detected"] = sum(controls.values())
        out["controls_run"] = len(controls)
        out["controls_missed"] = sorted(n for n, seen in controls.items() if not seen)
    return out


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
    ap.add_argument("--no-venv", action="store_true", help="install into --python's own "
                    "environment (a machine whose python holds PyTorch already)")
    ap.add_argument("--wheels", help="install offline from this folder of wheels")
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
               "dry_run": ns.dry_run, "steps": [], "bugs": []}
    failed = 0
    for name, cmd in plan(ns.python, out, not ns.no_venv, ns.wheels):
        step = {"name": name, "command": " ".join(map(shlex.quote, cmd))}
        if ns.dry_run or name in skip:
            step["status"] = "dry-run" if ns.dry_run else "skipped"
            print(f"[{step['status']}] {name}: {step['command']}")
        elif name.startswith("sanitizer") and not os.path.exists(cmd[0]):
            step["status"] = "missing compute-sanitizer"
            failed += 1
        else:
            t0 = time.monotonic()
            try:
                p = subprocess.run(cmd, capture_output=True, text=True, env=env, cwd=ROOT,
                                   timeout=TIMEOUTS.get(name, 600))
                rc, log = p.returncode, p.stdout + p.stderr
            except subprocess.TimeoutExpired as e:
                rc = 124
                log = "".join(x.decode(errors="replace") if isinstance(x, bytes) else (x or "")
                              for x in (e.stdout, e.stderr))
                log += f"\n[campaign] {name} stopped after {TIMEOUTS.get(name, 600)} s\n"
            (out / f"{name}.log").write_text(log)
            step.update(rc=rc, seconds=round(time.monotonic() - t0, 1), tail=log[-2000:],
                        status="ok" if rc == 0 else ("timeout" if rc == 124 else "failed"))
            if name.startswith("sanitizer-"):
                v = sanitizer_verdict(name.split("-", 1)[1], log)
                step["verdict"] = v
                results["bugs"].extend(v["bugs"])
                # controls are expected to race: judge the step by its proved kernels
                if rc != 124:
                    step["status"] = "ok" if not v["bugs"] and v["cases_run"] else "failed"
            failed += step["status"] != "ok"
            print(f"[{step['status']}] {name} ({step['seconds']} s)")
        results["steps"].append(step)
        (out / "campaign.json").write_text(json.dumps(results, indent=1))
    print(f"results: {out / 'campaign.json'}")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(run())
