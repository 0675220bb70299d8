"""Random kernels with bulk tensor copies (``tma_load``, docs/hopper.md) for the differential
test of the primitives: a block copies boxes of rows of ``x`` into SHARED tiles with
``tma_load`` issued by one thread on a split barrier (or a ring of two, with a second ring
that frees the slots), waits for the phase, and computes ``y`` from the tile, directly or
through a tile ``o`` that a bulk tensor store (``tma_store``, ``tma_commit``,
``tma_wait``) copies to ``y``; boxes run past the last row (clipped to zeros).  In
their plain form, clipped, the store's copies are guarded by the rows of ``y`` (or, now
and then, one row short: ``make_tma_store`` must refuse).  The tiles
are plain (rows of 64 f32) or swizzled (``@ SHARED(swizzle=W)``, rows of ``W`` bytes,
slots of 8 rows: the swizzle's period) with boxes of one such row.  Now and then one is broken on purpose (no wait for
the copy, no wait for the slot, the issuer outside the arrive range, no wait for the
store or no barrier after it): the primitives must
not turn a proved kernel into one that touches a copy in flight, and must keep every
meaning, faults included.  Only generated with ``GPUDSL_DIFF_FAMILY=tma`` (or
``Gen(r, family="tma")``): the default run's programs stay as they were."""
from __future__ import annotations

import random
import re

from .procgen import Program, pick_sizes


# (columns of a box, swizzle width): rows of 64 f32 plainly, or one swizzle's row of f32
LAYOUTS = [(64, 0), (64, 0), (32, 128), (16, 64), (8, 32)]


def _broken(r, lines, p=0.15):
    if r.random() >= p:
        return lines
    idx = [k for k, ln in enumerate(lines)
           if ln.strip().startswith(("wait(", "for t in par(0, 1)", "tma_wait(", "sync()"))]
    k = r.choice(idx)
    if lines[k].strip().startswith("for t in par(0, 1)"):
        return lines[:k] + [lines[k].replace("par(0, 1)", "par(1, 2)")] + lines[k + 1:]
    return lines[:k] + lines[k + 1:]


def _use(r, row: str, rows: int, cw: int, c0: int, store: str) -> list:
    """Threads over the box's columns computing from the tile: into ``y`` (guarded), or
    into the tile ``o`` that a bulk tensor store copies to ``y`` (``store``: its slot)."""
    op = "=" if store else r.choice(["=", "+="])
    rhs = r.choice(["s[{s}, t]", "s[{s}, t] * 2.0", "s[{s}, t] + a", f"s[{{s}}, {cw - 1} - t]"])
    if store:
        return [f"for t in par(0, {cw}) @ THREADS:",
                f"    for r in seq(0, {rows}):",
                f"        o[{store} + r, t] = " + rhs.format(s="{slot} + r")]
    return [f"for t in par(0, {cw}) @ THREADS:",
            f"    for r in seq(0, {rows}):",
            f"        if {row} + r < n:",
            f"            y[{row} + r, {c0} + t] {op} " + rhs.format(s="{slot} + r")]


def _store(row: str, rows: int, cw: int, c0: int, slot: str) -> list:
    """The bulk tensor store of ``o``'s slot to ``y`` (clipped), landed before anyone
    writes ``o`` again (the issuer waits, a barrier orders the others)."""
    return ["sync()", "for t in par(0, 1) @ THREADS:",
            f"    tma_store(y[{row}:{row} + {rows}, {c0}:{c0 + cw}], o[{slot}:{slot} + {rows}, 0:{cw}])",
            "    tma_commit()", "    tma_wait(0)", "sync()"]


_LOAD = re.compile(r"tma_load\(s\[(.+?):.+?, 0:(\d+)\], x\[(.+?):.+?, (\d+):\d+\]")
_STORE = re.compile(r"tma_store\(y\[(.+?):.+?, (\d+):(\d+)\], o\[(.+?):.+?, 0:\d+\]\)")


