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

* a swizzled operand (``[rows, 16]`` of a tile ``@ SHARED(swizzle=W)``, ``"mapping"``):
  its first row starts at a multiple of the pattern's period ``8 * W`` bytes in the tile
  (the descriptor's start address; whole groups of 8 rows) and its column offset is a
  multiple of 16 elements (the start advances by 32 bytes per k16 step inside a row);
  an MN-major B (``b_major="mn"``) of a swizzled tile: its first row starts at a multiple
  of the period, and its blocks of ``W / 2`` columns (the tile's next-to-last dimension
  of rows) lie a multiple of the period apart (the descriptor's leading byte offset).

The asynchronous side (no access to what is in flight) is the async obligation's
(:mod:`.asyncs`, the wgmma family).  Anything not encodable, or a solver timeout, is
``"unknown"``.
"""
from __future__ import annotations

import z3

from ...ir.nodes import BinOp, Const, Interval
from ...ir.printer import print_stmt
from ...ir.smt import SAT, UNKNOWN, Unsupported
from ...ir.types import INDEX
from ...ir.wgmma_meaning import K, WARPGROUP, is_swizzled_form, wgmma_of
from ...targets import WGMMA
from ..check_report import Diagnostic
from . import Ctx
from .collective_obligations import _as_access, _lane, _thread_loop, _uniform, _whole_warps

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
        _swizzled_operands(ctx, site, text)


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


def _swizzled_operands(ctx: Ctx, site, text: str):
    """Each ``[rows, 16]`` operand of a swizzled tile starts its rows at a multiple of the
    pattern's period and its columns at a multiple of 16 elements, for every size."""
    node = site.node
    mn = getattr(node, "b_major", "k") == "mn"
    for name in dict.fromkeys(w.name for w in (node.a, node.b)
                              if is_swizzled_form(w) or (mn and w is node.b)):
        acc = next((a for a in ctx.eff.accesses if a.name == name and a.kind == "read"
                    and wgmma_of(a.stmt) in (site.node, site.stmt)), None)
        info = ctx.eff.arrays[acc.array] if acc is not None else None
        if info is None or not info.swizzle:
            continue   # a mapping issue already (effects), or a plain MN-major tile
        op = wgmma_of(acc.stmt)
        for w in (op.a, op.b):
            if w.name == name:
                _swizzled_window(ctx, acc, info, w, text, mn and w is op.b)


def _swizzled_window(ctx: Ctx, acc, info, w, text: str, mn: bool = False):
    nbytes = max(1, w.ty.bits // 8)
    starts = _starts(w)
    flat = starts[0] if len(starts) > 1 else Const(0)
    for e, ext in zip(starts[1:-1] + [Const(0)], info.shape[1:]):
        flat = BinOp("+", BinOp("*", flat, ext, INDEX), e, INDEX)
    period = 8 * info.swizzle
    checks = [(flat, period // nbytes, f"its first row does not start at a multiple of "
               f"{period} bytes in '{info.name}' (the period of its {info.swizzle}-byte "
               "swizzle: the rows come in whole groups of 8)",
               "start the window at a row that is a multiple of 8 (in a tile whose slots "
               "are whole groups of 8 rows)")]
    if mn and sum(isinstance(p, Interval) for p in w.idx) == 3:   # blocks of E columns: a whole number of periods apart
        block = BinOp("*", info.shape[-2], info.shape[-1], INDEX)
        checks.append((block, period // nbytes, f"its blocks of {info.swizzle // nbytes} "
                       f"columns do not lie a multiple of {period} bytes apart in "
                       f"'{info.name}' (the descriptor's leading byte offset: the rows of a "
                       "block come in whole groups of 8)",
                       "give the tile's next-to-last dimension a multiple of 8 rows"))
    elif not mn:
        checks.append((starts[-1], K, f"its column offset is not a multiple of {K} elements "
                       f"({K * nbytes} bytes: one k16 step inside the swizzled row)",
                       f"take the columns as c0:c0 + {K} with c0 a multiple of {K}"))
    for expr, n, why, hint in checks:
        t = ctx.thread("1")
        what = f"that the swizzled operand '{w.name}' of `{text}` is aligned"
        try:
            cons = ctx.place(t, acc) + [t.expr(expr) % n != 0]
        except Unsupported as e:
            ctx.unknown(what, [acc.loc], str(e))
            continue
        r = ctx.solve(cons)
        if r.status == SAT:
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"the swizzled operand '{w.name}' of `{text}`: {why}; the "
                "hardware's descriptor cannot describe it", [acc.loc],
                {"sizes": ctx.enc.size_values(r.model),
                 "thread1": ctx.thread_witness(t, acc, r.model)}, hint))
        elif r.status == UNKNOWN:
            ctx.unknown(what, [acc.loc], f"solver: {r.reason or 'unknown'}")


__all__ = ["check_wgmma"]
