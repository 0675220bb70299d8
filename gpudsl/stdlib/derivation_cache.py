"""The disk cache of the standard library's derivations: a kernel that a schedule
function derived once (an sm_90a GEMM: 4-30 s of primitives, each proving that its step
keeps the meaning) is read back by the next process instead of derived again.

- Which: the kernel builders marked ``@derivation`` (the sm_90a, sm_80 and TF32 GEMMs,
  the attention kernels, the big fp32 GEMM).  In a process each call is remembered as
  by ``functools.lru_cache(maxsize=None)``: the same object for the same arguments.
- Key: the function's module and name, its arguments, and a digest of every source file
  of the installed gpudsl package (:func:`~gpudsl.runtime.artifact_cache.sources_digest`):
  any change of gpudsl misses.  Not the folder it is installed in: an entry's locations
  name the package's files relative to it, and a process reading it back names its own
  (the same sources; entries derived here can be carried to a GPU machine, the
  campaign's ``benchmarks/derive_ahead.py``).  Not Python's, numpy's or z3's versions:
  an entry is a kernel these sources derived, each step proved to keep the meaning, and
  the compile's ``check()`` proves it safe with the local solver.
  Only calls whose arguments are plain values (str, int, float, bool, None and tuples of
  them) are stored; any other call is derived.
- Entry: the proc's IR, pickled without its derivation history (the steps' cursors do
  not forward into a proc read back), with the texts of the pseudo-files its locations
  name (``<gpudsl.stdlib.NAME>``, put in ``linecache`` for messages, as deriving it
  would), as ``<key>.pickle`` with ``<key>.json`` in
  ``derived/`` under ``$GPUDSL_CACHE_DIR`` (default ``~/.cache/gpudsl``), through the
  kernel cache's :class:`~gpudsl.runtime.artifact_cache.Cache`: folder and files
  owner-only, read only when the current user owns them and nobody else may write them
  or the folders above, and only when their sha256 is the one recorded at write; the
  bytes unpickled are the bytes checked.  A damaged entry is a miss (removed, with a
  warning), never an error.
- What it does not skip: every compile proves the proc (``check()``) as it proves any
  other; the cache saves the derivation, not the proof of safety.
- ``GPUDSL_DERIVATION_CACHE=0`` turns it off; ``GPUDSL_DERIVATION_CACHE=/a/folder`` keeps
  the entries there instead.  ``f.cache_clear()`` forgets the
  process's answers and has this process derive every later call of ``f`` afresh
  (nothing read from the disk or written to it): what a caller that watches a
  derivation run means by it.
"""
from __future__ import annotations

import functools
import hashlib
import io
import os
import pickle
import time
from pathlib import Path

from ..runtime.artifact_cache import PACKAGE_ROOTS, Cache, cache_dir, sources_digest

SUFFIX = "pickle"
FORMAT = "gpudsl-derivation-2"
_PLAIN = (str, int, float, bool, type(None))
# the folder holding the gpudsl package, as locations name it: an entry names the
# package's files relative to it (``ROOT_MARK``), and reading it back names this
# process's own files (another checkout, or a GPU machine, of the same sources)
ROOT_MARK = "<gpudsl root>"
_HERE = str(Path(__file__).resolve().parents[2])


_OFF = ("0", "off", "no", "false")
_ON = ("", "1", "on", "yes", "true")


def enabled() -> bool:
    return os.environ.get("GPUDSL_DERIVATION_CACHE", "1").strip().lower() not in _OFF


def derivation_cache() -> Cache:
    """The cache folder of derived kernels: ``derived/`` in the cache directory, or the
    folder ``$GPUDSL_DERIVATION_CACHE`` names (the tests give each run its own)."""
    setting = os.environ.get("GPUDSL_DERIVATION_CACHE", "").strip()
    if setting.lower() in _ON:
        return Cache(cache_dir() / "derived")
    return Cache(setting)


def _relative(text: str | None) -> str | None:
    if text is None:
        return None
    for root in PACKAGE_ROOTS:
        text = text.replace(root.rstrip("/\\") + os.sep, ROOT_MARK + "/")
    return text


def at_root(file, line, col, text, made_by):
    """A location read back: the package's files named below this process's folder."""
    from ..errors import SrcLoc

    def here(t):
        return None if t is None else t.replace(ROOT_MARK + "/", _HERE + os.sep)

    return SrcLoc(here(file), line, col, text, here(made_by))


class _Pickler(pickle.Pickler):
    """Procs go without their derivation history (cursor forwarding: closures);
    locations name the package's files relative to its folder (:func:`at_root`)."""

    def reducer_override(self, obj):
        from ..errors import SrcLoc
        from ..proc import Proc

        if type(obj) is Proc:
            return Proc, (obj.ir,)
        if type(obj) is SrcLoc:
            return at_root, (_relative(obj.file), obj.line, obj.col, obj.text,
                             _relative(obj.made_by))
        return NotImplemented


