"""A race between checking a cache entry and loading it (issue 39).

``Cache.lookup`` checked a path's owner, mode and sha256, then the caller loaded the path
again (``pickle.loads(path.read_bytes())``, ``dlopen(path)``), and a fresh ``.so`` was
loaded back by name from the cache after a miss.  Whoever could flip a link on the way
between the two moments had their code run: their pickle unpickled, their ``.so``
loaded.  Now folder and entry are opened without following links, checked on their
descriptors and read through them, and exactly those bytes are used; folders above the
cache must be the user's or root's and writable by nobody else unless sticky.

The attacker is simulated with files of the same user that no check accepts (mode
0666, as another user's file would fail the owner check), so the tests mean the same
whether or not they run as root.
"""
from __future__ import annotations

import json
import os
import pickle
import shutil
import subprocess
import sys
import warnings
from pathlib import Path

import numpy as np
import pytest

from gpudsl.graph import graph_cache
from gpudsl.runtime import artifact_cache as cache_mod
from gpudsl.runtime.artifact_cache import Cache, CacheWarning, digest
from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.signature import KernelSig

pytestmark = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners and links")
needs_gxx = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")

KEY = "ab" * 32
LOOKUPS = int(os.environ.get("GPUDSL_RACE_LOOKUPS", "10000"))
# the attacker: the link names the real folder for up to 200 us, then theirs for up
# to 20 us (long enough on the real one for whole checks to pass, then a flip)
FLIPPER = """
import os, random, sys, time
link, a, b = sys.argv[1:4]
tmp = link + ".new"
print("ready", flush=True)
while True:
    for target, dwell in ((a, 200e-6), (b, 20e-6)):
        os.symlink(target, tmp)
        os.replace(tmp, link)
        end = time.perf_counter() + random.random() * dwell
        while time.perf_counter() < end:
            pass
"""


def _graph_entry(who: str) -> bytes:
    return pickle.dumps({"format": graph_cache.FORMAT, "products": {"who": who},
                         "constants": {}, "lookups": []})


def _foreign(folder: Path, name: str, data: bytes, meta: bytes) -> None:
    """The attacker's entry: content of their own, the honest metadata beside it, and a
    mode that no check accepts (another user's file would fail the owner check)."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / name).write_bytes(data)
    (folder / (name.rsplit(".", 1)[0] + ".json")).write_bytes(meta)
    for f in folder.iterdir():
        f.chmod(0o666)


@pytest.fixture
def graph_flip(tmp_path, monkeypatch):
    """``cache`` -> ``real`` (an honest graph entry) or ``evil`` (a foreign one): returns
    (plant the honest entry again, point the link at evil)."""
    real, evil, link = tmp_path / "real", tmp_path / "evil", tmp_path / "cache"

    def plant():
        Cache(real / "graphs").put(KEY, "pickle", _graph_entry("honest"))
    plant()
    meta = (real / "graphs" / f"{KEY}.json").read_bytes()
    _foreign(evil / "graphs", f"{KEY}.pickle", _graph_entry("evil"), meta)
    link.symlink_to(real)
    monkeypatch.setenv("GPUDSL_CACHE_DIR", str(link))
    monkeypatch.setenv("GPUDSL_GRAPH_CACHE", "1")

    def to_evil():
        os.unlink(link)
        link.symlink_to(evil)
    return plant, to_evil


def _load_graph():
    products = graph_cache.load(KEY, {}, ("who",))
    return None if products is None else products["who"]


def test_a_link_flipped_by_another_process_never_loads_a_foreign_pickle(tmp_path,
                                                                       graph_flip):
    plant, _ = graph_flip
    flipper = subprocess.Popen([sys.executable, "-c", FLIPPER, str(tmp_path / "cache"),
                                str(tmp_path / "real"), str(tmp_path / "evil")],
                               stdout=subprocess.PIPE, text=True)
    seen = {"honest": 0, "evil": 0, None: 0}
    try:
        assert flipper.stdout.readline().strip() == "ready"
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", CacheWarning)
            for _ in range(LOOKUPS):
                who = _load_graph()
                seen[who] += 1
                if who is None and not (tmp_path / "real" / "graphs" / f"{KEY}.pickle"
                                        ).exists():
                    plant()  # the old code removed the honest entry as "damaged"
    finally:
        flipper.kill()
        flipper.wait()
    assert seen["evil"] == 0, seen
    assert seen["honest"] > 0, seen  # the link did point at the real folder


def test_a_link_flipped_right_after_the_check_loads_the_checked_pickle(graph_flip,
                                                                      monkeypatch):
    _, to_evil = graph_flip
    assert _load_graph() == "honest"

    def digest_then_flip(data):
        to_evil()  # the worst moment: the entry has just been checked
        return digest(data)
    monkeypatch.setattr(cache_mod, "digest", digest_then_flip)
    assert _load_graph() == "honest"


# ------------------------------------------------------------- the emulator's .so

HONEST = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 3; }\n'
EVIL = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 666; }\n'
SIG = [KernelSig("k", ["int*"])]


def _run(src, cache):
    mod = build_emulator_module(src, SIG, cache=cache)
    x = np.zeros(2, np.int32)
    mod.launch("k", 1, 2, [x])
    return x.tolist()


@pytest.fixture(scope="module")
def so_entries(tmp_path_factory):
    """(key, honest folder, evil .so bytes): the honest entry and the attacker's code."""
    tmp = tmp_path_factory.mktemp("so")
    _run(HONEST, Cache(tmp / "honest"))
    _run(EVIL, Cache(tmp / "evil"))
    (so,) = (tmp / "honest").glob("*.so")
    (evil,) = (tmp / "evil").glob("*.so")
    return so.stem, tmp / "honest", evil.read_bytes()


