"""NVRTC compiles to sm_90 cubins without a GPU; ptxas resources; errors; the disk cache."""
from __future__ import annotations

import os
import time

import pytest

from gpudsl.errors import CompileError
from gpudsl.runtime import artifact_cache as cache_mod
from gpudsl.runtime.artifact_cache import Cache, atomic_write, cache_key
from gpudsl.runtime.nvrtc import Resources, compile_cubin, compiler_version, parse_resources

from .kernels import SOURCE


def test_compiles_to_cubin_with_resources(tmp_path):
    r = compile_cubin(SOURCE, "sm_90", cache=Cache(tmp_path))
    assert r.cubin[:4] == b"\x7fELF"
    assert r.arch == "sm_90"
    for name in ("saxpy2d", "reduce256", "matmul16", "atomics", "warp_sum"):
        assert r.resources[name].registers > 0, name
    assert r.resources["reduce256"].shared_bytes == 256 * 4
    assert r.resources["matmul16"].shared_bytes == (16 * 16 + 16 * 17) * 4
    assert r.resources["saxpy2d"].spill_stores_bytes == 0


def test_parse_resources_of_a_ptxas_log():
    log = """ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function 'k' for 'sm_90'
ptxas info    : Function properties for k
ptxas         .     256 bytes stack frame, 8 bytes spill stores, 12 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 256 bytes cumulative stack size, 1024 bytes smem, 384 bytes cmem[0]
ptxas info    : Compile time = 36.973 ms
ptxas info    : Compiling entry function '_Z2k2Pf' for 'sm_90'
ptxas info    : Function properties for _Z2k2Pf
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers
"""
    res = parse_resources(log)
    assert res["k"] == Resources(registers=255, shared_bytes=1024, spill_stores_bytes=8,
                                 spill_loads_bytes=12, stack_bytes=256, constant_bytes=384,
                                 barriers=1)
    assert res["_Z2k2Pf"].registers == 8 and res["_Z2k2Pf"].shared_bytes == 0


def test_compile_error_shows_python_file_and_line(tmp_path):
    src = '#line 42 "my_proc.py"\nextern "C" __global__ void k(float* y) { y[0] = undefined_thing; }\n'
    with pytest.raises(CompileError) as e:
        compile_cubin(src, cache=Cache(tmp_path))
    assert "my_proc.py(42): error" in str(e.value)
    assert "undefined_thing" in str(e.value)
    assert list(tmp_path.iterdir()) == []  # nothing cached for a failure


def test_second_compile_hits_the_cache(tmp_path):
    c = Cache(tmp_path)
    src = 'extern "C" __global__ void k(float* y, int n) { if (threadIdx.x < n) y[threadIdx.x] *= 2; }'
    t0 = time.perf_counter()
    first = compile_cubin(src, "sm_90", cache=c)
    t1 = time.perf_counter()
    second = compile_cubin(src, "sm_90", cache=c)
    t2 = time.perf_counter()
    assert not first.cached and second.cached
    assert second.cubin == first.cubin and second.resources == first.resources
    assert t2 - t1 < t1 - t0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [f"{first.key}.cubin", f"{first.key}.json"]  # no temporaries left
    third = compile_cubin(src, "sm_89", cache=c)                   # arch is part of the key
    assert not third.cached and third.key != first.key


def test_cache_dir_from_environment(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUDSL_CACHE_DIR", str(tmp_path / "gc"))
    assert cache_mod.default_cache().dir == tmp_path / "gc"
    monkeypatch.delenv("GPUDSL_CACHE_DIR")
    assert str(cache_mod.cache_dir()).endswith(os.path.join(".cache", "gpudsl"))


def test_cache_key_covers_every_input():
    base = ("src", "cuda", "sm_90", ["-O3"], "nvrtc-13.5")
    k = cache_key(*base)
    assert len({k, cache_key("src2", *base[1:]), cache_key(base[0], "emulator", *base[2:]),
                cache_key(*base[:2], "sm_80", *base[3:]), cache_key(*base[:3], ["-O2"], base[4]),
                cache_key(*base[:4], "nvrtc-13.6")}) == 6
    assert compiler_version().startswith("nvrtc-")


def test_atomic_write_never_leaves_partial_files(tmp_path, monkeypatch):
    target = tmp_path / "a.bin"
    atomic_write(target, b"old")

    def boom(src, dst):
        raise OSError("disk full")
    monkeypatch.setattr(os, "replace", boom)
    with pytest.raises(OSError):
        atomic_write(target, b"new content")
    monkeypatch.undo()
    assert target.read_bytes() == b"old"
    assert [p.name for p in tmp_path.iterdir()] == ["a.bin"]
    atomic_write(target, b"new")
    assert target.read_bytes() == b"new"


def test_bad_arch_is_refused():
    with pytest.raises(CompileError, match="architecture"):
        compile_cubin("", "ampere")



def _moved(src: str, root: str, elsewhere: str) -> str:
    """``src`` as another checkout of the same code at ``elsewhere`` generates it."""
    return src.replace(f'"{root}/', f'"{elsewhere}/')


def _doubled():
    from gpudsl import BLOCKS, THREADS, par, proc

    @proc
    def doubled(n: size, x: f32[n, 32], y: f32[n, 32]):
        for r in par(0, n) @ BLOCKS:
            for i in par(0, 32) @ THREADS:
                y[r, i] = 2.0 * x[r, i]

    return doubled


def test_the_key_does_not_depend_on_where_the_package_lies(tmp_path, monkeypatch):
    """Two checkouts (or a moved venv) of one kernel: the #line paths differ only by the
    folder holding the package; the key is the same, and the second checkout's compile
    hits the first one's entry.  A changed kernel changes the key."""
    from gpudsl.runtime.artifact_cache import PACKAGE_ROOTS, key_source

    src = _doubled().cuda_source()
    root = next(r for r in PACKAGE_ROOTS if f'"{r}/tests/runtime/test_nvrtc.py"' in src)
    elsewhere = "/elsewhere/checkout-2"
    other = _moved(src, root, elsewhere)          # what the other checkout generates
    assert other != src
    assert '"<gpudsl root>/tests/runtime/test_nvrtc.py"' in key_source(src)
    base = ("cuda", "sm_90", ["-lineinfo"], "nvrtc-13.0")
    here = cache_key(src, *base)
    changed = src.replace("2.0f", "3.0f")
    assert changed != src and cache_key(changed, *base) != here
    # a file outside the package's folder keeps its path in the key
    assert cache_key(_moved(src, root, "/tmp/user-a"), *base) != \
        cache_key(_moved(src, root, "/tmp/user-b"), *base)
    c = Cache(tmp_path)
    first = compile_cubin(src, "sm_90", cache=c)
    # the other checkout: its package lies in `elsewhere`
    monkeypatch.setattr(cache_mod, "PACKAGE_ROOTS", (elsewhere,))
    assert cache_key(other, *base) == here
    second = compile_cubin(other, "sm_90", cache=c)
    assert not first.cached and second.cached and second.key == first.key