def pickle_procs(obj) -> bytes:
    """``obj`` pickled, each ``Proc`` in it as its IR alone (raises what pickle raises)."""
    buf = io.BytesIO()
    _Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buf.getvalue()


def _plain(value) -> bool:
    if isinstance(value, tuple):
        return all(_plain(v) for v in value)
    return type(value) in _PLAIN


def entry_key(fn, args: tuple, kwargs: dict) -> str | None:
    """The entry of ``fn(*args, **kwargs)``, or None when an argument is not a plain
    value (``repr`` then may not name it)."""
    if not (_plain(args) and all(_plain(v) for v in kwargs.values())):
        return None
    call = repr((args, sorted(kwargs.items())))
    h = hashlib.sha256()
    for part in (FORMAT, sources_digest(), fn.__module__, fn.__qualname__, call):
        data = part.encode("utf-8", "surrogateescape")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def load(key: str):
    """The proc stored under ``key`` when present, trusted and intact; else None."""
    from ..ir.nodes import ProcDef
    from ..proc import Proc

    c = derivation_cache()
    hit = c.lookup(key, SUFFIX)  # the folders' and the entry's owners and modes, sha256
    if hit is None:
        return None
    try:
        entry = pickle.loads(hit[0])  # exactly the bytes verified
        if not (isinstance(entry, dict) and entry.get("format") == FORMAT
                and type(entry.get("proc")) is Proc
                and isinstance(entry["proc"].ir, ProcDef)
                and isinstance(entry.get("sources"), dict)
                and all(isinstance(f, str) and isinstance(t, str)
                        for f, t in entry["sources"].items())):
            raise ValueError("not an entry of this version")
    except Exception as e:  # noqa: BLE001 - whatever a damaged entry raises
        c.discard(key, SUFFIX, f"it cannot be read back ({type(e).__name__}: {e})")
        return None
    _hold_sources(entry["sources"])
    return entry["proc"]


def _pseudo_files(p) -> set:
    """The pseudo-file names (``<...>``: texts kept in ``linecache``) the locations of
    ``p``'s nodes name."""
    from ..ir.visitor import walk

    files = set()
    for node in walk(p.ir):
        loc = getattr(node, "loc", None)
        if loc is not None and str(loc.file).startswith("<"):
            files.add(loc.file)
    return files


def _sources_of(p) -> dict:
    """The texts of ``p``'s pseudo-files, which a new process needs for its messages."""
    import linecache

    return {f: "".join(linecache.cache[f][2]) for f in sorted(_pseudo_files(p))
            if len(linecache.cache.get(f, ())) == 4}


def _hold_sources(sources: dict) -> None:
    """Put an entry's texts in ``linecache``, as deriving the kernel would have (the
    stdlib's builders keep each text under its pseudo-file name, the latest one given)."""
    import linecache

    for f, text in sources.items():
        linecache.cache[f] = (len(text), None, text.splitlines(True), f)


def store(key: str, value, fn, seconds: float) -> None:
    """Write ``value`` (a proc) under ``key``, owner-only; anything else, or a value
    that cannot be pickled, is not stored."""
    from ..proc import Proc

    if type(value) is not Proc:
        return
    try:
        data = pickle_procs({"format": FORMAT, "proc": value, "sources": _sources_of(value)})
    except Exception:  # noqa: BLE001 - an IR that does not pickle is derived each time
        return
    derivation_cache().try_put(key, SUFFIX, data, {
        "format": FORMAT, "function": f"{fn.__module__}.{fn.__qualname__}",
        "proc": value.name, "derive_seconds": round(seconds, 3)})


def derivation(fn):
    """Mark a kernel builder whose result (a ``Proc``) is kept per arguments, in the
    process and on disk (the module's text); replaces ``@lru_cache(maxsize=None)``."""
    fresh = []   # set by cache_clear(): this process derives every call afresh

    @functools.lru_cache(maxsize=None)
    @functools.wraps(fn)
    def cached(*args, **kwargs):
        key = None if fresh or not enabled() else entry_key(fn, args, kwargs)
        if key is not None:
            hit = load(key)
            if hit is not None:
                return hit
        start = time.perf_counter()
        value = fn(*args, **kwargs)
        if key is not None:
            store(key, value, fn, time.perf_counter() - start)
        return value

    clear = cached.cache_clear

    def cache_clear():
        fresh.append(True)
        clear()

    cached.cache_clear = cache_clear
    return cached


__all__ = ["derivation", "derivation_cache", "enabled", "entry_key", "load", "store",
           "pickle_procs"]
