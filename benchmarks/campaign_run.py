"""Running one part of the GPU campaign (``gpu_campaign.py``): the plan's steps in order,
each within its limit and the part's budget, with campaign.json / campaign.log /
sanitizer.json written as it goes.  Imported by ``gpu_campaign.py`` (the command line)
and ``campaign_rehearse.py`` (the rehearsal), which import nothing of each other's."""
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
        return sanitizer_verdict(name.split("-")[1], output)   # sanitizer-TOOL[-what]
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
    derived = ROOT / ".derived"   # kernels derived ahead here (benchmarks/derive_ahead.py)
    if derived.is_dir() and "GPUDSL_DERIVATION_CACHE" not in os.environ:
        _owner_only(derived)
        env["GPUDSL_DERIVATION_CACHE"] = str(derived)
    return env


def _owner_only(folder: pathlib.Path) -> None:
    """The carried ``.derived/`` as the cache reads it: the folder 0700, entries 0600
    (a copy may arrive with other modes; gpudsl reads no entry others may write)."""
    try:
        os.chmod(folder, 0o700)
        for f in folder.iterdir():
            if f.is_file() and not f.is_symlink():
                os.chmod(f, 0o600)
    except OSError:
        pass   # not ours: gpudsl says so and derives afresh


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
