"""Shrinking a failure to a small reproduction.

Statements of the starting proc are deleted one at a time (the biggest first),
and ``if``/loop wrappers replaced by their bodies, as long as the proc still
parses and the same steps still give the same failure class for the same
primitive; cursor arguments (addresses) are moved to follow each deletion.
Then the size bindings are cut down to the first one that still fails.
"""
from __future__ import annotations

import random
import time
from dataclasses import replace as dc_replace

import gpudsl
from gpudsl import Proc, SchedulingError
from gpudsl.ir.nodes import For, If
from gpudsl.schedule.cursors import block_of, iter_stmts, splice

from .apply import Arg, Step


class _Gone(Exception):
    pass


def _move(addr, at, n_new):
    """``addr`` after the statement at ``at`` became ``n_new`` statements (its
    body, when it is a wrapper being unwrapped, or none)."""
    b, i = at[:-1], at[-1]
    L = len(b)
    if len(addr) <= L or addr[:L] != b:
        return addr
    j = addr[L]
    if j < i:
        return addr
    if j > i:
        return b + (j - 1 + n_new,) + addr[L + 1:]
    rest = addr[L + 1:]
    if n_new and len(rest) >= 2 and rest[0] == "body":  # inside the unwrapped body
        return b + (i + rest[1],) + rest[2:]
    if len(addr) == L + 1 and n_new == 0:
        raise _Gone
    raise _Gone


def _move_arg(a: Arg, at, n_new) -> Arg:
    if a.kind != "cursor":
        return a
    kind, addr, hi = a.value
    if kind == "gap":
        b, i = at[:-1], at[-1]
        if addr[:-1] == b and addr[-1] > i:
            return Arg("cursor", (kind, b + (addr[-1] - 1 + n_new,), hi))
        if addr[:-1] == b:
            return a
        return Arg("cursor", (kind, _move(addr, at, n_new), hi))
    if kind == "block":
        first = _move(addr, at, n_new)
        last = _move(addr[:-1] + (hi - 1,), at, n_new)
        if first[:-1] != last[:-1]:
            raise _Gone
        return Arg("cursor", (kind, first, last[-1] + 1))
    return Arg("cursor", (kind, _move(addr, at, n_new), hi))


def _move_steps(steps, at, n_new):
    return [Step(s.prim, [_move_arg(a, at, n_new) for a in s.args],
                 {k: _move_arg(a, at, n_new) for k, a in s.kwargs.items()}) for s in steps]


def reproduces(runner, pdef, steps, sizes, prim, cls):
    """The failure's message when the steps still fail so, else None."""
    try:
        p = gpudsl.proc_from_source("@proc\n" + str(Proc(pdef)).split("\n", 1)[1],
                                    runner.ns)
    except Exception:  # noqa: BLE001
        return None
    try:
        for s in steps[:-1]:
            p = s.call(p)
    except Exception:  # noqa: BLE001
        return None
    try:
        q = steps[-1].call(p)
    except SchedulingError:
        return None
    except Exception as exc:  # noqa: BLE001
        if cls != "exception":
            return None
        return f"{type(exc).__name__}: {' / '.join(str(exc).splitlines()[:2])}"
    if cls == "exception":
        return None
    try:
        bad = runner.oracle.judge(p, q, sizes, random.Random(0),
                                  with_check=runner.with_check)
    except Exception:  # noqa: BLE001
        return None
    return next((m for c, m in bad if c == cls), None)


def shrink(runner, failure, seconds: float = 20.0):
    """A smaller Failure with the same primitive and class (or the same one)."""
    t0 = time.monotonic()
    prog = failure.program
    try:
        p0 = gpudsl.proc_from_source("@proc\n" + prog.source, runner.ns)
    except Exception:  # noqa: BLE001
        return failure
    pdef, steps, sizes = p0.ir, list(failure.steps), list(prog.sizes)
    prim, cls = failure.prim, failure.cls
    msg = reproduces(runner, pdef, steps, sizes, prim, cls)
    if msg is None:
        return failure
    changed = True
    while changed and time.monotonic() - t0 < seconds:
        changed = False
        for addr, s in list(iter_stmts(pdef)):
            if time.monotonic() - t0 > seconds:
                break
            options = [()]
            if isinstance(s, (For, If)) and s.body:
                options.append(s.body)
            for new in options:
                try:
                    if addr[-1] >= len(block_of(pdef, addr[:-1])):
                        break
                    cand = splice(pdef, addr, new)
                    st2 = _move_steps(steps, addr, len(new))
                except (_Gone, IndexError, AttributeError):
                    continue
                m = reproduces(runner, cand, st2, sizes, prim, cls)
                if m is not None:
                    pdef, steps, msg, changed = cand, st2, m, True
                    break
            if changed:
                break
    for sz in sizes:
        m = reproduces(runner, pdef, steps, [sz], prim, cls)
        if m is not None:
            sizes, msg = [sz], m
            break
    src = str(Proc(pdef)).split("\n", 1)[1]
    prog2 = dc_replace(prog, source=src, sizes=sizes)
    return dc_replace(failure, program=prog2, steps=steps, message=msg)


__all__ = ["shrink"]
