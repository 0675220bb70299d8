"""A precompiled gpudsl_emu_sys.h for the emulator's g++ (issue 40: ~4 s per kernel).

Most of what g++ parses for an emulated kernel is the C++ standard library that
gpudsl_emu.h includes (``<thread>``, ``<string>``, ``<vector>``, ``<cmath>``...), all of it
in ``gpudsl_emu_sys.h``.  That header is precompiled (``g++ -x c++-header``, a ``.gch``)
once per header content, compiler and flags (``-DGPUDSL_EMU_STACK=...`` left out: the
header does not use it) and kept in the compile cache like a module.  A compile then
passes ``-include <folder>/gpudsl_emu_sys.h`` before ``gpudsl_emu.h``, where the folder is
private to this process and holds a stub of that name (it includes the real header) next
to the verified ``.gch`` bytes: g++ takes the ``.gch`` when it accepts it for these flags,
else it reads the stub and so the real header, as without a PCH.  The parsed declarations
are the same either way, so the kernel means exactly what it meant.

The ``.gch`` is read from the cache through :meth:`Cache.lookup` (owner and mode checks,
the sha256 recorded at write) and written to a folder this process created, never used
in place.  ``$GPUDSL_EMU_PCH=0`` turns it off; a compiler that is clang, or a PCH build
that fails, means the plain path.
"""
from __future__ import annotations

import atexit
import hashlib
import os
import shutil
import subprocess
import tempfile
import threading
from pathlib import Path

from gpudsl.runtime.artifact_cache import Cache, cache_key

SYS_HEADER = "gpudsl_emu_sys.h"
_lock = threading.Lock()
_dirs: dict[str, Path | None] = {}  # PCH key -> the folder holding stub and .gch (or None)
_home: tuple[int, Path] | None = None  # (pid, folder): this process's folder of PCHs


def enabled() -> bool:
    """Whether ``$GPUDSL_EMU_PCH`` allows the precompiled header (default: yes)."""
    return os.environ.get("GPUDSL_EMU_PCH", "1").strip() not in ("0", "no", "off", "false")


def pch_flags(flags: list[str]) -> list[str]:
    """The flags the PCH is built with: the module's, less the stack size."""
    return [f for f in flags if not f.startswith("-DGPUDSL_EMU_STACK=")]


def _key(here: Path, flags: list[str], version: str) -> str:
    text = (here / SYS_HEADER).read_bytes()
    extra = hashlib.sha256(text).hexdigest() + "\0" + str(here)
    return cache_key("", "emulator-pch", os.uname().machine, flags, version, extra=extra)


def _stub(here: Path) -> str:
    return f'#include "{here / SYS_HEADER}"\n'


def _build(here: Path, flags: list[str], cxx: str, run, tempdir) -> bytes | None:
    """Compile the PCH; None when the compiler refuses."""
    with tempdir() as tmp:
        d = Path(tmp)
        (d / SYS_HEADER).write_text(_stub(here))
        cmd = [cxx, *flags, "-x", "c++-header", SYS_HEADER, "-o", SYS_HEADER + ".gch"]
        try:
            rc, _, _ = run(cmd, cwd=str(d), timeout=300)
        except subprocess.TimeoutExpired:
            return None
        gch = d / (SYS_HEADER + ".gch")
        return gch.read_bytes() if rc == 0 and gch.is_file() else None


def _install(key: str, here: Path, data: bytes) -> Path:
    """Write the stub and ``data`` into a folder of this process's own."""
    d = _home_dir() / key[:16]
    d.mkdir(mode=0o700, exist_ok=True)
    (d / SYS_HEADER).write_text(_stub(here))
    gch = d / (SYS_HEADER + ".gch")
    with open(os.open(gch, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600), "wb") as f:
        f.write(data)
    return d


def _home_dir() -> Path:
    """This process's folder (a forked child makes its own and never removes its
    parent's: the parent's exit removes that one)."""
    global _home
    if _home is None or _home[0] != os.getpid():
        # the emulator's temporary prefix: its sweep removes those of dead processes
        d = tempfile.mkdtemp(prefix=f"gpudsl-emu-pch-{os.getpid()}-")
        _home = (os.getpid(), Path(d))
        atexit.register(_remove, *_home)
    return _home[1]


def _remove(pid: int, folder: Path) -> None:
    if os.getpid() == pid:
        shutil.rmtree(folder, ignore_errors=True)


def include_dir(here: Path, flags: list[str], cxx: str, version: str, cache: Cache,
                use_cache: bool, run, tempdir) -> Path | None:
    """The folder whose ``gpudsl_emu_sys.h`` to ``-include`` (its ``.gch`` beside it), or
    None for the plain path.  ``run`` and ``tempdir`` are the emulator's compiler runner
    and temporary-folder maker."""
    if not enabled() or "clang" in version.lower():
        return None
    flags = pch_flags(flags)
    key = _key(here, flags, version)
    with _lock:
        if _home is not None and _home[0] != os.getpid():
            _dirs.clear()  # a forked child: its parent's folder is not its own
        if key in _dirs:
            return _dirs[key]
        hit = cache.lookup(key, "gch") if use_cache else None
        data = hit[0] if hit is not None else _build(here, flags, cxx, run, tempdir)
        if data is not None and hit is None and use_cache:
            cache.try_put(key, "gch", data, {"target": "emulator-pch", "flags": flags})
        _dirs[key] = None if data is None else _install(key, here, data)
        return _dirs[key]
