"""On-disk cache of compiled artifacts (cubins, emulator shared objects).

Location: ``$GPUDSL_CACHE_DIR``, default ``~/.cache/gpudsl``.  An entry is keyed by
:func:`cache_key` (sha256 over source, target, arch, options, compiler version and gpudsl
version) and holds the artifact ``<key>.<suffix>`` plus ``<key>.json`` metadata (e.g. the
ptxas log and parsed resources).  Every write goes to a temporary file in the same
directory followed by ``os.replace``, so readers never see a partial file, and concurrent
writers of the same key simply race to install identical content.

Every entry's metadata records the artifact's sha256 (``"sha256"``); :meth:`Cache.lookup`
checks it before handing the artifact out, so a truncated or overwritten file is never
loaded: it is removed (with a warning, once per entry) and the caller recompiles; so is
an entry whose metadata is not a JSON object.  A cache
that cannot be written is reported once per directory (:class:`CacheWarning`), and
compilation goes on without it.

Nothing is loaded from a folder or entry that another user owns or that its group or
others may write, nor from a folder below one that others may write (unless sticky,
like ``/tmp``) or that another user than root owns (:mod:`gpudsl.runtime.safe_open`;
a warning, and the code is compiled afresh): anyone who can write there could plant
code that this process loads.  :meth:`Cache.lookup` checks the folder and the entry on
the descriptors it reads them through and hands out those bytes, never a path, so
flipping a link between the check and the load changes nothing.  The folder is
created owner-only and entries are written 0600; temp files left by writers killed
mid-write are swept (:func:`sweep_temporaries`).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import stat
import tempfile
import threading
import time
import warnings
from functools import lru_cache
from pathlib import Path

from .safe_open import CHECKED, Untrusted, open_dir, read_at, untrusted  # noqa: F401


class CacheWarning(UserWarning):
    """Something is wrong with gpudsl's on-disk cache (compilation goes on without it)."""


_warned: set = set()
_warn_lock = threading.Lock()


def warn_once(key, message: str) -> None:
    """Issue ``message`` as a :class:`CacheWarning` the first time ``key`` is seen."""
    with _warn_lock:
        if key in _warned:
            return
        _warned.add(key)
    warnings.warn(message, CacheWarning, stacklevel=3)


def digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def gpudsl_version() -> str:
    """The installed gpudsl version, or "dev" when running from a source tree."""
    try:
        from importlib.metadata import version
        return version("gpudsl")
    except Exception:
        return "dev"


@lru_cache(maxsize=1)
def sources_digest() -> str:
    """sha256 over every source file of the installed gpudsl package (its ``.py`` and
    ``.h`` files, by path below the package) and gpudsl's version: the same code
    anywhere (another checkout, another machine) has the same digest."""
    root = Path(__file__).resolve().parents[1]
    h = hashlib.sha256()
    h.update(gpudsl_version().encode() + b"\0")
    for f in sorted(root.rglob("*")):
        if f.suffix in (".py", ".h") and "__pycache__" not in f.parts:
            h.update(str(f.relative_to(root).as_posix()).encode() + b"\0")
            h.update(f.read_bytes())
            h.update(b"\0")
    return h.hexdigest()


@lru_cache(maxsize=1)
def package_digest() -> str:
    """:func:`sources_digest` and the versions of Python, numpy and z3: what the disk
    cache of compiled graphs keys on, so that any change of gpudsl's code or of what
    it runs with misses."""
    import sys

    import numpy as np
    import z3

    h = hashlib.sha256()
    for part in (sources_digest(), sys.version, np.__version__, z3.get_version_string()):
        h.update(part.encode() + b"\0")
    return h.hexdigest()


