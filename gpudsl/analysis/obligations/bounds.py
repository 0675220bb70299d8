"""Every access in bounds under the asserts; windows inside their arrays; callee asserts.

One query per access: the access happens (loop ranges, guards) and some index is
outside ``[0, extent)``.  A model is a witness: sizes, loop variables, the index.
"""
from __future__ import annotations

import z3

from ...ir.nodes import Point
from ...ir.printer import print_expr
from ..check_report import Diagnostic
from ...ir.smt import SAT, UNKNOWN, Unsupported
from ..overflow import explain, wrapped_at
from ..quick import in_bounds
from . import Ctx


def _report(ctx: Ctx, t, a, res, terms, what: str, locs, hint: str, extra=None,
            exprs=()):
    if res.status == SAT:
        m = res.model
        w = {"sizes": ctx.enc.size_values(m), "thread": ctx.thread_witness(t, a, m)}
        if extra is not None:
            w.update(extra(m))
        if ctx.enc.data_dependent:
            w["data_dependent"] = True
        found = wrapped_at(t, m, tuple(a.guards) + tuple(exprs))
        if found:  # the witness exists because the guard's or index's arithmetic wraps
            sentence, hint = explain(found, a.guards)
            what = f"{what} ({sentence})"
        ctx.diagnostics.append(Diagnostic("bounds", what, locs, w, hint))
    elif res.status == UNKNOWN:
        ctx.unknown("that " + what.replace(" may be ", " is never "), locs,
                    f"solver: {res.reason or 'unknown'}")


def check_bounds(ctx: Ctx):
    for a in ctx.eff.accesses:
        if not a.bounds or in_bounds(a, ctx.bindings):
            continue  # nothing to prove, or proved by intervals
        t = ctx.thread("b")
        ctx.enc.data_dependent = False
        try:
            cons = ctx.place(t, a)
            pairs = [(ctx.term(t, i), t.expr(e)) for i, e in a.bounds]
        except Unsupported as e:
            ctx.unknown(f"that {a.describe()} is in bounds", [a.loc], str(e))
            continue
        out = z3.Or(*[z3.Or(i < 0, i >= e) for i, e in pairs])
        r = ctx.solve(cons + [out])
        if r.status == SAT:
            info = ctx.eff.arrays[a.array]
            shape = ", ".join(print_expr(s) for s in info.shape)
            what = f"{a.describe()} may be out of bounds of '{info.name}' (shape [{shape}])"
            if len(a.bounds) > len(info.shape):
                what += " or of the window it was passed as"
            idx = [i for i, _ in pairs]

            def extra(m, idx=idx, pairs=pairs):
                return {"array": info.name, "element": ctx.eval_ints(m, idx),
                        "extent": ctx.eval_ints(m, [e for _, e in pairs])}

            _report(ctx, t, a, r, pairs, what, [a.loc],
                    "guard the access with an if, or assert the sizes that make it fit",
                    extra, [i for i, _ in a.bounds])
        elif r.status == UNKNOWN:
            ctx.unknown(f"that {a.describe()} is in bounds", [a.loc],
                        f"solver: {r.reason or 'unknown'}")
    for a, w in ctx.eff.window_checks:
        info = None
        for k, v in ctx.eff.arrays.items():
            if v.name == w.name:
                info = v
        if info is None:
            continue
        t = ctx.thread("w")
        try:
            cons = ctx.place(t, a)
            bad = []
            for part, ext in zip(w.idx, info.shape):
                e = t.expr(ext)
                if isinstance(part, Point):
                    p = t.expr(part.pt)
                    bad.append(z3.Or(p < 0, p >= e))
                else:
                    lo, hi = t.expr(part.lo), t.expr(part.hi)
                    bad.append(z3.Or(lo < 0, hi < lo, hi > e))
        except Unsupported as e:
            ctx.unknown("that a window lies inside its array", [a.loc], str(e))
            continue
        r = ctx.solve(cons + [z3.Or(*bad)])
        _report(ctx, t, a, r, None, f"the window {print_expr(w)} may reach outside "
                f"'{info.name}'", [a.loc], "pass a window inside the array")
    for a, pred in ctx.eff.call_preds:
        t = ctx.thread("p")
        try:
            cons = ctx.place(t, a)
            c = t.cond(pred)
        except Unsupported as e:
            ctx.unknown("a precondition of a called proc", [a.loc], str(e))
            continue
        r = ctx.solve(cons + [z3.Not(c)])
        _report(ctx, t, a, r, None, f"this call may break the callee's assert "
                f"{print_expr(pred)}", [a.loc], "make the arguments satisfy the assert")
