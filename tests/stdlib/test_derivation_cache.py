"""The disk cache of derived stdlib kernels: a kernel one process derived (an sm_90a
GEMM: 4-30 s) is read back by the next instead of derived again; any change of the
arguments or of gpudsl's sources misses; entries are read only from owner-only folders
and files, a damaged one is a miss, never an error; every compile still proves."""
from __future__ import annotations

import inspect
import os
import warnings

import numpy as np
import pytest

import gpudsl
from gpudsl.runtime.artifact_cache import CacheWarning
from gpudsl.stdlib import derivation_cache as dc

SRC = '''
@proc
def scale(n: size, x: f32[n], y: f32[n]):
    for b in par(0, (n + 63) // 64) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            if 64 * b + t < n:
                y[64 * b + t] = {c} * x[64 * b + t]
'''

posix = pytest.mark.skipif(not hasattr(os, "getuid"), reason="POSIX owners")


def build(c: float = 2.0, tag: str = "") -> gpudsl.Proc:
    """The builder the tests decorate (a new ``derivation`` of it is a new process's)."""
    build.calls.append((c, tag))
    return gpudsl.proc_from_source(SRC.format(c=c))


build.calls = []


@pytest.fixture
def folder(tmp_path, monkeypatch):
    d = tmp_path / "derived"
    monkeypatch.setenv("GPUDSL_DERIVATION_CACHE", str(d))
    build.calls.clear()
    return d


def _entries(d):
    return sorted(p.name for p in d.glob("*.pickle")) if d.exists() else []


def test_a_second_process_reads_the_kernel_back(folder):
    first = dc.derivation(build)
    p = first(3.0)
    assert build.calls == [(3.0, "")] and len(_entries(folder)) == 1
    assert first(3.0) is p                       # in the process: the same object
    again = dc.derivation(build)                 # another process: its own memory
    q = again(3.0)
    assert build.calls == [(3.0, "")]            # read back, not derived
    assert q == p and str(q) == str(p) and q._origin is None
    x = np.arange(100, dtype=np.float32)
    y = np.zeros_like(x)
    q.compile("emulator")(x=x, y=y)              # proved at compile, like any proc
    np.testing.assert_array_equal(y, 3 * x)


def test_other_arguments_or_sources_miss(folder, monkeypatch):
    dc.derivation(build)(2.0)
    dc.derivation(build)(2.0, tag="x")           # a keyword: another call
    dc.derivation(build)(2)                      # 2 is not 2.0 (repr)
    assert len(build.calls) == 3 and len(_entries(folder)) == 3
    monkeypatch.setattr(dc, "sources_digest", lambda: "another gpudsl")
    dc.derivation(build)(2.0)
    assert len(build.calls) == 4 and len(_entries(folder)) == 4


def test_a_call_with_a_non_plain_argument_is_derived_not_stored(folder):
    def builder(c):
        return build(float(c[0]))

    f = dc.derivation(builder)
    f((2.0,))                                    # a tuple of plain values: stored
    assert len(_entries(folder)) == 1
    assert dc.entry_key(builder, (np.float32(2.0),), {}) is None
    assert dc.entry_key(builder, ([2.0],), {}) is None
    assert dc.entry_key(builder, ((2.0, "a", None, True),), {}) is not None


def test_a_damaged_entry_is_a_miss_and_removed(folder):
    p = dc.derivation(build)(4.0)
    (entry,) = folder.glob("*.pickle")
    entry.write_bytes(entry.read_bytes()[:-7] + b"garbage")
    with pytest.warns(CacheWarning, match="damaged"):
        q = dc.derivation(build)(4.0)
    assert q == p and len(build.calls) == 2      # derived again
    assert len(_entries(folder)) == 1            # and stored afresh


def test_an_entry_that_is_not_a_proc_is_a_miss(folder):
    f = dc.derivation(build)
    f(5.0)
    key = dc.entry_key(build, (5.0,), {})
    dc.derivation_cache().put(key, dc.SUFFIX, dc.pickle_procs({"format": dc.FORMAT,
                                                                "proc": "not a proc"}))
    with pytest.warns(CacheWarning, match="cannot be read back"):
        assert dc.load(key) is None


@posix
def test_a_folder_others_may_write_is_not_read(folder):
    dc.derivation(build)(6.0)
    os.chmod(folder, 0o777)
    try:
        with pytest.warns(CacheWarning, match="not loading"):
            dc.derivation(build)(6.0)
        assert len(build.calls) == 2
    finally:
        os.chmod(folder, 0o700)


def test_off_and_cache_clear_derive_afresh(folder, monkeypatch):
    f = dc.derivation(build)
    f(7.0)
    f.cache_clear()                              # this process derives afresh from now
    f(7.0)
    assert len(build.calls) == 2
    monkeypatch.setenv("GPUDSL_DERIVATION_CACHE", "0")
    dc.derivation(build)(8.0)
    assert len(_entries(folder)) == 1            # 8.0 not written


