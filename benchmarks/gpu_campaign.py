"""The GPU campaign (issue 26): on a lent GPU machine with no network, one call of at
most 8 minutes gives the project's figures; a second, if the window has time left,
the rest.

    python3 benchmarks/gpu_campaign.py --part 1     # install, smoke, bench, pytest -m gpu,
                                                    # memcheck  (<= 480 s of step limits)
    python3 benchmarks/gpu_campaign.py --part 2     # racecheck, synccheck, tune, LLaMA
    python3 benchmarks/gpu_campaign.py --dry-run    # the plan; runs nothing
    python3 benchmarks/gpu_campaign.py --rehearse   # the whole path here, without a GPU
    python3 benchmarks/gpu_campaign.py --stamp      # the commit, for the machine (no .git)

The steps, their limits and their files are declared in ``campaign_plan.py``.  The
install is offline: the wheels the machines lack (``benchmarks/wheels.txt``, fetched
into ``.whl/`` by ``benchmarks/wheels.sh`` on a machine with a registry, carried with
the tree) go into a folder put first on ``PYTHONPATH``; the machine's own python holds
the rest (PyTorch, numpy, cuda-bindings, NVRTC, pytest...).  gpudsl itself runs from
the tree (``PYTHONPATH``), never installed.

Results go to ``$OUT`` when it is set (what comes back from the machine), else to
``benchmarks/results/<date>-<device>/part<N>/``: ``campaign.json`` (device, driver,
date, command, each step's status, seconds and figures), ``campaign.log`` (every
step's output, in order), ``bench.json``, ``sanitizer.json``, ``tune.json`` (part 2).
Both JSON files and the log are written as the run goes, so a killed run still
returns what it had.

``--rehearse`` proves the path here: the plan against the machines' limits, then a
fresh Python 3.12 virtual environment given only wheels from disk (``.whl-image/``,
the stand-in for what the machines hold, and ``.whl/``, with ``--no-index`` and the
network closed to pip), and both parts run with the GPU steps replaced by their
emulator equivalents.  ``--rehearse --plan-only`` is the checking part alone (CI).
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import pathlib
import shlex
import signal
import subprocess
import sys
import tempfile
import time

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
import campaign_plan as plan_mod  # noqa: E402
from campaign_plan import PARTS, ROOT, Step  # noqa: E402
from campaign_sanitizer import (MARK, sanitizer_findings,  # noqa: E402,F401
                                sanitizer_verdict)
from campaign_run import (TOOLS, _meta, _write_json, bench_rows, figures, plan,  # noqa: E402,F401
                          run_part, run_step)

def device_info() -> dict:
    try:
        q = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=30).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        q = ""
    name, _, driver = q.splitlines()[0].partition(",") if q else ("", "", "")
    return {"device": name.strip() or None, "driver": driver.strip() or None}


def default_out(part: int, device: str | None) -> pathlib.Path:
    if os.environ.get("OUT"):
        return pathlib.Path(os.environ["OUT"])
    date = datetime.date.today().isoformat()
    tag = (device or "no-gpu").replace(" ", "-")
    return ROOT / "benchmarks" / "results" / f"{date}-{tag}" / f"part{part}"


def dry_run(part: int, py: str, out: pathlib.Path, command: str) -> int:
    out.mkdir(parents=True, exist_ok=True)
    print(plan_mod.describe(part))
    steps = [{"name": s.name, "limit_s": s.limit_s, "status": "dry-run",
              "command": " ".join(map(shlex.quote, argv))}
             for s, argv in plan(py, out, part)]
    _write_json(out / "campaign.json", {**device_info(), "part": part, "dry_run": True,
                                        "date": datetime.date.today().isoformat(),
                                        "command": command, "steps": steps, "bugs": []})
    bad = plan_mod.check_plan(part)
    for b in bad:
        print("plan:", b, file=sys.stderr)
    return 1 if bad else 0


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--part", type=int, choices=sorted(PARTS), default=1)
    ap.add_argument("--dry-run", action="store_true", help="print the plan, run nothing")
    ap.add_argument("--rehearse", action="store_true",
                    help="run both parts here without a GPU, offline, in a fresh venv")
    ap.add_argument("--stamp", action="store_true", help="record the commit, the dirty "
                    "flag and a digest of the tracked files in .whl/tree-stamp.json (the "
                    "machines get no .git; the results name the commit from it)")
    ap.add_argument("--plan-only", action="store_true",
                    help="with --rehearse: check the plan against the limits only")
    ap.add_argument("--out", help="results folder (default $OUT, else "
                    "benchmarks/results/DATE-DEVICE/partN)")
    ap.add_argument("--skip", default="", help="comma-separated steps to skip")
    ap.add_argument("--python", default=sys.executable)
    ap.add_argument("--site", default=plan_mod.SITE, help="where the wheels are installed")
    ns = ap.parse_args(argv)
    command = " ".join(map(shlex.quote, ["python3", "benchmarks/gpu_campaign.py",
                                         *(sys.argv[1:] if argv is None else argv)]))
    if ns.stamp:
        st = _meta().write_stamp()
        print(f"stamp: commit {st['commit']}, dirty {st['dirty']}, {len(st['files'])} files "
              f"-> {plan_mod.WHEELS}/tree-stamp.json")
        return 0
    if ns.rehearse:
        from campaign_rehearse import rehearse

        return rehearse(plan_only=ns.plan_only, out=ns.out)
    info = device_info()
    out = pathlib.Path(ns.out) if ns.out else default_out(ns.part, info["device"])
    if ns.dry_run:
        return dry_run(ns.part, ns.python, out, command)
    if info["device"] is None:
        print("gpu_campaign: no NVIDIA GPU (nvidia-smi found none); --dry-run shows the "
              "plan, --rehearse runs it here on the emulator", file=sys.stderr)
        return 2
    res = run_part(ns.part, ns.python, out, ns.site, "cuda", False,
                   {s for s in ns.skip.split(",") if s}, command, info=info)
    print(f"results: {out / 'campaign.json'}")
    return 0 if all(s["status"] == "ok" for s in res["steps"]) else 1


if __name__ == "__main__":
    sys.exit(main())
