"""CUDA C → cubin with NVRTC (``cuda.bindings.nvrtc``), no GPU or driver needed.

``compile_cubin(source, arch)`` returns a :class:`CubinResult` with the cubin bytes, the
compile log and per-kernel :class:`Resources` parsed from ptxas' verbose output
(``--ptxas-options=-v``).  Results are cached on disk (:mod:`gpudsl.runtime.artifact_cache`).
Errors raise :class:`gpudsl.errors.CompileError` carrying the NVRTC log, whose lines read
``file.py(line): error: ...`` thanks to the ``#line`` directives codegen emits.
"""
from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field

from gpudsl.errors import CompileError
from gpudsl.runtime.artifact_cache import Cache, cache_key, default_cache

DEFAULT_OPTIONS = ("--ptxas-options=-v", "-lineinfo", "--std=c++17")


@dataclass(frozen=True)
class Resources:
    """What ptxas reports for one kernel."""

    registers: int = 0
    shared_bytes: int = 0
    spill_stores_bytes: int = 0
    spill_loads_bytes: int = 0
    stack_bytes: int = 0
    constant_bytes: int = 0
    barriers: int = 0


@dataclass
class CubinResult:
    """A compiled translation unit."""

    cubin: bytes
    log: str
    resources: dict[str, Resources] = field(default_factory=dict)
    arch: str = ""   # the architecture it was compiled for
    key: str = ""
    cached: bool = False


def _check(result, what: str) -> None:
    from cuda.bindings import nvrtc
    err = result[0] if isinstance(result, tuple) else result
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
        raise CompileError(f"NVRTC {what} failed: {err.name}")


def compiler_version() -> str:
    """``"nvrtc-MAJOR.MINOR"``; part of every cache key."""
    from cuda.bindings import nvrtc
    err, major, minor = nvrtc.nvrtcVersion()
    _check(err, "version query")
    return f"nvrtc-{major}.{minor}"


def include_dirs() -> list[str]:
    """Directories holding CUDA toolkit headers (cuda_fp16.h ...), when installed."""
    try:
        from cuda.pathfinder import find_nvidia_header_directory
        d = find_nvidia_header_directory("cudart")
        return [d] if d else []
    except Exception:
        return []


_ENTRY = re.compile(r"(?:Compiling entry function|Function properties for) '?([A-Za-z_$][\w$]*)'?")


def parse_resources(log: str) -> dict[str, Resources]:
    """Per-kernel resources from a ptxas ``-v`` log (keys are the entry names)."""
    out: dict[str, dict] = {}
    current: str | None = None
    for line in log.splitlines():
        m = _ENTRY.search(line)
        if m:
            current = m.group(1)
            out.setdefault(current, {})
            continue
        if current is None:
            continue
        d = out[current]
        m = re.search(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads",
                      line)
        if m:
            d["stack_bytes"] = int(m.group(1))
            d["spill_stores_bytes"] = int(m.group(2))
            d["spill_loads_bytes"] = int(m.group(3))
        m = re.search(r"Used (\d+) registers", line)
        if m:
            d["registers"] = int(m.group(1))
            if (b := re.search(r"used (\d+) barriers", line)):
                d["barriers"] = int(b.group(1))
            if (s := re.search(r"(\d+) bytes smem", line)):
                d["shared_bytes"] = int(s.group(1))
            d["constant_bytes"] = sum(int(c) for c in re.findall(r"(\d+) bytes cmem", line))
    return {name: Resources(**vals) for name, vals in out.items()}


def _log_of(prog) -> str:
    from cuda.bindings import nvrtc
    err, n = nvrtc.nvrtcGetProgramLogSize(prog)
    if err != nvrtc.nvrtcResult.NVRTC_SUCCESS or n <= 1:
        return ""
    buf = b" " * n
    nvrtc.nvrtcGetProgramLog(prog, buf)
    return buf.rstrip(b"\0").decode("utf-8", "replace")


def _compile(source: str, arch: str, options: list[str], name: str) -> tuple[bytes, str]:
    from cuda.bindings import nvrtc
    err, prog = nvrtc.nvrtcCreateProgram(source.encode(), name.encode(), 0, [], [])
    _check(err, "program creation")
    try:
        opts = [o.encode() for o in options]
        (err,) = nvrtc.nvrtcCompileProgram(prog, len(opts), opts)
        log = _log_of(prog)
        if err != nvrtc.nvrtcResult.NVRTC_SUCCESS:
            raise CompileError(f"NVRTC could not compile the generated CUDA C for {arch}:\n"
                               f"{log.strip()}",
                               hint="the file(line) locations point at the proc's source")
        err, n = nvrtc.nvrtcGetCUBINSize(prog)
        _check(err, "cubin size query")
        cubin = b" " * n
        _check(nvrtc.nvrtcGetCUBIN(prog, cubin), "cubin retrieval")
        return cubin, log
    finally:
        nvrtc.nvrtcDestroyProgram(prog)


def _interruptible(fn, *args):
    """``fn(*args)`` on a helper thread, waited for in short slices: Ctrl-C raises
    KeyboardInterrupt at once (NVRTC cannot be stopped; its thread finishes on its own and
    its result is dropped)."""
    import threading

    box: dict = {}

    def work():
        try:
            box["ok"] = fn(*args)
        except BaseException as e:  # handed to the caller
            box["err"] = e

    t = threading.Thread(target=work, name="gpudsl-nvrtc", daemon=True)
    t.start()
    while t.is_alive():
        t.join(0.05)
    if "err" in box:
        raise box["err"]
    return box["ok"]


def compile_cubin(source: str, arch: str | None = None, options: list[str] | tuple[str, ...] = (),
                  name: str = "gpudsl.cu", cache: Cache | None = None,
                  use_cache: bool = True) -> CubinResult:
    """Compile ``source`` to a cubin for ``arch`` (None: the default target,
    ``gpudsl.targets.DEFAULT_TARGET``); ``options`` are extra NVRTC flags."""
    if arch is None:
        from gpudsl import targets

        arch = targets.DEFAULT_TARGET
    if not re.fullmatch(r"sm_\d+[a-z]?", arch):
        raise CompileError(f"bad CUDA architecture {arch!r}", hint="use e.g. 'sm_90'")
    all_opts = [f"--gpu-architecture={arch}", *DEFAULT_OPTIONS, *options]
    all_opts += [f"-I{d}" for d in include_dirs()]
    cache = cache or default_cache()
    key = cache_key(source, "cuda", arch, all_opts, compiler_version())
    if use_cache:
        hit = cache.lookup(key, "cubin")
        if hit is not None:
            cubin, meta = hit  # the verified bytes (never the path again)
            try:
                return CubinResult(cubin, meta.get("log", ""),
                                   {k: Resources(**v) for k, v in meta["resources"].items()},
                                   arch, key, cached=True)
            except (KeyError, TypeError, AttributeError) as e:
                cache.discard(key, "cubin", f"it could not be read ({e})")
    cubin, log = _interruptible(_compile, source, arch, all_opts, name)
    res = parse_resources(log)
    if use_cache:  # a read-only cache directory must not break compilation (a warning)
        cache.try_put(key, "cubin", cubin,
                      {"log": log, "arch": arch, "resources": {k: asdict(v) for k, v in res.items()}})
    return CubinResult(cubin, log, res, arch, key, cached=False)
