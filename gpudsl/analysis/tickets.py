"""Atomic tickets: ``k = atomic_add(c[e], 1)`` gives every execution its own value.

Stream compaction writes ``out[k]`` with ``k`` the old value of a counter that every
thread increments atomically.  The old value is data (check() knows nothing of it), but
one fact holds: while the only writes of ``c`` are ``atomic_add`` with a positive
constant, ``c[e]`` grows with every such update, so two executions in one launch
receive different old values — unless the counter wraps around, which takes at least
``2**bits`` in increments.  check() uses exactly that: a *ticket* is a local ``k``

- allocated once (one integer scalar ``Alloc`` of that name in the proc),
- written once, by ``k = atomic_add(c[e], v)`` standing directly in the allocation's
  statement list after it, with ``v`` a constant >= 1 and ``e`` free of memory reads,
- not read between its allocation and that atomic,

where every write of ``c`` in the proc is such an ``atomic_add`` inside a kernel whose
loop extents (from the grid loops down) depend on sizes only.  Two threads' tickets
from the same counter element, in the same launch, from different executions (another
atomic statement, or another instance of the allocation's enclosing loops), differ when
the increments of one launch sum to less than ``2**bits`` (the sum bounded by each
atomic's increment times its loops' extents; a solver fact, so large sizes stay a
witness).
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from ..ir.nodes import Alloc, Assign, Atomic, Call, Const, For, If, Read, Reduce, WindowArg
from ..ir.types import BLOCKS
from ..ir.visitor import free_vars, walk


@dataclass(frozen=True)
class Ticket:
    local: str
    counter: str
    idx: tuple            # the counter element, in the allocation's scope
    scope: tuple          # the iterators of the loops around the allocation
    bits: int             # the counter's width
    counts: tuple         # (increment, (extents...)) per atomic_add on the counter


_BITS = {"i32": 32, "i64": 64, "u32": 32, "u64": 64}


def find_tickets(body) -> dict:
    """local name -> Ticket for the ticket locals of the (inlined) kernel ``body``."""
    allocs: dict = {}
    writes: dict = {}      # buffer or local name -> [(stmt, kernel loops or None)]
    _scan(body, (), None, allocs, writes)
    out = {}
    for name, sites in allocs.items():
        t = _ticket(name, sites, allocs, writes)
        if t is not None:
            out[name] = t
    return out


def _scan(stmts, loops, kloops, allocs, writes):
    for i, s in enumerate(stmts):
        if isinstance(s, Alloc):
            allocs.setdefault(s.name, []).append((stmts, i, loops, s))
        elif isinstance(s, (Assign, Reduce)):
            writes.setdefault(s.name, []).append((s, None))
        elif isinstance(s, Atomic):
            writes.setdefault(s.name, []).append((s, kloops))
            if s.result is not None:
                writes.setdefault(s.result, []).append((s, None))
        elif isinstance(s, Call):
            for a in s.args:
                if isinstance(a, WindowArg):
                    writes.setdefault(a.name, []).append((s, None))
        elif isinstance(s, For):
            inner = kloops + (s,) if kloops is not None else \
                ((s,) if s.mapping == BLOCKS else None)
            _scan(s.body, loops + (s,), inner, allocs, writes)
        elif isinstance(s, If):
            _scan(s.body, loops, kloops, allocs, writes)
            _scan(s.orelse, loops, kloops, allocs, writes)


def _ticket(name, sites, allocs, writes):
    if len(sites) != 1:
        return None
    stmts, i, loops, al = sites[0]
    if al.shape or not al.ty.is_integer:
        return None
    ws = writes.get(name, [])
    if len(ws) != 1 or not isinstance(ws[0][0], Atomic):
        return None
    w = ws[0][0]
    a = next((j for j in range(i + 1, len(stmts)) if stmts[j] is w), None)
    if a is None or w.result != name or name in free_vars(tuple(stmts[i + 1:a])):
        return None
    if w.name == name or any(isinstance(n, Read) for e in w.idx for n in walk(e)):
        return None
    bits = _BITS.get(getattr(w.rhs.ty, "name", ""), None)
    counts = _counter_counts(w.name, writes, allocs)
    if bits is None or counts is None:
        return None
    return Ticket(name, w.name, tuple(w.idx), tuple(l.iter for l in loops), bits, counts)


def _counter_counts(counter, writes, allocs):
    """(increment, extents) of every write of ``counter``, when each is an
    ``atomic_add`` of a constant >= 1 in a kernel whose loop extents read no loop
    variable; else None."""
    out = []
    loop_names = set()
    for ws in writes.values():
        for s, kl in ws:
            if kl:
                loop_names |= {l.iter for l in kl}
    for s, kl in writes.get(counter, []):
        if not isinstance(s, Atomic) or s.op != "add" or kl is None or s.name != counter:
            return None
        v = s.rhs
        if not (isinstance(v, Const) and isinstance(v.val, int) and not isinstance(v.val, bool)
                and v.val >= 1):
            return None
        ext = []
        for l in kl:
            used = free_vars((l.lo, l.hi))
            if used & (loop_names | set(allocs)):
                return None
            ext.append((l.lo, l.hi))
        out.append((v.val, tuple(ext)))
    return tuple(out) if out else None


def ticket_facts(t1, t2, same_launch: list) -> list:
    """For the tickets read by threads ``t1`` and ``t2`` (``ThreadEnv.tickets``): two
    from the same counter element and launch, from different executions, differ."""
    out = []
    for n1, (tk1, v1) in t1.tickets.items():
        for n2, (tk2, v2) in t2.tickets.items():
            if tk1.counter != tk2.counter:
                continue
            try:
                e1 = [t1.expr(e) for e in tk1.idx]
                e2 = [t2.expr(e) for e in tk2.idx]
                room = _room(t1, tk1)
                if n1 == n2:
                    other = z3.Or(*[t1.var(v) != t2.var(v) for v in tk1.scope]) \
                        if tk1.scope else z3.BoolVal(False)
                else:
                    other = z3.BoolVal(True)
            except Exception:   # an unencodable index or extent: no fact (sound)
                continue
            out.append(z3.Implies(z3.And(*same_launch, *[x == y for x, y in zip(e1, e2)],
                                         other, room), v1 != v2))
    return out


def _room(t, tk: Ticket):
    """The increments of one launch sum to less than ``2**bits``."""
    total = z3.IntVal(0)
    for inc, ext in tk.counts:
        term = z3.IntVal(inc)
        for lo, hi in ext:
            a, b = t.expr(lo), t.expr(hi)
            term = term * z3.If(b > a, b - a, 0)
        total = total + term
    return total < 2 ** tk.bits


__all__ = ["Ticket", "find_tickets", "ticket_facts"]
