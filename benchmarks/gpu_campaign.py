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

TOOLS = ("memcheck", "racecheck", "synccheck")


def plan(py: str, out: pathlib.Path, part: int = 1, site: str = plan_mod.SITE,
         wheels: pathlib.Path | None = None, target: str = "cuda",
         rehearse: bool = False) -> list[tuple[Step, list[str] | None]]:
    """The steps of ``part`` with their argv filled in (``None``: not run in a
    rehearsal)."""
    whl = pathlib.Path(wheels or ROOT / plan_mod.WHEELS)
    fill = dict(py=py, out=str(out), site=site, root=str(ROOT), target=target,
                tmp=tempfile.gettempdir(), wheels="{wheels}")
    steps = []
    for s in PARTS[part]:
        argv = s.rehearsal_argv(**fill) if rehearse else s.argv_for(**fill)
        if argv is not None and "{wheels}" in argv:
            i = argv.index("{wheels}")
            argv[i:i + 1] = sorted(str(p) for p in whl.glob("*.whl")) or [str(whl / "*.whl")]
        steps.append((s, argv))
    return steps


def _write_json(path: pathlib.Path, data) -> None:
    tmp = path.with_suffix(path.suffix + ".tmp")
    tmp.write_text(json.dumps(data, indent=1))
    os.replace(tmp, path)


def run_step(argv: list[str], env: dict, log, limit: float) -> tuple[int, str, float]:
    """Run one step with its output appended to the combined log as it comes; stop its
    whole process group at ``limit`` seconds (status 124).  Returns (status, output,
    seconds)."""
    log.write(f"\n$ {' '.join(map(shlex.quote, argv))}\n")
    log.flush()
    start = log.tell()
    t0 = time.monotonic()
    try:
        p = subprocess.Popen(argv, stdout=log, stderr=subprocess.STDOUT, env=env, cwd=ROOT,
                             start_new_session=True)
    except OSError as e:
        log.write(f"[campaign] cannot start: {e}\n")
        return 127, str(e), 0.0
    try:
        rc = p.wait(timeout=max(limit, 1))
    except subprocess.TimeoutExpired:
        _stop_group(p)
        rc = 124
        log.write(f"\n[campaign] stopped after {limit:.0f} s\n")
    log.flush()
    seconds = time.monotonic() - t0
    with open(log.name, errors="replace") as f:
        f.seek(start)
        return rc, f.read(), seconds


def _stop_group(p: subprocess.Popen) -> None:
    for sig, wait in ((signal.SIGTERM, 5), (signal.SIGKILL, 5)):
        try:
            os.killpg(p.pid, sig)
            p.wait(timeout=wait)
            return
        except (ProcessLookupError, subprocess.TimeoutExpired):
            continue


def figures(name: str, output: str, out: pathlib.Path) -> dict:
    """What a step's output says, as figures for campaign.json."""
    if name == "environment":
        for line in output.splitlines():
            if line.startswith("@@env "):
                return json.loads(line[6:])
        return {}
    if name == "smoke":
        words = [ln.split()[0] for ln in output.splitlines() if ln.split()
                 and ln.split()[0] in ("ok", "BAD", "SKIP")]
        return {"ok": words.count("ok"), "bad": words.count("BAD"),
                "skipped": words.count("SKIP"),
                "failures": [ln for ln in output.splitlines() if ln.startswith("BAD")][:20]}
    if name == "bench" and (out / "bench.json").exists():
        return {"rows": bench_rows(json.loads((out / "bench.json").read_text()))}
    if name == "pytest-gpu":
        tail = [ln for ln in output.splitlines() if " in " in ln and (
            "passed" in ln or "failed" in ln or "skipped" in ln or "error" in ln)]
        return {"summary": tail[-1].strip("= ") if tail else None}
    if name.startswith("sanitizer-"):
        return sanitizer_verdict(name.split("-", 1)[1], output)
    if name == "attention-suite" and (out / "attention_suite.json").exists():
        return {"rows": bench_rows(json.loads((out / "attention_suite.json").read_text()))}
    if name == "llama" and (out / "llama.json").exists():
        return {"rows": [{k: v for k, v in r.items() if k != "passes"} for r in
                         json.loads((out / "llama.json").read_text())["rows"]]}
    return {}


