"""The GPU campaign's environment step: what the machine holds, as one ``@@env`` JSON
line (the campaign puts it in campaign.json), and exit 1 when gpudsl cannot run there.

Versions of the packages gpudsl needs (numpy, z3-solver, cuda-bindings,
cuda-pathfinder, NVRTC, optuna, pytest, syrupy) and of PyTorch; the device and
driver seen by nvidia-smi; whether compute-sanitizer is on the PATH; whether gpudsl
imports and sees a driver, and which target ``gpudsl.ops`` will use; the provenance
of ``gpudsl.bench.meta`` (commit, dirty flag, CUDA/cuBLAS/cuDNN/NVRTC versions, clocks
and power limit)."""
from __future__ import annotations

import importlib.metadata as md
import json
import platform
import shutil
import subprocess
import sys

PACKAGES = ("numpy", "z3-solver", "cuda-bindings", "cuda-pathfinder", "nvidia-cuda-nvrtc",
            "optuna", "sqlalchemy", "alembic", "pytest", "hypothesis", "syrupy", "tqdm",
            "torch")


def versions() -> dict:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = md.version(name)
        except md.PackageNotFoundError:
            out[name] = None
    return out


def nvidia_smi() -> dict:
    try:
        p = subprocess.run(["nvidia-smi", "--query-gpu=name,driver_version,memory.total",
                            "--format=csv,noheader"], capture_output=True, text=True,
                           timeout=20)
        name, driver, mem = (x.strip() for x in p.stdout.splitlines()[0].split(","))
        return {"device": name, "driver": driver, "memory": mem}
    except (OSError, subprocess.SubprocessError, IndexError, ValueError):
        return {"device": None, "driver": None, "memory": None}


def gpudsl_state() -> dict:
    try:
        import gpudsl  # noqa: F401
        from gpudsl.runtime.driver import driver_available
        from gpudsl.stdlib.array_ops import backend
        return {"gpudsl_imports": True, "driver_available": bool(driver_available()),
                "ops_backend": backend()}
    except Exception as e:  # reported, and the step fails
        return {"gpudsl_imports": False, "error": f"{type(e).__name__}: {e}"[:400]}


def provenance() -> dict:
    """The tree's commit and dirty flag, the library versions (PyTorch imported first, so
    that its CUDA, cuBLAS and cuDNN are read) and the GPU's clocks and power now
    (``gpudsl.bench.meta``)."""
    try:
        import torch  # noqa: F401
    except Exception:
        pass
    try:
        from gpudsl.bench.meta import provenance as prov
        return prov()
    except Exception as e:
        return {"provenance_error": f"{type(e).__name__}: {e}"[:300]}


def main() -> int:
    env = {"python": platform.python_version(), "executable": sys.executable,
           "packages": versions(), **nvidia_smi(),
           "compute_sanitizer": shutil.which("compute-sanitizer"), **gpudsl_state(),
           **provenance()}
    print("@@env " + json.dumps(env), flush=True)
    for k, v in env["packages"].items():
        print(f"  {k:18} {v}")
    return 0 if env.get("gpudsl_imports") else 1


if __name__ == "__main__":
    sys.exit(main())
