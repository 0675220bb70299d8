"""``gpudsl.autotune`` (docs/autotuning.md): tune a schedule function's parameters.

Each candidate is built, proved by ``check()`` (a candidate that fails its proof is
never run), compiled, pruned on its ptxas resources, verified against a reference on
the real arguments, and only then timed; every failure is recorded with its reason.
Records live in an Optuna study storage (SQLite by default, any database URL to share
one study among machines), one study per task, shapes and environment, each record
keyed by the built proc's source, so tuning again resumes, and ``gpudsl.ops`` uses the
winners.

This package sits between ``proc`` and ``stdlib``: the standard library exposes its
schedule parameters as ``Space`` s and looks winners up here."""
from .db import Database, lookup_winner
from .candidate_pipeline import Limits
from .space import Budget, Config, Space
from .distributed import RayExecutor
from .result import Best, Result
from .tune import choose_winner, random_args, tune

__all__ = ["Space", "Config", "Budget", "Limits", "Database", "Result", "Best", "tune",
           "choose_winner", "random_args", "lookup_winner", "RayExecutor"]
