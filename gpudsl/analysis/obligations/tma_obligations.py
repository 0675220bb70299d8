"""Copies that land with a barrier phase: bulk tensor copies (``tma_load``, docs/hopper.md "TMA
loads"; meaning :mod:`gpudsl.ir.tma_meaning`) and async copies with ``bar=`` (``async_copy(dst, src,
bar=b)``, the same rule: :mod:`gpudsl.ir.landings`).

A copy ``c`` issued by thread ``t1`` at block-level position ``p`` on barrier ``b``
(element ``e``) lands with the phase ``NA(t1, p)`` of ``b[e]``: the one the issuer's next
arrive completes.  Obligations:

- **it lands**: ``t1`` is in ``b``'s arrive range and arrives on ``b[e]`` after ``p``
  (its arrive count at the block's end exceeds ``NA(t1, p)``); else "race" (in flight at
  the block's end);
- **nothing touches it in flight**: an access ``X`` (thread ``t2``) of a destination
  element (any access) or of a source element (a write) is a "race" unless ``X`` is
  ordered before the issue (program order in ``t1``, a block barrier, a chain of split
  barriers: :mod:`..sync_chains`) or after the landing: ``t2`` has received more than
  ``NA(t1, p)`` deliveries of ``b[e]`` before ``X`` (it waited for that phase or a later
  one), directly or through relays of that edge.  The landing is not ordered by the
  issuer's other edges (its arrive does not wait for the bytes), nor by block barriers
  (conservative);
- **alignment** ("bounds"): the source's rows are a multiple of 16 bytes apart and the
  destination starts at a multiple of 128 bytes in its array (the hardware's rules), of
  the swizzle's period ``8 * W`` bytes in a tile swizzled with ``W`` bytes (1024 for 128:
  the hardware swizzles by address, the tile's layout by offset); an async copy's both
  sides at multiples of its length (:mod:`.asyncs`).

The issue-point accesses (the box read and written by ``t1`` at ``p``) are the race and
bounds obligations' like any other access; out-of-range box elements are guarded zeros.
"""
from __future__ import annotations

import z3

from ...ir.nodes import AsyncCopy, BinOp, Const
from ...ir.smt import SAT, UNKNOWN, UNSAT, Unsupported
from ...ir.async_copy_meaning import bar_copy_of
from ...ir.landings import landing_barrier, landing_dst, landing_of
from ...ir.tma_meaning import (I_VAR, dst_align, global_side, pitch_rule, shared_side,
                               store_of)
from ...ir.types import INDEX
from ..phases import PhaseRelation
from ..check_report import Diagnostic
from ..sync_chains import MAX_RELAYS, CHAIN_TIME, Pos, block_body, chains, thread_span
from ..sync_counts import kernel_syncs
from .async_copy_obligations import _alignment as _copy_alignment, _seq_before

_PHASES = PhaseRelation()
_MAX_PER_COPY = 2


def _text(c) -> str:
    from ...ir.printer import print_stmt
    op = bar_copy_of(c.stmt) or c.stmt.tma
    return print_stmt(op)[0].strip()


def _what(op) -> str:
    return "async copy" if isinstance(op, AsyncCopy) else "bulk tensor copy"


def _stmt(op) -> str:
    return "async_copy" if isinstance(op, AsyncCopy) else "tma_load"


def copies(ctx) -> list:
    """The access records of each copy's destination writes and source reads."""
    out = []
    for a in ctx.eff.accesses:
        op = landing_of(a.stmt)
        if op is not None and ((a.kind == "write") == (a.name == landing_dst(op))):
            out.append(a)
    return out


def check_tma(ctx) -> None:
    recs = copies(ctx)
    if not recs:
        return
    by_array: dict = {}
    for a in ctx.eff.accesses:
        by_array.setdefault(a.array, []).append(a)
    seen_stmt: set = set()
    reported: set = set()
    for c in recs:
        op = landing_of(c.stmt)
        ks = kernel_syncs(ctx, c.kernel)
        if c.kind == "write" and id(op) not in seen_stmt:
            seen_stmt.add(id(op))
            if bar_copy_of(c.stmt) is not None:
                _copy_alignment(ctx, c)
            else:
                _alignment(ctx, c, op)
            if not _lands(ctx, ks, c, op):
                continue
        if ks is None or c.path is None or c.tpath is None:
            continue
        found = 0
        for x in by_array.get(c.array, ()):
            if found >= _MAX_PER_COPY or ctx.out_of_time():
                break
            if x.kernel != c.kernel or (c.kind == "read" and not x.is_write):
                continue
            if landing_of(x.stmt) is op and x.kind != "write":
                continue
            key = (op.loc, x.loc, c.kind)
            if key in reported:
                continue
            d = _pair(ctx, ks, c, x, op)
            if d is not None:
                ctx.diagnostics.append(d)
                if d.kind == "race":
                    reported.add(key)
                    found += 1


