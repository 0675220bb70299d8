"""The "emulator" backend: generated CUDA C run on the CPU.

The CUDA C translation unit is compiled by ``g++ -std=c++20 -O2 -x c++ -shared -fPIC
-include gpudsl_emu.h`` (so codegen emits nothing special), with one launcher per kernel
appended (``gpudsl_emu_kernel(name)``, see gpudsl_emu_sched.h), and loaded with ctypes.
Each block's threads run as fibers on one OS thread; ``__syncthreads()`` switches fibers.
Blocks are spread over ``workers`` OS threads (``__shared__`` is thread_local storage).
Barrier divergence and warp-collective deadlocks are reported as :class:`LaunchError`,
never a hang.  Compiled shared objects are cached like cubins (:mod:`gpudsl.runtime.artifact_cache`).

API::

    mod = build_emulator_module(source, [KernelSig("saxpy", ["int", "float", "const float*", "float*"])])
    mod.launch("saxpy", grid=(n // 256, 1, 1), block=(256, 1, 1), args=[np.int32(n), np.float32(2), x, y])

Arguments: numpy arrays (C-contiguous, exact dtype) for pointers, ``None`` for a null
pointer, numpy scalars of the exact type or Python numbers for scalars (see
:mod:`gpudsl.runtime.signature`).  ``extern __shared__ T name[];`` (dynamic shared memory)
is supported; its size is ``launch(..., shared_bytes=...)``.

Faults: a fault in kernel code (an invalid memory access, an integer division by zero, a
stack overflow, a trap g++ compiled for undefined behaviour) is caught in the emulator and
raised as :class:`LaunchError` naming the kernel, the block, the thread and, where the
line tables tell, the proc's source line; the process survives.  Memory the kernel may
legally reach (any mapped page) is not checked: a wild write can land in other data
unless the module is built with ``checks=True`` (``$GPUDSL_EMU_CHECKS=1``), which adds
g++'s bounds checks of fixed-size (REGISTER, SHARED) arrays and of integer division.
Ctrl-C during a launch stops it within milliseconds and raises KeyboardInterrupt.

Output: ``printf`` in kernel code (``compile(..., trace=...)`` emits it) is kept in a buffer
inside the module, not written to the C stdout (which Jupyter does not show); ``launch``
takes it into ``module.output`` and the compile layer prints it on ``sys.stdout``.

Limits: each emulated thread has a ``stack_kb`` KiB stack (default: sized from the
kernels' local arrays, at least 128, less 12 KiB of header and guard page; overflowing it
is a LaunchError); kernel parameters are at most 8 bytes; spin-waiting on other threads
hangs; inline PTX cannot be emulated.
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
from gpudsl.runtime import emu_pch
from gpudsl.runtime.artifact_cache import Cache, cache_key, default_cache
from gpudsl.runtime.private_lib import PREFIX as _LIB_PREFIX, load_library
from gpudsl.runtime.signature import KernelSig, host_pointer, pack_args

HERE = Path(__file__).resolve().parent
HEADERS = ("gpudsl_emu.h", "gpudsl_emu_sched.h", "gpudsl_emu_bars.h", "gpudsl_emu_sys.h",
           "gpudsl_emu_cluster.h", "gpudsl_emu_dsmem.h", "gpudsl_emu_faults.h",
           "gpudsl_emu_launch.h")
BASE_FLAGS = ("-std=c++20", "-O2", "-shared", "-fPIC", "-pthread", "-fvisibility=hidden",
              "-fno-strict-aliasing", "-fno-math-errno", "-Wno-unknown-pragmas",
              "-Wno-unused-function", "-Wno-unused-variable",
              # every stack page is probed, so an oversized frame hits the guard page
              "-fstack-clash-protection",
              # line tables: a fault names the proc's source line (through #line)
              "-g1")
# the optional bounds-checked build (checks=True / $GPUDSL_EMU_CHECKS=1)
CHECK_FLAGS = ("-fsanitize=bounds,integer-divide-by-zero,vla-bound",
               "-fsanitize-undefined-trap-on-error")
MAX_STACK_KB = 64 * 1024
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
                raise CompileError(f"the emulator backend needs a C++20 compiler; {cxx!r} was not "
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
    launchers = "".join(_launcher(src, k.name) for k in kernels)
    return f"{src}\n#line 1 \"<gpudsl emulator launchers>\"\n{launchers}"


def _launcher(src: str, name: str) -> str:
    """The launcher of kernel ``name``: a kernel declared ``__cluster_dims__(c, 1, 1)`` runs
    its clusters' blocks together (gpudsl_emu_cluster.h)."""
    m = re.search(r"__cluster_dims__\(\s*(\d+)\s*,\s*1\s*,\s*1\s*\)\s*\n?\s*"
                  + re.escape(name) + r"\s*\(", src)
    if m and int(m.group(1)) > 1:
        return f"gpudsl_emu_cluster_kernel({name}, {int(m.group(1))})\n"
    return f"gpudsl_emu_kernel({name})\n"


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
        self._take_output = lib.gpudsl_emu_take_output
        self._take_output.restype = ctypes.c_void_p
        self._take_output.argtypes = [ctypes.POINTER(ctypes.c_ulonglong)]
        self.output = ""  # what the last launch printed (kernel printf), see take_output
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
        try:
            rc = self._fns[name](*g, *b, int(shared_bytes), self.workers, slots.address)
        finally:
            self.output = self.take_output()
        if rc == 2:  # Ctrl-C: the launch stopped at once
            raise KeyboardInterrupt(f"emulated kernel {name} interrupted")
        if rc != 0:
            msg = (self._last_error() or b"unknown failure").decode("utf-8", "replace")
            raise LaunchError(f"emulated kernel {name} failed: {_with_source_line(msg, self.path)}")


    def take_output(self) -> str:
        """What kernels printed (``printf``) since the last take; the emulator keeps it in
        a buffer rather than the C stdout, which a notebook does not show.  ``launch``
        takes it after each launch into ``self.output``."""
        n = ctypes.c_ulonglong(0)
        p = self._take_output(ctypes.byref(n))
        if not p or not n.value:
            return ""
        return ctypes.string_at(p, n.value).decode("utf-8", "replace")


