"""Asynchronous copies (docs/async_copies.md): nothing touches a copy's destination, or writes its
source, before the copy has landed, and other threads only after a barrier that
follows the landing.

A copy ``c`` (of group ``G = commits(c)``, :mod:`gpudsl.analysis.async_counts`) and an
access ``X`` of its destination (any access) or of its source (a write):

- **the same thread** (``X`` after ``c`` in the thread's order): a "race" unless
  ``G < landed(X)``: a wait that completes the group ran before ``X``;
- **another thread of the block**: a "race" unless ``G < synced(X)`` (the group
  completed before a barrier that ran before ``X``) or ``X`` ran before a barrier
  that ran before ``c`` (for ``X`` itself an async copy: ``X``'s group completed
  before a barrier that ran before ``c``).

Other blocks and launches are the race obligation's (a copy is a read of its source
and a write of its destination there).  A copy is also refused unless both of its
first elements sit at element offsets that are multiples of its length (the hardware
asks addresses aligned to the copy's size): ``"bounds"``.

Commits and waits inside thread loops: :mod:`.async_local` (each copy must land in its
own thread loop).  What is not counted exactly (commits and waits both at block level
and in thread loops, or under a loop or condition inside a thread loop; counts that
depend on their own loop's variable) is "unknown".

The bulk tensor stores (``tma_store``, :mod:`gpudsl.ir.tma_meaning`) are a third, with
``tma_commit`` / ``tma_wait``: a store's destination writes (clipped to the array) and its
source reads.  The warpgroup MMAs (:mod:`gpudsl.ir.wgmma_meaning`) are a second family, asked the same
questions with their own groups (``wgmma_commit`` / ``wgmma_wait``): a wgmma's
accumulator elements (its writes) are its destination, its ``a`` / ``b`` elements (its
reads) its source, one element per access record; a later wgmma of the same shape on the
same accumulator is no conflict (the hardware orders them).
"""
from __future__ import annotations

import z3

from ...ir.async_copy_meaning import COPIES, stmt_text
from ...ir.tma_meaning import STORES
from ...ir.wgmma_meaning import FAMILIES, chained
from ...ir.nodes import BinOp, For
from ...ir.residues import residue
from ...ir.smt import SAT, UNKNOWN, UNSAT, Unsupported
from ...ir.types import BLOCKS, INDEX, THREADS
from ..async_counts import AsyncCounts, has_unknown
from ..sync_chains import Pos, chains, thread_span
from ..sync_counts import kernel_syncs
from ..phases import PhaseRelation
from .async_local import check_local, local_form
from ..check_report import Diagnostic
from . import Ctx

_PHASES = PhaseRelation()
_MAX_PER_COPY = 2


def check_asyncs(ctx: Ctx):
    for fam in FAMILIES + (STORES,):
        _check_family(ctx, fam)


def _ops(ctx: Ctx, fam) -> list:
    """The access records that stand for ``fam``'s operations: a copy's first elements
    (its destination write, its source read), a wgmma's accumulator writes and operand
    reads."""
    out = []
    for a in ctx.eff.accesses:
        op = fam.op_of(a.stmt)
        if op is None:
            continue
        if fam is COPIES:
            if a.stmt.k == 0 and a.name in (op.dst, op.src) and \
                    (a.kind == "write") == (a.name == op.dst):
                out.append(a)
        elif (a.kind == "write") == (a.name == _dst_name(op)):
            out.append(a)
    return out