def _edges_of(ks, op) -> list:
    bar = landing_barrier(op)[0]
    return [e for e in chains(ks).edges if e.send_key[:2] == ("arrive", bar)]


def _element(t, op, e):
    """The copy's barrier element is ``e``'s (True for a single barrier)."""
    index = landing_barrier(op)[1]
    if e.element is None or index is None:
        return z3.BoolVal(True)
    return t.expr(index) == e.element.val


def _lands(ctx, ks, c, op) -> bool:
    """The issuer arrives on the copy's barrier after the issue; False if refused."""
    bar, kind = landing_barrier(op)[0], _what(op)
    what = f"that the {kind} `{_text(c)}` lands"
    es = _edges_of(ks, op) if ks is not None else []
    if not es:
        w = _issued(ctx, c)
        if w is not None:
            ctx.diagnostics.append(Diagnostic(
                "race", f"the {kind} `{_text(c)}` never lands: no arrive on "
                f"'{bar}' (with one thread range) completes a phase of it", [c.loc], w,
                f"arrive on {bar} with the issuing thread in the range after the {_stmt(op)}"))
        return False
    t = ctx.thread("1")
    ch = chains(ks)
    try:
        cons = ctx.place(t, c)
        body = block_body(c.path)
        f = ks.flat(t)
        bad = []
        for e in es:
            end = t.expr(ks.counter(e.send_key).count_block(body))
            bad.append(z3.And(_element(t, op, e), z3.Or(
                z3.Not(ks.inside(f, e.send)), end <= ch.sent(e, Pos(t, c.path)))))
        cons.append(z3.Or(*bad))
    except Unsupported as ex:
        ctx.unknown(what, [c.loc], str(ex))
        return False
    r = ctx.solve(cons)
    if r.status == SAT:
        w = {"sizes": ctx.enc.size_values(r.model), "thread1": ctx.thread_witness(t, c, r.model),
             "between": "async"}
        ctx.diagnostics.append(Diagnostic(
            "race", f"the {kind} `{_text(c)}` may still be in flight when the "
            f"block's code ends: its issuing thread makes no arrive on {bar} after it "
            "(the copy lands with the phase the issuer's next arrive completes)", [c.loc], w,
            f"issue it from a thread of {bar}'s arrive range, before that thread's "
            "arrive"))
        return False
    if r.status == UNKNOWN:
        ctx.unknown(what, [c.loc], f"solver: {r.reason or 'unknown'}")
        return False
    return True


def _issued(ctx, c):
    """A witness (sizes, the issuing thread) that copy ``c`` is issued; None when it never
    is (nothing to land); ``{}`` when the solver cannot tell."""
    t = ctx.thread("1")
    try:
        r = ctx.solve(ctx.place(t, c))
    except Unsupported:
        return {}
    if r.status == SAT:
        return {"sizes": ctx.enc.size_values(r.model),
                "thread1": ctx.thread_witness(t, c, r.model), "between": "async"}
    return None if r.status == UNSAT else {}


def _landed_unordered(ch, ks, op, t1, pc: Pos, px: Pos, relays: int) -> list:
    """Constraints: ``px`` is not ordered after the landing of the copy at ``pc``."""
    out = []
    fs = ks.flat(t1)
    for e in _edges_of(ks, op):
        parts = [z3.Not(ch.direct(e, pc, px))]
        if relays > 0:
            for cls in ch.relays[id(e)]:
                if ch._reaches(cls, px.span, relays):
                    parts.append(z3.Implies(ks.inside(fs, e.send),
                                            ch._no_relay(e, cls, pc, px, relays)))
        out.append(z3.Implies(_element(t1, op, e), z3.And(*parts)))
    return out


def _pair(ctx, ks, c, x, op):
    r = _ask(ctx, ks, c, x, op, 0)
    if r is not None and chains(ks).any:
        r = _ask(ctx, ks, c, x, op, MAX_RELAYS)
    return r