def cache_dir() -> Path:
    """The cache directory (created on demand)."""
    d = os.environ.get("GPUDSL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                            "gpudsl")
    return Path(d)


# The folder holding the gpudsl package (a checkout, or site-packages), as resolved and
# as imported: the ``#line`` paths of generated code below it are keyed relative to it.
PACKAGE_ROOTS = tuple(sorted({str(Path(__file__).resolve().parents[2]),
                              str(Path(os.path.abspath(__file__)).parents[2])},
                             key=len, reverse=True))


def _c_string_body(text: str) -> str:
    """``text`` as codegen writes it inside a C string literal (``#line`` file names)."""
    return text.replace("\\", "\\\\").replace('"', '\\"')


def key_source(source: str, root: str | os.PathLike | None = None) -> str:
    """``source`` as the cache key sees it: the file names of its ``#line`` directives
    below ``root`` (default :data:`PACKAGE_ROOTS`, the folder holding the gpudsl package)
    made relative to it, so two checkouts (or a moved virtual environment) of the same
    code share their entries; the source compiled keeps its absolute paths (error
    messages name the real files)."""
    for r in (str(root),) if root is not None else PACKAGE_ROOTS:
        body = re.escape(_c_string_body(r.rstrip("/\\")))
        source = re.sub(rf'^(#line \d+ )"{body}(?:/|\\\\)', r'\1"<gpudsl root>/', source,
                        flags=re.MULTILINE)
    return source


def cache_key(source: str, target: str, arch: str, options: list[str] | tuple[str, ...],
              compiler_version: str, extra: str = "") -> str:
    """sha256 hex digest identifying one compilation (the source's ``#line`` paths
    relative to the package's folder: :func:`key_source`)."""
    h = hashlib.sha256()
    for part in (key_source(source), target, arch, "\0".join(options), compiler_version,
                 gpudsl_version(), extra):
        data = part.encode("utf-8", "surrogateescape")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def make_private_dir(d: Path) -> None:
    """Create the folder ``d`` and its missing parents owner-only (a parent that others
    may write would make the cache untrusted); an existing one is left."""
    if d.is_dir():
        return
    missing = [d]
    while not missing[-1].parent.exists() and missing[-1].parent != missing[-1]:
        missing.append(missing[-1].parent)
    for p in reversed(missing):
        p.mkdir(mode=0o700, exist_ok=True)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and ``os.replace``
    (owner-only: the folder is created 0700 and the file 0600).  The temp file is named
    ``.<name>.<pid>.<random>.tmp``: :func:`sweep_temporaries` removes those of writers
    that died mid-write."""
    make_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.{os.getpid()}.",
                               suffix=".tmp")
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o600)
        os.replace(tmp, path)
    except BaseException:
        try:
            os.unlink(tmp)
        except OSError:
            pass
        raise


# a temp file of atomic_write in a cache folder (an older gpudsl's has no pid)
_TEMP = re.compile(r"\.[0-9a-f]{64}\.[a-z]+\.(?:(\d+)\.)?[a-z0-9_]{8}\.tmp")
STALE_SECONDS = 3600  # a temp file this old is left over, whoever wrote it
GRACE_SECONDS = 60    # ... and one of a writer no longer running, this old
_swept: set = set()


def _running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        pass
    return True


def sweep_temporaries(dir_fd: int) -> int:
    """Remove the temp files that writers killed mid-write left in a cache folder (opened
    by :func:`~gpudsl.runtime.safe_open.open_dir`): only files of :func:`atomic_write`'s
    names, owned by this user, whose writer is no longer running (and which are at least
    ``GRACE_SECONDS`` old) or which are ``STALE_SECONDS`` old.  Returns how many."""
    n, now = 0, time.time()
    with os.scandir(dir_fd) as entries:
        names = [e.name for e in entries]
    for name in names:
        m = _TEMP.fullmatch(name)
        if m is None:
            continue
        try:
            st = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
            age = now - st.st_mtime
            pid = int(m.group(1)) if m.group(1) else None
            if not stat.S_ISREG(st.st_mode) or st.st_uid != os.geteuid():
                continue
            if age > STALE_SECONDS or (age > GRACE_SECONDS and pid is not None
                                       and pid != os.getpid() and not _running(pid)):
                os.unlink(name, dir_fd=dir_fd)
                n += 1
        except OSError:
            continue
    return n


class Cache:
    """A directory of ``<key>.<suffix>`` artifacts with ``<key>.json`` metadata."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory is not None else cache_dir()

    def path(self, key: str, suffix: str) -> Path:
        """Where the artifact for ``key`` lives (it may not exist)."""
        return self.dir / f"{key}.{suffix}"

    def put(self, key: str, suffix: str, data: bytes, meta: dict | None = None) -> Path:
        """Store an artifact (and metadata first, so a visible artifact has its metadata;
        the metadata records the artifact's sha256).  Raises OSError when it cannot.
        The first write to a folder in a process sweeps stale temporaries."""
        meta = dict(meta or {})
        meta["sha256"] = digest(data)
        atomic_write(self.path(key, "json"), json.dumps(meta, sort_keys=True).encode())
        p = self.path(key, suffix)
        atomic_write(p, data)
        self._sweep()
        return p

    def _sweep(self) -> None:
        if not CHECKED or str(self.dir) in _swept:
            return
        _swept.add(str(self.dir))
        try:
            fd = open_dir(self.dir)
        except (OSError, Untrusted):
            return
        try:
            sweep_temporaries(fd)
        except OSError:
            pass
        finally:
            os.close(fd)

    def try_put(self, key: str, suffix: str, data: bytes, meta: dict | None = None
                ) -> Path | None:
        """:meth:`put`, or None (with a warning, once per directory) when the cache cannot
        be written."""
        try:
            return self.put(key, suffix, data, meta)
        except OSError as e:
            warn_once(("unwritable", str(self.dir)),
                      f"gpudsl: the compile cache {self.dir} cannot be written "
                      f"({e.strerror or e}); compiled code is not cached and will be "
                      f"compiled again in each process (set GPUDSL_CACHE_DIR to a writable "
                      f"folder)")
            return None

    def discard(self, key: str, suffix: str, why: str) -> None:
        """Remove a damaged entry (artifact and metadata) and say so, once per entry."""
        p = self.path(key, suffix)
        try:
            fd = open_dir(self.dir) if CHECKED else None
        except (OSError, Untrusted):
            fd = None
        for name in (p.name, f"{key}.json"):
            try:
                if fd is not None:
                    os.unlink(name, dir_fd=fd)
                elif not CHECKED:
                    (self.dir / name).unlink()
            except OSError:
                pass
        if fd is not None:
            os.close(fd)
        warn_once(("damaged", str(p)),
                  f"gpudsl: removed the damaged cache entry {p}: {why}; compiling it again")

    def lookup(self, key: str, suffix: str) -> tuple[bytes, dict] | None:
        """``(artifact bytes, metadata)`` when both are present, trusted and the bytes'
        hash is the one recorded at write, else None (a damaged entry is discarded).
        Folder and files are opened without following links, checked on their
        descriptors and read through them (:mod:`gpudsl.runtime.safe_open`): use these
        bytes, never the path, which may name something else by now."""
        try:
            raw, data = self._read_entry(key, suffix)
        except Untrusted as e:
            warn_once(("untrusted", str(self.dir), str(e)),
                      f"gpudsl: not loading from the compile cache {self.dir}: {e}; "
                      "compiling afresh (point GPUDSL_CACHE_DIR at a folder only you "
                      "can write)")
            return None
        except OSError:
            return None
        try:
            meta = json.loads(raw)
        except ValueError:
            meta = None
        if not isinstance(meta, dict):
            self.discard(key, suffix, "its metadata is not a JSON object")
            return None
        if "sha256" not in meta:
            return None  # written by an older gpudsl: unverifiable, so a miss (overwritten)
        if meta["sha256"] != digest(data):
            self.discard(key, suffix, "its content does not match the hash recorded when "
                                      "it was written")
            return None
        return data, meta

    def _read_entry(self, key: str, suffix: str) -> tuple[bytes, bytes]:
        """The metadata's and the artifact's bytes (raises Untrusted or OSError)."""
        names = (f"{key}.json", f"{key}.{suffix}")
        if not CHECKED:
            return tuple((self.dir / n).read_bytes() for n in names)  # type: ignore
        fd = open_dir(self.dir)
        try:
            return tuple(read_at(fd, n, self.dir) for n in names)  # type: ignore
        finally:
            os.close(fd)


def default_cache() -> Cache:
    """A :class:`Cache` on the current ``$GPUDSL_CACHE_DIR`` (read at each call)."""
    return Cache()
