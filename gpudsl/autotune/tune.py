"""``autotune.tune``: the search, the database, the winner (SPEC section 8)."""
from __future__ import annotations

import json
import math
import pickle
import sys
import time

import numpy as np

from ..errors import Error
from . import pipeline as pl
from .db import Database, digest, shapes_key
from .env import env_key, environment
from .space import Budget, Config, Space

STRATEGIES = ("grid", "random", "tpe")
NEAR_TIE = 0.02   # configurations within 2% of the fastest count as tied
RETIME_TOP = 3


class Best:
    """The winner: ``config``, ``time_ms``, ``record`` and the built ``proc``."""

    def __init__(self, build, record: dict):
        self._build = build
        self.record = record
        self.config = Config(record["params"])
        self.time_ms = record["median_ms"]

    @property
    def proc(self):
        return self._build(self.config)

    def __repr__(self):
        return f"Best({dict(self.config)}, {self.time_ms:.4g} ms)"


class Result:
    def __init__(self, build, task, records, best, target, env, shapes, emulated):
        self._build = build
        self.task = task
        self.records = records          # one dict per configuration tried, in trial order
        self.best = best                # None when no configuration ran correctly
        self.target = target
        self.env = env
        self.shapes = shapes
        self.emulated = emulated

    def counts(self) -> dict:
        out: dict[str, int] = {}
        for r in self.records:
            out[r["status"]] = out.get(r["status"], 0) + 1
        return out

    def table(self) -> str:
        """Every configuration with status, time and rate (emulated times are labelled)."""
        names = list(self.records[0]["params"]) if self.records else []
        head = names + ["status", "median ms", "spread", "rate", "note"]
        rows = []
        for r in sorted(self.records, key=lambda r: (r["status"] != pl.OK,
                                                     r.get("median_ms") or math.inf)):
            med = r.get("median_ms")
            rows.append([str(r["params"].get(n)) for n in names] + [
                r["status"] + (" (cached)" if r.get("cached") else ""),
                f"{med:.4g}" if med is not None else "-",
                f"{r['spread_ms']:.2g}" if r.get("spread_ms") is not None else "-",
                f"{r['rate']:.3g} {r['unit']}" if r.get("rate") else "-",
                (r.get("error") or "")[:60].replace("\n", " ")])
        widths = [max(len(h), *(len(x[i]) for x in rows)) if rows else len(h)
                  for i, h in enumerate(head)]
        lines = ["  ".join(h.ljust(w) for h, w in zip(head, widths))]
        lines += ["  ".join(c.ljust(w) for c, w in zip(row, widths)) for row in rows]
        label = "EMULATED times (CPU emulator: for testing the tuner, not performance)" \
            if self.emulated else f"device {self.env.get('device')}"
        return f"{self.task} on {label}\n" + "\n".join(lines)

    def __str__(self):
        return self.table()

    def plot(self, ax=None):
        """A bar chart of the correct configurations' median times (needs matplotlib)."""
        import matplotlib.pyplot as plt

        ok = sorted((r for r in self.records if r["status"] == pl.OK),
                    key=lambda r: r["median_ms"])
        if ax is None:
            _, ax = plt.subplots()
        ax.barh([json.dumps(r["params"]) for r in ok], [r["median_ms"] for r in ok])
        ax.set_xlabel("median ms" + (" (emulated)" if self.emulated else ""))
        return ax

    def source(self) -> str:
        """The winning schedule as Python source to check in."""
        if self.best is None:
            raise Error(f"autotune: no configuration of {self.task} ran correctly")
        mod = getattr(self._build, "__module__", None) or "your_module"
        name = getattr(self._build, "__qualname__", None) or type(self._build).__name__
        build_expr = name
        if not hasattr(self._build, "__qualname__"):  # an instance: show its constructor
            build_expr = repr(self._build)
        proc_text = "\n".join("# " + ln for ln in str(self.best.proc).splitlines())
        return (f"# gpudsl autotune winner for {self.task}, shapes {self.shapes}\n"
                f"# on {json.dumps(self.env, sort_keys=True)}: {self.best.time_ms:.4g} ms"
                f"{' (emulated)' if self.emulated else ''}\n"
                f"from {mod} import {name.split('.')[0]}\n\n"
                f"CONFIG = {dict(self.best.config)!r}\n"
                f"proc = {build_expr}(CONFIG)\n\n# the winning proc:\n{proc_text}\n")


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
        if dt.kind == "f":
            out[k] = rng.standard_normal(tuple(shape)).astype(dt)
        else:
            out[k] = rng.integers(-8, 8, tuple(shape)).astype(dt)
    return out


