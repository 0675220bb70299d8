"""The tuning database: one record per configuration, and the winner of each task.

A SQLite file (``$GPUDSL_CACHE_DIR/tune.sqlite`` by default; any path, or a
``sqlite:///path`` URL that several processes or machines on a shared file system
write together).  Records are keyed as SPEC section 8 says: by the *built proc's
source* (its digest), the argument shapes and dtypes, and the *environment* (target,
device name and compute capability, driver, compiler and gpudsl versions), so a record
from another device, shape, compiler or version is never used.  Winners are keyed by the
task's name (``"matmul"`` for the standard-library node), shapes, dtypes and the same
environment: that is what ``gpudsl.ops`` looks up.

Written with the standard library's ``sqlite3`` so that looking a winner up (on every
``ops`` call) never needs the optional ``tune`` extra; see docs/decisions.md.
"""
from __future__ import annotations

import hashlib
import json
import os
import sqlite3
import threading
import time
from pathlib import Path

SCHEMA = """
CREATE TABLE IF NOT EXISTS records (
    source TEXT NOT NULL, shapes TEXT NOT NULL, env TEXT NOT NULL, task TEXT NOT NULL,
    params TEXT NOT NULL, status TEXT NOT NULL, error TEXT, median_ms REAL, spread_ms REAL,
    times_ms TEXT, rate REAL, unit TEXT, resources TEXT, threads INTEGER,
    timestamp REAL, seed INTEGER,
    PRIMARY KEY (source, shapes, env));
CREATE INDEX IF NOT EXISTS records_task ON records (task, shapes, env);
CREATE TABLE IF NOT EXISTS invalid (
    task TEXT NOT NULL, shapes TEXT NOT NULL, env TEXT NOT NULL, params TEXT NOT NULL,
    status TEXT NOT NULL, error TEXT, timestamp REAL,
    PRIMARY KEY (task, shapes, env, params));
CREATE TABLE IF NOT EXISTS winners (
    task TEXT NOT NULL, shapes TEXT NOT NULL, env TEXT NOT NULL, params TEXT NOT NULL,
    median_ms REAL, timestamp REAL, PRIMARY KEY (task, shapes, env));
"""

RECORD_FIELDS = ("source", "shapes", "env", "task", "params", "status", "error", "median_ms",
                 "spread_ms", "times_ms", "rate", "unit", "resources", "threads", "timestamp",
                 "seed")


def default_path() -> Path:
    """``$GPUDSL_TUNE_DB``, else ``tune.sqlite`` in the cache directory."""
    if os.environ.get("GPUDSL_TUNE_DB"):
        return Path(os.environ["GPUDSL_TUNE_DB"])
    from ..runtime.cache import cache_dir

    return cache_dir() / "tune.sqlite"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def shapes_key(shapes: dict) -> str:
    """``{"a": ((64, 64), "float32"), ...}`` as canonical text."""
    return json.dumps({k: [list(s), str(d)] for k, (s, d) in sorted(shapes.items())},
                      sort_keys=True)


