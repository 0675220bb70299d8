"""The tuning database: Optuna's study storage is the one store (docs/decisions.md).

A database is an Optuna RDB storage: a SQLite file (``$GPUDSL_TUNE_DB``, else
``tune.optuna.sqlite`` in the cache directory), or any URL SQLAlchemy takes (in
``$GPUDSL_TUNE_DB`` too)
(``sqlite:///path``, ``postgresql://...``, ``mysql://...``) so that several processes
or machines tune into one study.  There is one *study* per task (``"matmul"``),
argument shapes and dtypes, and *environment* (target, device name and compute
capability, driver, compiler and gpudsl versions), so a record from another device,
shape, compiler or version is never seen.  Inside a study each configuration is one
*trial*: user attribute ``key`` (the configuration's canonical JSON) set when a process
claims it, ``record`` (params, status, error, median and spread, times, rate, ptxas
resources, threads, timestamp, seed, and the built proc's source digest) when it is
measured; an ``ok`` trial is COMPLETE with its median as value, a failed one FAIL.  A
record is reused only when its source digest equals the freshly built proc's, as docs/autotuning.md keys it.  The winner is a study user attribute, which ``gpudsl.ops`` reads.

Claims make concurrent tuning of one study time each configuration once: a process
creates a RUNNING trial for a configuration (trial numbers are assigned by the
database), then looks again; when a lower-numbered or finished trial holds the same
key, its own trial is marked ``duplicate_of`` and it does not time the configuration.
A claim names its owner (pid and host): a claim whose owner on this host has died is
taken over at once; another host's after ``stale_seconds``.
"""
from __future__ import annotations

import copy
import hashlib
import json
import os
import re
import time
from contextlib import contextmanager
from contextvars import ContextVar
from pathlib import Path

from ..errors import Error

FORMAT = "gpudsl-tune-2"


def default_path() -> Path | str:
    """``$GPUDSL_TUNE_DB`` (a path, or a database URL such as ``sqlite:////dir/x.db``
    or ``postgresql://host/db``, kept as written), else ``tune.optuna.sqlite`` in the
    cache directory."""
    env = os.environ.get("GPUDSL_TUNE_DB")
    if env:
        return env if "://" in env else Path(env)
    from ..runtime.artifact_cache import cache_dir

    return cache_dir() / "tune.optuna.sqlite"


def digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()[:32]


def shapes_key(shapes: dict) -> str:
    """``{"a": ((64, 64), "float32"), ...}`` as canonical text."""
    return json.dumps({k: [list(s), str(d)] for k, (s, d) in sorted(shapes.items())},
                      sort_keys=True)


def to_url(where) -> str:
    if where is None:
        where = default_path()
    where = str(where)
    if "://" in where:
        return where
    p = Path(where).expanduser().resolve()
    from ..runtime.artifact_cache import make_private_dir

    make_private_dir(p.parent)
    if not p.exists():  # a new store is the owner's only (SQLite keeps the mode)
        try:
            os.close(os.open(p, os.O_CREAT | os.O_WRONLY, 0o600))
        except OSError:
            pass
    return "sqlite:///" + str(p)


def _optuna():
    try:
        import optuna
    except ImportError:
        raise Error("autotune: the tuning database needs Optuna", None,
                    "pip install 'gpudsl[tune]'") from None
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    return optuna


_storages: dict = {}


def sqlite_file(url: str) -> Path | None:
    """The file of a SQLite URL, whatever its driver (``sqlite:////abs`` and
    ``sqlite+pysqlite:////abs`` are ``/abs``), read by SQLAlchemy's own parser; None
    for another database, an in-memory one, or a URL it cannot parse.  Without
    SQLAlchemy (no store can be opened then) the ``sqlite[+driver]:///`` forms are
    read by hand."""
    try:
        from sqlalchemy.engine import make_url
    except ImportError:
        m = re.fullmatch(r"sqlite(?:\+\w+)?:///([^?]*)(?:\?.*)?", url, re.S)
        return Path(m.group(1)) if m and m.group(1) not in ("", ":memory:") else None
    try:
        u = make_url(url)
    except Exception:  # noqa: BLE001 - sqlalchemy.exc.ArgumentError, ValueError
        return None
    if u.get_backend_name() != "sqlite" or u.database in (None, "", ":memory:"):
        return None
    if u.database.startswith("file:") and u.query.get("uri") in ("true", "1"):
        from urllib.parse import urlparse  # sqlite:///file:/abs?uri=true

        return Path(urlparse(u.database).path) if urlparse(u.database).path else None
    return Path(u.database)