def _sizes(proc, args: dict) -> dict:
    """Size parameters that equal an argument's dimension directly (for check())."""
    sizes = {}
    for prm in proc.ir.params:
        if not prm.is_array or prm.name not in args:
            continue
        for d, actual in zip(prm.shape, np.shape(args[prm.name])):
            nm = getattr(d, "name", None)
            if isinstance(nm, str) and type(d).__name__ == "Var":
                sizes.setdefault(nm, int(actual))
    names = {prm.name for prm in proc.ir.params if not prm.is_array}
    return {k: v for k, v in sizes.items() if k in names}


def _written(proc, args) -> list[str]:
    from ..ir.binding import written_params

    w = written_params(proc.ir)
    return [p.name for p in proc.ir.params if p.name in w and p.name in args]


def simplicity(rec: dict) -> tuple:
    """Fewest threads, then smallest tiles (product of the numeric parameters), then
    the parameters' text: the SPEC's tie-break among near-equal configurations."""
    prod = 1
    for v in rec["params"].values():
        if isinstance(v, (int, float)) and not isinstance(v, bool):
            prod *= v
    return (rec.get("threads") or 0, prod, json.dumps(rec["params"], sort_keys=True))


def choose_winner(records: list[dict], retime=None, top: int = RETIME_TOP,
                  near: float = NEAR_TIE) -> dict | None:
    """Deterministic winner: the ``top`` fastest are re-timed interleaved (``retime``:
    list of records → list of lists of times, one per record); among those within
    ``near`` of the fastest, the simplest wins."""
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
                r["median_ms"], r["spread_ms"] = pl.summarize(times)
                r["times_ms"] = times
        head.sort(key=lambda r: (r["median_ms"], simplicity(r)))
    fastest = head[0]["median_ms"]
    tied = [r for r in head if r["median_ms"] <= fastest * (1 + near)]
    return min(tied, key=simplicity)


# ------------------------------------------------------------------ strategies


def _proposals(space: Space, strategy: str, seed: int):
    """A generator of configurations; ``.send(value)`` is not used: model-based search
    is driven through :class:`_Tpe`."""
    if strategy == "grid":
        yield from space.grid()
    elif strategy == "random":
        yield from space.shuffled(seed)