def dims(d, what: str) -> tuple[int, int, int]:
    """Normalise a launch dimension to a 3-tuple of positive ints."""
    t = (d,) if isinstance(d, int) else tuple(d)
    if not 1 <= len(t) <= 3 or not all(isinstance(x, int) and x >= 1 for x in t):
        raise LaunchError(f"{what} must be 1 to 3 positive integers, got {d!r}")
    return t + (1,) * (3 - len(t))  # type: ignore[return-value]


def _with_source_line(msg: str, so_path: str) -> str:
    """Replace a fault's ``[pc +0x...]`` by the source line the module's line tables give."""
    m = re.search(r" \[pc \+(0x[0-9a-f]+)\]", msg)
    if not m:
        return msg
    where = ""
    if os.path.isfile(so_path) and shutil.which("addr2line"):
        try:
            # the faulting instruction's address; -i lists inlined frames, innermost first
            r = subprocess.run(["addr2line", "-i", "-e", so_path, m.group(1)],
                               capture_output=True, text=True, timeout=10)
            lines = [ln.strip() for ln in r.stdout.splitlines()
                     if ln.strip() and not ln.startswith("??")]
            user = [ln for ln in lines if "gpudsl_emu" not in ln and "<gpudsl" not in ln]
            if user:
                where = f" at {user[-1]}"
        except (OSError, subprocess.SubprocessError):
            pass
    return msg[:m.start()] + where + msg[m.end():]


_LOCAL_ARRAY = re.compile(
    r"^[ \t]*(?:__align__\s*\(\s*\d+\s*\)\s*)?(?:const\s+)?"
    r"(float|double|int|unsigned int|unsigned|long long|unsigned long long|short|unsigned short|"
    r"signed char|unsigned char|char|bool|__half|half|__nv_bfloat16|int64_t|int32_t|uint32_t|"
    r"uint64_t|int8_t|uint8_t|int16_t|uint16_t)\s+[A-Za-z_]\w*\s*((?:\[\s*\d+\s*\])+)",
    re.M)
_SIZES = {"double": 8, "long long": 8, "unsigned long long": 8, "int64_t": 8, "uint64_t": 8,
          "short": 2, "unsigned short": 2, "int16_t": 2, "uint16_t": 2, "__half": 2, "half": 2,
          "__nv_bfloat16": 2, "signed char": 1, "unsigned char": 1, "char": 1, "bool": 1,
          "int8_t": 1, "uint8_t": 1}


