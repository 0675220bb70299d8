"""``gpudsl tune NODE --shape ...``: tune a standard-library node's schedule parameters
(its tuning task in the node table, ``gpudsl.stdlib.node_table``) into the tuning
database, which ``gpudsl.ops`` and the graph then use (docs/autotuning.md)."""
from __future__ import annotations


def _shape(text: str) -> tuple[int, ...]:
    try:
        dims = tuple(int(d) for d in text.lower().replace(",", "x").split("x"))
    except ValueError:
        raise SystemExit(f"gpudsl tune: --shape takes dimensions like 64x64, got {text!r}"
                         ) from None
    if not dims or any(d <= 0 for d in dims):
        raise SystemExit(f"gpudsl tune: bad shape {text!r}")
    return dims


def _params(items: list[str]) -> dict:
    out = {}
    for item in items:
        name, sep, vals = item.partition("=")
        if not sep:
            raise SystemExit(f"gpudsl tune: --param takes NAME=V1,V2, got {item!r}")
        try:
            out[name.strip()] = tuple(int(v) for v in vals.split(","))
        except ValueError:
            raise SystemExit(f"gpudsl tune: --param {name}: integers expected") from None
    return out


def tunable() -> list[str]:
    """The nodes of the node table that have a tuning task."""
    from ..stdlib.node_table import all_nodes

    return [n.name for n in all_nodes() if n.tuning is not None]


def _task(ns, params, backend=None):
    """The node's tuning task (its declaration in the node table), its space restricted
    by ``params``, the arguments, the reference and what turns a time into a rate."""
    from ..stdlib.node_table import get

    decl = get(ns.node)
    if decl is None or decl.tuning is None:
        raise SystemExit(f"gpudsl tune: {ns.node!r} is not a tunable node; nodes: "
                         f"{', '.join(tunable())}")
    shapes = [_shape(s) for s in ns.shape]
    if len(shapes) != decl.tune_shapes:
        raise SystemExit(f"gpudsl tune {ns.node}: give {decl.tune_shapes} --shape")
    perm = None if ns.perm is None else tuple(int(p) for p in ns.perm.split(","))
    dtype = getattr(ns, "dtype", None) or "float32"
    if dtype != "float32" and ns.node != "matmul":
        raise SystemExit(f"gpudsl tune {ns.node}: --dtype {dtype} is for matmul only (the "
                         "other nodes tune their float32 kernels)")
    t = decl.tuning(shapes, dict(perm=perm, begin=ns.begin, end=ns.end, dtype=dtype,
                                 backend=backend))
    try:
        space = t.space(**{k: list(v) for k, v in params.items()})
    except TypeError as e:
        raise SystemExit(f"gpudsl tune {ns.node}: {e}") from None
    return t, space, t.args(ns.seed), t.reference, t.rate


def where_ops_reads(db) -> str:
    """Whether ``gpudsl.ops`` reads the database the winner went to, and if not, how
    to make it: ops reads ``$GPUDSL_TUNE_DB``, else the cache directory's file."""
    from ..autotune.db import default_path, to_url

    if db is None or to_url(db) == to_url(default_path()):
        return f"gpudsl.ops uses it for these shapes on this device (database {default_path()})"
    return (f"stored in {db}; gpudsl.ops reads {default_path()}, not this database: run "
            f"with GPUDSL_TUNE_DB={db} for gpudsl.ops to use it (or tune without --db)")


def _backend(ns) -> str | None:
    """``--backend``, or the old ``--target`` spelling (warned on stderr)."""
    import sys

    old = getattr(ns, "target", None)
    if old is None:
        return ns.backend
    print("gpudsl tune: --target is deprecated (a target is an architecture now); write "
          "--backend", file=sys.stderr)
    if ns.backend not in (None, old):
        raise SystemExit("gpudsl tune: --backend and --target disagree")
    return old


def _resolved(backend: str | None) -> str:
    """``--backend``, else cuda when a GPU is present, else the emulator (what
    ``autotune.tune`` picks)."""
    if backend is not None:
        return backend
    from ..runtime.driver import driver_available

    return "cuda" if driver_available() else "emulator"


def run_tune(ns) -> int:
    from .. import autotune
    from ..errors import Error

    backend = _backend(ns)
    params = _params(ns.param)
    try:
        build, space, args, ref, rate = _task(ns, params, _resolved(backend))
    except Error as e:
        raise SystemExit(f"gpudsl tune {ns.node}: {e}") from None
    res = autotune.tune(build, space, args, reference=ref, backend=backend,
                        strategy=ns.strategy, budget=autotune.Budget(ns.trials, ns.seconds),
                        seed=ns.seed, db=ns.db, reps=ns.reps, rtol=1e-3, atol=1e-3,
                        task=build.task, **rate)
    print(res.table())  # ends with the winner line
    counts = ", ".join(f"{n} {k}" for k, n in sorted(res.counts().items()))
    print(f"\n{len(res.records)} configuration(s): {counts}")
    if res.missing:
        print(f"incomplete: {len(res.missing)} configuration(s) were claimed by another "
              f"tuner that did not finish them in time and are not measured: "
              + "; ".join(str(m) for m in res.missing[:5])
              + (" ..." if len(res.missing) > 5 else ""))
    if res.best is None:
        print("no configuration ran correctly; gpudsl.ops keeps its defaults")
        return 1
    print(where_ops_reads(ns.db))
    if ns.export:
        autotune.Database(ns.db).export_json(ns.export, task=build.task)
        print(f"records written to {ns.export}")
    return 3 if res.missing else 0