def _plain(lines, rows: int, grid: str, clipped: str = "", edge: str = "n"):
    """The copies as one-thread nests of element copies (what ``make_tma`` turns into the
    ``tma_load``, ``make_tma_store`` into the ``tma_store``): ``x`` and ``y`` then hold
    ``rows * n`` rows, so no box runs past ``x``; or, ``clipped``, the copies keep
    ``x``'s ``n`` rows, guarded, writing 0 past them (``"zeros"``: what a box does, which
    make_tma takes) or nothing (``"guard"``: which it refuses); the store's copies then
    guarded by ``row < edge`` (``"n"``: exactly inside ``y``, a box make_tma_store takes;
    ``"n - 1"``: one row short, which it refuses)."""
    out = []
    for ln in lines:
        m = _LOAD.search(ln)
        st = _STORE.search(ln)
        if st:   # the store's copies (make_tma_store turns them into it)
            pad = ln[:len(ln) - len(ln.lstrip())]
            row, c0, c1, slot = st.groups()
            copy = f"y[{row} + r, {c0} + c] = o[{slot} + r, c]"
            inner = [copy] if not clipped else [f"if {row} + r < {edge}:", f"    {copy}"]
            out += [pad + f"for r in seq(0, {rows}):",
                    pad + f"    for c in seq(0, {int(c1) - int(c0)}):"]
            out += [pad + "        " + x for x in inner]
        elif ln.strip() in ("tma_commit()", "tma_wait(0)") and out and "= o[" in out[-1]:
            continue
        elif m:
            pad = ln[:len(ln) - len(ln.lstrip())]
            slot, cw, row, c0 = m.groups()
            copy = f"s[{slot} + r, c] = x[{row} + r, {c0} + c]"
            inner = [copy] if not clipped else [f"if {row} + r < n:", f"    {copy}"] + (
                ["else:", f"    s[{slot} + r, c] = 0.0"] if clipped == "zeros" else [])
            out += [pad + f"for r in seq(0, {rows}):", pad + f"    for c in seq(0, {cw}):"]
            out += [pad + "        " + x for x in inner]
        elif clipped:
            out.append(ln)
        else:
            out.append(ln.replace("< n:", f"< {rows} * n:")
                       .replace(f"(n + {rows - 1}) // {rows}", "n"))
    return out


def tma_program(r: random.Random, name: str) -> Program:
    rows = r.choice([1, 2])
    cw, swz = r.choice(LAYOUTS)
    c0 = r.choice([0, 64 - cw])
    # a swizzled tile's copies start at a multiple of its period: slots of 8 rows
    step = 8 if swz else rows
    mem = f"SHARED(swizzle={swz})" if swz else "SHARED"
    store = r.random() < 0.35
    head = (f"def {name}(n: size, a: f32, x: f32[n, 64], y: f32[n, 64]):\n"
            "    assert n >= 1\n")
    out_tile = [f"o: f32[{step}, {cw}] @ {mem}"] if store else []
    if r.random() < 0.5:   # one box per block
        body = [f"s: f32[{step}, {cw}] @ {mem}", "full: barrier @ SHARED"] + out_tile + [
                "for t in par(0, 1) @ THREADS:",
                f"    tma_load(s[0:{rows}, 0:{cw}], x[{rows} * b:{rows} * b + {rows}, "
                f"{c0}:{c0 + cw}], bar=full)",
                "arrive(full, 0, 1)", f"wait(full, 0, {cw})"]
        body += [ln.replace("{slot}", "0")
                 for ln in _use(r, f"{rows} * b", rows, cw, c0, "0" if store else "")]
        if store:
            body += _store(f"{rows} * b", rows, cw, c0, "0")
        grid = f"(n + {rows - 1}) // {rows}"
    else:                  # a ring of two slots over the rows
        body = [f"s: f32[{2 * step}, {cw}] @ {mem}", "full: barrier[2] @ SHARED",
                "empty: barrier[2] @ SHARED"] + out_tile + [
                "for j in seq(0, 2):", f"    arrive(empty[j], 0, {cw})",
                f"for ks in seq(0, (n + {rows - 1}) // {rows}):",
                "    wait(empty[ks % 2], 0, 1)",
                "    for t in par(0, 1) @ THREADS:",
                f"        tma_load(s[{step} * (ks % 2):{step} * (ks % 2) + {rows}, 0:{cw}], "
                f"x[{rows} * ks:{rows} * ks + {rows}, {c0}:{c0 + cw}], bar=full[ks % 2])",
                "    arrive(full[ks % 2], 0, 1)", f"    wait(full[ks % 2], 0, {cw})"]
        body += ["    " + ln.replace("{slot}", f"{step} * (ks % 2)")
                 for ln in _use(r, f"{rows} * ks", rows, cw, c0, "0" if store else "")]
        if store:
            body += ["    " + ln for ln in _store(f"{rows} * ks", rows, cw, c0, "0")]
        body += [f"    arrive(empty[ks % 2], 0, {cw})"]
        grid = "1"
    if r.random() < 0.4:   # the plain copies make_tma turns into these loads
        clipped = r.choice(["", "", "zeros", "guard"]) if rows > 1 else ""
        edge = r.choice(["n", "n", "n - 1"]) if clipped and store else "n"
        body = _plain(body, rows, grid, clipped, edge)
        if not clipped:
            grid = "n" if grid != "1" else grid
            head = head.replace("x: f32[n, 64], y: f32[n, 64]",
                                f"x: f32[{rows} * n, 64], y: f32[{rows} * n, 64]")
    body = _broken(r, body)
    lines = [f"    for b in par(0, {grid}) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("tma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=5), [])


__all__ = ["tma_program", "LAYOUTS"]
