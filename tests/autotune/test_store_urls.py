"""The tuning store as a database URL, claims of killed tuners, and concurrent schema
creation (issue 28).

``GPUDSL_TUNE_DB=sqlite:////dir/shared.db`` made ``gpudsl tune`` create a local file
named ``sqlite:/dir/shared.db`` (the URL went through ``Path``), ``postgresql://...``
a local SQLite file, and ``gpudsl.ops`` / graphs stat the URL as a file and never read
the store.  A claim of a tuner killed with SIGKILL held its configuration for the
whole wait (600 s) and the tune ended without it, silently.  Two tuners creating a new
store at once: one died with a raw IntegrityError."""
from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("optuna")

from gpudsl import autotune  # noqa: E402
from gpudsl.autotune import db as db_mod  # noqa: E402

ROOT = Path(__file__).parent.parent.parent
SHAPES = {"a": ((4, 4), "float32")}


def _dead_pid() -> int:
    p = subprocess.Popen([sys.executable, "-c", "pass"])
    p.wait()
    return p.pid


def _roundtrip(monkeypatch, url: str):
    monkeypatch.setenv("GPUDSL_TUNE_DB", url)
    db = autotune.Database(None)
    assert db.url == url
    db.set_winner("urltask", db_mod.shapes_key(SHAPES), "env1", {"tile": 7}, 1.0)
    # gpudsl.ops and graphs read the winner through lookup_winner, from the URL's store
    db_mod._memo.clear()
    assert autotune.lookup_winner("urltask", SHAPES, "env1") == {"tile": 7}


