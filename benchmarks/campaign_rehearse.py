"""The GPU campaign's rehearsal (``gpu_campaign.py --rehearse``): the whole path of a
GPU window, here, without a GPU and without the network.

1. The plan of both parts against the machines' limits (``campaign_plan.check_plan``:
   step limits, device-call timeouts, output files and their names, the command's
   length, carried paths, wheels + tree under 64 MiB), and ``.whl/`` against
   ``benchmarks/wheels.txt``.  ``--plan-only`` stops here (CI runs it).
2. A fresh Python 3.12 virtual environment holding only what the lent machines hold
   (``.whl-image/``), installed with ``--no-index``; pip's configuration is ignored and
   its network closed (a proxy nobody answers), here and in every step after.
3. Both parts, with the carried wheels installed exactly as on the machine and the GPU
   steps replaced by their emulator equivalents (``Step.rehearse``).
4. Every output folder against the limits on what comes back (at most 8 files,
   16 MiB each, plain names), and every field issue 34 asks of the results
   (``field_problems``: provenance, each row's reference, backend and raw times, cold
   and warm bandwidth rows, the LLaMA rows); then the folder's README is generated from
   its JSON (``results_readme.py``), as for a real run.
"""
from __future__ import annotations

import glob
import json
import os
import pathlib
import re
import shutil
import subprocess
import sys
import tempfile
import time

import campaign_plan as plan_mod
from campaign_plan import PARTS, ROOT

OFFLINE = {"PIP_CONFIG_FILE": os.devnull, "PIP_NO_INDEX": "1",
           "PIP_DISABLE_PIP_VERSION_CHECK": "1", "http_proxy": "http://127.0.0.1:9",
           "https_proxy": "http://127.0.0.1:9", "HTTP_PROXY": "http://127.0.0.1:9",
           "HTTPS_PROXY": "http://127.0.0.1:9", "no_proxy": "", "NO_PROXY": ""}


def listed_wheels() -> list[str]:
    names = []
    for line in (ROOT / "benchmarks" / "wheels.txt").read_text().splitlines():
        spec = line.split("#", 1)[0].strip()
        if spec:
            names.append(spec)
    return names