@pytest.fixture
def so_flip(tmp_path, so_entries):
    """``cache`` -> ``real`` (the honest entry, or nothing with ``empty``), with a
    foreign ``evil`` folder beside it; returns (cache, point the link at evil)."""
    key, honest, evil_so = so_entries

    def make(empty=False):
        real, evil, link = tmp_path / "real", tmp_path / "evil", tmp_path / "cache"
        if empty:
            real.mkdir(mode=0o700)
        else:
            shutil.copytree(honest, real)
        meta = (honest / f"{key}.json").read_bytes()
        _foreign(evil, f"{key}.so", evil_so, meta)
        link.symlink_to(real)

        def to_evil():
            os.unlink(link)
            link.symlink_to(evil)
        return Cache(link), to_evil
    return make


@needs_gxx
def test_a_cached_so_is_loaded_from_the_bytes_checked(so_flip, monkeypatch):
    cache, to_evil = so_flip()

    def digest_then_flip(data):
        to_evil()
        return digest(data)
    monkeypatch.setattr(cache_mod, "digest", digest_then_flip)
    assert _run(HONEST, cache) == [3, 3]


@needs_gxx
def test_a_fresh_so_is_loaded_from_the_bytes_built_not_from_the_cache(so_flip,
                                                                     monkeypatch):
    cache, to_evil = so_flip(empty=True)
    real_write = cache_mod.atomic_write

    def write_then_flip(path, data):
        real_write(path, data)
        if path.suffix == ".so":
            to_evil()  # between installing the entry and loading it
    monkeypatch.setattr(cache_mod, "atomic_write", write_then_flip)
    assert _run(HONEST, cache) == [3, 3]


# ------------------------------------------------------------- the folders above


def _planted_cache(tmp_path, so_entries, above_mode):
    """A cache folder (0700, yours) below ``above`` (``above_mode``) holding a planted
    entry that passes every check on the folder and the entry themselves."""
    key, honest, evil_so = so_entries
    above = tmp_path / "above"
    above.mkdir()
    d = above / "cache"
    d.mkdir(mode=0o700)
    (d / f"{key}.so").write_bytes(evil_so)
    (d / f"{key}.json").write_text(json.dumps({"sha256": digest(evil_so)}))
    for f in d.iterdir():
        f.chmod(0o600)
    above.chmod(above_mode)
    return d


@needs_gxx
def test_a_folder_above_that_others_can_write_is_not_loaded_from(tmp_path, so_entries):
    # anyone may rename the cache folder away there and put their own in its place
    d = _planted_cache(tmp_path, so_entries, 0o777)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _run(HONEST, Cache(d)) == [3, 3]
    msgs = [str(m.message) for m in w if issubclass(m.category, CacheWarning)]
    assert any("not loading from the compile cache" in m and f"{d.parent} is writable" in m
               for m in msgs)


@needs_gxx
@pytest.mark.parametrize("how", ["sticky", "link"])
def test_a_sticky_folder_above_and_a_link_in_your_own_folder_are_fine(tmp_path,
                                                                      so_entries, how):
    # like /tmp: others may write it but not rename or remove what is yours
    d = _planted_cache(tmp_path, so_entries, 0o1777 if how == "sticky" else 0o700)
    if how == "link":
        (tmp_path / "mine").symlink_to(d)
        d = tmp_path / "mine"
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert _run(HONEST, Cache(d)) == [666, 666]  # the planted entry is a hit


@needs_gxx
def test_a_link_in_a_folder_others_can_write_is_not_followed(tmp_path, so_entries):
    d = _planted_cache(tmp_path, so_entries, 0o700)
    shared = tmp_path / "shared"
    shared.mkdir()
    (shared / "cache").symlink_to(d)
    shared.chmod(0o777)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _run(HONEST, Cache(shared / "cache")) == [3, 3]
    assert any(issubclass(m.category, CacheWarning) for m in w)
