"""What ran, for every benchmark JSON (issue 34): the tree's commit and whether it was
dirty, the versions of gpudsl, PyTorch, CUDA, cuBLAS, cuDNN, NVRTC and the driver, and
the GPU's clocks, power draw and limit, performance state and clock event reasons
(``nvidia-smi -q -d CLOCK,POWER,PERFORMANCE``) read at the start and at the end of the
run.  Each function tolerates what a machine lacks (no git, no
torch, no nvidia-smi): the field is then ``None`` with the reason where there is one.

``gpudsl bench``, ``benchmarks/half_gpu.py``, ``benchmarks/attention_gpu.py``,
``benchmarks/llama_bench.py`` and the campaign's environment step all call
:func:`provenance` at the start and :func:`gpu_state` again at the end."""
from __future__ import annotations

import ctypes
import hashlib
import importlib.metadata as md
import json
import pathlib
import subprocess
import sys

ROOT = pathlib.Path(__file__).resolve().parents[2]
SMI_QUERY = ["nvidia-smi", "-q", "-d", "CLOCK,POWER,PERFORMANCE"]


def _run(argv: list[str], timeout: float = 30) -> tuple[int, str]:
    try:
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, cwd=ROOT)
        return p.returncode, p.stdout
    except (OSError, subprocess.SubprocessError) as e:
        return 127, f"{type(e).__name__}: {e}"


STAMP = ".whl/tree-stamp.json"  # carried with the wheels (the machines get no .git)


def tree_state(root: pathlib.Path = ROOT) -> dict:
    """The commit the code ran from and whether tracked files differed from it
    (``dirty``).  Outside a git checkout (the lent GPU machines get a copy of the tree
    without .git) from the stamp ``write_stamp`` left in ``.whl/``: its commit, and
    dirty when it was, or when a stamped file's content has changed since."""
    rc, top = _run(["git", "-C", str(root), "rev-parse", "--show-toplevel"])
    rc, commit = _run(["git", "-C", str(root), "rev-parse", "HEAD"]) if rc == 0 and \
        pathlib.Path(top.strip()).resolve() == root.resolve() else (1, "")
    if rc == 0:  # a checkout of this tree (not some repository above a copy of it)
        rc2, status = _run(["git", "-C", str(root), "status", "--porcelain",
                            "--untracked-files=no"])
        return _stamp_over_git(root, {"commit": commit.strip(), "dirty": bool(
            status.strip()) if rc2 == 0 else None, "commit_from": "git"})
    stamp = root / STAMP
    if not stamp.is_file():
        return {"commit": None, "dirty": None, "commit_from": None,
                "why": f"no git checkout and no {STAMP}"}
    data = json.loads(stamp.read_text())
    same = _files_digest(root, data["files"]) == data["digest"]
    return {"commit": data["commit"], "dirty": bool(data["dirty"] or not same),
            "commit_from": STAMP, "changed_since_stamp": not same}


def _stamp_over_git(root: pathlib.Path, state: dict) -> dict:
    """A dirty checkout whose stamped files are exactly the stamp's (the device tool sent
    the session's first commit as ``.git`` and the commits after it as uncommitted
    changes: the 2026-11-29 H200 run reported that first commit, dirty): the stamped
    commit, clean, and the checkout's HEAD beside it (``git_head``)."""
    stamp = root / STAMP
    if not state.get("dirty") or not stamp.is_file():
        return state
    try:
        data = json.loads(stamp.read_text())
        same = not data["dirty"] and _files_digest(root, data["files"]) == data["digest"]
    except (OSError, ValueError, KeyError, TypeError):
        return state
    if not same or data["commit"] == state["commit"]:
        return state
    return {"commit": data["commit"], "dirty": False, "commit_from": STAMP,
            "git_head": state["commit"]}


def _files_digest(root: pathlib.Path, names: list[str]) -> str:
    h = hashlib.sha256()
    for n in names:
        p = root / n
        h.update(n.encode() + b"\0" + (p.read_bytes() if p.is_file() else b"<missing>"))
    return h.hexdigest()


