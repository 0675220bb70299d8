"""What a SHARED array holds after a barrier, when one statement wrote it, once per
thread, with a value computed from the writer's coordinates.

GPUVerify's ``barrier_invariants/wrap_around`` stores a permutation and indexes with
it::

    A[t] = t              # (or select(t % 2 == 0, (t + 2) % 8, t))
    sync()
    B[A[(t + 1) % 8]] = t

GPUVerify proves it with the user's barrier invariant ``A[tid] == tid``; check()
infers that invariant when all of this holds for a SHARED array ``A`` (a *summary*):

- the only write of ``A`` in the proc is one assignment ``W``:
  ``A[v1 + c1, ..., vd + cd] = g``, where ``v1..vd`` are exactly the variables of the
  ``@ THREADS`` loops around ``W`` (each once; ``ck`` constants), ``g`` is an integer
  expression that reads no memory, and ``W``'s conditions read no memory;
- ``W``'s loops in the kernel are the block loops and those thread loops only (no
  ``seq`` or unmapped ``par`` loop: each thread runs ``W`` at most once), and ``A`` is
  allocated in the block's code outside any loop (one copy per block);
- ``W`` stands in a statement of the innermost block loop's body before an unranged
  ``sync()`` of that body, and the read stands in a statement after it.

Then, at the read of ``A[r1, ..., rd]`` by a thread of a block, the only thread of
that block that can have written that element is ``w = (r1 - c1, ..., rd - cd)`` (the
index is one-to-one in the thread's coordinates), it did so before the barrier, and
nothing wrote it since.  So *if* ``w`` lies in the thread loops' ranges and ``W``'s
conditions hold for it (in the reader's block and launch), the value read is ``g``
evaluated for ``w`` (when that value fits the element type; else no fact).  Otherwise
the element was never written: no fact.  This needs no race-freedom assumption: the
barrier orders ``W`` before the read, and nothing else writes ``A``.  (An access out
of bounds elsewhere could overwrite ``A``; the first such access of an execution is
reported, by the earliest-failure argument of :func:`.effects._first_impure`.)
"""
from __future__ import annotations

import itertools
from dataclasses import dataclass

import z3

from ..ir.nodes import Assign, BinOp, Const, For, Read, Sync, Var
from ..ir.types import BLOCKS, THREADS
from ..ir.visitor import walk

_BITS = {"i32": 32, "i64": 64}


@dataclass(frozen=True)
class Summary:
    name: str
    write: object        # the KernelAccess of W
    vars: tuple          # per index: (thread loop variable, constant offset)
    body: tuple          # the innermost block loop's body
    sync_at: int         # index in body of the barrier
    bits: int


def find_summaries(eff) -> dict:
    """array source name -> :class:`Summary`, for the SHARED arrays that have one."""
    names: dict = {}
    for info in eff.arrays.values():
        names.setdefault(info.name, []).append(info)
    writes: dict = {}
    for a in eff.accesses:
        if a.kind != "read":
            writes.setdefault(a.array, []).append(a)
    out = {}
    for name, infos in names.items():
        if len(infos) != 1:
            continue
        s = _summary(infos[0], writes.get(infos[0].key, []))
        if s is not None:
            out[name] = s
    return out


def _summary(info, ws):
    if not info.mem.per_block or info.level != "block" or len(ws) != 1:
        return None
    if any(l.mapping != BLOCKS for l in info.loops if l.level != "host"):
        return None
    bits = _BITS.get(getattr(info.ty, "name", ""))
    w = ws[0]
    s = w.stmt
    if bits is None or w.kind != "write" or w.reduce or not isinstance(s, Assign) \
            or s.name != info.name or not s.rhs.ty.is_integer or _reads(s.rhs) \
            or any(_reads(g) for g in w.guards) or w.kernel != info.kernel:
        return None
    kl = [l for l in w.loops if l.level != "host"]
    tloops = [l for l in kl if l.mapping == THREADS]
    if any(l.mapping not in (BLOCKS, THREADS) for l in kl):
        return None
    vars_ = [_var_plus_const(e) for e in w.idx]
    if any(v is None for v in vars_) or sorted(v for v, _ in vars_) != \
            sorted(l.iter for l in tloops) or len(set(v for v, _ in vars_)) != len(vars_):
        return None
    top = top_step(w)
    if top is None:
        return None
    body, i = top
    j = next((k for k in range(i + 1, len(body))
              if isinstance(body[k], Sync) and not body[k].ranged), None)
    if j is None:
        return None
    return Summary(info.name, w, tuple(vars_), body, j, bits)


