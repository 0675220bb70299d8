"""Async copies whose commits and waits stand in their thread loop (the language allows
both places): a kernel whose ``async_commit`` / ``async_wait`` all stand at the top level of
the body of a thread loop (under no condition or loop inside it).

Such a thread loop is *self-contained* for a copy in it when the copy's group is
completed by a wait later in the same body: then the copy starts and lands inside one
thread's run of the loop body, within one phase of the block, and other threads meet it
as a plain write there (the race obligation, which sees the copy's window written where
it starts).  What is left is the issuing thread's order, counted in the body's
statement list: a copy at top-level statement ``j`` belongs to group ``G`` = the
commits before ``j``; a wait at ``w`` completes the groups below ``commits(w) - n``.
The group numbering of a thread goes on across thread loops, but every relation here is
a difference of two counts of one body, and a copy must land in its own loop, so a
thread leaves each loop with no copy in flight.
"""
from __future__ import annotations

from ...ir.async_copy_meaning import COPIES
from ...ir.wgmma_meaning import chained
from ...ir.nodes import For
from ...ir.smt import SAT, UNKNOWN, Unsupported
from ...ir.types import BLOCKS, THREADS
from ..check_report import Diagnostic


def thread_body(tpath, depth: int):
    """(depth d, list B) of the statement list that is the body of the innermost thread
    loop of the nest at ``tpath[depth]``: ``tpath[d] = (B, j)``; None when ``tpath`` does
    not go below the nest."""
    d = depth
    L, i = tpath[d]
    s = L[i]
    while isinstance(s, For) and s.mapping == THREADS:
        d += 1
        if d >= len(tpath):
            return None
        L, i = tpath[d]
        s = L[i]
    return d, L


def local_form(ctx, kernel, fam=COPIES) -> str | None:
    """None when every commit and wait (of family ``fam``) of ``kernel`` stands at the top
    level of a thread loop's body, else why not."""
    sites = [s for s in ctx.eff.asyncs if s.kernel == kernel and
             isinstance(s.stmt, (fam.commit, fam.wait))]
    for site in sites:
        tp, p = site.at.tpath, site.at.path
        if tp is None or p is None or site.level != "thread":
            return f"the {fam.commit_text}/{fam.wait_text} of the kernel stand at block " \
                   "level and in thread loops"
        tb = thread_body(tp, len(p) - 1)
        if tb is None or tb[0] != len(tp) - 1:
            return (f"the {type(site.stmt).__name__} at {site.loc} stands under a loop or a "
                    "condition inside its thread loop")
    return None


def _commits(B, j, fam=COPIES) -> int:
    return sum(isinstance(s, fam.commit) for s in B[:j])


def _landed(B, j, fam=COPIES) -> int:
    """Groups below this have completed before top-level statement ``j`` of ``B``."""
    for w in range(j - 1, -1, -1):
        if isinstance(B[w], fam.wait):
            return _commits(B, w, fam) - B[w].depth
    return 0


def check_local(ctx, c, accesses, text, seq_before, fam=COPIES) -> list:
    """Diagnostics for the access ``c`` of an operation of ``fam`` (a copy's first
    element) in the thread-local form: it lands in its loop; its thread touches its
    elements only after that."""
    d, B = thread_body(c.tpath, len(c.path) - 1)
    jc = c.tpath[d][1]
    g = _commits(B, jc, fam)
    out = []
    if c.kind == "write" and g >= _landed(B, len(B), fam):
        out.append(Diagnostic(
            "race", f"the {fam.name} `{text}` may still be in flight when its thread loop "
            f"ends: no {fam.wait_text} after it in the loop completes its group (commits and "
            "waits inside a thread loop must complete the loop's operations)", [c.loc],
            _where(ctx, c), f"{fam.commit_text}, then {fam.wait_text} for the group, in the "
            "same thread loop, after it"))
        return out
    width = fam.width(fam.op_of(c.stmt))
    for x in accesses:
        if x.kernel != c.kernel or x.tpath is None or len(x.tpath) <= d or \
                x.tpath[:d] != c.tpath[:d] or x.tpath[d][0] is not B:
            continue  # outside this thread loop: the race obligation's
        if c.kind == "read" and not x.is_write or chained(fam, c.stmt, x.stmt, x.name):
            continue
        if g < _landed(B, x.tpath[d][1], fam):
            continue
        d_ = _query(ctx, c, x, width, seq_before, _same_run(c.tpath, d), fam)
        if d_ is not None:
            out.append(d_)
            if d_.kind == "race":
                break
    return out


def _where(ctx, c) -> dict:
    """A witness of a thread running copy ``c`` (sizes, block, thread, loops)."""
    t = ctx.thread("1")
    w = {"sizes": {}, "between": "async"}
    try:
        r = ctx.solve(ctx.place(t, c))
    except Unsupported:
        return w
    if r.status == SAT:
        w.update(sizes=ctx.enc.size_values(r.model),
                 thread1=ctx.thread_witness(t, c, r.model))
    return w


def _same_run(tpath, d) -> list:
    """The loops (not block or thread loops) around the thread loop whose body is at
    depth ``d`` of ``tpath``: an access in another iteration of one of them runs in
    another run of the thread loop, after the copy has landed (it lands in its own run,
    which the first obligation of :func:`check_local` asks), so only the same run is
    asked about."""
    out = []
    for L, i in tpath[:d]:
        s = L[i]
        if isinstance(s, For) and s.mapping not in (BLOCKS, THREADS):
            out.append(s.iter)
    return out


def _query(ctx, c, x, width, seq_before, same_run=(), fam=COPIES):
    what = f"that {x.describe()} waits for the {fam.name}"
    try:
        t1, t2, cons, i1, i2 = ctx.two_threads(c, x, width)
        ki = ctx.eff.kernels[c.kernel]
        cons += [t1.var(lp.iter) == t2.var(lp.iter) for lp in ki.block_loops]
        cons += [a == b for a, b in zip(t1.tc, t2.tc)]
        cons += [t1.var(it) == t2.var(it) for it in same_run]
        cons.append(seq_before(c.tpath, x.tpath, t1, t2))
    except Unsupported as e:
        return ctx.undecided(what, [c.loc, x.loc], str(e) or "unsupported expression")
    r = ctx.solve(cons)
    if r.status == UNKNOWN:
        return ctx.undecided(what, [c.loc, x.loc], f"solver: {r.reason or 'unknown'}")
    if r.status != SAT:
        return None
    element = ctx.eval_ints(r.model, i2)
    info = ctx.eff.arrays[x.array]
    el = f"{info.name}[{', '.join(str(v) for v in element)}]" if element else info.name
    w = {"sizes": ctx.enc.size_values(r.model), "array": info.name, "element": element,
         "thread1": ctx.thread_witness(t1, c, r.model),
         "thread2": ctx.thread_witness(t2, x, r.model), "between": "async"}
    return Diagnostic(
        "race", f"data race on {info.mem.name} array '{info.name}': the {fam.name} "
        f"`{_stmt(fam.op_of(c.stmt))}` may still be in flight: the same thread "
        f"{'reads' if x.kind == 'read' else 'writes'} {el} before the {fam.wait_text} that "
        f"completes its group ({x.describe()})", [c.loc, x.loc], w,
        f"{fam.commit_text} the group and {fam.wait_text} for it before this access",
        [f"{fam.name}, thread 1", f"{x.describe()}, thread 2"])


def _stmt(op) -> str:
    from ...ir.async_copy_meaning import stmt_text
    return stmt_text(op)


__all__ = ["local_form", "check_local", "thread_body"]
