"""The emulator's precompiled system header (gpudsl/runtime/emu_pch.py): the same shared
object as the plain path, built once into the cache, and the plain path whenever g++
does not take it."""
import numpy as np
import pytest

from gpudsl.runtime import emu_pch, emulator
from gpudsl.runtime.artifact_cache import Cache
from gpudsl.runtime.emulator import build_emulator_module

from .kernels import SIGS, SOURCE


def _pch_dir(cache, flags):
    cxx = emulator.compiler()
    return emu_pch.include_dir(emulator.HERE, flags, cxx, emulator.compiler_version(cxx),
                               cache, True, emulator.run_compiler, emulator._tempdir)


def _flags(checks):
    return [*emulator.BASE_FLAGS, *(emulator.CHECK_FLAGS if checks else ()),
            "-DGPUDSL_EMU_STACK=131072"]


@pytest.mark.parametrize("checks", [False, True])
def test_same_shared_object_with_and_without_the_pch(tmp_path, checks):
    cache = Cache(tmp_path / "cache")
    flags = _flags(checks)
    pch = _pch_dir(cache, flags)
    assert pch is not None and (pch / "gpudsl_emu_sys.h.gch").is_file()
    full = emulator.prepare_source(SOURCE, SIGS)
    out = tmp_path / "m.so"
    emulator._compile(full, flags, out, emulator.compiler())
    plain = out.read_bytes()
    emulator._compile(full, flags, out, emulator.compiler(), pch)
    assert out.read_bytes() == plain  # not one byte of meaning changes


def test_pch_is_cached_per_flags_without_the_stack_size(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "cache")
    monkeypatch.setattr(emu_pch, "_dirs", {})
    _pch_dir(cache, _flags(False))
    assert len(list(cache.dir.glob("*.gch"))) == 1
    monkeypatch.setattr(emu_pch, "_dirs", {})  # a new process: from the cache, no build
    monkeypatch.setattr(emu_pch, "_build", lambda *a: pytest.fail("built again"))
    other = [f.replace("131072", "262144") for f in _flags(False)]
    assert _pch_dir(cache, other) is not None


def test_a_pch_gxx_rejects_means_the_plain_path(tmp_path, monkeypatch):
    cache = Cache(tmp_path / "cache")
    monkeypatch.setattr(emu_pch, "_dirs", {})
    monkeypatch.setattr(emu_pch, "_build", lambda *a: b"not a precompiled header")
    mod = build_emulator_module(SOURCE, SIGS, cache=cache, use_cache=False, workers=1)
    x, y = np.ones(300, np.float32), np.ones(300, np.float32)
    mod.launch("saxpy2d", (2, 1), (256,), [np.int32(300), np.float32(2), x, y])
    assert (y == 3).all()


def test_switched_off(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUDSL_EMU_PCH", "0")
    assert _pch_dir(Cache(tmp_path / "cache"), _flags(False)) is None


def test_a_forked_child_keeps_off_its_parents_folder(tmp_path):
    import os
    cache = Cache(tmp_path / "cache")
    parent = _pch_dir(cache, _flags(False))
    r, w = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: its own folder; its exit leaves the parent's alone
        try:
            mine = _pch_dir(cache, _flags(False))
            os.write(w, b"1" if mine is not None and mine != parent else b"0")
        finally:
            emu_pch._remove(*emu_pch._home)
            os._exit(0)
    os.waitpid(pid, 0)
    assert os.read(r, 1) == b"1"
    assert (parent / "gpudsl_emu_sys.h.gch").is_file()