def _check_family(ctx: Ctx, fam):
    copies = _ops(ctx, fam)
    if not copies:
        return
    counts: dict = {}
    reported = {(frozenset(map(_lk, d.locations)), "race") for d in ctx.diagnostics
                if d.kind == "race"}
    by_array: dict = {}
    for a in ctx.eff.accesses:
        by_array.setdefault(a.array, []).append(a)
    for c in copies:
        if ctx.out_of_time():
            ctx.unknown(f"that the {fam.name} at {c.loc} lands before it is used", [c.loc],
                        "check()'s overall time budget is spent")
            return
        if c.kind == "write" and fam is COPIES:
            _alignment(ctx, c)
        why = _uncountable(ctx, c, fam)
        if why == "thread":  # commits and waits in thread loops
            why = local_form(ctx, c.kernel, fam)
            if why is None:
                for d in check_local(ctx, c, by_array.get(c.array, ()), _text(c, fam),
                                     _seq_before, fam):
                    key = (frozenset(_lk(x) for x in d.locations), str(d.kind))
                    if d.kind != "race" or key not in reported:
                        ctx.diagnostics.append(d)
                        reported.add(key)
                continue
        if why:
            ctx.unknown(f"when the {fam.name} `{_text(c, fam)}` lands", [c.loc], why)
            continue
        ac = counts.setdefault(c.kernel, AsyncCounts(fam.commit, fam.wait))
        if c.kind == "write":
            _lands(ctx, ac, c, fam)
        found = 0
        for x in by_array.get(c.array, ()):
            if found >= _MAX_PER_COPY:
                break
            if x.kernel != c.kernel or (c.kind == "read" and not x.is_write):
                continue
            if chained(fam, c.stmt, x.stmt, x.name):
                continue
            key = (frozenset((_lk(c.loc), _lk(x.loc))), "race")
            if key in reported:
                continue
            d = _pair(ctx, ac, c, x, fam)
            if d is not None:
                ctx.diagnostics.append(d)
                if d.kind == "race":
                    reported.add(key)
                    found += 1


def _lk(loc):
    return (loc.file, loc.line, loc.col) if loc is not None else None


def _text(a, fam=COPIES) -> str:
    from ...ir.async_copy_meaning import stmt_text
    return stmt_text(fam.op_of(a.stmt))


def _uncountable(ctx, c, fam=COPIES) -> str | None:
    if c.path is None or c.tpath is None or c.kernel is None:
        return f"the {fam.name} does not stand in a kernel's thread loop"
    for site in ctx.eff.asyncs:
        if site.kernel != c.kernel or not isinstance(site.stmt, (fam.commit, fam.wait)):
            continue
        if site.level != "block" or site.at.path is None:
            return "thread"
    return None


def _alignment(ctx: Ctx, c):
    """Both first elements at offsets that are multiples of the copy's length (``c``: the
    first destination write of a copy of a group or of one completing on a barrier)."""
    cp = c.stmt.copy
    if cp.n == 1:
        return
    for name, idx in ((cp.dst, cp.dst_idx), (cp.src, cp.src_idx)):
        key = c.array if name == cp.dst else next(
            (a.array for a in ctx.eff.accesses if a.stmt is c.stmt and a.name == name), None)
        info = ctx.eff.arrays.get(key)
        if info is None:
            continue
        if info.is_param and any(q.name == name and q.kind == "window"
                                 for q in ctx.eff.proc.params):
            ctx.unknown(f"that the async copy `{stmt_text(cp)}` is aligned", [c.loc],
                        f"'{name}' is a window parameter: its start is the caller's")
            continue
        flat = idx[0]
        for e, ext in zip(idx[1:], info.shape[1:]):
            flat = BinOp("+", BinOp("*", flat, ext, INDEX), e, INDEX)
        t = ctx.thread("1")
        if _multiple(ctx, t, c, flat, cp.n):
            continue
        try:
            cons = ctx.place(t, c) + [t.expr(flat) % cp.n != 0]
        except Unsupported as e:
            ctx.unknown(f"that the async copy `{stmt_text(cp)}` is aligned", [c.loc], str(e))
            continue
        r = ctx.solve(cons)
        if r.status == SAT:
            w = {"sizes": ctx.enc.size_values(r.model), "array": name,
                 "offset": ctx.eval_ints(r.model, [t.expr(flat)])[0],
                 "thread1": ctx.thread_witness(t, c, r.model)}
            ctx.diagnostics.append(Diagnostic(
                "bounds", f"the async copy `{stmt_text(cp)}` moves {cp.n} elements of '{name}' "
                f"from element offset {w['offset']}, not a multiple of {cp.n}: the hardware "
                "copies aligned windows only", [c.loc], w,
                f"start the window at a multiple of {cp.n} (and keep row lengths multiples "
                f"of {cp.n})"))
        elif r.status == UNKNOWN:
            ctx.unknown(f"that the async copy `{stmt_text(cp)}` is aligned", [c.loc],
                        f"solver: {r.reason or 'unknown'}")