def _storage(url: str):
    if url not in _storages:
        optuna = _optuna()
        kw = {}
        if url.startswith("sqlite"):  # concurrent writers wait instead of failing
            kw = {"connect_args": {"timeout": 120}}
        for attempt in range(20):
            try:
                _storages[url] = optuna.storages.RDBStorage(url, engine_kwargs=kw)
                break
            except Exception as e:  # noqa: BLE001 - sqlalchemy's errors, by name
                # two processes creating the schema of a new store at once: the loser's
                # CREATE or version row fails (IntegrityError, "already exists"); the
                # schema is there once the winner commits
                if attempt == 19 or type(e).__name__ not in _SCHEMA_RACE:
                    raise
                time.sleep(0.05 * (attempt + 1))
    return _storages[url]


_SCHEMA_RACE = ("IntegrityError", "OperationalError", "ProgrammingError")


def _owner() -> dict:
    import socket

    return {"pid": os.getpid(), "host": socket.gethostname()}


def owner_alive(owner) -> bool | None:
    """Whether the process that made a claim still runs: True/False for a claim of this
    host, None (unknown) for another host's or a claim without an owner."""
    import socket

    if not isinstance(owner, dict) or owner.get("host") != socket.gethostname():
        return None
    try:
        os.kill(int(owner["pid"]), 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OSError, ValueError, TypeError):
        return True
    return True


def study_name(task: str, shapes: str, env: str) -> str:
    return f"{task} {digest(shapes + '|' + env)[:20]}"


class Study:
    """One task, shapes and environment: its trials and winner."""

    def __init__(self, db: "Database", task: str, shapes: str, env: str, create=True):
        self.db, self.task, self.shapes, self.env = db, task, shapes, env
        st = db.storage
        self.name = study_name(task, shapes, env)
        optuna = _optuna()
        try:
            self.id = st.get_study_id_from_name(self.name)
        except KeyError:
            if not create:
                raise
            try:
                self.id = st.create_new_study([optuna.study.StudyDirection.MINIMIZE],
                                              self.name)
            except optuna.exceptions.DuplicatedStudyError:  # another process won
                self.id = st.get_study_id_from_name(self.name)
            for k, v in (("task", task), ("shapes", shapes), ("env", env),
                         ("format", FORMAT)):
                st.set_study_user_attr(self.id, k, v)

    def trials(self):
        return self.db.storage.get_all_trials(self.id, deepcopy=False)

    def records(self) -> list[dict]:
        """Every measured configuration once (duplicates of a claim left out), in trial
        order."""
        out = []
        for t in self.trials():
            rec = t.user_attrs.get("record")
            if rec is not None and "duplicate_of" not in t.user_attrs:
                out.append(dict(rec, trial=t.number))
        return out

    def find(self, source: str) -> dict | None:
        """A stored record of a proc with this source digest (whichever configuration
        built it): the same kernel is not measured twice."""
        for t in self.trials():
            rec = t.user_attrs.get("record")
            if rec is not None and "duplicate_of" not in t.user_attrs \
                    and rec.get("source") == source:
                return dict(rec)
        return None

    # ------------------------------------------------------------ claims

    def claim(self, key: str, stale_seconds: float = 3600.0):
        """``("mine", trial_id)`` when this process is to measure ``key``;
        ``("done", record)`` when it is measured; ``("busy", None)`` when another
        process is measuring it."""
        optuna = _optuna()
        TS = optuna.trial.TrialState
        st = self.db.storage

        def holders():
            return [t for t in self.trials() if t.user_attrs.get("key") == key
                    and "duplicate_of" not in t.user_attrs
                    and (t.state == TS.RUNNING or "record" in t.user_attrs)]

        for t in holders():
            if "record" in t.user_attrs:
                return "done", dict(t.user_attrs["record"])
        now = time.time()
        for t in holders():  # a claim abandoned by a process that died
            started = t.user_attrs.get("claimed_at", now)
            dead = owner_alive(t.user_attrs.get("owner")) is False
            if t.state == TS.RUNNING and (dead or now - started > stale_seconds):
                try:
                    st.set_trial_user_attr(t._trial_id, "duplicate_of", -1)
                    st.set_trial_state_values(t._trial_id, TS.FAIL)
                except Exception:  # it finished meanwhile
                    pass
        # the claim is created with its key in one transaction (a template trial): a
        # claim without its key, seen by another process between two writes, let both
        # processes measure one configuration (seen under load)
        import datetime

        template = optuna.trial.FrozenTrial(
            number=0, state=TS.RUNNING, value=None, datetime_start=datetime.datetime.now(),
            datetime_complete=None, params={}, distributions={},
            user_attrs={"key": key, "claimed_at": time.time(), "owner": _owner()},
            system_attrs={},
            intermediate_values={}, trial_id=0)
        tid = st.create_new_trial(self.id, template_trial=template)
        mine = st.get_trial_number_from_id(tid)
        for t in holders():
            if t._trial_id == tid:
                continue
            if "record" in t.user_attrs or t.number < mine:
                st.set_trial_user_attr(tid, "duplicate_of", t.number)
                st.set_trial_state_values(tid, TS.FAIL)
                if "record" in t.user_attrs:
                    return "done", dict(t.user_attrs["record"])
                return "busy", None
        return "mine", tid

    def finish(self, trial_id, rec: dict) -> None:
        optuna = _optuna()
        st = self.db.storage
        st.set_trial_user_attr(trial_id, "record", _plain(rec))
        if rec.get("status") == "ok" and rec.get("median_ms") is not None:
            st.set_trial_state_values(trial_id, optuna.trial.TrialState.COMPLETE,
                                      [float(rec["median_ms"])])
        else:
            st.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)

    def abandon(self, trial_id) -> None:
        """Give a claim up (this process is stopping): another may take it."""
        optuna = _optuna()
        try:
            self.db.storage.set_trial_user_attr(trial_id, "duplicate_of", -1)
            self.db.storage.set_trial_state_values(trial_id, optuna.trial.TrialState.FAIL)
        except Exception:
            pass

    def put(self, key: str, rec: dict) -> None:
        """Store a record without a claim (an import)."""
        tid = self.db.storage.create_new_trial(self.id)
        self.db.storage.set_trial_user_attr(tid, "key", key)
        self.finish(tid, rec)

    def waiting(self, key: str) -> dict | None:
        """The record of ``key`` once another process has finished it, else None."""
        for t in self.trials():
            if t.user_attrs.get("key") == key and "record" in t.user_attrs \
                    and "duplicate_of" not in t.user_attrs:
                return dict(t.user_attrs["record"])
        return None

    def orphaned(self, key: str) -> bool:
        """Whether no live process holds a claim of ``key`` (its owner died)."""
        TS = _optuna().trial.TrialState
        for t in self.trials():
            if t.user_attrs.get("key") == key and t.state == TS.RUNNING \
                    and "duplicate_of" not in t.user_attrs \
                    and owner_alive(t.user_attrs.get("owner")) is not False:
                return False
        return True

    # ------------------------------------------------------------ winner

    def set_winner(self, params: dict, median_ms) -> None:
        wrote()
        self.db.storage.set_study_user_attr(
            self.id, "winner", {"params": _plain(params), "median_ms": median_ms,
                                "timestamp": time.time()})

    def winner(self) -> dict | None:
        w = self.db.storage.get_study_user_attrs(self.id).get("winner")
        return dict(w["params"]) if w else None