def write_stamp(root: pathlib.Path = ROOT, out: pathlib.Path | None = None) -> dict:
    """Record the commit, the dirty flag and a digest of the tracked files in
    ``.whl/tree-stamp.json`` (run before a GPU window: ``gpu_campaign.py --stamp``)."""
    rc, names = _run(["git", "-C", str(root), "ls-files"])
    state = tree_state(root)
    if rc != 0 or state.get("commit_from") != "git":
        raise RuntimeError("write_stamp needs a git checkout")
    files = sorted(n for n in names.splitlines() if n)
    data = {"commit": state["commit"], "dirty": state["dirty"], "files": files,
            "digest": _files_digest(root, files)}
    out = out or root / STAMP
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(data))
    return data


def _version(name: str) -> str | None:
    try:
        return md.version(name)
    except md.PackageNotFoundError:
        return None


def _nvrtc_version() -> str | None:
    try:
        from ..runtime.nvrtc import compiler_version

        return compiler_version()
    except Exception:
        return None


def _cublas_version() -> str | None:
    """cuBLASLt's version from the library PyTorch loaded (``cublasLtGetVersion``:
    MAJOR * 10000 + MINOR * 100 + PATCH)."""
    try:
        with open("/proc/self/maps") as f:
            paths = {ln.split()[-1] for ln in f if "libcublasLt" in ln}
        for p in sorted(paths):
            lib = ctypes.CDLL(p)
            lib.cublasLtGetVersion.restype = ctypes.c_size_t
            v = int(lib.cublasLtGetVersion())
            return f"{v // 10000}.{v // 100 % 100}.{v % 100}"
    except (OSError, AttributeError):
        pass
    return None


def torch_versions() -> dict:
    """PyTorch and the CUDA libraries it brought (only when torch is already imported:
    this never imports it), and the SDPA backends it lets run."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {"torch": None, "cuda": None, "cudnn": None, "cublas": None}
    cuda_ok = bool(torch.cuda.is_available())
    out = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cudnn": torch.backends.cudnn.version() if cuda_ok else None,
           "cublas": _cublas_version() if cuda_ok else None}
    b = torch.backends.cuda
    try:
        out["sdpa_enabled"] = {"flash": b.flash_sdp_enabled(), "cudnn": b.cudnn_sdp_enabled(),
                               "efficient": b.mem_efficient_sdp_enabled(),
                               "math": b.math_sdp_enabled()}
        out["matmul_flags"] = {
            "allow_tf32": b.matmul.allow_tf32,
            "allow_fp16_reduced_precision_reduction":
                b.matmul.allow_fp16_reduced_precision_reduction,
            "allow_bf16_reduced_precision_reduction":
                b.matmul.allow_bf16_reduced_precision_reduction}
    except AttributeError:
        pass
    return out


def versions() -> dict:
    from ..version import __version__

    return {"gpudsl": __version__, "python": sys.version.split()[0],
            "numpy": _version("numpy"), "nvrtc": _nvrtc_version(),
            "cuda_bindings": _version("cuda-bindings"), **torch_versions()}


def parse_smi(text: str) -> dict:
    """``nvidia-smi -q`` text as ``{"Section/Key": "value"}`` (nesting by indentation)."""
    out, stack = {}, []
    for line in text.splitlines():
        if not line.strip() or line.startswith(("=", "GPU ")):
            continue  # the banner, and the one GPU's header line (device 0 only)
        indent = len(line) - len(line.lstrip())
        key, _, value = line.strip().partition(":")
        while stack and stack[-1][0] >= indent:
            stack.pop()
        if value.strip():
            out["/".join([s for _, s in stack] + [key.strip()])] = value.strip()
        else:
            stack.append((indent, key.strip()))
    return out


def gpu_state() -> dict:
    """The GPU's clocks, power draw and limit, performance state and clock event reasons
    now (``nvidia-smi -q -d CLOCK,POWER,PERFORMANCE``), or why not."""
    rc, text = _run(SMI_QUERY)
    if rc != 0:
        return {"available": False, "why": text.strip()[:200] or f"nvidia-smi exit {rc}"}
    fields = parse_smi(text)
    keep = {k: v for k, v in fields.items() if any(w in k for w in (
        "Clocks", "Power", "Performance State", "Driver Version", "CUDA Version"))}
    return {"available": True, "fields": keep}


def provenance() -> dict:
    """Everything a result file records about what produced it (see the module)."""
    return {**tree_state(), "versions": versions(), "gpu_state_start": gpu_state()}


def finish(prov: dict) -> dict:
    """``prov`` with the versions read again (torch may have been imported since) and
    the GPU's state at the end."""
    return {**prov, "versions": versions(), "gpu_state_end": gpu_state()}
