"""``gpudsl tune NODE --shape ...``: tune a standard-library node's schedule parameters
into the tuning database, which ``gpudsl.ops`` then uses (SPEC sections 6 and 8)."""
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


def run_tune(ns) -> int:
    from .. import autotune
    from ..stdlib.matmul import DEFAULTS, MatmulBuild, matmul_space

    shapes = [_shape(s) for s in ns.shape]
    if len(shapes) != 2:
        raise SystemExit("gpudsl tune matmul: give two --shape (a and b)")
    sa, sb = shapes
    params = _params(ns.param)
    unknown = set(params) - set(DEFAULTS)
    if unknown:
        raise SystemExit(f"gpudsl tune matmul: unknown parameter(s) {', '.join(sorted(unknown))}"
                         f"; the parameters are {', '.join(k for k in DEFAULTS if k != 'vec')}")
    space = matmul_space(**params)
    out = sa[:-1] + (sb[-1],)
    m = sa[-2] if len(sa) > 1 else 1
    batch = sa[0] if len(sa) == 3 else 1
    flops = 2.0 * batch * m * sa[-1] * sb[-1]
    args = autotune.random_args({"a": sa, "b": sb, "c": out}, ns.seed)
    res = autotune.tune(MatmulBuild(sa, sb), space, args,
                        reference=lambda a, b, c: a.astype("float64") @ b,
                        target=ns.target, strategy=ns.strategy,
                        budget=autotune.Budget(ns.trials, ns.seconds), seed=ns.seed,
                        db=ns.db, reps=ns.reps, flops=flops, rtol=1e-3, atol=1e-3)
    print(res.table())
    counts = ", ".join(f"{n} {k}" for k, n in sorted(res.counts().items()))
    print(f"\n{len(res.records)} configuration(s): {counts}")
    if res.best is None:
        print("no configuration ran correctly; gpudsl.ops keeps its defaults")
        return 1
    print(f"winner: {dict(res.best.config)} {res.best.time_ms:.4g} ms"
          + (" (emulated)" if res.emulated else "")
          + "; gpudsl.ops uses it for these shapes on this device")
    if ns.export:
        db = autotune.Database(ns.db)
        db.export_json(ns.export, task=MatmulBuild.task)
        print(f"records written to {ns.export}")
    return 0
