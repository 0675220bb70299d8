"""The "emulator" target: generated CUDA C run on the CPU.

The CUDA C translation unit is compiled by ``g++ -std=c++20 -O2 -x c++ -shared -fPIC
-include gpudsl_emu.h`` (so codegen emits nothing special), with one launcher per kernel
appended (``gpudsl_emu_kernel(name)``, see gpudsl_emu_sched.h), and loaded with ctypes.
Each block's threads run as fibers on one OS thread; ``__syncthreads()`` switches fibers.
Blocks are spread over ``workers`` OS threads (``__shared__`` is thread_local storage).
Barrier divergence and warp-collective deadlocks are reported as :class:`LaunchError`,
never a hang.  Compiled shared objects are cached like cubins (:mod:`gpudsl.runtime.cache`).

API::

    mod = build_emulator_module(source, [KernelSig("saxpy", ["int", "float", "const float*", "float*"])])
    mod.launch("saxpy", grid=(n // 256, 1, 1), block=(256, 1, 1), args=[np.int32(n), np.float32(2), x, y])

Arguments: numpy arrays (C-contiguous, exact dtype) for pointers, ``None`` for a null
pointer, numpy scalars of the exact type or Python numbers for scalars (see
:mod:`gpudsl.runtime.signature`).  ``extern __shared__ T name[];`` (dynamic shared memory)
is supported; its size is ``launch(..., shared_bytes=...)``.

Limits: each emulated thread has a ``stack_kb`` KiB stack (default 128, less 12 KiB of
header and guard page; overflowing it crashes with SIGSEGV); kernel parameters are at most
8 bytes; spin-waiting on other threads hangs; inline PTX cannot be emulated.
"""
from __future__ import annotations

import ctypes
import hashlib
import os
import re
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path
from typing import Any, Iterable

from gpudsl.errors import CompileError, LaunchError
from gpudsl.runtime.cache import Cache, cache_key, default_cache
from gpudsl.runtime.signature import KernelSig, host_pointer, pack_args

HERE = Path(__file__).resolve().parent
HEADERS = ("gpudsl_emu.h", "gpudsl_emu_sched.h")
BASE_FLAGS = ("-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
              "-fno-strict-aliasing", "-fno-math-errno", "-Wno-unknown-pragmas",
              "-Wno-unused-function", "-Wno-unused-variable")
# CUDA headers generated code may include; in the emulator they are empty.
STUB_HEADERS = ("cuda_runtime.h", "cuda_runtime_api.h", "cuda.h", "cuda_fp16.h", "cuda_bf16.h",
                "device_launch_parameters.h", "device_functions.h", "math_constants.h",
                "cooperative_groups.h")

_EXTERN_SHARED = re.compile(
    r"extern\s+__shared__\s+(?:__align__\s*\(\s*\d+\s*\)\s+)?((?:[A-Za-z_][\w:]*\s+)*?[A-Za-z_][\w:]*)"
    r"\s*(?:__align__\s*\(\s*\d+\s*\)\s*)?([A-Za-z_]\w*)\s*\[\s*\]\s*;")

_version_lock = threading.Lock()
_versions: dict[str, str] = {}


def compiler() -> str:
    """The C++ compiler: ``$GPUDSL_CXX``, else ``g++``."""
    return os.environ.get("GPUDSL_CXX", "g++")


def compiler_version(cxx: str | None = None) -> str:
    """First line of ``cxx --version`` (part of the cache key)."""
    cxx = cxx or compiler()
    with _version_lock:
        if cxx not in _versions:
            if shutil.which(cxx) is None:
                raise CompileError(f"the emulator target needs a C++20 compiler; {cxx!r} was not "
                                   f"found", hint="install g++ or set GPUDSL_CXX")
            out = subprocess.run([cxx, "--version"], capture_output=True, text=True, timeout=30)
            _versions[cxx] = (out.stdout.splitlines() or ["unknown"])[0]
        return _versions[cxx]


def _header_digest() -> str:
    h = hashlib.sha256()
    for name in HEADERS:
        h.update((HERE / name).read_bytes())
    return h.hexdigest()


def prepare_source(source: str, kernels: Iterable[KernelSig]) -> str:
    """The translation unit g++ sees: dynamic shared memory rewritten, launchers appended."""
    src = _EXTERN_SHARED.sub(
        lambda m: f"{m.group(1)}* {m.group(2)} = reinterpret_cast<{m.group(1)}*>"
                  f"(gpudsl_emu::dynamic_smem());", source)
    launchers = "".join(f"gpudsl_emu_kernel({k.name})\n" for k in kernels)
    return f"{src}\n#line 1 \"<gpudsl emulator launchers>\"\n{launchers}"


def default_workers() -> int:
    """OS threads running blocks: ``$GPUDSL_EMU_WORKERS``, default min(CPU count, 8)."""
    try:
        return max(1, int(os.environ["GPUDSL_EMU_WORKERS"]))
    except (KeyError, ValueError):
        try:
            n = len(os.sched_getaffinity(0))
        except (AttributeError, OSError):
            n = os.cpu_count() or 1
        return max(1, min(n, 8))


