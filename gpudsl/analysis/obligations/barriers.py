"""The obligations of ranged and split barriers (docs/language.md (synchronization)), kind ``"divergence"``
(``"mapping"`` for the warp rule of ranged barriers).

All synchronization statements stand at block level under uniform control flow
(:mod:`..mapping`), so every thread of the block reaches each of them the same number
of times; what is left to prove, with the counts of :mod:`..sync_counts`:

- the target has what they lower to: mbarriers for split barriers, named barriers for
  ranged ones (kind ``"target"``), no more distinct ranges a kernel than it has named
  barriers (kind ``"resource"``);
- ranges: every range lies inside the block (a thread of the range that does not
  exist never arrives); a ranged barrier covers whole warps (``bar.sync`` counts
  warps) unless it is the whole block;
- a split barrier is allocated at the top of the block's code (its phases are
  counted from the block's start) and all its arrives name one range and one ``count=``
  (the expected arrival count of every phase is the range's width times the count);
- every wait completes: a thread's k-th wait on ``bar`` stands where exactly k + 1
  arrives on ``bar`` have run (fewer: the phase never completes; more: the phase
  parity the hardware waits on no longer tells phase k from phase k + 2);
- no phase overruns a waiter: an arrive that completes phase k + 1 is ordered after
  the wait for phase k of every waiting thread that does not arrive itself.
"""
from __future__ import annotations

import z3

from ...ir.nodes import Arrive, For, Sync, Var, Wait
from ...ir.smt import SAT, UNKNOWN, UNSAT, Unsupported
from ...ir.types import BLOCKS
from ...ir.visitor import walk
from ...targets import MBARRIER, NAMED_BARRIERS
from ..check_report import Diagnostic
from ..sync_chains import CHAIN_TIME, first_direct
from ..sync_counts import kernel_syncs


def _text(s) -> str:
    from ...ir.printer import print_stmt
    return print_stmt(s)[0].strip()


def check_barriers(ctx):
    for k in ctx.eff.kernels:
        ks = kernel_syncs(ctx, k)
        if ks is None:
            continue
        syncs = [si for si in ctx.eff.syncs if si.kernel == k and si.level == "block"
                 and si.at is not None and si.at.path is not None]
        _hardware(ctx, ks, syncs)
        if not _shapes(ctx, ks, syncs):
            continue
        for si in syncs:
            if isinstance(si.stmt, (Arrive, Wait)):
                _ring_bounds(ctx, ks, si)
        waits = [si for si in syncs if isinstance(si.stmt, Wait)]
        arrives = [si for si in syncs if isinstance(si.stmt, Arrive)]
        for w in waits:
            _completes(ctx, ks, w)
        for a in arrives:
            for w in waits:
                if w.stmt.name == a.stmt.name:
                    _no_overrun(ctx, ks, a, w)


def _div(ctx, msg, locs, hint, witness=None, kind="divergence"):
    ctx.diagnostics.append(Diagnostic(kind, msg, [l for l in locs if l is not None],
                                      witness or {}, hint))


def _hardware(ctx, ks, syncs) -> None:
    """What the barriers need of ``ctx.target`` (kind ``"resource"``): split barriers are
    mbarriers; ranged barriers are named barriers, at most ``named_barriers - 1``
    distinct ranges a kernel (id 0 is the whole block's)."""
    tgt = ctx.target
    if not tgt.has(MBARRIER):
        for a in ks.allocs:
            _div(ctx, f"the split barrier '{a.name}' is an mbarrier, which {tgt.name} does not "
                 "have", [a.loc], "check for sm_80 or newer, or synchronize with sync()",
                 kind="target")
    ranged = {}
    for si in syncs:
        s = si.stmt
        if isinstance(s, Sync) and s.ranged and (s.lo.val, s.hi.val) != (0, ks.block_size):
            ranged.setdefault((s.lo.val, s.hi.val), s.loc)
    if ranged and not tgt.has(NAMED_BARRIERS):
        _div(ctx, f"ranged barriers are named barriers (bar.sync), which {tgt.name} does not "
             "have", list(ranged.values())[:1], "synchronize the whole block with sync()",
             kind="target")
    elif len(ranged) > tgt.named_barriers - 1:
        _div(ctx, f"{len(ranged)} distinct ranged barriers in one kernel: {tgt.name} has "
             f"{tgt.named_barriers} named barriers and the whole block's sync() takes one",
             list(ranged.values()), f"use at most {tgt.named_barriers - 1} distinct ranges",
             kind="resource")


