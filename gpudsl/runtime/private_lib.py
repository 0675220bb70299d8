"""Loading compiled code from bytes already checked, never from a shared path.

``dlopen`` takes a name, and a name in a cache folder may name another file by the time
the loader opens it.  So the verified bytes of a shared object are written to a private
copy, in a folder of this process (``gpudsl-emu-lib-<pid>-*`` in the temp folder,
created 0700 and checked, on its descriptor, to be this user's and writable by nobody
else), and the copy is loaded through the folder's descriptor
(``/proc/self/fd/<fd>/<name>`` where there is a ``/proc``).  The same bytes are loaded once per process (``dlopen``
of one path handed back one handle before, too).  The copies stay while the process
runs (fault reports read their line tables) and the folder goes at exit; one left by
a killed process is swept by the emulator (``_sweep_stale_temporaries``).

Where the temp folder's file system does not allow executing code (``noexec``) the
private folder is made in the cache folder instead.
"""
from __future__ import annotations

import atexit
import ctypes
import hashlib
import itertools
import os
import shutil
import tempfile
import threading

from ..errors import CompileError
from .safe_open import CHECKED, DIR_FLAGS, Untrusted, check

PREFIX = "gpudsl-emu-lib-"
_CREATE = (os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0)
           | getattr(os, "O_CLOEXEC", 0))
_lock = threading.Lock()
_loaded: dict[str, tuple[ctypes.CDLL, str]] = {}  # sha256 -> (library, its copy)
_folder: tuple[int, int, str] | None = None       # (pid, descriptor or -1, path)
_count = itertools.count()


def _noexec(path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & getattr(os, "ST_NOEXEC", 0))
    except OSError:
        return False


def _make_folder(bases) -> tuple[int, str]:
    why = []
    for base in bases:
        if base is None:
            continue
        if _noexec(base):
            why.append(f"{base} does not allow executing code (noexec)")
            continue
        try:
            path = tempfile.mkdtemp(prefix=f"{PREFIX}{os.getpid()}-", dir=base)
            fd = _open_own(path) if CHECKED else -1
        except (OSError, Untrusted) as e:
            why.append(str(e))
            continue
        atexit.register(shutil.rmtree, path, True)
        return fd, path
    raise CompileError("no private folder to load the emulator's compiled code from: "
                       + "; ".join(why),
                       hint="point TMPDIR at a folder only you can write")


def _open_own(path: str) -> int:
    """The folder just made, opened; whatever renames happen above it afterwards, the
    descriptor names a folder that is this user's and 0700, where nobody else can put a
    file (no check of the folders above is needed: nobody else can make a folder this
    user owns)."""
    fd = os.open(path, DIR_FLAGS)
    try:
        check(os.fstat(fd), path)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _private_folder(fallback) -> tuple[int, str]:
    global _folder
    if _folder is None or _folder[0] != os.getpid():  # a forked child makes its own
        _folder = (os.getpid(), *_make_folder([tempfile.gettempdir(), fallback]))
    return _folder[1], _folder[2]


def load_library(data: bytes, fallback: str | os.PathLike | None = None
                 ) -> tuple[ctypes.CDLL, str]:
    """``(library, path of its private copy)`` for the shared object ``data``; the
    private folder goes in ``fallback`` (e.g. the cache folder) when the temp folder's
    file system is ``noexec``.  Raises OSError when the loader refuses the bytes."""
    key = hashlib.sha256(data).hexdigest()
    with _lock:
        if key in _loaded:
            return _loaded[key]
        fd, folder = _private_folder(fallback)
        name = f"{next(_count)}-{key[:16]}.so"
        path = os.path.join(folder, name)
        out = os.open(name, _CREATE, 0o600, dir_fd=fd) if fd >= 0 else \
            os.open(path, _CREATE, 0o600)
        with os.fdopen(out, "wb") as f:
            f.write(data)
        by_fd = f"/proc/self/fd/{fd}/{name}"
        try:
            lib = ctypes.CDLL(by_fd if fd >= 0 and os.path.exists(by_fd) else path)
        except OSError:
            os.unlink(name, dir_fd=fd) if fd >= 0 else os.unlink(path)
            raise
        _loaded[key] = (lib, path)
        return lib, path