class EmuModule:
    """A loaded emulator shared object; :meth:`launch` runs one kernel over a grid."""

    def __init__(self, lib: ctypes.CDLL, path: str, kernels: Iterable[KernelSig],
                 workers: int, cached: bool = False):
        self.lib = lib
        self.path = path
        self.kernels = {k.name: k for k in kernels}
        self.workers = workers  # OS threads running blocks; may be changed between launches
        self.cached = cached
        self._fns: dict[str, Any] = {}
        self._last_error = lib.gpudsl_emu_last_error
        self._last_error.restype = ctypes.c_char_p
        self._last_error.argtypes = []
        for k in self.kernels.values():
            f = getattr(lib, f"gpudsl_launch_{k.name}")
            f.restype = ctypes.c_int
            f.argtypes = [ctypes.c_uint] * 6 + [ctypes.c_ulonglong, ctypes.c_int, ctypes.c_void_p]
            self._fns[k.name] = f
            sig = getattr(lib, f"gpudsl_sig_{k.name}")
            sig.restype = ctypes.c_char_p
            actual = sig().decode()
            if actual != k.codes():
                raise CompileError(
                    f"kernel {k.name}: the signature given ({', '.join(k.param_types)}) does not "
                    f"match the compiled kernel (type codes {actual!r}, expected {k.codes()!r})")

    def launch(self, name: str, grid, block, args: list | tuple, shared_bytes: int = 0) -> None:
        """Run kernel ``name`` on ``grid`` x ``block`` (ints or tuples of up to 3 ints)."""
        sig = self.kernels.get(name)
        if sig is None:
            raise LaunchError(f"no kernel named {name!r} in this module "
                              f"(has: {', '.join(self.kernels) or 'none'})")
        g, b = dims(grid, "grid"), dims(block, "block")
        slots = pack_args(sig, args, host_pointer)
        rc = self._fns[name](*g, *b, int(shared_bytes), self.workers, slots.address)
        if rc != 0:
            msg = (self._last_error() or b"unknown failure").decode("utf-8", "replace")
            raise LaunchError(f"emulated kernel {name} failed: {msg}")


def dims(d, what: str) -> tuple[int, int, int]:
    """Normalise a launch dimension to a 3-tuple of positive ints."""
    t = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, int) and x >= 1 for x in t):
        raise LaunchError(f"{what} must be 1 to 3 positive integers, got {d!r}")
    return t + (1,) * (3 - len(t))  # type: ignore[return-value]


def _compile(full_source: str, flags: list[str], out: Path, cxx: str) -> None:
    with tempfile.TemporaryDirectory(prefix="gpudsl-emu-") as tmp:
        tmpd = Path(tmp)
        for h in STUB_HEADERS:
            (tmpd / h).write_text("#pragma once\n")
        src = tmpd / "kernel.cu"
        src.write_text(full_source)
        cmd = [cxx, *flags, "-I", str(tmpd), "-I", str(HERE), "-include", str(HERE / HEADERS[0]),
               "-x", "c++", str(src), "-o", str(out)]
        try:
            r = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        except subprocess.TimeoutExpired:
            raise CompileError("the emulator's C++ compiler timed out after 600 s") from None
        if r.returncode != 0:
            log = r.stderr.replace(str(src), "kernel.cu")
            raise CompileError(f"the emulator's C++ compiler rejected the generated code:\n"
                               f"{log.strip()}",
                               hint="file:line locations point at the proc's source")


def build_emulator_module(source: str, kernels: Iterable[KernelSig], *,
                          options: Iterable[str] = (), workers: int | None = None,
                          stack_kb: int = 128,
                          cache: Cache | None = None, use_cache: bool = True) -> EmuModule:
    """Compile ``source`` for the emulator (or fetch it from the cache) and load it.

    Blocks run on ``workers`` OS threads (default :func:`default_workers`; 1 gives
    deterministic block order).  ``stack_kb`` (a power of two >= 32) is each emulated
    thread's stack region.  ``options`` are extra g++ flags.  The C++ compiler is
    ``$GPUDSL_CXX`` or ``g++``.
    """
    kernels = list(kernels)
    if stack_kb < 32 or stack_kb & (stack_kb - 1):
        raise CompileError(f"stack_kb must be a power of two >= 32, got {stack_kb}")
    cxx = compiler()
    flags = [*BASE_FLAGS, f"-DGPUDSL_EMU_STACK={stack_kb * 1024}", *options]
    full = prepare_source(source, kernels)
    cache = cache or default_cache()
    key = cache_key(full, "emulator", os.uname().machine, flags, compiler_version(cxx),
                    extra=_header_digest())
    nworkers = workers if workers is not None else default_workers()
    if use_cache:
        hit = cache.lookup(key, "so")
        if hit is not None:
            try:
                return EmuModule(ctypes.CDLL(str(hit[0])), str(hit[0]), kernels, nworkers,
                                 cached=True)
            except OSError:
                pass  # damaged entry: rebuild it
    with tempfile.TemporaryDirectory(prefix="gpudsl-emu-out-") as tmp:
        out = Path(tmp) / "module.so"
        _compile(full, flags, out, cxx)
        if use_cache:
            try:
                path = cache.put(key, "so", out.read_bytes(), {"target": "emulator",
                                                               "flags": flags})
                return EmuModule(ctypes.CDLL(str(path)), str(path), kernels, nworkers)
            except OSError:
                pass  # unwritable cache: load the temporary file instead
        # dlopen keeps the mapping after the temporary file is removed
        return EmuModule(ctypes.CDLL(str(out)), str(out), kernels, nworkers)