def test_a_stdlib_kernel_read_back_equals_its_derivation(folder, monkeypatch):
    from gpudsl.stdlib import matmul_sm80

    builder = inspect.unwrap(matmul_sm80._sm80_kernel)
    args = ("f16", 64, 64, 32, 32, 32, 2, False)
    p = dc.derivation(builder)(*args)
    with warnings.catch_warnings():
        warnings.simplefilter("error")           # no cache warning on the way back
        q = dc.derivation(builder)(*args)
    assert q == p and q is not p
    assert q.cuda_source() == p.cuda_source()    # locations too: the same #line
    assert q.check().ok
    # another checkout (or a GPU machine) of the same sources reads the entry back
    # with its own files named
    here = dc._HERE
    mine = {loc.made_by for loc in _locations(q)} - {None}
    assert any(here + os.sep in m for m in mine)
    monkeypatch.setattr(dc, "_HERE", "/another/checkout")
    r = dc.load(dc.entry_key(builder, args, {}))
    theirs = {loc.made_by for loc in _locations(r)} - {None}
    assert theirs == {m.replace(here + os.sep, "/another/checkout" + os.sep) for m in mine}


def _locations(p):
    from gpudsl.ir.visitor import walk

    return [n.loc for n in walk(p.ir) if getattr(n, "loc", None) is not None]


def test_messages_of_a_read_back_kernel_quote_its_source(folder):
    import linecache

    p = dc.derivation(build)(9.0)
    file = p.ir.loc.file
    assert file.startswith("<") and "9.0 * x" in "".join(linecache.cache[file][2])
    del linecache.cache[file]                    # a new process: no text under the name
    q = dc.derivation(build)(9.0)
    assert len(build.calls) == 1 and "9.0 * x" in "".join(linecache.cache[file][2])
    linecache.cache[file] = (3, None, ["x\n"], file)   # another text under the name
    dc.derivation(build)(9.0)                    # read back: its text, as deriving would
    assert len(build.calls) == 1 and "9.0 * x" in "".join(linecache.cache[file][2])
    assert q.ir.loc.file == file


def test_types_read_back_are_the_modules_own():
    # code compares mappings, memories and dtypes by identity (divide_loop asked
    # `mapping is not BLOCKS` and refused a BLOCKS loop of a kernel read back)
    import pickle

    from gpudsl.ir import types as T

    for obj in (T.BLOCKS, T.THREADS, T.CLUSTERS, T.SHARED, T.REGISTER, T.GLOBAL, T.CONST,
                T.f16, T.bf16, T.f32, T.INDEX, T.BARRIER):
        assert pickle.loads(dc.pickle_procs(obj)) is obj
    odd = T.Memory("ODD", "block")               # not one of the module's: a copy
    back = pickle.loads(pickle.dumps(odd))
    assert back == odd and back is not odd


def test_a_read_back_kernel_takes_further_primitives(folder):
    from gpudsl.schedule import divide_loop

    p = dc.derivation(build)(11.0)
    q = dc.load(dc.entry_key(build, (11.0,), {}))
    assert q == p
    r = divide_loop(q, "b", 2, ["bo", "bi"], tail="guard")   # a BLOCKS loop, read back
    assert "for bo in par(" in str(r)


def test_two_processes_write_the_same_bytes(tmp_path):
    # xdist workers (or users' processes) deriving one kernel at once both write its
    # entry, the metadata (with the sha256) and the pickle in two steps: a reader that
    # met one's metadata and the other's pickle would discard the entry as damaged
    # (an error in the tests) unless the two wrote the same bytes.  Statements made by a
    # primitive once named the script that asked for the kernel; hash seeds must not
    # matter either.
    import subprocess
    import sys
    import textwrap

    code = textwrap.dedent('''
        import hashlib, inspect
        from gpudsl.stdlib import matmul
        from gpudsl.stdlib.derivation_cache import pickle_procs, _sources_of
        p = inspect.unwrap(matmul.cut_kernel)(False, 4)
        data = pickle_procs({"format": "f", "proc": p, "sources": _sources_of(p)})
        print(hashlib.sha256(data).hexdigest())
        ''')
    digests = set()
    for seed, name in (("1", "first.py"), ("2", "second.py")):
        (tmp_path / name).write_text(code)
        env = dict(os.environ, PYTHONHASHSEED=seed, GPUDSL_DERIVATION_CACHE="0")
        out = subprocess.run([sys.executable, str(tmp_path / name)], env=env,
                             capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        digests.add(out.stdout.split()[-1])
    assert len(digests) == 1