def _multiple(ctx: Ctx, t, c, flat, n: int) -> bool:
    """``flat`` is a multiple of ``n`` wherever the copy runs, decided by residues
    (``ir.residues``: linear questions about the atoms only), so that the proof does not
    hang on the solver's version; False when undecided (the solver is then asked)."""
    memo: dict = {}

    def atom(x):
        if id(x) not in memo:
            memo[id(x)] = None
            try:
                place, v = ctx.place(t, c), t.expr(x)
            except Unsupported:
                return None
            for r in range(n):
                if ctx.solve(place + [v % n != r]).status == UNSAT:
                    memo[id(x)] = r
                    break
        return memo[id(x)]

    return residue(flat, n, atom) == 0


def _lands(ctx: Ctx, ac: AsyncCounts, c, fam=COPIES):
    """The operation's group is completed before the block's code ends (else it may
    write memory the block no longer owns, and in the meaning it never lands)."""
    g, end = ac.commits(c.path), ac.landed_at_end(c.path)
    what = f"the {fam.name} `{_text(c, fam)}`"
    if has_unknown(g) or has_unknown(end):
        ctx.unknown(f"that {what} lands before the block ends",
                    [c.loc], f"the number of {fam.commit_text} or {fam.wait_text} before it "
                    "depends on loop variables")
        return
    t = ctx.thread("1")
    try:
        cons = ctx.place(t, c) + [t.expr(g) >= t.expr(end)]
    except Unsupported as e:
        ctx.unknown(f"that {what} lands", [c.loc], str(e))
        return
    r = ctx.solve(cons)
    if r.status == SAT:
        w = {"sizes": ctx.enc.size_values(r.model), "thread1": ctx.thread_witness(t, c, r.model),
             "between": "async"}
        ctx.diagnostics.append(Diagnostic(
            "race", f"{what} may still be in flight when the block's code ends: no "
            f"{fam.wait_text} completes its group (it lands nowhere, and may write memory the "
            "block no longer owns)", [c.loc], w,
            f"{fam.commit_text} the group and {fam.wait_text} for it before the block ends"))
    elif r.status == UNKNOWN:
        ctx.unknown(f"that {what} lands", [c.loc], f"solver: {r.reason or 'unknown'}")


def _seq_before(p1, p2, t1, t2):
    """The instance of path ``p1`` runs strictly before that of ``p2`` in one thread
    (full paths, thread loops included: the two threads' loop variables agree on the
    block and thread loops by the caller's constraints)."""
    parts, alts = [], []
    for d in range(min(len(p1), len(p2))):
        (L1, i1), (L2, i2) = p1[d], p2[d]
        if L1 is not L2:
            break
        if i1 != i2:
            if i1 < i2:
                alts.append(z3.And(*parts) if parts else z3.BoolVal(True))
            break
        s = L1[i1]
        if isinstance(s, For) and s.mapping not in (BLOCKS, THREADS):
            v1, v2 = t1.var(s.iter), t2.var(s.iter)
            alts.append(z3.And(*parts, v1 != v2 if s.kind == "par" else v1 < v2))
            parts.append(v1 == v2)
    return z3.Or(*alts) if alts else z3.BoolVal(False)