def local_array_bytes(source: str) -> int:
    """Bytes of the fixed-size arrays declared on a thread's stack (not ``__shared__``,
    ``__constant__`` or ``static``), summed over the translation unit: an upper bound of
    what one thread's frame holds."""
    total = 0
    for m in _LOCAL_ARRAY.finditer(source):
        line = source[source.rfind("\n", 0, m.start()) + 1:m.end()]
        if re.search(r"__shared__|__constant__|\bstatic\b|\bextern\b", line):
            continue
        n = 1
        for d in re.findall(r"\d+", m.group(2)):
            n *= int(d)
        total += n * _SIZES.get(m.group(1), 4)
    return total


def stack_kb_for(source: str) -> int:
    """Per-thread stack (KiB, a power of two >= 128) with room for the local arrays twice
    over (g++ may keep copies) plus 64 KiB for calls and spills."""
    need = (2 * local_array_bytes(source) + 64 * 1024 + 12 * 1024) // 1024 + 1
    kb = 128
    while kb < need and kb < MAX_STACK_KB:
        kb *= 2
    return kb


# ------------------------------------------------------------ compiling (interruptible, tidy)

_TMP_PREFIX = "gpudsl-emu-"  # compiles' folders, and private_lib's (gpudsl-emu-lib-)
assert _LIB_PREFIX.startswith(_TMP_PREFIX)
_swept = False


def _sweep_stale_temporaries() -> None:
    """Remove temporary folders left by gpudsl processes that no longer exist (a killed
    parent cannot clean up after itself); once per process."""
    global _swept
    if _swept:
        return
    _swept = True
    tmp = Path(tempfile.gettempdir())
    try:
        entries = list(tmp.glob(_TMP_PREFIX + "*"))
    except OSError:
        return
    for d in entries:
        m = re.match(re.escape(_TMP_PREFIX) + r"(?:out-|lib-|pch-)?(\d+)-", d.name)
        if not m or not d.is_dir():
            continue
        pid = int(m.group(1))
        if pid == os.getpid():
            continue
        try:
            os.kill(pid, 0)
            continue  # alive (or not ours to signal): leave it
        except ProcessLookupError:
            shutil.rmtree(d, ignore_errors=True)
        except OSError:
            continue


def _tempdir(kind: str = "") -> tempfile.TemporaryDirectory:
    return tempfile.TemporaryDirectory(prefix=f"{_TMP_PREFIX}{kind}{os.getpid()}-")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if _prctl is not None:
        _prctl(1, 9, 0, 0, 0)  # PR_SET_PDEATHSIG, SIGKILL: the compiler dies with its parent


try:
    _prctl = ctypes.CDLL(None, use_errno=True).prctl if os.uname().sysname == "Linux" else None
except (OSError, AttributeError):  # pragma: no cover
    _prctl = None


def run_compiler(cmd: list[str], cwd: str | None = None, timeout: float = 600):
    """Run a compiler in its own process group; on any exit (error, timeout, Ctrl-C) the
    whole group (g++ and its cc1plus, as, ld) is killed before this returns or raises."""
    import signal

    p = subprocess.Popen(cmd, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True,
                         preexec_fn=_die_with_parent if _prctl is not None else None)
    try:
        out, err = p.communicate(timeout=timeout)
    except BaseException:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except OSError:
            pass
        p.kill()
        p.wait()
        raise
    return p.returncode, out, err


def _compile(full_source: str, flags: list[str], out: Path, cxx: str,
             pch: Path | None = None) -> None:
    """Compile to ``out``; with ``pch`` (a folder of :mod:`gpudsl.runtime.emu_pch`) its
    precompiled system header first, and on any failure once more without it."""
    _sweep_stale_temporaries()
    if pch is not None:
        try:
            return _gxx(full_source, [*flags, f"-fdebug-prefix-map={pch}=.", "-include",
                                      str(pch / emu_pch.SYS_HEADER)], out, cxx)
        except CompileError:
            pass  # the plain path says what is wrong
    return _gxx(full_source, flags, out, cxx)