def _shapes(ctx, ks, syncs) -> bool:
    """Ranges and allocations; False when the counts cannot be trusted."""
    ok = True
    bs = ks.block_size
    for si in syncs:
        s = si.stmt
        if isinstance(s, Sync) and not s.ranged:
            continue
        lo, hi = s.lo.val, s.hi.val
        if bs is None:
            ctx.unknown(f"that `{_text(s)}` covers threads of the block", [s.loc],
                        "the block size is not a constant")
            ok = False
            continue
        if hi > bs:
            w = _reached(ctx, si)
            if w is not None:
                _div(ctx, f"`{_text(s)}` expects threads [{lo}, {hi}), but the block has {bs} "
                     "thread(s): the missing threads never arrive, the others wait forever",
                     [s.loc], "keep the range inside the block", dict(w, block_size=bs))
        warp = ctx.target.warp_size
        if isinstance(s, Sync) and (lo, hi) != (0, bs) and (lo % warp or hi % warp):
            _div(ctx, f"`{_text(s)}`: a ranged barrier synchronises whole warps (bar.sync "
                 f"counts warps); lo and hi must be multiples of {warp} unless the range is "
                 "the whole block", [s.loc], "round the range to warps", kind="mapping")
    top = set()
    for f in walk(ctx.eff.kernels[ks.kernel].loop):
        if isinstance(f, For) and f.mapping == BLOCKS:
            top.update(id(x) for x in f.body)
    for a in ks.allocs:
        if id(a) not in top:
            ctx.unknown(f"the phases of the split barrier '{a.name}'", [a.loc],
                        "it is not allocated at the top of the block's code (inside a loop "
                        "or branch, it starts afresh each time)")
            ok = False
    for bar, b in ks.bars.items():
        if len(b["arrive"]) > 1:
            rs = ", ".join(f"[{lo}, {hi})" for lo, hi in sorted(b["arrive"]))
            locs = [si.loc for si in syncs if isinstance(si.stmt, Arrive) and
                    si.stmt.name == bar]
            _div(ctx, f"the arrives on '{bar}' name different thread ranges ({rs}): a split "
                 "barrier expects the same number of arrivals in every phase", locs,
                 "use one split barrier per group of arriving threads")
            ok = False
        if len(ks.arrive_counts.get(bar, ())) > 1:
            cs = ", ".join(map(str, sorted(ks.arrive_counts[bar])))
            locs = [si.loc for si in syncs if isinstance(si.stmt, Arrive) and
                    si.stmt.name == bar]
            _div(ctx, f"the arrives on '{bar}' give different counts (count={cs}): a split "
                 "barrier expects the same number of arrivals in every phase", locs,
                 "give every arrive on the barrier the same range and count, or use one "
                 "split barrier per kind of arrive")
            ok = False
    return ok


def _reached(ctx, si):
    """A witness that the statement runs for some sizes (None: it never does)."""
    t = ctx.thread("1")
    try:
        cons = ctx.place(t, si.at)
    except Unsupported:
        return {}
    r = ctx.solve(cons)
    if r.status == UNSAT:
        return None
    if r.status != SAT:
        return {}
    return {"sizes": ctx.enc.size_values(r.model),
            "thread1": ctx.thread_witness(t, si.at, r.model)}


def _completes(ctx, ks, w):
    s = w.stmt
    if not ks.exact(w.at.path):
        ctx.unknown(f"that `{_text(s)}` waits for a phase that completes", [s.loc],
                    "the number of arrives and waits before it depends on loop variables")
        return
    t = ctx.thread("1")
    try:
        cons = ctx.place(t, w.at)
        f = ks.flat(t)
        el, cons_el = _element(t, s)
        na = ks.count(t, ("arrive", s.name, el), w.at.path)
        nw = ks.waits(t, f, s.name, w.at.path, element=el)
        cons += cons_el + [ks.inside(f, (s.lo.val, s.hi.val)), na != nw + 1]
    except Unsupported as e:
        ctx.unknown(f"that `{_text(s)}` waits for a phase that completes", [s.loc], str(e))
        return
    r = ctx.solve(cons)
    if r.status == UNKNOWN:
        ctx.unknown(f"that `{_text(s)}` waits for a phase that completes", [s.loc],
                    f"solver: {r.reason or 'unknown'}")
    if r.status != SAT:
        return
    m = r.model
    k, done = m.eval(nw, model_completion=True).as_long(), m.eval(na, True).as_long()
    why = (f"phase {k} of '{s.name}', which no arrive before it completes ({done} "
           "phase(s) completed): the threads would wait forever") if done <= k else \
        (f"phase {k} of '{s.name}', but phase {k + 1} completed before it too: the phase "
         f"parity cannot tell phase {k} from phase {k + 2}")
    _div(ctx, f"`{_text(s)}` waits for {why}", [s.loc],
         f"arrive on '{s.name}' once before each wait",
         {"sizes": ctx.enc.size_values(m), "thread1": ctx.thread_witness(t, w.at, m),
          "phase": k, "completed": done})


_ELEMENT = Var("__ring_element")


def _element(t, s):
    """The ring element statement ``s`` names, as a count key free of loop variables
    (an unknown of thread ``t``, constrained to the element): ``(None, [])`` for a
    single barrier."""
    if s.index is None:
        return None, []
    return _ELEMENT, [t.expr(_ELEMENT) == t.expr(s.index)]


