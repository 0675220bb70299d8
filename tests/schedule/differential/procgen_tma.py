"""Random kernels with bulk tensor copies (``tma_load``, docs/hopper.md) for the differential
test of the primitives: a block copies boxes of rows of ``x`` into SHARED tiles with
``tma_load`` issued by one thread on a split barrier (or a ring of two, with a second ring
that frees the slots), waits for the phase, and computes ``y`` from the tile; boxes run
past the last row (clipped to zeros).  Now and then one is broken on purpose (no wait for
the copy, no wait for the slot, the issuer outside the arrive range): the primitives must
not turn a proved kernel into one that touches a copy in flight, and must keep every
meaning, faults included.  Only generated with ``GPUDSL_DIFF_FAMILY=tma`` (or
``Gen(r, family="tma")``): the default run's programs stay as they were."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes


def _broken(r, lines, p=0.15):
    if r.random() >= p:
        return lines
    idx = [k for k, ln in enumerate(lines) if ln.strip().startswith(("wait(", "for t in par(0, 1)"))]
    k = r.choice(idx)
    if lines[k].strip().startswith("for t in par(0, 1)"):
        return lines[:k] + [lines[k].replace("par(0, 1)", "par(1, 2)")] + lines[k + 1:]
    return lines[:k] + lines[k + 1:]


def _use(r, row: str, rows: int) -> list:
    op = r.choice(["=", "+="])
    rhs = r.choice(["s[{s}, t]", "s[{s}, t] * 2.0", "s[{s}, t] + a", "s[{s}, 63 - t]"])
    return ["for t in par(0, 64) @ THREADS:",
            f"    for r in seq(0, {rows}):",
            f"        if {row} + r < n:",
            f"            y[{row} + r, t] {op} " + rhs.format(s="{slot} + r")]


def _plain(r, lines, rows: int, slot: str, row: str):
    """Now and then, the copy as a one-thread nest of element copies (what ``make_tma``
    turns into the ``tma_load``): the boxes then stay inside ``x`` (``rows * n`` rows)."""
    out = []
    for ln in lines:
        if "tma_load(" in ln:
            pad = ln[:len(ln) - len(ln.lstrip())]
            out += [pad + f"for r in seq(0, {rows}):",
                    pad + "    for c in seq(0, 64):",
                    pad + f"        s[{slot} + r, c] = x[{row} + r, c]"]
        else:
            out.append(ln.replace("< n:", f"< {rows} * n:"))
    return out


def tma_program(r: random.Random, name: str) -> Program:
    rows = r.choice([1, 2])
    plain = r.random() < 0.4
    lead = f"{rows} * n" if plain else "n"
    head = (f"def {name}(n: size, a: f32, x: f32[{lead}, 64], y: f32[{lead}, 64]):\n"
            "    assert n >= 1\n")
    if r.random() < 0.5:   # one box per block
        body = [f"s: f32[{rows}, 64] @ SHARED", "full: barrier @ SHARED",
                "for t in par(0, 1) @ THREADS:",
                f"    tma_load(s[0:{rows}, 0:64], x[{rows} * b:{rows} * b + {rows}, 0:64], "
                "bar=full)",
                "arrive(full, 0, 1)", "wait(full, 0, 64)"]
        body += [ln.replace("{slot}", "0") for ln in _use(r, f"{rows} * b", rows)]
        grid = f"(n + {rows - 1}) // {rows}"
        if plain:
            body, grid = _plain(r, body, rows, "0", f"{rows} * b"), "n"
    else:                  # a ring of two slots over the rows
        body = [f"s: f32[{2 * rows}, 64] @ SHARED", "full: barrier[2] @ SHARED",
                "empty: barrier[2] @ SHARED",
                "for j in seq(0, 2):", "    arrive(empty[j], 0, 64)",
                f"for ks in seq(0, (n + {rows - 1}) // {rows}):",
                "    wait(empty[ks % 2], 0, 1)",
                "    for t in par(0, 1) @ THREADS:",
                f"        tma_load(s[{rows} * (ks % 2):{rows} * (ks % 2) + {rows}, 0:64], "
                f"x[{rows} * ks:{rows} * ks + {rows}, 0:64], bar=full[ks % 2])",
                "    arrive(full[ks % 2], 0, 1)", "    wait(full[ks % 2], 0, 64)"]
        body += ["    " + ln.replace("{slot}", f"{rows} * (ks % 2)")
                 for ln in _use(r, f"{rows} * ks", rows)]
        body += ["    arrive(empty[ks % 2], 0, 64)"]
        grid = "1"
        if plain:
            body = [ln.replace(f"(n + {rows - 1}) // {rows}):", "n):") for ln in body]
            body = _plain(r, body, rows, f"{rows} * (ks % 2)", f"{rows} * ks")
    body = _broken(r, body)
    lines = [f"    for b in par(0, {grid}) @ BLOCKS:"] + ["        " + ln for ln in body]
    return Program("tma", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=5), [])


__all__ = ["tma_program"]
