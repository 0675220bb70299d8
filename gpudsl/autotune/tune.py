"""``autotune.tune``: the search, the database, the winner (docs/autotuning.md).

The search is Optuna's where it is model based (``strategy="tpe"``); grid and random
are the space's own orders.  Every configuration goes through the one store of
``db.py`` (an Optuna study): claimed, measured once, recorded."""
from __future__ import annotations

import json
import math
import pickle
import sys
import time

import numpy as np

from ..backend_names import backend_keyword
from ..errors import Error
from . import candidate_pipeline as pl
from . import trial as tr
from .db import Database, digest, shapes_key
from .env import env_key, environment
from .result import Best, Result
from .space import Budget, Config, Space

STRATEGIES = ("grid", "random", "tpe")
NEAR_TIE = 0.02   # configurations within 2% of the fastest count as tied
RETIME_TOP = 3


# ------------------------------------------------------------------ helpers


def _task_name(build) -> str:
    name = getattr(build, "task", None) or getattr(build, "__qualname__", None)
    return str(name or type(build).__name__)


def _shapes(args: dict) -> dict:
    return {k: (tuple(int(d) for d in v.shape), str(v.dtype)) for k, v in args.items()
            if hasattr(v, "shape")}


def random_args(shapes: dict, seed: int) -> dict:
    """Arguments for ``shapes`` ({name: shape} or {name: (shape, dtype)}), seeded."""
    rng = np.random.default_rng(seed)
    out = {}
    for k, s in shapes.items():
        if isinstance(s, tuple) and len(s) == 2 and isinstance(s[1], str):
            shape, dt = s
        else:
            shape, dt = s, "float32"
        dt = np.dtype(dt)
        if dt.kind == "f" or dt.name == "bfloat16":
            out[k] = rng.standard_normal(tuple(shape)).astype(dt)
        else:
            out[k] = rng.integers(-8, 8, tuple(shape)).astype(dt)
    return out


def simplicity(rec: dict) -> tuple:
    """Fewest threads, then smallest tiles (product of the numeric parameters), then
    the parameters' text: the documented tie-break among near-equal configurations."""
    prod = 1
    for v in rec["params"].values():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            prod *= v
    return (rec.get("threads") or 0, prod, json.dumps(rec["params"], sort_keys=True))


def deciding_ms(rec: dict) -> float:
    """The figure a record is ranked by: its re-timed median (all its timings, the
    interleaved re-timing included) when it was re-timed, else its median."""
    return rec["retimed_ms"] if rec.get("retimed_ms") is not None else rec["median_ms"]


def choose_winner(records: list[dict], retime=None, top: int = RETIME_TOP,
                  near: float = NEAR_TIE) -> dict | None:
    """Deterministic winner: the ``top`` fastest are re-timed interleaved (``retime``:
    list of records → list of lists of times, one per record); among those within
    ``near`` of the fastest, the simplest wins.  The re-timed records get
    ``retimed_ms`` / ``retimed_spread_ms`` (the median and spread of all their times,
    which rank them: `deciding_ms`); their ``median_ms`` stays the first measurement."""
    ok = sorted((r for r in records if r["status"] == pl.OK),
                key=lambda r: (r["median_ms"], simplicity(r)))
    if not ok:
        return None
    head = ok[:top]
    if retime is not None and len(head) > 1:
        extra = retime(head)
        for r, ts in zip(head, extra):
            if ts:
                times = list(r.get("times_ms") or []) + list(ts)
                r["retimed_ms"], r["retimed_spread_ms"] = pl.summarize(times)
        head.sort(key=lambda r: (deciding_ms(r), simplicity(r)))
    fastest = deciding_ms(head[0])
    tied = [r for r in head if deciding_ms(r) <= fastest * (1 + near)]
    return min(tied, key=simplicity)


# ------------------------------------------------------------------ strategies


def _proposals(space: Space, strategy: str, seed: int):
    if strategy == "grid":
        return space.grid()
    return space.shuffled(seed)