WRITES = 0  # winners this process wrote (gpudsl.ops re-reads the database after one)


def wrote() -> None:
    """Count a write of a winner: ``stdlib.node_registry.db_stamp`` changes at once."""
    global WRITES
    WRITES += 1


def _plain(x):
    return json.loads(json.dumps(x, default=lambda v: v.item() if hasattr(v, "item")
                                 else str(v)))


class Database:
    """``Database(path_or_url)``; ``None`` is the cache directory's file."""

    def __init__(self, where: str | os.PathLike | None = None):
        self.url = to_url(where)
        self.storage = _storage(self.url)

    def study(self, task: str, shapes: str, env: str, create: bool = True) -> Study:
        return Study(self, task, shapes, env, create)

    def _studies(self, task=None, shapes=None, env=None) -> list[Study]:
        out = []
        for s in self.storage.get_all_studies():
            a = s.user_attrs
            if a.get("format") != FORMAT:
                continue
            if any(v is not None and a.get(k) != v
                   for k, v in (("task", task), ("shapes", shapes), ("env", env))):
                continue
            out.append(Study(self, a["task"], a["shapes"], a["env"], create=False))
        return out

    def records(self, task: str | None = None, shapes: str | None = None,
                env: str | None = None) -> list[dict]:
        out = []
        for s in self._studies(task, shapes, env):
            out += [dict(r, task=s.task, shapes=s.shapes, env=s.env) for r in s.records()]
        return sorted(out, key=lambda r: r.get("timestamp") or 0)

    def winner(self, task: str, shapes: str, env: str) -> dict | None:
        try:
            return self.study(task, shapes, env, create=False).winner()
        except KeyError:
            return None

    def set_winner(self, task, shapes, env, params, median_ms) -> None:
        self.study(task, shapes, env).set_winner(params, median_ms)

    # ---------------------------------------------------------------- JSON

    def export_json(self, path: str | os.PathLike | None = None, task: str | None = None) -> str:
        """Every record and winner (of ``task``) as JSON text (written to ``path`` if
        given), to check tuned results into a repository."""
        studies = []
        for s in sorted(self._studies(task), key=lambda s: s.name):
            recs = []
            for t in s.trials():
                if "record" in t.user_attrs and "duplicate_of" not in t.user_attrs:
                    recs.append({"key": t.user_attrs["key"], **t.user_attrs["record"]})
            recs.sort(key=lambda r: (r["key"], r.get("source") or ""))
            w = self.storage.get_study_user_attrs(s.id).get("winner")
            studies.append({"task": s.task, "shapes": s.shapes, "env": s.env,
                            "records": recs, "winner": w})
        text = json.dumps({"format": FORMAT, "studies": studies}, indent=1, sort_keys=True)
        if path is not None:
            Path(path).write_text(text)
        return text

    def import_json(self, path_or_text) -> int:
        """Merge an export (records already present are kept); returns the number of
        records read."""
        text = str(path_or_text)
        if not text.lstrip().startswith("{"):
            text = Path(text).read_text()
        doc = json.loads(text)
        if doc.get("format") != FORMAT:
            raise Error(f"autotune: not a gpudsl tuning export (format {FORMAT})")
        n = 0
        for sd in doc["studies"]:
            s = self.study(sd["task"], sd["shapes"], sd["env"])
            have = {(t.user_attrs.get("key"), t.user_attrs["record"].get("source"))
                    for t in s.trials() if "record" in t.user_attrs
                    and "duplicate_of" not in t.user_attrs}
            for r in sd["records"]:
                n += 1
                r = dict(r)
                key = r.pop("key")
                if (key, r.get("source")) not in have:
                    s.put(key, r)
            if sd.get("winner"):
                wrote()
                self.storage.set_study_user_attr(s.id, "winner", sd["winner"])
        return n


