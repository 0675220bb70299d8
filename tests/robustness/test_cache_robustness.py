"""Issue 12: the cache verifies what it loads, warns once when it cannot write, and leaves
no temporary folders or compilers behind.  Damaged entries are loaded in child processes
(the old code died of SIGBUS/SIGSEGV or raised a raw AttributeError)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import warnings
from pathlib import Path

import numpy as np
import pytest

from .helpers import child_env, run_child, sigint_as_a_terminal

pytestmark = pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")


def test_entries_record_a_content_hash(tmp_path):
    from gpudsl.runtime.artifact_cache import Cache, digest

    c = Cache(tmp_path)
    c.put("k", "bin", b"abc", {"x": 1})
    meta = json.loads((tmp_path / "k.json").read_text())
    assert meta["sha256"] == digest(b"abc") and meta["x"] == 1
    assert c.lookup("k", "bin")[0] == b"abc"  # the bytes checked, never a path
    (tmp_path / "k.bin").write_bytes(b"abd")
    with pytest.warns(UserWarning, match="removed the damaged cache entry"):
        assert c.lookup("k", "bin") is None
    assert not (tmp_path / "k.bin").exists() and not (tmp_path / "k.json").exists()


def test_an_entry_without_a_hash_is_not_trusted(tmp_path):
    from gpudsl.runtime.artifact_cache import Cache, CacheWarning

    (tmp_path / "k.bin").write_bytes(b"abc")
    (tmp_path / "k.json").write_text("{}")
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)  # an older gpudsl's entry: a quiet miss
        assert Cache(tmp_path).lookup("k", "bin") is None
    Cache(tmp_path).put("k", "bin", b"abc")
    assert Cache(tmp_path).lookup("k", "bin") is not None


@pytest.mark.parametrize("how", ["truncated", "overwritten", "missing_symbol"])
def test_a_damaged_entry_is_removed_reported_once_and_rebuilt(tmp_path, how):
    first = run_child(["cache_child.py", str(tmp_path)])
    assert first.returncode == 0, first.stderr[-3000:]
    assert "result: [0, 2, 4, 6]" in first.stdout
    r = run_child(["cache_child.py", str(tmp_path), how])
    assert r.returncode == 0, f"child died (rc {r.returncode}):\n{r.stdout}\n{r.stderr[-3000:]}"
    assert "result: [0, 2, 4, 6]" in r.stdout
    warned = [ln for ln in r.stdout.splitlines() if ln.startswith("warning:")]
    assert len(warned) == 1 and "removed the damaged cache entry" in warned[0], r.stdout
    # rebuilt and stored again: a third process finds a good entry and says nothing
    third = run_child(["cache_child.py", str(tmp_path)])
    assert third.returncode == 0 and "cached: True True" in third.stdout, third.stdout
    assert "warning:" not in third.stdout


def test_an_unwritable_cache_warns_once_and_still_compiles(tmp_path):
    from gpudsl.runtime.artifact_cache import Cache, CacheWarning
    from gpudsl.runtime.emulator import build_emulator_module
    from gpudsl.runtime.signature import KernelSig

    blocker = tmp_path / "file"
    blocker.write_text("not a folder")
    cache = Cache(blocker / "cache")  # under a regular file: cannot be created, even as root
    src = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 3; }\n'
    with warnings.catch_warnings(record=True) as w:
        warnings.simplefilter("always")
        for _ in range(2):
            mod = build_emulator_module(src, [KernelSig("k", ["int*"])], cache=cache)
            x = np.zeros(2, np.int32)
            mod.launch("k", 1, 2, [x])
            assert x.tolist() == [3, 3]
    msgs = [m for m in w if issubclass(m.category, CacheWarning)]
    assert len(msgs) == 1 and "cannot be written" in str(msgs[0].message)


@pytest.mark.parametrize("meta", ["5", "true", "[1]", '"text"', "null", "{"])
def test_metadata_that_is_not_a_json_object_is_a_damaged_entry(tmp_path, meta):
    # issue 39: valid JSON that is not an object (5, true) raised TypeError on every
    # compile until the entry was deleted by hand
    from gpudsl.runtime.artifact_cache import Cache, CacheWarning
    from gpudsl.runtime.emulator import build_emulator_module
    from gpudsl.runtime.signature import KernelSig

    src = 'extern "C" __global__ void k(int* x) { x[threadIdx.x] = 4; }\n'

    def build():
        mod = build_emulator_module(src, [KernelSig("k", ["int*"])], cache=Cache(tmp_path))
        x = np.zeros(2, np.int32)
        mod.launch("k", 1, 2, [x])
        assert x.tolist() == [4, 4]
        return mod
    build()
    (meta_file,) = tmp_path.glob("*.json")
    meta_file.write_text(meta)
    with pytest.warns(CacheWarning, match="damaged cache entry .*not a JSON object"):
        assert not build().cached
    with warnings.catch_warnings():
        warnings.simplefilter("error", CacheWarning)
        assert build().cached  # written again, whole


def test_temporaries_of_a_writer_killed_mid_write_are_swept(tmp_path):
    # issue 39: a kill -9 mid-write left .<key>.*.tmp files that nothing swept
    from gpudsl.runtime.artifact_cache import Cache

    key = "cd" * 32
    writer = subprocess.Popen([sys.executable, "-c", f"""
