"""The ``hopper`` family of the differential test (docs/hopper.md): kernels with a swizzled
SHARED tile (``@ SHARED(swizzle=W)``, rows of 128 bytes) and ``setmaxnreg`` over the
warpgroups of a block of 256 threads: a staged exchange through the tile behind
``sync()`` (all threads, or one warpgroup producing for the other), block-level ``seq``
loops around it, and naive forms (``seq`` loops over rows) for the primitives that map
and stage.  Now and then a setmaxnreg stands where check() refuses it (inside a ``seq``
loop, on half a warpgroup, asking for more registers than the block has): the
primitives must keep the meaning either way and never turn a proved kernel into a
refused one."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes

HEAD = "def {name}(n: size, a: f32, x: f32[n, 256], y: f32[n, 256]):\n    assert n >= 1\n"
GOOD = [["setmaxnreg(40, 0, 128)", "setmaxnreg(232, 128, 256)"],
        ["setmaxnreg(232, 128, 256)", "setmaxnreg(40, 0, 128)"],
        ["setmaxnreg(24, 0, 256)"], ["setmaxnreg(256, 0, 128)", "setmaxnreg(24, 128, 256)"],
        ["setmaxnreg(120, 128, 256)"], []]
BAD = [["setmaxnreg(256, 0, 256)"], ["setmaxnreg(40, 0, 64)"], ["setmaxnreg(44, 0, 128)"]]


def _tile(r) -> str:
    return f"s: f32[8, 32] @ SHARED(swizzle={r.choice([32, 64, 128, 128])})"


def _load(r, tv, lo, hi):
    src = r.choice([f"x[b, {tv}]", f"x[b, {tv}] + a", f"x[b, 255 - {tv}] * 2.0"])
    rel = f"{tv} - {lo}" if lo else tv
    k = hi - lo
    row = f"({rel}) // 32" if k == 256 else f"({rel}) // 16"
    col = f"({rel}) % 32" if k == 256 else f"({rel}) % 16 + 16 * ((i + {lo // 128}) % 2)"
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:", f"    s[{row}, {col}] = {src}"]


def _use(r, tv, lo, hi):
    body = r.choice([f"y[b, {tv}] += s[({tv} + i) % 8, 31 - {tv} % 32]",
                     f"y[b, {tv}] = y[b, {tv}] + s[{tv} % 8, ({tv} // 8) % 32] + a",
                     f"y[b, {tv}] += s[7 - {tv} % 8, {tv} % 32] * 2.0"])
    return [f"for {tv} in par({lo}, {hi}) @ THREADS:", f"    {body}"]


def _staged(r):
    mid = ["sync()"] if r.random() < 0.92 else []
    tail = ["sync()"] if r.random() < 0.85 else []
    return _load(r, "t", 0, 256) + mid + _use(r, "u", 0, 256) + tail


def _roles(r):
    """Warpgroup 0 produces into the tile, warpgroup 1 consumes it."""
    return _load(r, "t", 0, 128) + ["sync()"] + _use(r, "u", 128, 256) + ["sync()"]


def _naive(r):
    """Rows in seq loops: the input of parallelize_loop and stage_mem."""
    return ["for t in seq(0, 256):", "    s[t // 32, t % 32] = x[b, t] * 2.0",
            "for u in seq(0, 256):", f"    y[b, u] += s[u % 8, {r.choice(['u // 8', '31 - u % 32'])}]"]


def hopper_program(r: random.Random, name: str) -> Program:
    regs = r.choice(GOOD + GOOD + BAD)
    naive = r.random() < 0.2
    body = _naive(r) if naive else r.choice([_staged, _staged, _roles])(r)
    lines = ["    for b in par(0, n) @ BLOCKS:", "        " + _tile(r)]
    inner = r.random() < 0.08 and regs
    if not inner:
        lines += ["        " + ln for ln in regs]
    lines.append(f"        for i in seq(0, {r.choice(['2', 'n', '1'])}):")
    if inner:
        lines += ["            " + ln for ln in regs]
    lines += ["            " + ln for ln in body]
    if naive and r.random() < 0.5:   # a thread loop keeps the block at 256 threads
        lines += ["        for t in par(0, 256) @ THREADS:", "            y[b, t] += a"]
    src = HEAD.format(name=name) + "\n".join(lines) + "\n"
    return Program("hopper", name, src, pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=2), [])


__all__ = ["hopper_program"]
