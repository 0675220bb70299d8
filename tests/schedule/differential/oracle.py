"""The oracle of one primitive application: ``judge(before, after, sizes, rng)``.

An accepted application must give a proc that

(a) prints and parses back equal (callees and instrs taken from its calls);
(b) computes in the interpreter exactly what ``before`` computes, on
    integer-valued float inputs, at each binding of the sizes: the same arrays,
    and the same faults (an ``InterpError`` in one is one in the other); where the
    step added a precondition (``add_assert``), a binding outside it must be
    refused by it instead;
(c) where ``before`` proves with ``check()``, still proves free of races,
    divergence and out-of-bounds accesses (mapping and resource diagnostics are
    expected between steps of a schedule), and runs clean in the interpreter's
    race detector.  A result check() reports as breaking a mapping rule is an
    unfinished schedule (copies at block level before their loops are mapped):
    check() and compile() refuse it, so its races are counted apart, not failed.

Each violation is a ``(class, message)``; an empty list means the step is fine.
"""
from __future__ import annotations

import random

import numpy as np

import gpudsl
from gpudsl import Error, InterpError, Proc, RaceError
from gpudsl.ir.nodes import Call, Const, Var
from gpudsl.ir.printer import print_expr
from gpudsl.targets import EMULATED_TARGET

# Values beyond this may round in float32 sums: such comparisons are inconclusive
# (half the float16 programs' bound: 2 ** 9).
EXACT = 2.0 ** 22
_NUMPY = {"f16": np.float16, "f64": np.float64}


def _exact(arrays) -> float:
    """The magnitude below which the sums of small integers are exact in every array."""
    return min([2.0 ** (np.finfo(v.dtype).nmant - 1) for v in arrays
                if v.dtype.kind == "f"], default=EXACT)
LOST = {"race", "divergence", "bounds"}


def callees_of(pdef, out=None) -> dict:
    """Every proc or instr called (transitively) in ``pdef``, by name, as Procs."""
    out = {} if out is None else out

    def rec(blk):
        for s in blk:
            if isinstance(s, Call) and s.proc.name not in out:
                callees_of(s.proc, out)
                out[s.proc.name] = Proc(s.proc)
            for f in ("body", "orelse"):
                rec(getattr(s, f, ()))

    rec(pdef.body)
    return out


def _shape(e, sizes):
    if isinstance(e, Const):
        return int(e.val)
    if isinstance(e, Var):
        return sizes[e.name]
    return int(eval(print_expr(e), {"min": min, "max": max},  # noqa: S307
                    dict(sizes)))


def make_args(pdef, sizes: dict, rng: random.Random) -> dict:
    """Arguments: small integers as float32 arrays and scalars."""
    args = dict(sizes)
    nrng = np.random.default_rng(rng.randrange(2 ** 32))
    for prm in pdef.params:
        if prm.kind == "scalar":
            args[prm.name] = float(rng.randint(-2, 2))
        elif prm.is_array:
            shape = tuple(_shape(e, sizes) for e in prm.shape)
            dt = _NUMPY.get(prm.ty.name, np.float32)
            args[prm.name] = nrng.integers(-2, 3, size=shape).astype(dt)
    return args


def _copy(args):
    return {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}


def run(p, args, races: bool = False):
    """("ok", arrays) | ("fault", message) | ("race", message) | ("crash", message)."""
    a = _copy(args)
    try:
        gpudsl.interpret(p, detect_races=races, **a)
    except RaceError as exc:
        return "race", str(exc).splitlines()[0]
    except InterpError as exc:
        return "fault", str(exc).splitlines()[0]
    except Error as exc:
        return "crash", f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    except Exception as exc:  # noqa: BLE001 - a crash of the interpreter is a finding
        return "crash", f"{type(exc).__name__}: {exc}"
    return "ok", {k: v for k, v in a.items() if isinstance(v, np.ndarray)}