import os, sys, time
from pathlib import Path
from gpudsl.runtime import artifact_cache as cache
os.replace = lambda *a: (print("writing", flush=True), time.sleep(600))
cache.Cache({str(tmp_path)!r}).put({key!r}, "so", b"half")
"""], stdout=subprocess.PIPE, text=True, env=child_env())
    assert writer.stdout.readline().strip() == "writing"
    writer.kill()  # SIGKILL: no cleanup runs
    writer.wait()
    left = [f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")]
    assert len(left) == 1 and left[0].startswith(f".{key}.json."), left
    live = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
    try:
        keep = {f".{key}.so.{live.pid}.abcd1234.tmp",  # its writer is still running
                f".{key}.so.efgh5678.tmp",             # an older gpudsl's, not stale yet
                ".notes.tmp", f"{key}.so.tmp", "other.txt"}  # not names the cache writes
        old = {f".{key}.cubin.ijkl9012.tmp"}           # an older gpudsl's, hours old
        for name in keep | old:
            (tmp_path / name).write_bytes(b"x")
        (tmp_path / f".{key}.sass.{live.pid}.mnop3456.tmp").symlink_to(tmp_path / "other.txt")
        keep.add(f".{key}.sass.{live.pid}.mnop3456.tmp")  # a link: not ours to judge
        minute_ago, hours_ago = time.time() - 120, time.time() - 3 * 3600
        for name in keep | set(left):
            os.utime(tmp_path / name, (minute_ago, minute_ago), follow_symlinks=False)
        for name in old | {".notes.tmp", "other.txt"}:
            os.utime(tmp_path / name, (hours_ago, hours_ago))
        os.utime(tmp_path / f".{key}.so.efgh5678.tmp")  # just now
        Cache(tmp_path).put("ef" * 32, "so", b"next writer")
    finally:
        live.kill()
        live.wait()
    now = {f.name for f in tmp_path.iterdir() if f.name.endswith(".tmp")
           or f.name == "other.txt"}
    assert now == keep, sorted(now ^ keep)


SLOW_COMPILE = r"""
import sys, os
from pathlib import Path
from gpudsl.runtime.artifact_cache import Cache
from gpudsl.runtime.emulator import build_emulator_module
from gpudsl.runtime.signature import KernelSig
# templates instantiated recursively: g++ works for many seconds
src = '''
template <int N> struct F { static constexpr long v = F<N - 1>::v * 3 % 1000003 + F<N - 2>::v % 7; };
template <> struct F<0> { static constexpr long v = 1; };
template <> struct F<1> { static constexpr long v = 1; };
''' + "".join(f"template <int K> struct G{i} {{ static constexpr long v = F<K>::v + {i}; }};\n"
              f"long g{i} = G{i}<{800 + i}>::v;\n" for i in range(400)) + '''
extern "C" __global__ void k(int* x) { x[0] = (int)g0; }
'''
print("compiling", os.getpid(), flush=True)
try:
    build_emulator_module(src, [KernelSig("k", ["int*"])], cache=Cache(sys.argv[1]),
                          options=["-ftemplate-depth=5000"])
    print("done", flush=True)