def _ring_bounds(ctx, ks, si):
    """``bar[e]`` names an element of the ring: ``0 <= e < k`` (kind ``"bounds"``)."""
    s = si.stmt
    k = ks.rings.get(s.name)
    if s.index is None or k is None:
        return
    t = ctx.thread("1")
    what = f"that `{_text(s)}` names an element of the ring '{s.name}'"
    try:
        cons = ctx.place(t, si.at)
        e = t.expr(s.index)
        cons.append(z3.Or(e < 0, e >= k))
    except Unsupported as ex:
        ctx.unknown(what, [s.loc], str(ex))
        return
    r = ctx.solve(cons)
    if r.status == UNKNOWN:
        ctx.unknown(what, [s.loc], f"solver: {r.reason or 'unknown'}")
    if r.status != SAT:
        return
    m = r.model
    ctx.diagnostics.append(Diagnostic(
        "bounds", f"`{_text(s)}` names element {m.eval(e, True)} of the barrier ring "
        f"'{s.name}', which has {k}", [s.loc], f"index the ring modulo {k}: {s.name}[i % {k}]",
        {"sizes": ctx.enc.size_values(m), "thread1": ctx.thread_witness(t, si.at, m)}))


def _no_overrun(ctx, ks, a, w):
    bar = a.stmt.name
    A = ks.arrive_range(bar)
    W = (w.stmt.lo.val, w.stmt.hi.val)
    if A is None or (A[0] <= W[0] and W[1] <= A[1]):
        return  # every waiter arrives itself, after its wait (program order)
    what = f"that `{_text(a.stmt)}` never completes a phase before a waiter has passed " \
           f"`{_text(w.stmt)}` for the phase before"
    if not (ks.exact(a.at.path) and ks.exact(w.at.path)):
        ctx.unknown(what, [a.stmt.loc, w.stmt.loc], "the number of barrier instances before "
                    "them depends on loop variables")
        return
    found = first_direct(ks, lambda relays: _overrun_at(ctx, ks, a, w, A, W, what, relays))
    if found is None:
        return
    t, u, m = found
    _div(ctx, f"`{_text(a.stmt)}` may complete the next phase of '{a.stmt.name}' before a "
         f"thread of `{_text(w.stmt)}` has passed its wait: the phase parity would then make "
         "it wait for the phase after", [a.stmt.loc, w.stmt.loc],
         "order the arrive after the wait: a barrier, or a second split barrier the "
         "waiters arrive on", {"sizes": ctx.enc.size_values(m),
                               "thread1": ctx.thread_witness(t, w.at, m),
                               "thread2": ctx.thread_witness(u, a.at, m)})


def _overrun_at(ctx, ks, a, w, A, W, what, relays):
    """(waiter, arriver, model) of an overrun, or None (none, or "unknown" reported as
    ``what``); chains of at most ``relays`` relays order."""
    bar = a.stmt.name
    t, u = ctx.thread("1"), ctx.thread("2")  # t waits, u arrives
    try:
        cons = ctx.place(t, w.at) + ctx.place(u, a.at)
        for l in a.at.loops:
            if l.mapping == BLOCKS or l.level == "host":
                cons.append(t.var(l.iter) == u.var(l.iter))
        ft, fu = ks.flat(t), ks.flat(u)
        cons += [ks.inside(ft, W), z3.Not(ks.inside(ft, A)), ks.inside(fu, A)]
        el, cons_t = _element(t, w.stmt)
        _, cons_u = _element(u, a.stmt)
        if el is not None:  # the arrive and the wait name one element of the ring
            cons += cons_t + cons_u + [t.expr(el) == u.expr(el)]
        cons.append(ks.count(u, ("arrive", bar, el), a.at.path) ==
                    ks.waits(t, ft, bar, w.at.path, element=el) + 1)
        cons += ks.unordered(w.at.path, t, a.at.path, u, after1=True, span1=W, span2=A,
                             relays=relays)
    except Unsupported as e:
        ctx.unknown(what, [a.stmt.loc, w.stmt.loc], str(e))
        return None
    r = ctx.solve(cons, CHAIN_TIME if relays else 1)
    if r.status == UNKNOWN:
        ctx.unknown(what, [a.stmt.loc, w.stmt.loc], f"solver: {r.reason or 'unknown'}")
    if r.status != SAT:
        return None
    return t, u, r.model


__all__ = ["check_barriers", "barrier_issues"]


def barrier_issues(ir) -> list:
    """The diagnostics of :func:`check_barriers` alone for a proc (for the rewrite
    primitives: a rewrite may not add one)."""
    from ..proc_effects import collect
    from . import Ctx

    ctx = Ctx(collect(ir), {}, 3000)
    check_barriers(ctx)
    return ctx.diagnostics