class Oracle:
    def __init__(self):
        self._proved: dict = {}
        self.inconclusive = 0
        self.unfinished = 0  # results check() reports as breaking a mapping rule

    def proved(self, p):
        """True / False, or a string when check() itself crashed."""
        key = p.ir
        if key not in self._proved:
            if len(self._proved) > 4000:
                self._proved.clear()
            try:
                rep = p.check(_target=EMULATED_TARGET)   # sm_90's limits, every feature
                v = True if rep.ok else sorted(rep.kinds())
            except Exception as exc:  # noqa: BLE001
                v = f"{type(exc).__name__}: {str(exc).splitlines()[0] if str(exc) else ''}"
            self._proved[key] = v
        return self._proved[key]

    def reparse(self, q):
        text = str(q)
        try:
            back = gpudsl.proc_from_source(text, callees_of(q.ir))
        except Exception as exc:  # noqa: BLE001
            return [("reparse-error", f"{type(exc).__name__}: "
                     f"{' / '.join(str(exc).splitlines()[:2])}")]
        if back != q:
            return [("reparse-unequal", "str(p) parses back to a different proc")]
        return []

    def judge(self, before, after, sizes: list, rng: random.Random, with_check=True):
        out = self.reparse(after)
        # only add_assert changes the preconditions: the meanings are compared where
        # the new ones hold, and every other binding must be refused by them
        narrowed = before.ir.preds != after.ir.preds
        for sz in sizes:
            args = make_args(before.ir, sz, rng)
            r0, r1 = run(before, args), run(after, args)
            where = ", ".join(f"{k}={v}" for k, v in sz.items())
            if r1[0] == "crash":
                out.append(("interp-crash", f"at {where}: {r1[1]}"))
                break
            if r0[0] == "crash":
                break
            if narrowed and r0[0] == "ok" and r1[0] == "fault" and "precondition" in r1[1]:
                continue  # add_assert: outside the new domain, refused at the launch
            if r0[0] != r1[0]:
                out.append(("fault-mismatch", f"at {where}: before {r0[0]}"
                            f"{': ' + r0[1] if r0[0] != 'ok' else ''}; after {r1[0]}"
                            f"{': ' + r1[1] if r1[0] != 'ok' else ''}"))
                break
            if r0[0] != "ok":
                continue
            big = max((float(np.nanmax(np.abs(v))) if v.size and not np.all(np.isnan(v))
                       else 0.0) for d in (r0[1], r1[1]) for v in d.values()) \
                if r0[1] else 0.0
            if big > _exact(list(r0[1].values())):
                self.inconclusive += 1
                continue
            diff = [k for k in r0[1] if not np.array_equal(r0[1][k], r1[1][k],
                                                           equal_nan=True)]
            if diff:
                k = diff[0]
                out.append(("meaning", f"at {where}: {k} differs: before "
                            f"{_short(r0[1][k])}, after {_short(r1[1][k])}"))
                break
        if with_check and self.proved(before) is True:
            v = self.proved(after)
            if isinstance(v, str):
                out.append(("check-crash", v))
            elif v is not True:
                # Mapping and resource diagnostics are expected in the middle of a
                # schedule (a BLOCKS loop before its THREADS loop is mapped): only
                # races, divergence and bounds are a lost proof.
                lost = sorted(set(v) & LOST)
                if "mapping" in v:
                    # An unfinished schedule (e.g. copies that stage_mem put at block
                    # level, before the copy loops are mapped to THREADS): check()
                    # tells the user, and compile() refuses it, so the races that come
                    # with the broken mapping rule are not silent.  Counted apart.
                    self.unfinished += 1
                    return out
                if lost:
                    out.append(("proof-lost", f"before: ok; after: {', '.join(v)}"))
                elif "unknown" in v:
                    self.inconclusive += 1
            r = run(after, make_args(before.ir, sizes[0], rng), races=True)
            if r[0] == "race":
                out.append(("race-detected", r[1]))
            elif r[0] == "fault" and ("deadlock" in r[1] or "sync_cluster()" in r[1]):
                # ranged / split barriers; a cluster's blocks not meeting at sync_cluster()
                out.append(("deadlock-detected", r[1]))
        return out


def _short(a) -> str:
    s = np.array2string(np.asarray(a), threshold=24, max_line_width=200)
    return " ".join(s.split())


__all__ = ["Oracle", "callees_of", "make_args", "run"]
