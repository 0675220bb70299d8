"""Helpers for the analysis tests: sizes satisfying asserts, arrays for the
interpreter, and replaying a race witness in the dynamic detector."""
from __future__ import annotations

import numpy as np
import z3

import gpudsl
from gpudsl.ir.smt import Encoder


def sample_sizes(p, fixed: dict | None = None, cap: int = 4096) -> dict | None:
    """Small sizes and index parameters that satisfy the proc's asserts."""
    ir = p.ir
    enc = Encoder(ir, fixed or {})
    cons = enc.premises()
    for q in ir.params:
        if q.kind in ("size", "index") and q.name not in (fixed or {}):
            v = enc.params[q.name]
            cons += [v <= cap, v >= (1 if q.kind == "size" else -cap)]
    s = z3.Optimize()
    s.add(*cons)
    free = [enc.params[q.name] for q in ir.params
            if q.kind == "size" and q.name not in (fixed or {})]
    if free:
        s.minimize(z3.Sum(*free))
    if s.check() != z3.sat:
        return None
    return {k: v for k, v in enc.size_values(s.model()).items()}


def make_args(p, sizes: dict, seed: int = 0) -> dict:
    from gpudsl.interpreter import eval_control

    rng = np.random.default_rng(seed)
    args = {}
    for q in p.ir.params:
        if q.kind in ("size", "index"):
            args[q.name] = int(sizes[q.name])
        elif q.kind == "scalar":
            args[q.name] = 1 if q.ty.kind == "int" else (True if q.ty.kind == "bool" else 1.5)
        else:
            shape = tuple(int(eval_control(d, sizes)) for d in q.shape)
            dt = np.dtype(q.ty.numpy)
            if dt.kind == "f":
                args[q.name] = rng.standard_normal(shape).astype(dt)
            else:
                args[q.name] = np.zeros(shape, dtype=dt)
    return args


def races_dynamically(p, sizes: dict, seed: int = 0):
    """The RaceError the interpreter raises with these sizes, or None."""
    try:
        gpudsl.interpret(p, detect_races=True, **make_args(p, sizes, seed))
    except gpudsl.RaceError as e:
        return e
    return None
