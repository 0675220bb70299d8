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

**Whose counter.**  Two tickets can only be told apart when they come from one copy of
the counter: a SHARED counter has a copy per block (and per execution of the
statements that allocate it), a REGISTER one a copy per thread.  So the fact also
needs the iterators of the loops around the counter's allocation (the block loops for
a SHARED array) to be equal in both threads, and a REGISTER counter, or a counter
name allocated more than once, gives no tickets at all.  (Before this rule, a SHARED
counter in a kernel of two blocks was taken as one counter: two blocks' equal
tickets were "proved" distinct.)

**Resets.**  Other writes of the counter (a plain ``c[0] = 0``, an ``atomic_sub``...)
are allowed where they cannot come between two atomics of one launch and copy:

- a GLOBAL counter (a parameter or a host-level allocation) may be written in any
  other way *outside* the kernels that update it atomically, when no host-level
  ``par`` loop encloses one of its atomics: the kernels of a proc run one after
  another, so during the launch whose tickets are compared the counter's only
  writes are that kernel's atomic adds (zeroing the counter in a first kernel, then
  compacting in a second, is proved);
- a SHARED counter allocated directly in the innermost block loop's body may be
  written in any other way by statements of that body that stand before an
  unranged ``sync()`` of the same body, when every atomic of the counter stands in a
  statement after that ``sync()`` (GPUVerify's ``atomics/counter``: thread 0 zeroes
  ``count``, a barrier, then ``A[atomic_inc(&count)] = t``).  The body runs once per
  block, every thread of the block passes that barrier (it stands in no loop or
  ``if`` of the block's code) and only this block's threads touch its copy, so every
  such write happens before every atomic of the copy.

In both cases the counter only grows between the first and the last atomic of one
copy in one launch, which is all the distinctness argument uses; the increments of
the other kernels still count in the ``2**bits`` bound (an over-count: fewer facts).
"""
from __future__ import annotations

from dataclasses import dataclass

import z3

from ..ir.nodes import (Alloc, Assign, Atomic, Call, Const, For, If, Read, Reduce, Sync,
                        WindowArg)
from ..ir.types import BLOCKS, GLOBAL, SHARED
from ..ir.visitor import free_vars, walk


@dataclass(frozen=True)
class Ticket:
    local: str
    counter: str
    idx: tuple            # the counter element, in the allocation's scope
    scope: tuple          # the iterators of the loops around the allocation
    bits: int             # the counter's width
    counts: tuple         # (increment, (extents...)) per atomic_add on the counter
    copy: tuple = ()      # the iterators of the loops around the counter's allocation


_BITS = {"i32": 32, "i64": 64, "u32": 32, "u64": 64}


def find_tickets(body, params: dict | None = None) -> dict:
    """local name -> Ticket for the ticket locals of the (inlined) kernel ``body``;
    ``params``: array parameter name -> its Memory (GLOBAL when not given)."""
    allocs: dict = {}
    writes: dict = {}      # buffer or local name -> [(stmt, kernel loops or None, ctx)]
    ctx = dict(kernel=None, host_par=False, body=None, top=None)
    _scan(body, (), None, allocs, writes, ctx)
    out = {}
    for name, sites in allocs.items():
        t = _ticket(name, sites, allocs, writes, params or {})
        if t is not None:
            out[name] = t
    return out


def _scan(stmts, loops, kloops, allocs, writes, ctx):
    """Allocations and writes by name, each with its loops and context: ``kernel``
    (the outermost block loop), ``host_par`` (under a host-level ``par`` loop),
    ``body`` (the innermost block loop's body) and ``top`` (the index in ``body`` of
    the statement it stands in)."""
    for i, s in enumerate(stmts):
        c = dict(ctx, top=i) if stmts is ctx["body"] else ctx
        if isinstance(s, Alloc):
            allocs.setdefault(s.name, []).append((stmts, i, loops, s, c))
        elif isinstance(s, (Assign, Reduce)):
            writes.setdefault(s.name, []).append((s, None, c))
        elif isinstance(s, Atomic):
            writes.setdefault(s.name, []).append((s, kloops, c))
            if s.result is not None:
                writes.setdefault(s.result, []).append((s, None, c))
        elif isinstance(s, Call):
            for a in s.args:
                if isinstance(a, WindowArg):
                    writes.setdefault(a.name, []).append((s, None, c))
        elif isinstance(s, For):
            inner = kloops + (s,) if kloops is not None else \
                ((s,) if s.mapping == BLOCKS else None)
            sub = c
            if s.mapping == BLOCKS:
                sub = dict(c, kernel=c["kernel"] or s, body=s.body, top=None)
            elif c["kernel"] is None and s.kind == "par":
                sub = dict(c, host_par=True)
            _scan(s.body, loops + (s,), inner, allocs, writes, sub)
        elif isinstance(s, If):
            _scan(s.body, loops, kloops, allocs, writes, c)
            _scan(s.orelse, loops, kloops, allocs, writes, c)


def _ticket(name, sites, allocs, writes, params):
    if len(sites) != 1:
        return None
    stmts, i, loops, al, _ = sites[0]
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
    copy = _counter_copy(w.name, allocs, params)
    if bits is None or copy is None:
        return None
    counts = _counter_counts(w.name, writes, allocs, copy[1])
    if counts is None:
        return None
    return Ticket(name, w.name, tuple(w.idx), tuple(l.iter for l in loops), bits, counts,
                  copy[0])


def _counter_copy(counter, allocs, params):
    """(the iterators of the loops around the counter's allocation, its allocation
    site or None for a parameter), or None when the counter is not one GLOBAL or
    SHARED array (allocated twice, a REGISTER array, a parameter shadowed)."""
    sites = allocs.get(counter, [])
    if len(sites) > 1 or (sites and counter in params):
        return None
    if not sites:
        mem = params.get(counter, GLOBAL)
        return ((), None) if mem.scope == "grid" else None
    stmts, i, loops, al, c = sites[0]
    if al.mem.scope not in ("grid", "block") or not al.mem.writable:   # one shared copy
        return None
    return tuple(l.iter for l in loops), sites[0]


def _counter_counts(counter, writes, allocs, site):
    """(increment, extents) of every ``atomic_add`` of a constant >= 1 on ``counter``,
    each in a kernel whose loop extents read no loop variable, when every other write
    of it is a reset that cannot fall between two of them (module docstring); else
    None."""
    out = []
    loop_names = set()
    for ws in writes.values():
        for s, kl, _ in ws:
            if kl:
                loop_names |= {l.iter for l in kl}
    adds, resets = [], []
    for s, kl, c in writes.get(counter, []):
        v = getattr(s, "rhs", None)
        if isinstance(s, Atomic) and s.name == counter and s.op == "add" and kl is not None \
                and isinstance(v, Const) and isinstance(v.val, int) \
                and not isinstance(v.val, bool) and v.val >= 1:
            adds.append((s, kl, c))
        else:
            resets.append((s, c))
    if not adds or (resets and not _resets_apart(adds, resets, site)):
        return None
    for s, kl, c in adds:
        ext = []
        for l in kl:
            used = free_vars((l.lo, l.hi))
            if used & (loop_names | set(allocs)):
                return None
            ext.append((l.lo, l.hi))
        out.append((s.rhs.val, tuple(ext)))
    return tuple(out)


def _resets_apart(adds, resets, site) -> bool:
    """Every reset (a write other than a counted ``atomic_add``) happens outside the
    span of the atomics of one copy in one launch (module docstring, "Resets")."""
    if site is None or site[3].mem.scope == "grid":
        if site is not None and site[4]["kernel"] is not None:
            return False          # a GLOBAL array inside a kernel: a mapping error anyway
        kernels = {id(c["kernel"]) for s, kl, c in adds}
        return all(c["kernel"] is None or id(c["kernel"]) not in kernels for s, c in resets) \
            and not any(c["host_par"] for s, kl, c in adds)
    stmts, i, loops, al, c = site
    if stmts is not c["body"]:
        return False              # allocated in a loop or if of the block's code
    if any(x["top"] is None or x["body"] is not stmts
           for x in [r[1] for r in resets] + [a[2] for a in adds]):
        return False              # not all in the allocation's own statement list
    last = max(x["top"] for _, x in resets)
    first = min(x["top"] for _, _, x in adds)
    return any(isinstance(stmts[j], Sync) and not stmts[j].ranged
               for j in range(last + 1, first))


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
                same_copy = [t1.var(v) == t2.var(v) for v in tk1.copy]
                if n1 == n2:
                    other = z3.Or(*[t1.var(v) != t2.var(v) for v in tk1.scope]) \
                        if tk1.scope else z3.BoolVal(False)
                else:
                    other = z3.BoolVal(True)
            except Exception:   # an unencodable index or extent: no fact (sound)
                continue
            out.append(z3.Implies(z3.And(*same_launch, *same_copy,
                                         *[x == y for x, y in zip(e1, e2)], other, room),
                                  v1 != v2))
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
