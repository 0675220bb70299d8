"""On-disk cache of compiled artifacts (cubins, emulator shared objects).

Location: ``$GPUDSL_CACHE_DIR``, default ``~/.cache/gpudsl``.  An entry is keyed by
:func:`cache_key` (sha256 over source, target, arch, options, compiler version and gpudsl
version) and holds the artifact ``<key>.<suffix>`` plus ``<key>.json`` metadata (e.g. the
ptxas log and parsed resources).  Every write goes to a temporary file in the same
directory followed by ``os.replace``, so readers never see a partial file, and concurrent
writers of the same key simply race to install identical content.

Every entry's metadata records the artifact's sha256 (``"sha256"``); :meth:`Cache.lookup`
checks it before handing the artifact out, so a truncated or overwritten file is never
loaded: it is removed (with a warning, once per entry) and the caller recompiles.  A cache
that cannot be written is reported once per directory (:class:`CacheWarning`), and
compilation goes on without it.

Nothing is loaded from a folder or entry that another user owns or that its group or
others may write (:func:`untrusted`; a warning, and the code is compiled afresh): a
shared folder would let anyone who can write there run code in this process.  The
folder is created owner-only and entries are written 0600.
"""
from __future__ import annotations

import hashlib
import json
import os
import tempfile
import threading
import warnings
from pathlib import Path


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


def cache_dir() -> Path:
    """The cache directory (created on demand)."""
    d = os.environ.get("GPUDSL_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache",
                                                            "gpudsl")
    return Path(d)


def cache_key(source: str, target: str, arch: str, options: list[str] | tuple[str, ...],
              compiler_version: str, extra: str = "") -> str:
    """sha256 hex digest identifying one compilation."""
    h = hashlib.sha256()
    for part in (source, target, arch, "\0".join(options), compiler_version,
                 gpudsl_version(), extra):
        data = part.encode("utf-8", "surrogateescape")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def untrusted(path: Path) -> str | None:
    """Why ``path`` (a cache folder or entry) must not be loaded from: it is not owned by
    the current user, or its group or others may write it (anyone who can write there
    could plant code that this process loads); None when it is trusted or absent.  As
    pip does with its cache.  Not checked where the system has no owners (Windows)."""
    if not hasattr(os, "getuid"):
        return None
    try:
        st = os.stat(path)
    except OSError:
        return None
    if st.st_uid != os.getuid():
        return f"{path} is owned by another user (uid {st.st_uid})"
    if st.st_mode & 0o022:
        return f"{path} is writable by its group or by others (mode {st.st_mode & 0o777:o})"
    return None


def make_private_dir(d: Path) -> None:
    """Create the folder ``d`` (and its parents) owner-only; an existing one is left."""
    if not d.is_dir():
        d.mkdir(parents=True, exist_ok=True, mode=0o700)


def atomic_write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` via a temp file in the same directory and ``os.replace``
    (owner-only: the folder is created 0700 and the file 0600)."""
    make_private_dir(path.parent)
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix="." + path.name + ".", suffix=".tmp")
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


class Cache:
    """A directory of ``<key>.<suffix>`` artifacts with ``<key>.json`` metadata."""

    def __init__(self, directory: str | os.PathLike | None = None):
        self.dir = Path(directory) if directory is not None else cache_dir()

    def path(self, key: str, suffix: str) -> Path:
        """Where the artifact for ``key`` lives (it may not exist)."""
        return self.dir / f"{key}.{suffix}"

    def get(self, key: str, suffix: str) -> bytes | None:
        """The cached artifact's bytes, or None on a miss."""
        try:
            return self.path(key, suffix).read_bytes()
        except OSError:
            return None

    def get_meta(self, key: str) -> dict | None:
        """The metadata stored with ``key``, or None."""
        try:
            return json.loads(self.path(key, "json").read_text())
        except (OSError, ValueError):
            return None

    def put(self, key: str, suffix: str, data: bytes, meta: dict | None = None) -> Path:
        """Store an artifact (and metadata first, so a visible artifact has its metadata;
        the metadata records the artifact's sha256).  Raises OSError when it cannot."""
        meta = dict(meta or {})
        meta["sha256"] = digest(data)
        atomic_write(self.path(key, "json"), json.dumps(meta, sort_keys=True).encode())
        p = self.path(key, suffix)
        atomic_write(p, data)
        return p

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
        for q in (p, self.path(key, "json")):
            try:
                q.unlink()
            except OSError:
                pass
        warn_once(("damaged", str(p)),
                  f"gpudsl: removed the damaged cache entry {p}: {why}; compiling it again")

    def trusted(self) -> bool:
        """Whether code may be loaded from this folder (see :func:`untrusted`)."""
        return untrusted(self.dir) is None

    def lookup(self, key: str, suffix: str) -> tuple[Path, dict] | None:
        """``(artifact path, metadata)`` when both are present and the artifact's content
        hash is the one recorded at write, else None (a damaged entry is discarded)."""
        p = self.path(key, suffix)
        for q in (self.dir, p, self.path(key, "json")):
            why = untrusted(q)
            if why is not None:
                warn_once(("untrusted", str(q)),
                          f"gpudsl: not loading from the compile cache: {why}; compiling "
                          "afresh (point GPUDSL_CACHE_DIR at a folder only you can write)")
                return None
        meta = self.get_meta(key)
        if meta is None or not p.is_file():
            return None
        data = self.get(key, suffix)
        if data is None:
            return None
        if "sha256" not in meta:
            return None  # written by an older gpudsl: unverifiable, so a miss (overwritten)
        if meta["sha256"] != digest(data):
            self.discard(key, suffix, "its content does not match the hash recorded when "
                                      "it was written")
            return None
        return p, meta


def default_cache() -> Cache:
    """A :class:`Cache` on the current ``$GPUDSL_CACHE_DIR`` (read at each call)."""
    return Cache()