except KeyboardInterrupt:
    print("interrupted", flush=True)
"""


def _processes_mentioning(text: str) -> list[int]:
    found = []
    for d in Path("/proc").iterdir():
        if not d.name.isdigit():
            continue
        try:
            cmd = (d / "cmdline").read_bytes().replace(b"\0", b" ").decode("utf-8", "replace")
        except OSError:
            continue
        if text in cmd:
            found.append(int(d.name))
    return found


def _start_slow_compile(tmp_path, tmpdir=None):
    env = child_env()
    if tmpdir is not None:  # temporaries in a folder no other gpudsl process sweeps
        env["TMPDIR"] = str(tmpdir)
    p = subprocess.Popen([sys.executable, "-c", SLOW_COMPILE, str(tmp_path / "c")],
                         stdout=subprocess.PIPE, text=True, env=env,
                         preexec_fn=sigint_as_a_terminal)
    line = p.stdout.readline()
    assert line.startswith("compiling"), line
    tag = f"gpudsl-emu-{p.pid}-"
    deadline = time.time() + 60
    while not _processes_mentioning(tag) and time.time() < deadline:
        time.sleep(0.05)
    assert _processes_mentioning(tag), "the compiler never started"
    return p, tag


def _leftover_dirs(pid, tmpdir=None):
    tmp = Path(tmpdir or tempfile.gettempdir())
    return [d for d in tmp.glob("gpudsl-emu-*") if f"-{pid}-" in d.name]


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists(), reason="needs /proc")
def test_ctrl_c_during_a_compile_kills_the_compiler_and_removes_temporaries(tmp_path):
    p, tag = _start_slow_compile(tmp_path)
    time.sleep(0.3)
    t0 = time.time()
    p.send_signal(signal.SIGINT)
    out = p.stdout.readline()
    elapsed = time.time() - t0
    p.wait(timeout=60)
    assert out.strip() == "interrupted", out
    assert elapsed < 1.0, elapsed
    time.sleep(0.2)
    assert _processes_mentioning(tag) == []
    assert _leftover_dirs(p.pid) == []


@pytest.mark.skipif(not Path("/proc/self/cmdline").exists() or not sys.platform.startswith("linux"),
                    reason="needs Linux")
def test_a_killed_parent_takes_its_compiler_along_and_its_temporaries_are_swept(tmp_path):
    from gpudsl.runtime import emulator

    own_tmp = tmp_path / "tmp"
    own_tmp.mkdir()
    p, tag = _start_slow_compile(tmp_path, own_tmp)
    p.kill()
    p.wait(timeout=60)
    # g++ (the driver) gets SIGKILL with its parent; its cc1plus finishes its file and exits
    deadline = time.time() + 120
    while _processes_mentioning(tag) and time.time() < deadline:
        time.sleep(0.2)
    drivers = [q for q in _processes_mentioning(tag)
               if (Path(f"/proc/{q}/comm").read_text().strip() in ("g++", "c++"))]
    assert drivers == []
    assert _leftover_dirs(p.pid, own_tmp)  # a SIGKILLed process cannot clean up ...
    emulator._swept = False
    saved, tempfile.tempdir = tempfile.tempdir, str(own_tmp)
    try:
        emulator._sweep_stale_temporaries()  # ... the next compile of any process does
    finally:
        tempfile.tempdir = saved
    assert _leftover_dirs(p.pid, own_tmp) == []
