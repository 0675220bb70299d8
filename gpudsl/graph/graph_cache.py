"""The disk cache of compiled graphs: a second ``graph.compile`` of the same model, in
any process, reads back what the first derived and proved instead of doing it again.

An entry holds a model's compile products (the fusion groups and their proved
kernels, the memory plan, the launch list and the unit's generated code with its
proofs); the unit's machine code comes from the kernel cache as before
(:mod:`gpudsl.runtime.artifact_cache`).  It lives in ``graphs/`` under ``$GPUDSL_CACHE_DIR``
(default ``~/.cache/gpudsl``), one ``<key>.pickle`` with its ``<key>.json``
(sha256 of the pickle), written owner-only through the kernel cache's own
:class:`~gpudsl.runtime.artifact_cache.Cache`.

- The key covers everything the products are made of: the graph's script text and
  file name, the constants' names, dtypes and shapes, the backend and its environment
  (device, compiler), the versions of gpudsl, Python, numpy and z3, a digest of
  every source file of the installed gpudsl package, and of the node table's
  declarations (``table_digest``: a node a user registered, or registered again with
  another expression or kernel choice, changes what a script means).  Any change
  misses.
- What the compile read from outside the script is recorded in the entry and asked
  again at load: each tuning-store answer (``gpudsl.autotune.db.lookup_winner``) and
  the values of the constants the compile read (e.g. a scale baked into a kernel);
  any difference is a miss.
- Trust: an entry is a pickle, so it is read only from a folder, and as a file, that
  the current user owns and that neither group nor others may write, below folders
  that only the user or root may change (the cache folder and ``graphs/``; otherwise
  a warning and a fresh compile), and only when its content matches the sha256
  recorded next to it; the bytes unpickled are the bytes checked
  (:meth:`~gpudsl.runtime.artifact_cache.Cache.lookup`).  A damaged or unreadable entry is a
  miss (removed, with a warning), never an error.
- ``GPUDSL_GRAPH_CACHE=0`` turns the cache off.
"""
from __future__ import annotations

import hashlib
import os
import pickle

import numpy as np

from ..runtime.artifact_cache import Cache, cache_dir, package_digest, warn_once
from ..stdlib.derivation_cache import pickle_procs

SUFFIX = "pickle"
FORMAT = "gpudsl-graph-1"


def enabled() -> bool:
    return os.environ.get("GPUDSL_GRAPH_CACHE", "1").strip().lower() not in (
        "0", "off", "no", "false")


def graph_cache() -> Cache:
    """The cache folder of compiled graphs (``graphs/`` in the cache directory)."""
    return Cache(cache_dir() / "graphs")


def source_digest() -> str:
    """sha256 over every source file of the installed gpudsl package and the versions
    of what the products are made with (:func:`~gpudsl.runtime.artifact_cache.package_digest`),
    and this cache's format."""
    return hashlib.sha256((FORMAT + "\0" + package_digest()).encode()).hexdigest()


def _callable_text(fn) -> str:
    """What a declaration's function is made of: gpudsl's own by name (its source is in
    ``source_digest``), another's by its source text where Python has it."""
    if fn is None:
        return "-"
    module = getattr(fn, "__module__", None) or ""
    name = f"{module}.{getattr(fn, '__qualname__', repr(fn))}"
    if module == "gpudsl" or module.startswith("gpudsl."):
        return name
    import inspect

    try:
        return name + "\0" + inspect.getsource(fn)
    except (OSError, TypeError):
        code = getattr(fn, "__code__", None)
        return name + "\0" + (repr((code.co_code, code.co_consts)) if code else repr(fn))


def table_digest() -> str:
    """sha256 over the node table's declarations: each node's names, script
    arguments and keyword options, element expression, dtypes and graph properties, and what its shape
    rule, kernel choice and reference are (``_callable_text``)."""
    from ..stdlib.node_table import all_nodes

    h = hashlib.sha256()
    for n in all_nodes():
        facts = (n.name, n.graph, n.script, n.keywords, n.expr, n.dtypes, n.aliases,
                 n.graph_view, n.commutes)
        parts = [repr(facts)] + [_callable_text(f) for f in (n.shape, n.launch,
                                                             n.half_rule)]
        h.update("\0".join(parts).encode("utf-8", "surrogateescape") + b"\1")
    return h.hexdigest()


