"""Shared helpers: running two procs on the same random inputs."""
from __future__ import annotations

import numpy as np

import gpudsl
from gpudsl.ir.nodes import Const, Var
from gpudsl.schedule.simplify import normalize
from gpudsl.ir.visitor import substitute


def _shape(prm, sizes):
    env = {k: Const(v) for k, v in sizes.items()}
    out = []
    for e in prm.shape:
        v = normalize(substitute(e, env))
        assert isinstance(v, Const), f"cannot evaluate the shape of {prm.name}"
        out.append(int(v.val))
    return tuple(out)


def random_args(p, sizes: dict, seed: int = 0) -> dict:
    rng = np.random.default_rng(seed)
    args = {}
    for prm in p.ir.params:
        if prm.kind in ("size", "index"):
            args[prm.name] = sizes[prm.name]
        elif prm.kind == "scalar":
            args[prm.name] = float(rng.uniform(-1, 1)) if prm.ty.is_float else \
                int(rng.integers(0, 4))
        else:
            shp = _shape(prm, sizes)
            dt = np.dtype(prm.ty.numpy)
            if dt.kind == "f":
                args[prm.name] = rng.uniform(-1, 1, size=shp).astype(dt)
            else:
                args[prm.name] = rng.integers(0, 4, size=shp).astype(dt)
    return args


def run(p, args: dict) -> dict:
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    gpudsl.interpret(p, **a)
    return a


def assert_same_meaning(p1, p2, seeds=(0, 1), **sizes):
    for seed in seeds:
        args = random_args(p1, sizes, seed)
        r1, r2 = run(p1, args), run(p2, args)
        for k, v in r1.items():
            if isinstance(v, np.ndarray):
                np.testing.assert_allclose(r2[k], v, rtol=1e-5, atol=1e-5,
                                           err_msg=f"array {k} differs")


def assert_refused(exc_info, prim: str, file_part: str = "test_"):
    """The SchedulingError names the primitive and a file:line."""
    e = exc_info.value
    assert isinstance(e, gpudsl.SchedulingError)
    assert e.primitive == prim
    text = str(e)
    assert text.count(":") >= 2 and file_part in text, text
    assert e.loc is not None and e.loc.line > 0
    return text