def tag_readers(eff, sums: dict) -> None:
    """Mark each access whose conditions or indices read a summarized array with its
    top-level position (``a.summary_at``): race questions asked once per class of
    accesses (``obligations.race_obligations._shape``) must not share an answer between a read
    after the barrier (with facts) and one before it (without)."""
    if not sums:
        return
    for a in eff.accesses:
        names = {n.name for e in tuple(a.guards) + tuple(a.idx) for n in walk(e)
                 if isinstance(n, Read)}
        if names & set(sums):
            top = top_step(a)
            a.__dict__["summary_at"] = (id(top[0]), top[1]) if top else None


def top_step(a):
    """(the innermost block loop's body, the index of the statement holding ``a``)."""
    for L, i in a.path or ():
        s = L[i]
        if isinstance(s, For) and s.mapping == BLOCKS:
            continue
        return L, i
    return None


def _reads(e) -> bool:
    return any(isinstance(n, Read) for n in walk(e))


def _var_plus_const(e):
    if isinstance(e, Var):
        return e.name, 0
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = e.lhs, e.rhs
        if isinstance(a, Var) and isinstance(b, Const) and isinstance(b.val, int):
            return a.name, (b.val if e.op == "+" else -b.val)
        if e.op == "+" and isinstance(b, Var) and isinstance(a, Const) \
                and isinstance(a.val, int):
            return b.name, a.val
    return None


def summary_facts(ctx, t, a, reads) -> list:
    """Facts about the values of ``reads`` ((kind, name, index terms, value), thread
    ``t`` placed at access ``a``) of arrays with a summary read after its barrier."""
    sums = ctx.summaries
    if not sums:
        return []
    top = top_step(a)
    out = []
    for kind, name, terms, v in reads:
        sm = sums.get(name)
        if kind != "i" or sm is None or top is None or a.kernel != sm.write.kernel \
                or top[0] is not sm.body or top[1] <= sm.sync_at or len(terms) != len(sm.vars):
            continue
        try:
            out.append(_fact(ctx, t, sm, terms, v))
        except Exception:   # an unencodable bound, condition or value: no fact (sound)
            continue
    return out


_writers = itertools.count()


def _fact(ctx, t, sm, terms, v):
    """``v`` (thread ``t``'s read of ``A[terms]``) is ``g`` of the one writer, when it
    exists; the writer is a thread env sharing ``t``'s launch and block."""
    w = sm.write
    wt = ctx.enc.thread(f"{t.tag}>w{next(_writers)}")
    for l in w.loops:
        if l.mapping != THREADS:     # the reader's launch and block
            wt.vars[l.iter] = t.vars[l.iter]
    for (var, c), r in zip(sm.vars, terms):
        wt.vars[var] = r - c
    cons = []
    for l in w.loops:
        if l.mapping == THREADS:
            x = wt.vars[l.iter]
            cons += [x >= wt.expr(l.lo), x < wt.expr(l.hi)]
    cons += [wt.cond(g) for g in w.guards]
    val = wt.expr(w.stmt.rhs)
    half = 2 ** (sm.bits - 1)
    return z3.Implies(z3.And(*cons, val >= -half, val < half), v == val)


__all__ = ["Summary", "find_summaries", "summary_facts", "tag_readers", "top_step"]