class _Tpe:
    """Optuna's TPE sampler over the space's categorical domains (ask / tell)."""

    def __init__(self, space: Space, seed: int):
        try:
            import optuna
        except ImportError:
            raise Error("autotune: strategy 'tpe' needs Optuna", None,
                        "pip install 'gpudsl[tune]', or use strategy='grid' or 'random'"
                        ) from None
        optuna.logging.set_verbosity(optuna.logging.WARNING)
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
         reference=None, target: str | None = None, strategy: str = "grid",
         budget: Budget | None = None, seed: int = 0, db=None, executor=None,
         limits: pl.Limits | None = None, warmup: int = 1, reps: int = 10,
         rtol: float = 1e-4, atol: float = 1e-4, flops: float | None = None,
         bytes_moved: float | None = None, task: str | None = None,
         progress: bool | None = None) -> Result:
    """Tune ``build`` (configuration → Proc) over ``space``; see SPEC section 8.

    ``args`` are the real arguments (numpy arrays; in-place ones are restored between
    runs), or ``shapes`` ({name: shape} or {name: (shape, dtype)}) for seeded random
    ones.  ``reference`` (a Proc, or a callable of the arguments returning what the
    written argument must hold) is required: nothing is timed before it is verified.
    ``target``: ``"cuda"``, or ``"emulator"`` for a dry run (default: cuda when a GPU is
    present).  ``db``: a :class:`Database`, a path or ``sqlite:///`` URL (default: the
    cache directory's).  ``executor``: any ``concurrent.futures.Executor`` to build,
    prove and compile candidates in parallel (``None``: in this process)."""
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
    if target is None:
        from ..runtime.driver import driver_available

        target = "cuda" if driver_available() else "emulator"
    budget = budget or Budget()
    limits = limits or pl.Limits()
    db = db if isinstance(db, Database) else Database(db)
    task = task or _task_name(build)
    env = env_key(target)
    skey = shapes_key(_shapes(args))
    if progress is None:
        progress = sys.stderr.isatty()
    bar = _Bar(progress, budget.trials or len(space))
    expected_cache: dict = {}
    records: list[dict] = []
    seen: dict[str, dict] = {}
    start = time.monotonic()

    def out_of_budget():
        if budget.trials is not None and len(records) >= budget.trials:
            return True
        return budget.seconds is not None and time.monotonic() - start > budget.seconds

    def evaluate(c: Config, prepared: dict | None) -> dict:
        pkey = c.key()
        if pkey in seen:
            return seen[pkey]
        base = {"task": task, "params": dict(c), "shapes": skey, "env": env, "seed": seed}
        old = db.get_invalid(task, skey, env, pkey)
        if old is not None:  # it never had a proc: its failure is remembered
            return dict(base, status=old["status"], error=old["error"], cached=True)
        if prepared is not None and prepared["status"] in (pl.BUILD_ERROR, pl.REFUSED):
            db.put_invalid(task, skey, env, pkey, prepared["status"], prepared["error"])
            return dict(base, status=prepared["status"], error=prepared["error"])
        p, fail = pl.build_proc(build, c)
        if fail:
            db.put_invalid(task, skey, env, pkey, *fail)
            return dict(base, status=fail[0], error=fail[1])
        src = digest(str(p))
        old = db.get(src, skey, env)
        if old is not None:  # measured before on this environment: not measured again
            old["params"] = dict(c)
            old["cached"] = True
            return old
        rec = dict(base, source=src, timestamp=time.time())
        kernel, info = pl.prove_and_compile(p, target, _sizes(p, args), limits)
        rec.update(status=info["status"], error=info.get("error"),
                   resources=info.get("resources"), threads=info.get("threads"))
        if kernel is not None:
            written = _written(p, args)
            wkey = tuple(written)
            if wkey not in expected_cache:
                expected_cache[wkey] = pl.expected_outputs(reference, args, written)
            bad = pl.verify(kernel, args, expected_cache[wkey], rtol, atol)
            if bad:
                rec.update(status=bad[0], error=bad[1])
            else:
                timer = pl.Timer(kernel, target, args, written)
                try:
                    times = timer.run(warmup, reps)
                except Exception as e:
                    rec.update(status=pl.LAUNCH_ERROR, error=pl._reason(e))
                else:
                    med, spread = pl.summarize(times)
                    rec.update(median_ms=med, spread_ms=spread, times_ms=times)
                    if flops:
                        rec.update(rate=flops / (med * 1e-3) / 1e9, unit="GFLOP/s")
                    elif bytes_moved:
                        rec.update(rate=bytes_moved / (med * 1e-3) / 1e9, unit="GB/s")
                    timers[pkey] = timer
        db.put(rec)
        return rec

    timers: dict[str, pl.Timer] = {}

    def record(c, rec):
        seen[c.key()] = rec
        records.append(rec)
        bar.update(rec)
        return rec

    def prepared_batch(cs):
        """Run build/prove/compile of a batch on the executor (warming the disk cache)."""
        if executor is None or len(cs) < 2:
            return [None] * len(cs)
        sizes = {}
        try:
            pickle.dumps(build)
        except Exception:
            return [None] * len(cs)
        futs = [executor.submit(pl.prepare, build, c, target, sizes, limits) for c in cs]
        out = []
        for f in futs:
            try:
                out.append(f.result())
            except Exception:
                out.append(None)
        return out

    if strategy == "tpe":
        tpe = _Tpe(space, seed)
        asks = 0
        while not out_of_budget() and asks < 20 * max(1, len(space)):
            asks += 1
            trial, c = tpe.ask()
            if not space.allows(c):
                tpe.tell(trial, None)
                continue
            if c.key() in seen:
                rec = seen[c.key()]
                tpe.tell(trial, rec.get("median_ms") if rec["status"] == pl.OK else None)
                if len(seen) >= len(space):
                    break
                continue
            rec = record(c, evaluate(c, None))
            tpe.tell(trial, rec.get("median_ms") if rec["status"] == pl.OK else None)
    else:
        todo = list(_proposals(space, strategy, seed))
        width = getattr(executor, "_max_workers", 1) or 1
        while todo and not out_of_budget():
            n = width
            if budget.trials is not None:
                n = min(n, budget.trials - len(records))
            batch, todo = todo[:n], todo[n:]
            for c, prep in zip(batch, prepared_batch(batch)):
                record(c, evaluate(c, prep))
    bar.close()

    def retime(head):
        ts = []
        for r in head:
            if r["params"] and Config(r["params"]).key() not in timers:
                ts.append(None)
        if any(t is None for t in ts):
            return [[] for _ in head]  # cached records: their stored times stand
        rounds = [[] for _ in head]
        for _ in range(max(3, reps // 2)):  # interleaved: A B C A B C ...
            for i, r in enumerate(head):
                rounds[i].append(timers[Config(r["params"]).key()].once())
        return rounds

    win = choose_winner([dict(r) for r in records], retime)
    best = None
    if win is not None:
        best = Best(build, win)
        db.set_winner(task, skey, env, win["params"], win["median_ms"])
    return Result(build, task, records, best, target, environment(target), _shapes(args),
                  target == "emulator")


class _Bar:
    """A progress bar with the best time so far (tqdm when installed)."""

    def __init__(self, on: bool, total: int):
        self.bar = None
        self.best = math.inf
        if on:
            try:
                from tqdm import tqdm

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