_memo: dict = {}


_LOOKUPS: ContextVar = ContextVar("gpudsl_tuning_lookups", default=None)


@contextmanager
def recording_lookups(into: list | None = None):
    """Inside the block, every :func:`lookup_winner` call is appended to the list
    yielded (``into``, or a new one) as ``((task, shapes, env, db), answer)``: what a
    compile chose from the tuning store, so that a cached compile can ask again."""
    out = [] if into is None else into
    token = _LOOKUPS.set(out)
    try:
        yield out
    finally:
        _LOOKUPS.reset(token)


def replay_lookups(asked) -> None:
    """Tell the recording around this call (:func:`recording_lookups`, if any) the
    lookups ``asked`` (pairs as it records them), made earlier for a memoized result."""
    seen = _LOOKUPS.get()
    if seen is not None:
        seen.extend(asked)


def lookup_winner(task: str, shapes: dict, env: str, db: str | os.PathLike | None = None
                  ) -> dict | None:
    """The winning parameters of ``task`` for these shapes and environment, or None.
    Cheap when there is no database file; memoized on the file's modification time.
    Without Optuna installed there is no winner (the defaults)."""
    w = _lookup_winner(task, shapes, env, db)
    seen = _LOOKUPS.get()
    if seen is not None:
        seen.append(((task, shapes, env, None if db is None else str(db)), copy.deepcopy(w)))
    return w


def _lookup_winner(task, shapes, env, db):
    where = default_path() if db is None else db
    url = str(where) if "://" in str(where) else None
    path = Path(where).expanduser() if url is None else sqlite_file(url)
    stamp = None
    if path is not None:
        try:
            stamp = path.stat().st_mtime_ns
        except OSError:
            return None
        from ..runtime.artifact_cache import untrusted, warn_once

        why = untrusted(path) or untrusted(path.parent)
        if why is not None:  # anyone who can write it would choose the kernels run
            warn_once(("untrusted", str(path)),
                      f"gpudsl: not reading tuned winners from {path}: {why}; using the "
                      "defaults")
            return None
    key = (str(path or url), stamp, task, shapes_key(shapes), env)
    if key not in _memo or stamp is None:
        if len(_memo) > 4096:
            _memo.clear()
        try:
            _memo[key] = Database(path if path is not None else url).winner(task, key[3], env)
        except Exception:  # no Optuna, or not a tuning database: the defaults
            _memo[key] = None
    return _memo[key]
