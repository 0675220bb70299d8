"""Who may write what gpudsl loads (issue 28): the kernel cache loaded shared objects
from ``GPUDSL_CACHE_DIR`` by a key anyone can compute, whoever owned the folder.  Now,
as pip does with its cache, nothing is loaded from a folder or an entry that another
user owns or that its group or others may write (a warning; compiled afresh), and the
folder and its entries are created owner-only."""
from __future__ import annotations

import json
import os
import shutil
import stat
import warnings

import numpy as np
import pytest

from gpudsl.runtime.artifact_cache import Cache, CacheWarning, digest
from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.signature import KernelSig

pytestmark = [pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++"),
              pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")]

HONEST = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 3; }\n'
EVIL = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 666; }\n'
SIG = [KernelSig("k", ["int*"])]


def _run(src, cache):
    mod = build_emulator_module(src, SIG, cache=cache)
    x = np.zeros(2, np.int32)
    mod.launch("k", 1, 2, [x])
    return x.tolist()


def _entry(src, where):
    """(key, .so bytes) of ``src`` compiled into a fresh cache at ``where``."""
    _run(src, Cache(where))
    (so,) = where.glob("*.so")
    return so.stem, so.read_bytes()


def _plant(d, key, data, mode=0o644):
    d.mkdir(exist_ok=True)
    (d / f"{key}.so").write_bytes(data)
    (d / f"{key}.json").write_text(json.dumps({"sha256": digest(data)}))
    for f in (d / f"{key}.so", d / f"{key}.json"):
        f.chmod(mode)


@pytest.fixture(scope="module")
def planted(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("entries")
    key, _ = _entry(HONEST, tmp / "honest")
    _, evil = _entry(EVIL, tmp / "evil")
    return key, evil


def test_a_planted_entry_in_a_trusted_folder_would_run(tmp_path, planted):
    # the threat: the key is computable, and a planted entry with it is loaded
    key, evil = planted
    d = tmp_path / "mine"
    _plant(d, key, evil)
    d.chmod(0o700)
    assert _run(HONEST, Cache(d)) == [666, 666]


@pytest.mark.parametrize("folder_mode, entry_mode", [(0o775, 0o644), (0o777, 0o644),
                                                     (0o700, 0o666), (0o700, 0o664)])
def test_a_planted_entry_where_others_can_write_is_never_loaded(tmp_path, planted,
                                                                folder_mode, entry_mode):
    key, evil = planted
    d = tmp_path / "shared"
    _plant(d, key, evil, entry_mode)
    d.chmod(folder_mode)
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        assert _run(HONEST, Cache(d)) == [3, 3]
        if folder_mode == 0o775:  # the entry it put is not loaded either
            assert _run(HONEST, Cache(d)) == [3, 3]
    msgs = [str(m.message) for m in w if issubclass(m.category, CacheWarning)]
    assert msgs and all("not loading from the compile cache" in m for m in msgs)


def test_the_cache_folder_and_entries_are_created_owner_only(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDSL_CACHE_DIR", str(tmp_path / "new" / "cache"))
    old = os.umask(0o002)  # a permissive umask (user private groups)
    try:
        assert _run(HONEST, None) == [3, 3]
    finally:
        os.umask(old)
    d = tmp_path / "new" / "cache"
    assert stat.S_IMODE(d.stat().st_mode) == 0o700
    files = list(d.iterdir())
    assert files and all(stat.S_IMODE(f.stat().st_mode) == 0o600 for f in files)
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        mod = build_emulator_module(HONEST, SIG)
    assert mod.cached