class _Tpe:
    """Optuna's TPE sampler over the space's categorical domains (ask / tell), on an
    in-memory study: the records themselves live in the database's study."""

    def __init__(self, space: Space, seed: int):
        from .db import _optuna

        optuna = _optuna()
        self.optuna = optuna
        self.space = space
        self.study = optuna.create_study(
            direction="minimize", sampler=optuna.samplers.TPESampler(seed=seed))
        self.dists = {n: optuna.distributions.CategoricalDistribution(
            [json.dumps(v) for v in vals]) for n, vals in space.domains.items()}

    def ask(self):
        t = self.study.ask(self.dists)
        return t, Config({n: json.loads(t.params[n]) for n in self.space.names})

    def tell(self, trial, value):
        if value is None or not math.isfinite(value):
            self.study.tell(trial, state=self.optuna.trial.TrialState.FAIL)
        else:
            self.study.tell(trial, value)


# ------------------------------------------------------------------ tune


def tune(build, space: Space, args: dict | None = None, *, shapes: dict | None = None,
         reference=None, backend: str | None = None, strategy: str = "grid",
         budget: Budget | None = None, seed: int = 0, db=None, executor=None,
         limits: pl.Limits | None = None, warmup: int = 1, reps: int = 10,
         rtol: float = 1e-4, atol: float = 1e-4, flops: float | None = None,
         bytes_moved: float | None = None, task: str | None = None,
         progress: bool | None = None, wait_seconds: float = 600.0,
         target: str | None = None) -> Result:
    """Tune ``build`` (configuration → Proc) over ``space``; see docs/autotuning.md.

    ``args`` are the real arguments (numpy arrays; in-place ones are restored between
    runs), or ``shapes`` ({name: shape} or {name: (shape, dtype)}) for seeded random
    ones.  ``reference`` (a Proc, or a callable of the arguments returning what the
    written argument must hold) is required: nothing is timed before it is verified.
    ``backend``: ``"cuda"``, or ``"emulator"`` for a dry run (default: cuda when a GPU is
    present; ``target=`` is its old, deprecated spelling).  ``db``: a ``Database``, a path or a database URL (``sqlite:///``,
    ``postgresql://``: several processes or machines tune into one study); default the
    cache directory's.  ``executor``: any ``concurrent.futures.Executor`` to build,
    prove and compile candidates in parallel (``None``: in this process); an executor
    with ``whole_trials = True`` (``autotune.RayExecutor``) runs whole trials, timing
    included, as its tasks.  A configuration another process is measuring is waited
    for up to ``wait_seconds``."""
    if reference is None:
        raise Error("autotune.tune needs a reference", None,
                    "pass reference=<naive proc> or a function of the arguments returning "
                    "the expected output: candidates are verified before they are timed")
    if strategy not in STRATEGIES:
        raise Error(f"autotune: unknown strategy {strategy!r}", None,
                    f"choose one of {', '.join(STRATEGIES)}")
    if args is None:
        if shapes is None:
            raise Error("autotune.tune needs args or shapes")
        args = random_args(shapes, seed)
    backend = backend_keyword(backend, target, "autotune.tune")
    if backend is None:
        from ..runtime.driver import driver_available

        backend = "cuda" if driver_available() else "emulator"
    db = db if isinstance(db, Database) else Database(db)
    if progress is None:
        progress = sys.stderr.isatty()
    run = TuningRun(build, space, args, reference, backend, budget or Budget(), seed, db,
                    executor, task or _task_name(build), progress,
                    dict(backend=backend, limits=limits or pl.Limits(), warmup=warmup,
                         reps=reps, rtol=rtol, atol=atol, flops=flops,
                         bytes_moved=bytes_moved))
    if strategy == "tpe":
        run.search_tpe()
    else:
        run.search_in_batches(_proposals(space, strategy, seed))
    run.wait_for_others(wait_seconds)
    return run.result()