def _pair(ctx: Ctx, ac: AsyncCounts, c, x, fam=COPIES):
    """A diagnostic when access ``x`` may touch operation ``c``'s elements in flight."""
    width = fam.width(fam.op_of(c.stmt))
    xc = x if _ops_of(x, fam) else None
    g = ac.commits(c.path)
    landed_x = ac.landed(x.path) if x.path is not None else None
    synced_x = ac.synced(x.path) if x.path is not None else None
    exprs = [g, landed_x, synced_x]
    if xc is not None:
        exprs += [ac.commits(x.path), ac.synced(c.path)]
    what = f"that {x.describe()} waits for the {fam.name} `{_text(c, fam)}`"
    if any(e is None or has_unknown(e) for e in exprs):
        return ctx.undecided(what, [c.loc, x.loc], f"the number of {fam.commit_text} or barriers "
                           "before them depends on loop variables")
    ctx.enc.data_dependent = False
    try:
        t1, t2, cons, i1, i2 = ctx.two_threads(c, x, width)
        ki = ctx.eff.kernels[c.kernel]
        cons += [t1.var(l.iter) == t2.var(l.iter) for l in ki.block_loops]
        for l in ctx.eff.kernels[c.kernel].host_loops:
            cons.append(t1.var(l.iter) == t2.var(l.iter))
        gv = t1.expr(g)
        same = z3.And(*[a == b for a, b in zip(t1.tc, t2.tc)])
        after = _seq_before(c.tpath, x.tpath, t1, t2)
        early_same = z3.And(same, after, gv >= t2.expr(landed_x))
        if xc is not None:
            before = t2.expr(ac.commits(x.path)) < t1.expr(ac.synced(c.path))
        else:
            sp = _PHASES.same_phase(x.path, c.path, t2, t1)
            sp = z3.BoolVal(sp) if isinstance(sp, bool) else sp
            before = z3.And(_seq_before(x.path, c.path, t2, t1), z3.Not(sp))
        early_other = z3.And(z3.Not(same), z3.Not(gv < t2.expr(synced_x)), z3.Not(before),
                             *_split_unordered(ctx, ac, c, x, t1, t2, gv))
        cons.append(z3.Or(early_same, early_other))
    except Unsupported as e:
        return ctx.undecided(what, [c.loc, x.loc], str(e) or "unsupported expression")
    r = ctx.solve(cons)
    if r.status == UNKNOWN:
        return ctx.undecided(what, [c.loc, x.loc], f"solver: {r.reason or 'unknown'}")
    if r.status != SAT:
        return None
    return _race(ctx, c, x, t1, t2, i2, early_same, r.model, fam)


def _split_unordered(ctx, ac, c, x, t1, t2, gv) -> list:
    """Constraints: split barriers (and chains of them) order ``x`` neither before the
    issue of ``c`` nor after ``c`` has landed in its thread (:mod:`..sync_chains`)."""
    ks = kernel_syncs(ctx, c.kernel)
    if ks is None or c.path is None or x.path is None:
        return []
    ch = chains(ks)
    px = Pos(t2, x.path, span=thread_span(x.loops, ks))
    pc = Pos(t1, c.path, span=thread_span(c.loops, ks))
    return ch.not_before(px, pc, 1) + ch.not_released_after(
        t1, lambda u, path: u.expr(ac.landed(path)) > gv, px)


def _ops_of(x, fam):
    """``(x,)`` when ``x`` is the destination write of one of ``fam``'s operations."""
    op = fam.op_of(x.stmt)
    if op is None or x.kind != "write":
        return ()
    if fam is COPIES:
        return (x,) if x.name == op.dst else ()
    return (x,) if x.name == _dst_name(op) else ()


def _dst_name(op) -> str:
    """The array an operation writes (a wgmma's accumulator, a store's destination)."""
    d = getattr(op, "acc", None) or op.dst
    return d if isinstance(d, str) else d.name


def _race(ctx, c, x, t1, t2, i2, early_same, model, fam=COPIES):
    own = z3.is_true(model.eval(early_same, model_completion=True))
    element = ctx.eval_ints(model, i2)
    info = ctx.eff.arrays[x.array]
    el = f"{info.name}[{', '.join(str(v) for v in element)}]" if element else info.name
    side = fam.dst if c.kind == "write" else fam.src
    wait, commit = fam.wait_text, fam.commit_text
    if own:
        why = (f"the same thread {'reads' if x.kind == 'read' else 'writes'} {el} before the "
               f"{wait} that completes the {fam.name}'s group")
        hint = (f"{commit} the group and {wait} for it before this access (a wait of depth "
                "n leaves the n most recent groups in flight)")
    else:
        why = (f"another thread {'reads' if x.kind == 'read' else 'writes'} {el} with no "
               f"barrier between the {wait} that completes the {fam.name}'s group and the "
               "access")
        hint = (f"{wait} for the group, then sync(), before other threads touch what it "
                "uses")
    msg = (f"data race on {info.mem.name} array '{info.name}': the {fam.name} "
           f"`{_text(c, fam)}` ({side} {el}) may still be in flight: {why} ({x.describe()})")
    w = {"sizes": ctx.enc.size_values(model), "array": info.name, "element": element,
         "thread1": ctx.thread_witness(t1, c, model),
         "thread2": ctx.thread_witness(t2, x, model), "between": "async"}
    return Diagnostic("race", msg, [c.loc, x.loc], w, hint,
                      [f"{fam.name}, thread 1", f"{x.describe()}, thread 2"])


__all__ = ["check_asyncs"]
