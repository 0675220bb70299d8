"""Random kernels with guarded edges (docs/hopper.md, "Edges") for the differential test
of the primitives: blocks of 4 rows over ``m`` rows, per-thread REGISTER accumulators
initialized, accumulated and stored under the edge guard ``4 bi + t < m``, the rows read
from ``x`` directly or from a SHARED tile staged with or without zeros past the edge.
Now and then the store reads past the guard (unguarded, a shifted guard, or another
row's accumulator): ``remove_guard`` must refuse to drop values that a read sees, and
every primitive must keep every meaning.  The store writes its row itself (no ``% m``)
half the time it is guarded inside: ``stage_mem`` of the block's output tile
``y[4 * bi:4 * bi + 4, 0:F]`` (drawn by the family's steps) copies it out under the
bounds, or fills it first where the block leaves a row inside unwritten.  Only generated with
``GPUDSL_DIFF_FAMILY=edge`` (or ``Gen(r, family="edge")``): the default run's programs
stay as they were."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes


def edge_program(r: random.Random, name: str) -> Program:
    F = r.choice([1, 2])
    g = "4 * bi + t < m"
    init = r.choice(["0.0", "a", "x[4 * bi + t, 0]"])
    staged = r.random() < 0.6
    zeros = staged and r.random() < 0.7
    src = "xs[t, j]" if staged else "x[4 * bi + t, j]"
    if init.startswith("x"):
        init = "xs[t, 0]" if staged else init
    store_guard = r.choice([g, g, g, "4 * bi + t < m - 1", "4 * bi + t < m + 1", "True"])
    row = r.choice(["t", "t", "t", "(t + 1) % 4"])
    op = r.choice(["=", "+="])
    body = [f"acc: f32[4, {F}] @ REGISTER"]
    if staged:
        body += ["xs: f32[4, 8] @ SHARED",
                 "for t in par(0, 4) @ THREADS:",
                 "    for j in seq(0, 8):",
                 f"        if {g}:",
                 "            xs[t, j] = x[4 * bi + t, j]"]
        if zeros:
            body += ["        else:", "            xs[t, j] = 0.0"]
        body += ["sync()"]
    body += ["for t in par(0, 4) @ THREADS:",
             f"    for f in seq(0, {F}):",
             f"        if {g}:",
             f"            acc[t, f] = {init}",
             "for t in par(0, 4) @ THREADS:",
             f"    for f in seq(0, {F}):",
             f"        if {g}:",
             "            for j in seq(0, 8):",
             f"                acc[t, f] += {src} * {r.choice(['2.0', 'a', 'f32(f + 1)'])}",
             "for t in par(0, 4) @ THREADS:",
             f"    for f in seq(0, {F}):"]
    # the row itself (no ``% m``) where the guard keeps it inside: a block's output tile
    # then leaves the array in the last block (stage_mem's clipped copy out, issue 36)
    wrap = "" if store_guard in (g, "4 * bi + t < m - 1") and r.random() < 0.5 else " % m"
    store = f"y[(4 * bi + t){wrap}, f] {op} acc[{row}, f]"
    if store_guard == "True":
        body += [f"        {store}"]
    else:
        body += [f"        if {store_guard}:", f"            {store}"]
    head = (f"def {name}(m: size, a: f32, x: f32[m, 8], y: f32[m, {F}]):\n")
    lines = ["    for bi in par(0, (m + 3) // 4) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("edge", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, [], ["m"], lo=1, hi=9), [])


__all__ = ["edge_program"]