class Database:
    """``Database(path_or_url)``; ``None`` is the cache directory's file."""

    def __init__(self, where: str | os.PathLike | None = None):
        if where is None:
            where = default_path()
        where = str(where)
        if where.startswith("sqlite:///"):
            where = where[len("sqlite:///"):]
        elif "://" in where:
            from ..errors import Error

            raise Error(f"autotune: database URL {where!r} is not supported",
                        None, "give a file path or sqlite:///path (a shared file system "
                        "lets several machines tune into one database)")
        self.path = Path(where)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        with self._connect() as con:
            con.executescript(SCHEMA)

    def _connect(self) -> sqlite3.Connection:
        con = sqlite3.connect(str(self.path), timeout=60)
        con.row_factory = sqlite3.Row
        return con

    # ---------------------------------------------------------------- records

    def get(self, source: str, shapes: str, env: str) -> dict | None:
        with self._connect() as con:
            row = con.execute("SELECT * FROM records WHERE source=? AND shapes=? AND env=?",
                              (source, shapes, env)).fetchone()
        return _decode(dict(row)) if row else None

    def put(self, rec: dict) -> None:
        row = _encode(rec)
        with self._lock, self._connect() as con:
            con.execute(f"INSERT OR REPLACE INTO records ({', '.join(RECORD_FIELDS)}) VALUES "
                        f"({', '.join('?' * len(RECORD_FIELDS))})",
                        tuple(row.get(f) for f in RECORD_FIELDS))

    def get_invalid(self, task: str, shapes: str, env: str, params: str) -> dict | None:
        """A configuration that failed before it had a proc (the build raised)."""
        with self._connect() as con:
            row = con.execute("SELECT * FROM invalid WHERE task=? AND shapes=? AND env=? AND "
                              "params=?", (task, shapes, env, params)).fetchone()
        return dict(row) if row else None

    def put_invalid(self, task, shapes, env, params, status, error) -> None:
        with self._lock, self._connect() as con:
            con.execute("INSERT OR REPLACE INTO invalid VALUES (?, ?, ?, ?, ?, ?, ?)",
                        (task, shapes, env, params, status, error, time.time()))

    def records(self, task: str | None = None, shapes: str | None = None,
                env: str | None = None) -> list[dict]:
        q, args = "SELECT * FROM records", []
        conds = [(c, v) for c, v in (("task", task), ("shapes", shapes), ("env", env))
                 if v is not None]
        if conds:
            q += " WHERE " + " AND ".join(f"{c}=?" for c, _ in conds)
            args = [v for _, v in conds]
        with self._connect() as con:
            return [_decode(dict(r)) for r in con.execute(q + " ORDER BY timestamp", args)]

    # ---------------------------------------------------------------- winners

    def set_winner(self, task: str, shapes: str, env: str, params: dict, median_ms) -> None:
        with self._lock, self._connect() as con:
            con.execute("INSERT OR REPLACE INTO winners VALUES (?, ?, ?, ?, ?, ?)",
                        (task, shapes, env, json.dumps(params, sort_keys=True), median_ms,
                         time.time()))

    def winner(self, task: str, shapes: str, env: str) -> dict | None:
        with self._connect() as con:
            row = con.execute("SELECT params FROM winners WHERE task=? AND shapes=? AND env=?",
                              (task, shapes, env)).fetchone()
        return json.loads(row["params"]) if row else None

    # ---------------------------------------------------------------- JSON

    def export_json(self, path: str | os.PathLike | None = None, task: str | None = None) -> str:
        """Every record (of ``task``) and winner as JSON text (written to ``path`` if given),
        to check tuned results into a repository."""
        with self._connect() as con:
            wq = "SELECT * FROM winners" + (" WHERE task=?" if task else "")
            winners = [dict(r) for r in con.execute(wq, (task,) if task else ())]
            iq = "SELECT * FROM invalid" + (" WHERE task=?" if task else "")
            invalid = [dict(r) for r in con.execute(iq, (task,) if task else ())]
        doc = {"format": "gpudsl-tune-1", "records": self.records(task), "invalid": invalid,
               "winners": winners}
        text = json.dumps(doc, indent=1, sort_keys=True)
        if path is not None:
            Path(path).write_text(text)
        return text

    def import_json(self, path_or_text) -> int:
        """Merge an export; returns the number of records read."""
        text = str(path_or_text)
        if not text.lstrip().startswith("{"):
            text = Path(text).read_text()
        doc = json.loads(text)
        if doc.get("format") != "gpudsl-tune-1":
            from ..errors import Error

            raise Error("autotune: not a gpudsl tuning export (format gpudsl-tune-1)")
        for r in doc["records"]:
            self.put(r)
        with self._lock, self._connect() as con:
            for r in doc.get("invalid", []):
                con.execute("INSERT OR REPLACE INTO invalid VALUES (?, ?, ?, ?, ?, ?, ?)",
                            (r["task"], r["shapes"], r["env"], r["params"], r["status"],
                             r["error"], r["timestamp"]))
            for w in doc.get("winners", []):
                con.execute("INSERT OR REPLACE INTO winners VALUES (?, ?, ?, ?, ?, ?)",
                            (w["task"], w["shapes"], w["env"], w["params"], w["median_ms"],
                             w["timestamp"]))
        return len(doc["records"])


_JSON_COLS = ("params", "times_ms", "resources")


def _encode(rec: dict) -> dict:
    row = dict(rec)
    for c in _JSON_COLS:
        if row.get(c) is not None and not isinstance(row[c], str):
            row[c] = json.dumps(row[c], sort_keys=True)
    return row


def _decode(row: dict) -> dict:
    for c in _JSON_COLS:
        if row.get(c):
            row[c] = json.loads(row[c])
    return row


_memo: dict = {}


def lookup_winner(task: str, shapes: dict, env: str, db: str | os.PathLike | None = None
                  ) -> dict | None:
    """The winning parameters of ``task`` for these shapes and environment, or None.
    Cheap when there is no database; memoized on the file's modification time."""
    path = Path(db) if db is not None else default_path()
    try:
        stamp = path.stat().st_mtime_ns
    except OSError:
        return None
    key = (str(path), stamp, task, shapes_key(shapes), env)
    if key not in _memo:
        if len(_memo) > 4096:
            _memo.clear()
        try:
            _memo[key] = Database(path).winner(task, key[3], env)
        except sqlite3.Error:
            _memo[key] = None
    return _memo[key]