def bench_rows(bench: dict) -> list[dict]:
    """bench.json's rows reduced to what the closing note quotes."""
    keep = ("node", "size", "l2", "status", "ratio", "rate", "unit", "roofline_fraction",
            "median_ms", "reference", "reference_backend", "copy_fraction", "rel_error",
            "reason")
    return [{k: r[k] for k in keep if k in r} for r in bench.get("results", [])]


def _environment(site: str, target: str) -> dict:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(
        [site, str(ROOT)] + [p for p in [os.environ.get("PYTHONPATH")] if p]),
        "PYTHONUNBUFFERED": "1"}
    if target == "emulator":
        env["GPUDSL_NO_GPU"] = "1"
    return env


def _meta():
    """gpudsl/bench/meta.py loaded by its path (it needs nothing the install brings)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("bench_meta", ROOT / "gpudsl" / "bench" /
                                                  "meta.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def _has_torch(py: str, env: dict) -> bool:
    return subprocess.run([py, "-c", "import torch"], env=env, capture_output=True,
                          timeout=120).returncode == 0


def run_part(part: int, py: str, out: pathlib.Path, site: str, target: str,
             rehearse: bool, skip: set, command: str, budget: float | None = None,
             info: dict | None = None) -> dict:
    """Run one part's steps in order, each within its limit and the part's budget, and
    write campaign.json / campaign.log / sanitizer.json as it goes."""
    out.mkdir(parents=True, exist_ok=True)
    env = _environment(site, target)
    budget = budget if budget is not None else plan_mod.PART_BUDGET_S[part]
    meta = _meta()
    results = {**(info or {}), **meta.tree_state(), "gpu_state_start": meta.gpu_state(),
               "part": part, "rehearsal": rehearse, "target": target,
               "date": datetime.datetime.now(datetime.timezone.utc)
               .isoformat(timespec="seconds"), "command": command, "budget_s": budget,
               "steps": [], "bugs": []}
    sanitizers: dict = {}
    t_end = time.monotonic() + budget
    torch = None
    with open(out / "campaign.log", "a+") as log:
        for step, argv in plan(py, out, part, site, target=target, rehearse=rehearse):
            rec = {"name": step.name, "limit_s": step.limit_s,
                   "command": " ".join(map(shlex.quote, argv or []))}
            left = t_end - time.monotonic()
            if step.needs == "torch" and torch is None:
                torch = _has_torch(py, env)
            why = ("skipped (--skip)" if step.name in skip else
                   "not rehearsed (needs a GPU)" if argv is None else
                   "skipped: PyTorch is missing" if step.needs == "torch" and not torch
                   and not rehearse else
                   "not run: the part's budget is spent" if left < 5 else None)
            results["steps"].append(rec)
            if why:
                rec["status"] = why
            else:
                rec["status"] = "running"  # what a killed run leaves
                _write_json(out / "campaign.json", results)
                limit = (max(step.limit_s, 600) if rehearse else left if step.rest
                         else min(step.limit_s, left))
                rc, output, secs = run_step(argv, env, log, limit)
                rec.update(rc=rc, seconds=round(secs, 1), status="ok" if rc == 0 else (
                    "timeout" if rc == 124 else "failed"), **{"figures": figures(
                        step.name, output, out)})
                if step.name.startswith("sanitizer-"):
                    v = rec["figures"]
                    sanitizers[step.name] = v
                    results["bugs"].extend(v.get("bugs", []))
                    if rc != 124:  # controls race on purpose: judge by the proved kernels
                        rec["status"] = "ok" if not v["bugs"] and v["cases_run"] else "failed"
                if step.name == "environment":
                    results.setdefault("device", rec["figures"].get("device"))
                    results.setdefault("driver", rec["figures"].get("driver"))
            print(f"[{rec['status']}] {step.name}" + (f" ({rec['seconds']} s)"
                                                       if "seconds" in rec else ""), flush=True)
            _write_json(out / "campaign.json", results)
            if sanitizers:
                _write_json(out / "sanitizer.json", {**sanitizers, "provenance": {
                    k: results.get(k) for k in ("commit", "dirty", "device", "driver")}})
    results["gpu_state_end"] = meta.gpu_state()
    _write_json(out / "campaign.json", results)
    return results


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
