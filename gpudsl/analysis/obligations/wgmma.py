"""Warpgroup MMAs (docs/hopper.md): issued by whole, converged warpgroups on operands they
agree on, on a target that has them.

For each ``wgmma`` (``eff.wgmmas``), with ``L`` its innermost ``@ THREADS`` loop (a
warpgroup is 128 consecutive values of ``L``'s variable from a multiple of 128):

* the target has the instruction (``"target"``: wgmma is sm_90a's);
* mapping: it stands in ``L``'s body or in ``seq`` loops and ``if``s there, no ``par``
  loop between;
* whole warpgroups (``"divergence"``): the warpgroup of every thread reaching it lies in
  ``L``'s bounds and, with ``L`` nested in another thread loop, the block's x extent is a
  multiple of 128 (a warpgroup then lies in one row); no condition or loop bound inside
  ``L`` lets one lane of a warpgroup reach it and another not (the warp collectives'
  obligations, :mod:`.collectives`, asked for 128 lanes);
* one operation per warpgroup (``"divergence"``): every lane names the same ``a`` and ``b``
  windows (their starts are equal for two lanes of one warpgroup at one point of the
  enclosing loops), since the hardware reads one matrix descriptor per operand.

The asynchronous side (no access to what is in flight) is the async obligation's
(:mod:`.asyncs`, the wgmma family).  Anything not encodable, or a solver timeout, is
``"unknown"``.
"""
from __future__ import annotations

import z3

from ...ir.nodes import Interval
from ...ir.printer import print_stmt
from ...ir.smt import SAT, UNKNOWN, Unsupported
from ...ir.wgmma import WARPGROUP
from ...targets import WGMMA
from ..report import Diagnostic
from . import Ctx
from .collectives import _as_access, _lane, _thread_loop, _uniform, _whole_warps

_HINT = ("the 128 threads of a warpgroup issue a wgmma together: keep it out of "
         "lane-dependent ifs and loops, and let its thread loop cover whole warpgroups "
         "(bounds multiples of 128)")


def check_wgmma(ctx: Ctx):
    if not ctx.eff.wgmmas:
        return
    _target(ctx)
    done: set = set()
    for site in ctx.eff.wgmmas:
        text = print_stmt(site.node)[0].strip()
        k = _thread_loop(site)
        if k is None:
            continue  # a mapping issue already (effects)
        if any(l.kind == "par" for l in site.loops[k + 1:]):
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"`{text}` stands inside a par loop nested in its thread loop",
                [site.loc], {}, "issue it in the thread loop itself"))
            continue
        if site.loops[k].uid not in done and _whole_warps(ctx, site, k, text, WARPGROUP,
                                                          "wgmma", _HINT):
            done.add(site.loops[k].uid)
        _uniform(ctx, site, k, text, WARPGROUP, "wgmma", _HINT)
        _same_operands(ctx, site, k, text)


def _target(ctx: Ctx):
    if ctx.target.has(WGMMA):
        return
    site = ctx.eff.wgmmas[0]
    ctx.diagnostics.append(Diagnostic(
        "target", f"wgmma (warpgroup MMA) is an instruction of sm_90a, which "
        f"{ctx.target.name} does not have", [site.loc], {},
        "check and compile for target='sm_90a' (H100, H200), or multiply with mma.sync "
        "(gpudsl.stdlib.matmul_f16)"))


def _starts(w) -> list:
    """The index expressions that place a window (points and range starts)."""
    return [p.lo if isinstance(p, Interval) else p.pt for p in w.idx]


def _same_operands(ctx: Ctx, site, k: int, text: str):
    """Two lanes of one warpgroup, at one point of the loops around the thread loop,
    name the same ``a`` and ``b`` windows."""
    s = site.node
    starts = _starts(s.a) + _starts(s.b)
    t1, t2 = ctx.thread("lane1"), ctx.thread("lane2")
    ctx.enc.data_dependent = False
    try:
        a = _as_access(site, site.loops, site.guards)
        cons = ctx.place(t1, a) + ctx.place(t2, a)
        for j, l in enumerate(site.loops):   # one point of every loop but the lanes'
            if j != k:
                cons.append(t1.vars[l.iter] == t2.vars[l.iter])
        x = site.loops[k].iter
        cons.append(t1.vars[x] / WARPGROUP == t2.vars[x] / WARPGROUP)
        differ = z3.Or(*[t1.expr(e) != t2.expr(e) for e in starts])
    except Unsupported as e:
        ctx.unknown(f"that every lane of a warpgroup names the same operands of `{text}`",
                    [site.loc], str(e))
        return
    r = ctx.solve(cons + [differ])
    if r.status == SAT:
        m = r.model
        w = {"sizes": ctx.enc.size_values(m), "lanes": [_lane(ctx, t1, a, m),
                                                        _lane(ctx, t2, a, m)]}
        if ctx.enc.data_dependent:
            w["data_dependent"] = True
        ctx.diagnostics.append(Diagnostic(
            "divergence", f"two lanes of one warpgroup may name different A or B windows in "
            f"`{text}`: the hardware reads one matrix descriptor per operand for the whole "
            "warpgroup", [site.loc], w,
            "index the operands by the warpgroup (t // 128) and the loops around the thread "
            "loop only, not by the lane"))
    elif r.status == UNKNOWN:
        ctx.unknown(f"that every lane of a warpgroup names the same operands of `{text}`",
                    [site.loc], f"solver: {r.reason or 'unknown'}")


__all__ = ["check_wgmma"]