def _norm(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def wheel_problems(folder: pathlib.Path) -> list[str]:
    """How ``folder`` differs from wheels.txt: missing, extra, or other versions."""
    want = {_norm(s.split("==")[0]): s.split("==")[1] for s in listed_wheels()}
    have: dict = {}
    for w in folder.glob("*.whl"):
        name, version = w.name.split("-")[:2]
        have.setdefault(_norm(name), []).append(version)
    bad = [f"{n}=={v} is not in {folder.name}/" for n, v in want.items() if n not in have]
    bad += [f"{n} is in {folder.name}/ but not in wheels.txt" for n in have if n not in want]
    bad += [f"{n}: {folder.name}/ holds {have[n]}, wheels.txt says {v}" for n, v in
            want.items() if n in have and have[n] != [v]]
    return bad


def plan_problems(need_wheels: bool = True) -> list[str]:
    """The plan against the limits, and .whl/ against wheels.txt (a missing .whl/ is a
    problem only when ``need_wheels``: CI checks the plan without fetching wheels)."""
    wheels, tree = plan_mod.wheels_bytes(), plan_mod.tree_bytes()
    bad = [p for part in PARTS for p in plan_mod.check_plan(part, wheels, tree)]
    whl = ROOT / plan_mod.WHEELS
    if whl.is_dir():
        bad += wheel_problems(whl)
    elif need_wheels:
        bad.append(".whl/ is missing: run bash benchmarks/wheels.sh first")
    else:
        print("note: no .whl/ here (bash benchmarks/wheels.sh fetches it)")
    return bad


def find_python312() -> str | None:
    """A Python 3.12 interpreter: on the PATH, else pyenv's, else uv's."""
    cands = [shutil.which("python3.12") or ""]
    cands += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/3.12*/bin/python3.12")))
    cands += sorted(glob.glob("/usr/local/bin/python3.12") + glob.glob("/usr/bin/python3.12"))
    for c in cands:
        if c and subprocess.run([c, "-c", "import sys; assert sys.version_info[:2] == "
                                 "(3, 12)"], capture_output=True).returncode == 0:
            return c
    return None


def make_venv(py312: str, where: pathlib.Path) -> str:
    """A fresh venv holding the machines' packages, installed from .whl-image/ only."""
    subprocess.run([py312, "-m", "venv", str(where)], check=True, timeout=120)
    py = str(where / "bin" / "python")
    image = ROOT / ".whl-image"
    if not image.is_dir():
        raise SystemExit("rehearse: .whl-image/ is missing: run bash benchmarks/wheels.sh")
    subprocess.run([py, "-m", "pip", "install", "-q", "--no-index", "--find-links",
                    str(image), "-r", str(ROOT / "benchmarks" / "wheels-image.txt")],
                   check=True, timeout=600, env={**os.environ, **OFFLINE})
    return py


def output_problems(out: pathlib.Path) -> list[str]:
    files = [p for p in out.rglob("*") if p.is_file()]
    bad = [f"{out.name}: {len(files)} files > {plan_mod.OUT_FILES}"] \
        if len(files) > plan_mod.OUT_FILES else []
    bad += [f"{p.name}: {p.stat().st_size} bytes > 16 MiB" for p in files
            if p.stat().st_size > plan_mod.OUT_FILE_BYTES]
    bad += [f"{p.name}: a name $OUT does not return" for p in files
            if not plan_mod.OUT_NAME.match(p.name) or p.parent != out]
    return bad


PROVENANCE = ("commit", "dirty", "versions", "gpu_state_start", "gpu_state_end")
ROW_FIELDS = ("reference", "reference_backend", "reference_kernels", "ratio", "timing",
              "reference_timing", "rel_error", "tolerance")


def _load_json(path: pathlib.Path):
    return json.loads(path.read_text()) if path.is_file() else None


def result_problems(name: str, data: dict | None) -> list[str]:
    """What a bench JSON (``bench.json``, ``attention_suite.json``) lacks."""
    if data is None:
        return [f"{name}: missing"]
    bad = [f"{name}: no {k}" for k in PROVENANCE + ("complete",) if data.get(k) is None]
    for r in data.get("results", []):
        tag = f"{name}: {r['node']} {r['size']}"
        if r.get("status") != "ok":
            bad.append(f"{tag}: {r.get('status')} {r.get('reason', '')[:80]}")
            continue
        bad += [f"{tag}: no {k}" for k in ROW_FIELDS if k not in r]
        if not r.get("timing", {}).get("times_ms") or \
                not r.get("reference_timing", {}).get("times_ms"):
            bad.append(f"{tag}: no raw times")
    states = {}
    for r in data.get("results", []):
        if r.get("unit") == "B/s":
            states.setdefault((r["node"], r["size"]), set()).add(r.get("l2"))
    bad += [f"{name}: {k} lacks a cold or warm row" for k, v in states.items()
            if v != {"cold", "warm"}]
    return bad


def field_problems(base: pathlib.Path) -> list[str]:
    """Issue 34's fields in a rehearsal's (or a run's) output folder."""
    p1, p2 = base / "part1", base / "part2"
    bad = result_problems("bench.json", _load_json(p1 / "bench.json"))
    bad += result_problems("attention_suite.json", _load_json(p1 / "attention_suite.json"))
    for part in (p1, p2):
        camp = _load_json(part / "campaign.json") or {}
        bad += [f"{part.name}/campaign.json: no {k}" for k in PROVENANCE[:2] +
                PROVENANCE[3:] if k not in camp]
    llama = _load_json(p2 / "llama.json")
    if llama is None or not llama.get("complete"):
        return bad + ["llama.json: missing or incomplete"]
    ours = [r for r in llama["rows"] if r.get("impl") == "gpudsl"]
    bad += [f"llama.json: gpudsl {r.get('dtype')}: {r.get('error')}" for r in ours
            if "passes" not in r]
    variants = {r.get("variant") for r in llama["rows"] if r.get("impl") == "torch"}
    if variants != {"eager", "graph", "compile"}:
        bad.append(f"llama.json: torch variants {sorted(map(str, variants))}")
    return bad


def rehearse(plan_only: bool = False, out: str | None = None) -> int:
    t0 = time.monotonic()
    for part in PARTS:
        print(plan_mod.describe(part))
    bad = plan_problems(need_wheels=not plan_only)
    print(f"wheels {plan_mod.wheels_bytes() / 2**20:.1f} MiB + tree "
          f"{plan_mod.tree_bytes() / 2**20:.1f} MiB (limit {plan_mod.TREE_BYTES // 2**20})")
    for b in bad:
        print("plan:", b, file=sys.stderr)
    if plan_only or bad:
        return 1 if bad else 0
    from campaign_run import _meta

    st = _meta().write_stamp()  # the commit the machines will report (they get no .git)
    print(f"stamp: {plan_mod.WHEELS}/tree-stamp.json, commit {st['commit'][:12]}, "
          f"dirty {st['dirty']}")
    py312 = find_python312()
    if py312 is None:
        print("rehearse: no Python 3.12 here (the machines' python)", file=sys.stderr)
        return 2
    os.environ.update(OFFLINE)  # every step below: no network for pip
    from campaign_run import run_part

    base = pathlib.Path(out or tempfile.mkdtemp(prefix="gpudsl-rehearsal-"))
    work = pathlib.Path(tempfile.mkdtemp(prefix="gpudsl-rehearsal-env-"))
    py = make_venv(py312, work / "venv")
    print(f"rehearse: venv {work / 'venv'} from .whl-image/ ({time.monotonic() - t0:.0f} s)")
    summary = {}
    for part in PARTS:
        res = run_part(part, py, base / f"part{part}", str(work / "site"), "emulator",
                       True, set(), f"gpu_campaign.py --rehearse (part {part})",
                       budget=3600, info={"device": "rehearsal (emulator)"})
        for s in res["steps"]:
            ok = s["status"] == "ok" or s["status"].startswith("not rehearsed")
            if not ok:
                bad.append(f"part {part}: {s['name']}: {s['status']}")
        bad += output_problems(base / f"part{part}")
        summary[part] = {s["name"]: s.get("seconds") for s in res["steps"]}
    bad += field_problems(base)
    import results_readme

    (base / "README.md").write_text(results_readme.generate(base))
    print(f"rehearse: {base / 'README.md'} generated from the JSON")
    wall = time.monotonic() - t0
    print(json.dumps({"rehearsal_wall_s": round(wall, 1), "step_seconds": summary,
                      "planned_gpu_limits_s": {p: {s.name: s.limit_s for s in PARTS[p]}
                                               for p in PARTS}, "results": str(base)},
                     indent=1))
    for b in bad:
        print("rehearse:", b, file=sys.stderr)
    shutil.rmtree(work, ignore_errors=True)
    return 1 if bad else 0