def _gxx(full_source: str, flags: list[str], out: Path, cxx: str) -> None:
    """One g++ run compiling ``full_source`` to ``out``."""
    with _tempdir() as tmp:
        tmpd = Path(tmp)
        for h in STUB_HEADERS:
            (tmpd / h).write_text("#pragma once\n")
        src = tmpd / "kernel.cu"
        src.write_text(full_source)
        # relative names and a mapped debug prefix: the output does not depend on the
        # temporary folder's name, so concurrent builds of one key install identical bytes
        cmd = [cxx, *flags, f"-fdebug-prefix-map={tmpd}=.", "-I", ".", "-I", str(HERE),
               "-include", str(HERE / HEADERS[0]), "-x", "c++", "kernel.cu", "-o", str(out)]
        try:
            rc, _, stderr = run_compiler(cmd, cwd=str(tmpd))
        except subprocess.TimeoutExpired:
            raise CompileError("the emulator's C++ compiler timed out after 600 s") from None
        if rc != 0:
            raise CompileError(f"the emulator's C++ compiler rejected the generated code:\n"
                               f"{stderr.strip()}",
                               hint="file:line locations point at the proc's source")


def _load(data: bytes, kernels, nworkers: int, cache: Cache | None,
          cached: bool = False) -> EmuModule:
    """Load exactly ``data`` (a private copy: never a path in the cache, which may name
    another file by now; :mod:`gpudsl.runtime.private_lib`)."""
    lib, path = load_library(data, cache.dir if cache is not None else None)
    return EmuModule(lib, path, kernels, nworkers, cached=cached)


def checks_default() -> bool:
    """Whether ``$GPUDSL_EMU_CHECKS`` asks for the bounds-checked build."""
    return os.environ.get("GPUDSL_EMU_CHECKS", "") not in ("", "0")


def build_emulator_module(source: str, kernels: Iterable[KernelSig], *,
                          options: Iterable[str] = (), workers: int | None = None,
                          stack_kb: int | None = None, checks: bool | None = None,
                          cache: Cache | None = None, use_cache: bool = True) -> EmuModule:
    """Compile ``source`` for the emulator (or fetch it from the cache) and load it.

    Blocks run on ``workers`` OS threads (default :func:`default_workers`; 1 gives
    deterministic block order).  ``stack_kb`` (a power of two >= 32) is each emulated
    thread's stack region (default :func:`stack_kb_for` the source).  ``checks`` adds
    g++'s bounds and division checks (default ``$GPUDSL_EMU_CHECKS``).  ``options`` are
    extra g++ flags.  The C++ compiler is ``$GPUDSL_CXX`` or ``g++``.

    A cache entry is verified (its content hash) before it is loaded; a damaged entry,
    or one that fails to load, is removed with a warning and rebuilt.
    """
    kernels = list(kernels)
    if stack_kb is None:
        stack_kb = stack_kb_for(source)
    if stack_kb < 32 or stack_kb & (stack_kb - 1):
        raise CompileError(f"stack_kb must be a power of two >= 32, got {stack_kb}")
    if checks is None:
        checks = checks_default()
    cxx = compiler()
    flags = [*BASE_FLAGS, *(CHECK_FLAGS if checks else ()),
             f"-DGPUDSL_EMU_STACK={stack_kb * 1024}", *options]
    full = prepare_source(source, kernels)
    cache = cache or default_cache()
    key = cache_key(full, "emulator", os.uname().machine, flags, compiler_version(cxx),
                    extra=_header_digest())
    nworkers = workers if workers is not None else default_workers()
    if use_cache:
        hit = cache.lookup(key, "so")  # the verified bytes
        if hit is not None:
            try:
                return _load(hit[0], kernels, nworkers, cache, cached=True)
            except (OSError, AttributeError) as e:
                cache.discard(key, "so", f"it could not be loaded ({e})")
    with _tempdir("out-") as tmp:
        out = Path(tmp) / "module.so"
        pch = emu_pch.include_dir(HERE, flags, cxx, compiler_version(cxx), cache, use_cache,
                                  run_compiler, _tempdir)
        _compile(full, flags, out, cxx, pch)
        data = out.read_bytes()
    if use_cache:
        cache.try_put(key, "so", data, {"target": "emulator", "flags": flags})
    return _load(data, kernels, nworkers, cache if use_cache else None)