class TuningRun:
    """One call of ``tune``: the configurations seen, their records, the study they go
    to, the timers kept for the final interleaved re-timing, and the configurations
    another process holds (``deferred``)."""

    def __init__(self, build, space, args, reference, backend, budget, seed, db, executor,
                 task, progress, measure_kw):
        self.build, self.space, self.args, self.reference = build, space, args, reference
        self.backend, self.budget, self.seed, self.executor = backend, budget, seed, executor
        self.task, self.measure_kw = task, measure_kw
        self.study = db.study(task, shapes_key(_shapes(args)), env_key(backend))
        self.bar = _Bar(progress, budget.trials or len(space))
        self.whole = bool(getattr(executor, "whole_trials", False))
        self.expected_cache: dict = {}
        self.records: list[dict] = []
        self.seen: dict[str, dict] = {}
        self.timers: dict[str, pl.Timer] = {}
        self.deferred: list = []
        self.start_time = time.monotonic()

    # ------------------------------------------------------------ one configuration

    def out_of_budget(self) -> bool:
        b = self.budget
        if b.trials is not None and len(self.records) + len(self.deferred) >= b.trials:
            return True
        return b.seconds is not None and time.monotonic() - self.start_time > b.seconds

    def expected_for(self, p):
        wkey = tuple(tr.written(p, self.args))
        if wkey not in self.expected_cache:
            self.expected_cache[wkey] = pl.expected_outputs(self.reference, self.args,
                                                            list(wkey))
        return self.expected_cache[wkey]

    def start(self, c: Config, prepared: dict | None):
        """("rec", record) when known or failed before measuring, ("busy", claim key)
        when another process measures it, ("run", job) when this process is to."""
        base = {"params": dict(c), "seed": self.seed}
        if prepared is not None and prepared["status"] in (pl.BUILD_ERROR, pl.REFUSED):
            p, fail = None, (prepared["status"], prepared["error"])
        else:
            p, fail = pl.build_proc(self.build, c)
        src = None if fail else digest(str(p))
        if src is not None:
            old = self.study.find(src)
            if old is not None:  # this kernel was measured here before: not again
                return "rec", dict(old, params=dict(c), cached=True)
        ckey = c.key() + "|" + (src or "no proc")
        state, x = self.study.claim(ckey)
        if state == "done":
            return "rec", dict(x, params=dict(c), cached=True)
        if state == "busy":
            return "busy", ckey
        if fail:
            rec = dict(base, source=None, status=fail[0], error=fail[1],
                       timestamp=time.time())
            self.study.finish(x, rec)
            return "rec", rec
        return "run", (c, p, x, base, src)

    def run_jobs(self, jobs):
        """Measure claimed configurations (here, or as the executor's tasks)."""
        if self.whole and jobs:
            yield from self._run_remote(jobs)
            return
        for c, p, tid, base, src in jobs:
            try:
                fields, timer = tr.measure(p, self.args, self.expected_for(p),
                                           **self.measure_kw)
            except BaseException:
                self.study.abandon(tid)
                raise
            rec = dict(base, source=src, **fields)
            self.study.finish(tid, rec)
            if timer is not None:
                self.timers[c.key()] = timer
            yield c, rec

    def _run_remote(self, jobs):
        futs = [self.executor.submit(tr.remote_measure, self.build, c, self.args,
                                     self.expected_for(p), **self.measure_kw)
                for c, p, *_ in jobs]
        for (c, p, tid, base, src), f in zip(jobs, futs):
            try:
                fields = f.result()
            except Exception as e:
                fields = {"status": pl.LAUNCH_ERROR, "error": pl._reason(e),
                          "timestamp": time.time()}
            rec = dict(base, source=src, **fields)
            self.study.finish(tid, rec)
            yield c, rec

    def record(self, c, rec):
        self.seen[c.key()] = rec
        self.records.append(rec)
        self.bar.update(rec)
        return rec

    def prepared_batch(self, cs):
        """Build/prove/compile a batch on the executor (warming the disk cache)."""
        if self.executor is None or self.whole or len(cs) < 2:
            return [None] * len(cs)
        try:
            pickle.dumps(self.build)
        except Exception:
            return [None] * len(cs)
        futs = [self.executor.submit(pl.prepare, self.build, c, self.backend, {},
                                     self.measure_kw["limits"]) for c in cs]
        out = []
        for f in futs:
            try:
                out.append(f.result())
            except Exception:
                out.append(None)
        return out

    def one(self, c: Config, prepared=None):
        kind, x = self.start(c, prepared)
        if kind == "rec":
            return self.record(c, x)
        if kind == "busy":
            self.deferred.append((c, x))
            return None
        for c2, rec in self.run_jobs([x]):
            return self.record(c2, rec)

    # ------------------------------------------------------------ the searches

    def search_tpe(self):
        tpe = _Tpe(self.space, self.seed)
        asks = 0
        while not self.out_of_budget() and asks < 20 * max(1, len(self.space)):
            asks += 1
            trial, c = tpe.ask()
            if not self.space.allows(c):
                tpe.tell(trial, None)
                continue
            rec = self.seen.get(c.key()) or self.one(c)
            tpe.tell(trial, rec.get("median_ms") if rec and rec["status"] == pl.OK else None)
            if len(self.seen) + len(self.deferred) >= len(self.space):
                break

    def search_in_batches(self, todo):
        width = getattr(self.executor, "_max_workers", 1) or 1
        while todo and not self.out_of_budget():
            n = width
            if self.budget.trials is not None:
                n = min(n, self.budget.trials - len(self.records) - len(self.deferred))
            batch, todo = todo[:n], todo[n:]
            jobs = []
            for c, prep in zip(batch, self.prepared_batch(batch)):
                kind, x = self.start(c, prep)
                if kind == "rec":
                    self.record(c, x)
                elif kind == "busy":
                    self.deferred.append((c, x))
                else:
                    jobs.append(x)
            for c, rec in self.run_jobs(jobs):
                self.record(c, rec)

    def wait_for_others(self, wait_seconds: float):
        """Configurations another process was measuring: their records, once written;
        one whose owner died is measured here."""
        deadline = time.monotonic() + wait_seconds
        while self.deferred and time.monotonic() < deadline:
            for c, ckey in list(self.deferred):
                rec = self.study.waiting(ckey)
                if rec is not None:
                    self.deferred.remove((c, ckey))
                    self.record(c, dict(rec, params=dict(c), cached=True))
                elif self.study.orphaned(ckey):  # its owner died (killed): measure here
                    self.deferred.remove((c, ckey))
                    self.one(c)  # busy again (another live process took it): deferred
            if self.deferred:
                time.sleep(0.2)
        self.bar.close()

    # ------------------------------------------------------------ the winner

    def retime(self, head):
        if any(Config(r["params"]).key() not in self.timers for r in head):
            return [[] for _ in head]  # records of earlier runs: their stored times stand
        rounds = [[] for _ in head]
        reps = self.measure_kw["reps"]
        for _ in range(max(3, reps // 2)):  # interleaved: A B C A B C ...
            for i, r in enumerate(head):
                rounds[i].append(self.timers[Config(r["params"]).key()].once())
        return rounds

    def result(self) -> Result:
        records = self.records
        win = choose_winner(records, self.retime)  # annotates the re-timed records
        stored = self.study.winner()
        if win is not None and stored is not None and all(r.get("cached") for r in records):
            # a pure resume: the winner chosen with the interleaved re-timing (whose
            # times are not records) stands; recomputing it from the stored medians
            # alone could flip a near tie
            same = [r for r in records if r["status"] == pl.OK and dict(r["params"]) == stored]
            if same:
                win = same[0]
        best = None
        if win is not None:
            win["winner"] = True  # the table's first row
            best = Best(self.build, win)
            self.study.set_winner(win["params"], best.time_ms)
        res = Result(self.build, self.task, records, best, self.backend,
                     environment(self.backend), _shapes(self.args), self.backend == "emulator")
        # configurations that other processes still held when the wait ended: not measured
        res.missing = [dict(c) for c, _ in self.deferred]
        return res


class _Bar:
    """A progress bar with the best time so far (tqdm when installed)."""

    def __init__(self, on: bool, total: int):
        self.bar = None
        self.best = math.inf
        if on:
            try:
                from tqdm.auto import tqdm  # a widget in a notebook (ipywidgets)

                self.bar = tqdm(total=total, desc="tuning", file=sys.stderr)
            except ImportError:
                self.bar = None

    def update(self, rec):
        if rec.get("status") == pl.OK and rec.get("median_ms") is not None:
            self.best = min(self.best, rec["median_ms"])
        if self.bar is not None:
            self.bar.update(1)
            self.bar.set_postfix(best=f"{self.best:.4g} ms")

    def close(self):
        if self.bar is not None:
            self.bar.close()

