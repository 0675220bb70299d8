"""Cheap syntactic proofs, tried before the solver (issue 13: check() scales).

``interval(e, ranges)`` bounds an IR integer expression by interval arithmetic over
the ranges of the loop variables that enclose it (constants only); guards are
ignored, so the interval covers every instance that may run: a proof that an index
lies in ``[0, extent)`` from intervals is a proof, and anything the arithmetic does
not cover answers None (ask the solver).
"""
from __future__ import annotations

from ..ir.nodes import BinOp, Builtin, Const, Var


def loop_ranges(loops, bindings=None) -> dict:
    """name -> (lo, hi) inclusive, for loops with constant (or bound) bounds, the
    innermost binding of a name winning; a loop that runs zero times is left out."""
    out = {}
    for l in loops:
        lo = interval(l.lo, out, bindings)
        hi = interval(l.hi, out, bindings)
        if lo is None or hi is None or lo[0] > hi[1] - 1:
            out.pop(l.iter, None)
            out[l.iter] = None
            continue
        out[l.iter] = (lo[0], hi[1] - 1)
    return out


def interval(e, ranges: dict, bindings=None):
    if isinstance(e, Const):
        if isinstance(e.val, bool) or not isinstance(e.val, int):
            return None
        return (e.val, e.val)
    if isinstance(e, Var):
        if e.name in ranges:
            return ranges[e.name]
        if bindings and e.name in bindings:
            v = int(bindings[e.name])
            return (v, v)
        return None
    if isinstance(e, BinOp):
        a = interval(e.lhs, ranges, bindings)
        if a is None:
            return None
        b = interval(e.rhs, ranges, bindings)
        if b is None:
            return None
        op = e.op
        if op == "+":
            return (a[0] + b[0], a[1] + b[1])
        if op == "-":
            return (a[0] - b[1], a[1] - b[0])
        if op == "*":
            ps = [x * y for x in a for y in b]
            return (min(ps), max(ps))
        if op == "//" and b[0] == b[1] and b[0] > 0:
            return (a[0] // b[0], a[1] // b[0])
        if op == "%" and b[0] == b[1] and b[0] > 0:
            if a[0] >= 0 and a[1] < b[0]:
                return a
            return (0, b[0] - 1)
        return None
    if isinstance(e, Builtin) and e.name in ("min", "max") and len(e.args) == 2:
        a = interval(e.args[0], ranges, bindings)
        b = interval(e.args[1], ranges, bindings)
        if a is None or b is None:
            return None
        f = min if e.name == "min" else max
        return (f(a[0], b[0]), f(a[1], b[1]))
    return None


def in_bounds(a, bindings=None) -> bool:
    """Every index of access ``a`` provably inside its extent, by intervals."""
    if not a.bounds:
        return True
    ranges = loop_ranges(a.loops, bindings)
    for i, ext in a.bounds:
        r = interval(i, ranges, bindings)
        x = interval(ext, ranges, bindings)
        if r is None or x is None or r[0] < 0 or r[1] >= x[0]:
            return False
    return True