def test_sqlite_url_in_the_environment_is_a_database_url(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    store = tmp_path / "dir" / "shared.db"
    store.parent.mkdir()
    _roundtrip(monkeypatch, f"sqlite:///{store}")
    assert store.is_file()
    assert not (tmp_path / "sqlite:").exists()  # not a local file named after the URL
    # a second store, by URL too, is another store
    other = tmp_path / "other.db"
    monkeypatch.setenv("GPUDSL_TUNE_DB", f"sqlite:///{other}")
    db_mod._memo.clear()
    assert autotune.lookup_winner("urltask", SHAPES, "env1") is None
    assert autotune.Database(None).url == f"sqlite:///{other}"


def _postgres(tmp_path):
    """A throwaway PostgreSQL server (unix socket only) in ``tmp_path`` (a folder the
    server's user can reach), or a skip."""
    pytest.importorskip("psycopg2")
    for tool in ("initdb", "pg_ctl"):
        if shutil.which(tool) is None:
            pytest.skip(f"no PostgreSQL server installed ({tool})")
    run = []
    if os.geteuid() == 0:  # initdb refuses root
        if shutil.which("runuser") is None:
            pytest.skip("running as root without runuser")
        try:
            import pwd

            pwd.getpwnam("postgres")
        except KeyError:
            pytest.skip("running as root and no 'postgres' user")
        run = ["runuser", "-u", "postgres", "--"]
        shutil.chown(tmp_path, "postgres")
    data, sock = tmp_path / "data", str(tmp_path)
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    r = subprocess.run(run + ["initdb", "-D", str(data), "-A", "trust", "-U", "gpudsl"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"initdb failed: {r.stderr[-300:]}")
    r = subprocess.run(run + ["pg_ctl", "-D", str(data), "-w", "-l", str(tmp_path / "log"),
                              "-o", f"-k {sock} -p {port} -c listen_addresses=''", "start"],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip(f"the PostgreSQL server did not start: {r.stderr[-300:]}")
    stop = run + ["pg_ctl", "-D", str(data), "-w", "-m", "immediate", "stop"]
    return f"postgresql+psycopg2://gpudsl@/postgres?host={sock}&port={port}", stop


def test_postgresql_url_in_the_environment(tmp_path, monkeypatch):
    import tempfile

    monkeypatch.chdir(tmp_path)
    where = Path(tempfile.mkdtemp(prefix="gpudsl-pg-"))  # pytest's folders are 0700
    stop = None
    try:
        where.chmod(0o755)
        url, stop = _postgres(where)
        _roundtrip(monkeypatch, url)
        assert not list(tmp_path.iterdir())  # nothing local: the server holds the store
        db_mod._storages.pop(url).remove_session()
    finally:
        if stop is not None:
            subprocess.run(stop, capture_output=True)
        shutil.rmtree(where, ignore_errors=True)


def test_a_dead_tuners_claim_is_taken_over(tmp_path, monkeypatch):
    db = autotune.Database(tmp_path / "t.sqlite")
    study = db.study("claims", "s", "e")
    dead = {"pid": _dead_pid(), "host": socket.gethostname()}
    monkeypatch.setattr(db_mod, "_owner", lambda: dead)
    state, _ = study.claim("k1")
    assert state == "mine"  # the killed tuner's claim, never finished
    monkeypatch.undo()
    assert study.orphaned("k1")
    state, tid = study.claim("k1")
    assert state == "mine"  # taken over at once, not after an hour (or 600 s of waiting)
    # a live owner's claim on this host holds
    state, _ = study.claim("k2")
    assert state == "mine" and not study.orphaned("k2")
    assert study.claim("k2")[0] == "busy"


def test_tune_measures_a_killed_tuners_configuration_and_reports_missing_ones(
        tmp_path, monkeypatch):
    from .shared_worker import full_build, space

    import numpy as np

    from .kernels import reference

    rng = np.random.default_rng(0)
    args = {"a": rng.standard_normal((32, 32)).astype(np.float32),
            "b": rng.standard_normal((32, 32)).astype(np.float32),
            "c": np.zeros((32, 32), np.float32)}
    db = autotune.Database(tmp_path / "t.sqlite")
    kw = dict(reference=reference, backend="emulator", strategy="grid", seed=0, db=db,
              task="killed", reps=1)
    configs = list(space())
    study = db.study("killed", db_mod.shapes_key(
        {k: (v.shape, str(v.dtype)) for k, v in args.items()}), autotune.env.env_key("emulator"))

    def key(c):
        return c.key() + "|" + db_mod.digest(str(full_build(c)))

    # one configuration claimed by a killed tuner of this host, one by a tuner on
    # another host that never finishes
    monkeypatch.setattr(db_mod, "_owner", lambda: {"pid": _dead_pid(),
                                                   "host": socket.gethostname()})
    assert study.claim(key(configs[0]))[0] == "mine"
    monkeypatch.setattr(db_mod, "_owner", lambda: {"pid": 1, "host": "elsewhere"})
    assert study.claim(key(configs[1]))[0] == "mine"
    monkeypatch.undo()
    t0 = time.monotonic()
    res = autotune.tune(full_build, space(), args, wait_seconds=3.0, **kw)
    assert time.monotonic() - t0 < 120
    measured = {autotune.Config(r["params"]).key() for r in res.records}
    assert configs[0].key() in measured  # taken over
    assert configs[1].key() not in measured
    assert res.missing == [dict(configs[1])]  # and the result says so


_SCHEMA_CHILD = """
import sys, time
start = float(sys.argv[2])
while time.time() < start:
    pass
from gpudsl import autotune
autotune.Database(sys.argv[1]).study("race", "s", "e")
"""


def test_concurrent_schema_creation(tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    import optuna  # noqa: F401 - imported once here so the children's import is warm

    for round_ in range(3):
        url = f"sqlite:///{tmp_path / f'new{round_}.sqlite'}"
        start = time.time() + 4.0
        procs = [subprocess.Popen([sys.executable, "-c", _SCHEMA_CHILD, url, str(start)],
                                  stderr=subprocess.PIPE, text=True, env=env)
                 for _ in range(3)]
        for p in procs:
            _, err = p.communicate(timeout=300)
            assert p.returncode == 0, err[-2000:]


def test_a_store_others_can_write_is_not_read(tmp_path, monkeypatch):
    from gpudsl.runtime.artifact_cache import CacheWarning

    d = tmp_path / "team"
    d.mkdir()
    store = d / "tune.sqlite"
    autotune.Database(store).set_winner("trust", db_mod.shapes_key(SHAPES), "env1",
                                        {"tile": 7}, 1.0)
    assert (store.stat().st_mode & 0o777) == 0o600  # created owner-only
    monkeypatch.setenv("GPUDSL_TUNE_DB", str(store))
    db_mod._memo.clear()
    assert autotune.lookup_winner("trust", SHAPES, "env1") == {"tile": 7}
    d.chmod(0o777)
    db_mod._memo.clear()
    with pytest.warns(CacheWarning, match="not reading tuned winners"):
        assert autotune.lookup_winner("trust", SHAPES, "env1") is None


@pytest.mark.parametrize("scheme", ["sqlite", "sqlite+pysqlite"])
def test_a_store_url_others_can_write_is_not_read_whatever_the_driver(tmp_path, monkeypatch,
                                                                     scheme):
    # issue 39: only sqlite:/// was recognised as a file, so a store written
    # sqlite+pysqlite:/// was read whoever could write it (URLs now go through make_url)
    from gpudsl.runtime.artifact_cache import CacheWarning

    store = tmp_path / "team" / "tune.sqlite"
    store.parent.mkdir()
    url = f"{scheme}:///{store}"
    autotune.Database(url).set_winner("drv", db_mod.shapes_key(SHAPES), "env1", {"tile": 5},
                                      1.0)
    monkeypatch.setenv("GPUDSL_TUNE_DB", url)
    db_mod._memo.clear()
    assert autotune.lookup_winner("drv", SHAPES, "env1") == {"tile": 5}
    store.chmod(0o666)
    db_mod._memo.clear()
    with pytest.warns(CacheWarning, match="not reading tuned winners"):
        assert autotune.lookup_winner("drv", SHAPES, "env1") is None
    assert db_mod.sqlite_file(f"{scheme}:///{store}?timeout=5") == store
    assert db_mod.sqlite_file("postgresql+psycopg2://host/db") is None
    assert db_mod.sqlite_file(f"{scheme}://") is None  # in memory