def _ask(ctx, ks, c, x, op, relays: int):
    bar, kind = landing_barrier(op)[0], _what(op)
    what = f"that {x.describe()} waits for the {kind} `{_text(c)}`"
    t1, t2 = ctx.thread("1"), ctx.thread("2")
    ch = chains(ks)
    try:
        cons = ctx.place(t1, c) + ctx.place(t2, x)
        cons += [t1.expr(a) == t2.expr(b) for a, b in zip(c.idx, x.idx)]
        ki = ctx.eff.kernels[c.kernel]
        cons += [t1.var(l.iter) == t2.var(l.iter) for l in ki.block_loops]
        cons += [t1.var(l.iter) == t2.var(l.iter) for l in ki.host_loops]
        same = z3.And(*[a == b for a, b in zip(t1.tc, t2.tc)])
        if landing_of(x.stmt) is op:   # another instance of the same copy, not this one
            outer = [l for l in c.loops if not l.iter.startswith(I_VAR)]
            cons.append(z3.Not(z3.And(same, *[t1.var(l.iter) == t2.var(l.iter)
                                               for l in outer])))
        pc = Pos(t1, c.path, span=thread_span(c.loops, ks))
        px = Pos(t2, x.path, span=thread_span(x.loops, ks))
        own_before = z3.And(same, _seq_before(x.tpath, c.tpath, t2, t1))
        sp = _PHASES.same_phase(x.path, c.path, t2, t1)
        sp = z3.BoolVal(sp) if isinstance(sp, bool) else sp
        synced_before = z3.And(_seq_before(x.path, c.path, t2, t1), z3.Not(sp))
        cons += [z3.Not(own_before), z3.Not(synced_before)]
        cons += ch.not_before(px, pc, relays)
        cons += _landed_unordered(ch, ks, op, t1, pc, px, relays)
    except Unsupported as e:
        ctx.unknown(what, [c.loc, x.loc], str(e) or "unsupported expression")
        return ctx.diagnostics.pop()
    r = ctx.solve(cons, CHAIN_TIME if relays else 1)
    if r.status == UNKNOWN:
        ctx.unknown(what, [c.loc, x.loc], f"solver: {r.reason or 'unknown'}")
        return ctx.diagnostics.pop()
    if r.status != SAT:
        return None
    element = ctx.eval_ints(r.model, [t2.expr(i) for i in x.idx])
    info = ctx.eff.arrays[x.array]
    el = f"{info.name}[{', '.join(str(v) for v in element)}]" if element else info.name
    side = "destination" if c.kind == "write" else "source"
    msg = (f"data race on {info.mem.name} array '{info.name}': the {kind} "
           f"`{_text(c)}` ({side} {el}) may still be in flight: {x.describe()} is ordered "
           f"neither before its issue nor after the phase of {bar} it completes")
    w = {"sizes": ctx.enc.size_values(r.model), "array": info.name, "element": element,
         "thread1": ctx.thread_witness(t1, c, r.model),
         "thread2": ctx.thread_witness(t2, x, r.model), "between": "async"}
    return Diagnostic("race", msg, [c.loc, x.loc], w,
                      f"wait on {bar} for that phase before the access (or order the "
                      f"access before the {_stmt(op)})",
                      [f"{kind}, thread 1", f"{x.describe()}, thread 2"])


def check_store_alignment(ctx) -> None:
    """The alignment rules of the bulk tensor stores (their in-flight rules are the async
    families', :mod:`.asyncs`)."""
    seen = set()
    for a in ctx.eff.accesses:
        op = store_of(a.stmt)
        if op is not None and a.kind == "read" and id(op) not in seen:
            seen.add(id(op))
            _alignment(ctx, a, op)


def _alignment(ctx, c, op) -> None:
    """The global box's rows 16 bytes apart, the shared tile at a multiple of 128 bytes
    (``c``: an access of the shared side)."""
    g, sh = global_side(op), shared_side(op)
    glob = next((a for a in ctx.eff.accesses if a.stmt is not None and
                 getattr(a.stmt, "tma", None) is op and a.name == g.name), None)
    checks = []
    rule = glob and pitch_rule(g.name, g.ty, ctx.eff.arrays[glob.array].shape)
    if rule is not None:
        checks.append((rule.extent, rule.per, rule.broken(), rule.hint()))
    info = ctx.eff.arrays[c.array]
    zero = {l.iter: Const(0) for l in c.loops if l.iter.startswith(I_VAR)}
    from ...ir.visitor import substitute
    start = [substitute(i, zero) for i in c.idx]
    flat = start[0] if start else Const(0)
    for e, ext in zip(start[1:], info.shape[1:]):
        flat = BinOp("+", BinOp("*", flat, ext, INDEX), e, INDEX)
    align = dst_align(getattr(info, "swizzle", 0))
    per = align * 8 // sh.ty.bits
    what = f" (the period of its {info.swizzle}-byte swizzle)" if info.swizzle else ""
    checks.append((flat, per, f"the shared tile of the copy does not start at a multiple "
                   f"of {align} bytes in '{sh.name}'{what}",
                   f"start the shared window at a multiple of {per} elements"))
    for expr, n, why, hint in checks:
        t = ctx.thread("1")
        try:
            cons = ctx.place(t, c) + [t.expr(expr) % n != 0]
        except Unsupported as e:
            ctx.unknown(f"that the bulk tensor copy `{_text(c)}` is aligned", [c.loc], str(e))
            continue
        r = ctx.solve(cons)
        if r.status == SAT:
            ctx.diagnostics.append(Diagnostic(
                "bounds", f"the bulk tensor copy `{_text(c)}`: {why} (the hardware copies "
                "aligned boxes only)", [c.loc],
                {"sizes": ctx.enc.size_values(r.model),
                 "thread1": ctx.thread_witness(t, c, r.model)}, hint))
        elif r.status == UNKNOWN:
            ctx.unknown(f"that the bulk tensor copy `{_text(c)}` is aligned", [c.loc],
                        f"solver: {r.reason or 'unknown'}")


__all__ = ["check_tma", "check_store_alignment", "copies"]
