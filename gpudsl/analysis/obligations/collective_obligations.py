"""Warp collectives (docs/language.md (synchronization)): reached by all 32 lanes of each warp, lanes in range.

For each collective (``eff.collectives``), with ``L`` its innermost ``@ THREADS``
loop (x: a warp is 32 consecutive ``x`` from a multiple of 32):

* mapping: it stands inside a ``@ THREADS`` loop of a kernel, with no unmapped
  ``par`` loop between;
* whole warps (``"divergence"``): for all sizes under the asserts, the warp (32
  values of ``L``'s variable from a multiple of 32) of every thread reaching the
  collective lies in ``L``'s bounds and, when ``L`` is nested in another thread
  loop, the block's x extent is a multiple of 32 (a warp then lies in one row);
* no lane-dependent control (``"divergence"``): there are no two lanes of one warp
  at the same point of the enclosing loops such that one reaches the collective and
  the other does not (an ``if`` or a loop bound inside ``L`` that differs between
  them).  Collectives whose result is the same in every lane (``ballot``,
  ``any_lanes``, ``warp_sum``...) are one unknown shared by the two lanes there;
* lane arguments (``"bounds"``): the lane of ``shfl``, the mask of ``shfl_xor`` and
  the distance of ``shfl_down`` / ``shfl_up`` lie in ``[0, 32)``.

Anything not encodable, or a solver timeout, is ``"unknown"``.
"""
from __future__ import annotations

import z3

from ...ir.collective_meaning import COLLECTIVES, WARP
from ...ir.nodes import BinOp, Collective, Const, Var
from ...ir.printer import print_expr
from ...ir.types import INDEX, THREADS, bool_
from ...ir.visitor import ExprMap
from ...ir.smt import SAT, UNKNOWN, Unsupported
from ..proc_effects import KernelAccess
from ..check_report import Diagnostic
from . import Ctx

_HINT = ("all 32 lanes of a warp evaluate a collective together: keep it out of "
         "lane-dependent ifs and loops, and let its thread loop cover whole warps "
         "(bounds multiples of 32, e.g. `assert n % 32 == 0`)")


def check_collectives(ctx: Ctx):
    done: set = set()
    for site in ctx.eff.collectives:
        text = print_expr(site.node)
        k = _thread_loop(site)
        if k is None:
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"the warp collective `{text}` stands outside any @ THREADS loop",
                [site.loc], {}, "put it inside a `par(...) @ THREADS` loop"))
            continue
        inner = site.loops[k + 1:]
        if any(l.kind == "par" for l in inner):
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"the warp collective `{text}` stands inside a par loop nested in "
                "its thread loop", [site.loc], {}, "evaluate it in the thread loop itself"))
            continue
        if site.loops[k].uid not in done and _whole_warps(ctx, site, k, text):
            done.add(site.loops[k].uid)  # one report per thread loop
        _uniform(ctx, site, k, text)
        _lanes_in_range(ctx, site, text)


def _thread_loop(site):
    if site.kernel is None or site.level != "thread":
        return None
    ks = [i for i, l in enumerate(site.loops) if l.mapping == THREADS]
    return ks[-1] if ks else None


def _as_access(site, loops, guards) -> KernelAccess:
    return KernelAccess("", "", None, "read", (), [], tuple(guards), tuple(loops), site.kernel,
                  site.level, None, site.loc, site.stmt)


def _whole_warps(ctx: Ctx, site, k: int, text: str, width: int = WARP,
                 what: str = "warp collective", hint: str = _HINT) -> bool:
    """Prove that the warp (``width`` lanes: a warpgroup for wgmma) of every thread
    reaching ``site`` lies in the thread loop (and, nested, in one row of the block);
    True when a problem was reported."""
    group = "warp" if width == WARP else "warpgroup"
    L = site.loops[k]
    t = ctx.thread("w")
    ctx.enc.data_dependent = False
    try:
        reached = ctx.place(t, _as_access(site, site.loops, site.guards))
    except Unsupported:
        reached = []  # dropping the facts of reaching it is sound
    try:
        lo, hi = t.expr(L.lo), t.expr(L.hi)
        x = t.vars.get(L.iter) if reached else None
        if x is not None:  # the warp of the thread that reaches it sticks out of the loop
            w0 = x - x % width
            bad = [w0 < lo, w0 + width > hi]
        else:
            bad = [lo % width != 0, hi % width != 0]
        nested = any(l.mapping == THREADS for l in site.loops[:k])
        if nested:
            xs = [t.expr(h) for h in ctx.eff.kernels[site.kernel].thread_extents.get(0, [])]
            X = xs[0]
            for x in xs[1:]:
                X = z3.If(x > X, x, X)
            bad.append(X % width != 0)
    except Unsupported as e:
        ctx.unknown(f"that the thread loop of `{text}` covers whole {group}s", [site.loc],
                    str(e))
        return True
    r = ctx.solve(reached + [hi > lo, z3.Or(*bad)])
    if r.status == SAT:
        m = r.model
        lo_v, hi_v = ctx.eval_ints(m, [lo, hi])
        msg = (f"the thread loop '{L.iter}' holding the {what} `{text}` may cover "
               f"part of a {group}: it runs {L.iter} in [{lo_v}, {hi_v})")
        if x is not None:
            msg += f" and {L.iter}={ctx.eval_ints(m, [x])[0]} reaches it"
        if nested:
            msg += f" and the block's x extent is {ctx.eval_ints(m, [X])[0]}"
        msg += f"; a {what} needs all {width} lanes of each {group}"
        w = {"sizes": ctx.enc.size_values(m), "loop": {L.iter: [lo_v, hi_v]}}
        if ctx.enc.data_dependent:
            w["data_dependent"] = True
        ctx.diagnostics.append(Diagnostic("divergence", msg, [site.loc, L.loc], w, hint))
        return True
    if r.status == UNKNOWN:
        ctx.unknown(f"that the thread loop of `{text}` covers whole {group}s", [site.loc],
                    f"solver: {r.reason or 'unknown'}")
        return True
    return False


