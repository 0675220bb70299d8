"""Random tiled kernels for the differential test of the block order (``set_block_order``,
docs/primitives.md): a grid of tiles ``bi`` x ``bj`` (BLOCKS loops, directly nested,
sometimes under a batch loop ``z``, sometimes starting at 1, sometimes with a triangular
inner loop or a statement between the two), each tile's threads reading ``x`` and
writing ``y``, now and then through a SHARED tile and a barrier.  ``set_block_order``
must keep every meaning, print and parse back, and the primitives applied after it must
drop the hint where they break its pair.  Only generated with
``GPUDSL_DIFF_FAMILY=tiles`` (or ``Gen(r, family="tiles")``): the default run's programs
stay as they were."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes


def tiles_program(r: random.Random, name: str) -> Program:
    T = r.choice([2, 4])
    batch = r.random() < 0.3
    lo = r.choice([0, 0, 0, 1])
    inner_hi = "n" if r.random() < 0.85 else "bi + 1"          # triangular: refused
    between = r.random() < 0.15                                 # no direct nest: refused
    staged = r.random() < 0.4
    z = "z, " if batch else ""
    src = f"x[{z}bi, bj, t]"
    body = []
    if staged:
        body += ["xs: f32[%d] @ SHARED" % T,
                 f"for t in par(0, {T}) @ THREADS:",
                 f"    xs[t] = {src}",
                 "sync()"]
        src = r.choice(["xs[t]", f"xs[({T} - 1) - t]"])
    rhs = r.choice([f"{src} * 2.0", f"{src} + a", f"{src} + f32(bi + 2 * bj)"])
    op = r.choice(["=", "=", "+="])
    body += [f"for t in par(0, {T}) @ THREADS:",
             f"    y[{z}bi, bj, t] {op} {rhs}"]
    lines = [f"for bi in par({lo}, m) @ BLOCKS:"]
    if between:
        lines += ["    c: f32 @ REGISTER", "    c = 1.0"]
    lines += [f"    for bj in par(0, {inner_hi}) @ BLOCKS:"] + ["        " + b for b in body]
    if batch:
        lines = ["for z in par(0, 2) @ BLOCKS:"] + ["    " + ln for ln in lines]
    lead = "2, " if batch else ""
    head = (f"def {name}(m: size, n: size, a: f32, x: f32[{lead}m, n, {T}], "
            f"y: f32[{lead}m, n, {T}]):\n")
    asserts = ["n >= m"] if inner_hi != "n" else []
    if asserts:
        head += "    assert n >= m\n"
    return Program("tiles", name, head + "\n".join("    " + ln for ln in lines) + "\n",
                   pick_sizes(r, asserts, ["m", "n"], lo=1, hi=6), [])


__all__ = ["tiles_program"]