def key(text: str, file: str, device: str, constants: dict) -> str:
    """The entry of a model: script, file name, constants' names/dtypes/shapes,
    the backend and its environment, gpudsl's sources and the node table's
    declarations (see the module's text)."""
    from ..autotune.env import env_key

    h = hashlib.sha256()
    consts = sorted((k, str(v.dtype), tuple(v.shape)) for k, v in constants.items())
    for part in (source_digest(), table_digest(), text, file, device, env_key(device),
                 repr(consts)):
        data = part.encode("utf-8", "surrogateescape")
        h.update(len(data).to_bytes(8, "little"))
        h.update(data)
    return h.hexdigest()


def constant_digest(a: np.ndarray) -> str:
    a = np.ascontiguousarray(a)
    return hashlib.sha256(str(a.dtype).encode() + repr(a.shape).encode()
                          + a.tobytes()).hexdigest()


class Reads(dict):
    """The model's constants while it compiles: remembers which ones were read (any
    iteration over them counts as reading all)."""

    def __init__(self, d):
        super().__init__(d)
        self.read: set = set()

    def __getitem__(self, k):
        self.read.add(k)
        return super().__getitem__(k)

    def get(self, k, default=None):
        self.read.add(k)
        return super().get(k, default)

    def _all(self):
        self.read.update(super().keys())

    def __iter__(self):
        self._all()
        return super().__iter__()

    def items(self):
        self._all()
        return super().items()

    def values(self):
        self._all()
        return super().values()


def load(k: str, constants: dict, names: tuple) -> dict | None:
    """The products (``names`` -> value) stored under ``k``, when present, trusted,
    intact and still what a compile would read (tuning answers, constants); else
    None."""
    if not enabled():
        return None
    c = graph_cache()
    hit = c.lookup(k, SUFFIX)  # the folders' and the entry's owners and modes, its sha256
    if hit is None:
        return None
    try:
        entry = pickle.loads(hit[0])  # exactly the bytes verified
        if not (isinstance(entry, dict) and entry.get("format") == FORMAT
                and isinstance(entry.get("products"), dict)
                and set(entry["products"]) == set(names)
                and isinstance(entry.get("constants"), dict)
                and isinstance(entry.get("lookups"), list)):
            raise ValueError("not an entry of this version")
        valid = still_valid(entry, constants)
    except Exception as e:  # noqa: BLE001 - whatever a damaged entry raises
        c.discard(k, SUFFIX, f"it cannot be read back ({type(e).__name__}: {e})")
        return None
    return entry["products"] if valid else None


def still_valid(entry: dict, constants: dict) -> bool:
    """The tuning store gives the same answers, and the constants the compile read
    hold the same values."""
    from ..autotune.db import lookup_winner

    for name, digest in entry["constants"].items():
        if name not in constants or constant_digest(constants[name]) != digest:
            return False
    for (task, shapes, env, db), answer in entry["lookups"]:
        if lookup_winner(task, shapes, env, db) != answer:
            return False
    return True


def store(k: str, products: dict, lookups: list, constants: dict, read: set) -> None:
    """Write an entry (owner-only; a cache that cannot be written is reported once and
    the compile goes on).  Products that cannot be pickled are not cached."""
    if not enabled():
        return
    entry = {"format": FORMAT, "products": products, "lookups": list(lookups),
             "constants": {n: constant_digest(constants[n]) for n in sorted(read)
                           if n in constants}}
    try:
        data = pickle_procs(entry)
    except Exception as e:  # noqa: BLE001 - an object of the products that cannot go
        warn_once(("unpicklable", type(e).__name__),
                  f"gpudsl: a compiled graph could not be cached ({type(e).__name__}: {e})")
        return
    graph_cache().try_put(k, SUFFIX, data, {"format": FORMAT})


__all__ = ["enabled", "graph_cache", "source_digest", "table_digest", "key", "load", "store", "Reads",
           "still_valid"]