def _shared_uniform(guards):
    """The guards with each integer or bool collective whose result is the same in
    every lane replaced by one variable per occurrence (shared by both lanes)."""
    names: list = []

    def fn(e):
        if isinstance(e, Collective) and COLLECTIVES[e.name].uniform and \
                (e.ty.is_integer or e.ty == bool_):
            v = Var(f"__warp{len(names)}", INDEX)
            names.append(v.name)
            return BinOp("!=", v, Const(0), bool_) if e.ty == bool_ else v
        return e

    return tuple(ExprMap(fn).visit(g) for g in guards), names


def _uniform(ctx: Ctx, site, k: int, text: str, width: int = WARP,
             what: str = "warp collective", hint: str = _HINT):
    group = "warp" if width == WARP else "warpgroup"
    n_inner_ifs = _inner_ifs(site)
    if n_inner_ifs == 0 and len(site.loops) == k + 1:
        return  # nothing between the thread loop and the collective
    guards, shared = _shared_uniform(site.guards)
    outer = guards[:len(guards) - n_inner_ifs]
    inner_g = guards[len(guards) - n_inner_ifs:]
    t1, t2 = ctx.thread("lane1"), ctx.thread("lane2")
    for n in shared:
        t1.vars[n] = t2.vars[n] = z3.Int(f"{n}@warp")
    ctx.enc.data_dependent = False
    try:
        cons = ctx.place(t1, _as_access(site, site.loops, guards))
        cons += ctx.place(t2, _as_access(site, site.loops[:k + 1], outer))
        for l in site.loops[:k]:
            cons.append(t1.vars[l.iter] == t2.vars[l.iter])
        x = site.loops[k].iter
        cons.append(t1.vars[x] / width == t2.vars[x] / width)
        reach = []
        for l in site.loops[k + 1:]:
            v2 = t2.declare(l.iter)
            cons.append(v2 == t1.vars[l.iter])
            reach += [v2 >= t2.expr(l.lo), v2 < t2.expr(l.hi)]
        reach += [t2.cond(g) for g in inner_g]
    except Unsupported as e:
        ctx.unknown(f"that every lane of a {group} reaches `{text}`", [site.loc], str(e))
        return
    r = ctx.solve(cons + [z3.Not(z3.And(*reach))])
    if r.status == SAT:
        m = r.model
        a = _as_access(site, site.loops, guards)
        w = {"sizes": ctx.enc.size_values(m), "lanes": [
            _lane(ctx, t1, a, m), _lane(ctx, t2, a, m)]}
        if ctx.enc.data_dependent or shared:  # values of (uniform) collectives assumed
            w["data_dependent"] = True
        ctx.diagnostics.append(Diagnostic(
            "divergence", f"the {what} `{text}` may be reached by some lanes of a "
            f"{group} and not by others: a condition or loop bound around it inside its "
            "thread loop differs between lanes" + (" (it depends on data)"
                                                   if w.get("data_dependent") else ""),
            [site.loc], w, hint))
    elif r.status == UNKNOWN:
        ctx.unknown(f"that every lane of a {group} reaches `{text}`", [site.loc],
                    f"solver: {r.reason or 'unknown'}")


def _lane(ctx: Ctx, t, a, m) -> dict:
    w = ctx.thread_witness(t, a, m)
    w.pop("access", None)
    return w


def _inner_ifs(site) -> int:
    """How many of the enclosing ``if``s lie inside the innermost thread loop."""
    last = max(i for i, s in enumerate(site.inside)
               if getattr(s, "mapping", None) == THREADS)
    return sum(1 for s in site.inside[last + 1:] if hasattr(s, "cond"))


def _lanes_in_range(ctx: Ctx, site, text: str):
    cd = COLLECTIVES[site.node.name]
    if cd.lane is None:
        return
    t = ctx.thread("lane")
    ctx.enc.data_dependent = False
    a = _as_access(site, site.loops, site.guards)
    try:
        cons = ctx.place(t, a)
        la = t.expr(site.node.args[1])
    except Unsupported as e:
        ctx.unknown(f"that the {cd.lane} of `{text}` lies in [0, {WARP})", [site.loc], str(e))
        return
    r = ctx.solve(cons + [z3.Or(la < 0, la >= WARP)])
    if r.status == SAT:
        m = r.model
        w = {"sizes": ctx.enc.size_values(m), "thread": _lane(ctx, t, a, m),
             "lane_argument": ctx.eval_ints(m, [la])[0]}
        if ctx.enc.data_dependent:
            w["data_dependent"] = True
        ctx.diagnostics.append(Diagnostic(
            "bounds", f"the {cd.lane} of `{text}` may lie outside [0, {WARP})", [site.loc], w,
            f"keep it in [0, {WARP}), e.g. with % {WARP}"))
    elif r.status == UNKNOWN:
        ctx.unknown(f"that the {cd.lane} of `{text}` lies in [0, {WARP})", [site.loc],
                    f"solver: {r.reason or 'unknown'}")
