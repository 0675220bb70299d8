"""Data flow through one allocation, for the memory primitives.

``sink_alloc`` (one copy per iteration of a loop) and ``expand_dim`` (one copy per
value of an index) split an allocation into several.  That keeps the meaning when
every read sees the same value as before: the last write before it of the same
element lands in the same copy.  :func:`check_flow` proves it, per read, in one of
two ways (both decided with legality's ``prove`` / ``find_conflict``):

- *covered*: in every instance, the element read was written earlier in the same
  iterations of the loops that separate the copies (so every write in between
  lands in the same copy too);
- *no flow*: no write of the element before the read lands in another copy.

Otherwise the primitive refuses, with a witness where there is one.
"""
from __future__ import annotations

import bisect
from dataclasses import replace

import z3

from ..errors import SchedulingError
from ..ir.nodes import Alloc, Atomic, BinOp, Call, Const, For, If, Read, Var
from ..ir.printer import print_expr
from ..ir.visitor import free_vars, walk
from ..ir.smt_scope import Scope
from .legality import RegionAccess, collect, find_conflict, prove, raise_conflict
from .memflow_lanes import merge_lanes
from .primitive import fail


class _Site:
    """An access of the buffer with its statement path in the region (ints are
    statement indices, "body"/"orelse" the block of a loop or if) and the paths of
    its enclosing loops."""

    def __init__(self, acc: RegionAccess, path: tuple, lpaths: tuple, leaf):
        self.acc, self.path, self.lpaths, self.leaf = acc, path, lpaths, leaf


def _sites(stmts, buf, path=(), loops=(), lpaths=(), guards=(), out=None):
    out = [] if out is None else out
    for k, s in enumerate(stmts):
        p = path + (k,)
        if isinstance(s, Alloc):
            if s.name == buf:
                raise fail(f"another '{buf}' is allocated inside its scope; rename one first",
                           s.loc)
            continue
        if isinstance(s, (For, If)):
            hdr = (s.lo, s.hi) if isinstance(s, For) else (s.cond,)
            for e in hdr:
                for n in walk(e):
                    if isinstance(n, Read) and n.name == buf:
                        out.append(_Site(RegionAccess(buf, "r", n.idx, loops, guards, s), p, lpaths,
                                         s))
            if isinstance(s, For):
                _sites(s.body, buf, p + ("body",), loops + (s,), lpaths + (p,), guards,
                       out)
            else:
                _sites(s.body, buf, p + ("body",), loops, lpaths,
                       guards + ((s.cond, True),), out)
                _sites(s.orelse, buf, p + ("orelse",), loops, lpaths,
                       guards + ((s.cond, False),), out)
            continue
        for a in collect((s,), loops, guards):
            if a.buf == buf:
                if a.mode == "atomic" or isinstance(s, Atomic) and s.name == buf:
                    raise fail(f"'{buf}' is updated atomically", s.loc)
                out.append(_Site(a, p, lpaths, s))
    return out


def _common(w: _Site, r: _Site) -> int:
    n = 0
    for x, y in zip(w.lpaths, r.lpaths):
        if x != y:
            break
        n += 1
    return n


def _static_before(w: _Site, r: _Site, over: bool):
    """Does ``w`` come before ``r`` in one pass through their common loops' bodies?
    ``over``: over-approximate where the order inside a call is unknown."""
    for x, y in zip(w.path, r.path):
        if x == y:
            continue
        if isinstance(x, int) and isinstance(y, int):
            return x < y
        return False  # the two branches of one if
    if len(w.path) != len(r.path):
        return len(w.path) < len(r.path)  # a loop or if header runs before its body
    # the same statement: an assignment reads before it writes
    return over and isinstance(w.leaf, Call)


def _before(w: _Site, r: _Site, ew, er, over: bool):
    n = _common(w, r)
    vw = [ew[L.iter] for L in w.acc.loops[:n]]
    vr = [er[L.iter] for L in r.acc.loops[:n]]
    terms = []
    for k in range(n):
        terms.append(z3.And(*[a == b for a, b in zip(vw[:k], vr[:k])], vw[k] < vr[k]))
    if _static_before(w, r, over):
        terms.append(z3.And(*[a == b for a, b in zip(vw, vr)]))
    return z3.Or(*terms) if terms else z3.BoolVal(False)


def _same_iteration(w: _Site, r: _Site, split: set, ew, er):
    """Constraints that ``w`` and ``r`` run in the same iteration of the loops
    (common to both) that bind the variables of ``split``; None when some such
    loop of ``r`` does not enclose ``w``."""
    n = _common(w, r)
    out = []
    for v in split:
        ks = [k for k, L in enumerate(r.acc.loops) if L.iter == v]
        if not ks:
            continue
        k = ks[-1]
        if k >= n:
            return None
        out.append(ew[v] == er[v])
    return out


def check_flow(pdef, addr, region: tuple, buf: str, ix, loc, why: str):
    """Refuse unless every read of ``buf`` in ``region`` (the statements from
    ``addr`` on) sees the same value when ``buf`` is split into one copy per value
    of the index expression ``ix`` (evaluated at each access)."""
    sites = _sites(region, buf)
    bound = {L.iter for s in sites for L in s.acc.loops}
    split = free_vars(ix) & bound
    if not split:
        return  # the index is fixed over the allocation's life: one copy is used
    writes = [s for s in sites if s.acc.mode != "r"]
    reads = [s for s in sites if s.acc.mode != "w"]
    seen: dict = {}
    before = _Before(sites, writes)
    lanes = merge_lanes(writes, _Site)
    for r in reads:
        if _covered(pdef, addr, r, lanes, split, seen, before):
            continue
        for w in writes:
            hit = find_conflict(
                pdef, addr, [w.acc], [replace(r.acc, mode="r")],
                lambda e1, e2, w=w: z3.And(_before(w, r, e1, e2, True),
                                           _ix(pdef, ix, e1) != _ix(pdef, ix, e2)),
                allow_reduce=False, tags=("_w", "_r"))
            if hit:
                raise_conflict(why, hit, loc)


def reads_covered(pdef, addr, region: tuple, buf: str) -> bool:
    """Whether every read of ``buf`` in ``region`` (the statements from ``addr`` on)
    reads an element that the region wrote before it, in every instance: the value
    ``buf`` held before the region is never read (``stage_mem`` leaves its copy in
    out then)."""
    sites = _sites(region, buf)
    writes = [s for s in sites if s.acc.mode != "r"]
    reads = [s for s in sites if s.acc.mode != "w"]
    if not writes:
        return not reads
    seen: dict = {}
    before = _Before(sites, writes)
    lanes = merge_lanes(writes, _Site)
    return all(_covered(pdef, addr, r, lanes, set(), seen, before) for r in reads)


def _ix(pdef, ix, env):
    return Scope(pdef).int(ix, env)


def _key(site: _Site):
    k = site.__dict__.get("_key")
    if k is None:
        k = site._key = (repr(site.acc.idx), repr(site.acc.guards), site.lpaths,
                         tuple(id(L) for L in site.acc.loops))
    return k


class _Before:
    """The writes of each class (indices, guards, loop paths), in program order, to
    find the nearest write of a read's class before it without scanning every write
    (N reads of N writes was quadratic; issue 28)."""

    def __init__(self, sites, writes):
        self.pos = {id(s): i for i, s in enumerate(sites)}
        self.groups: dict = {}
        for w in writes:
            self.groups.setdefault(_key(w)[:3], []).append(w)
        self.at = {k: [self.pos[id(w)] for w in g] for k, g in self.groups.items()}

    def candidates(self, r: _Site):
        """The writes of ``r``'s class that come before it in program order, nearest
        first (a write statically before ``r`` comes before it in program order)."""
        k = _key(r)[:3]
        j = bisect.bisect_left(self.at.get(k, []), self.pos[id(r)] + 1)
        g = self.groups.get(k, [])
        return (g[i] for i in range(j - 1, -1, -1))


def _covered(pdef, addr, r: _Site, writes, split, seen: dict, before: _Before) -> bool:
    # ``writes``: the writes with each vector copy's as one (memflow_lanes)
    # the nearest write of the same element before the read in the same loop body
    # usually covers it alone: one small question instead of one over every write
    # (a chain of N in-place updates asked N questions of N writes each).  The
    # question depends only on the two accesses' indices, guards and loops (the write
    # is before the read in both): asked once per such pair
    kr = _key(r)
    near = None
    for w in before.candidates(r):
        if _static_before(w, r, False):
            near = w
            break
    if near is not None:
        k = (kr, _key(near))
        if k not in seen:
            seen[k] = _covered_by(pdef, addr, r, [near], split)
        if seen[k]:
            return True
    return _covered_by(pdef, addr, r, writes, split)


def _covered_by(pdef, addr, r: _Site, writes, split) -> bool:
    """Is every instance of ``r`` covered by an earlier write of the same element in the
    same iterations of the ``split`` loops?  Asked first with the write's iteration
    given explicitly (:func:`_witness`: a quantifier-free question, which every solver
    version decides alike), then, where no witness was found or it does not fit, with
    the write's loop variables under an existential."""
    for explicit in (True, False):
        def prop(enc, env, explicit=explicit):
            ri = enc.instance(r.acc.loops, r.acc.guards, "_r")
            er, fr = ri.env, ri.facts
            alts = []
            for w in writes:
                alt = _cover_term(enc, w, r, split, er, explicit)
                if alt is not None:
                    alts.append(alt)
            if not alts:
                return z3.BoolVal(False)
            return z3.Implies(z3.And(*fr), z3.Or(*alts))

        try:
            prove(pdef, addr, prop, "", None)
        except SchedulingError:
            continue
        return True
    return False


def _cover_term(enc, w: _Site, r: _Site, split, er, explicit: bool):
    """``w`` writes the element ``r`` reads, before it, in the same ``split``
    iterations: for some iteration of ``w``'s loops (``explicit``: the one
    :func:`_witness` names, else an existential); None when it cannot."""
    wi = enc.instance(w.acc.loops, w.acc.guards, "_w")
    ew, fw = wi.env, wi.facts
    same = _same_iteration(w, r, split, ew, er)
    if same is None or len(w.acc.idx) != len(r.acc.idx):
        return None
    body = z3.And(*fw, *same, _before(w, r, ew, er, False),
                  *[enc.int(i, ew) == enc.int(j, er) for i, j in zip(w.acc.idx, r.acc.idx)])
    qv = [ew[L.iter] for L in w.acc.loops]
    if not explicit:
        return z3.Exists(qv, body) if qv else body
    pairs = _witness(enc, w, r, ew, er)
    return None if pairs is None else z3.substitute(body, *pairs)


def _witness(enc, w: _Site, r: _Site, ew, er):
    """The iteration of ``w``'s loops that writes the element ``r`` reads, as terms
    over ``r``'s instance, for the shapes staged copies have: each index of ``w`` a
    mixed-radix number, a sum of ``c * v``, ``c * (X // d)`` and ``c * (X % d)`` (``X``
    a loop variable or, recursively, such a sum: a flattened copy index) plus terms
    free of ``w``'s loops; a loop that indexes nothing is the same iteration of a loop
    common to both.  Where that shape does not fit because a loop common to both
    enters an index otherwise (``- 64 * ch``), the common loops are held at the read's
    iteration and only the others are read off.  Only a candidate: the question it is
    put in checks it.  None when no shape fits."""
    common = _common(w, r)
    for held in (0, common):
        pairs = _read_off(enc, w, r, ew, er, common, held)
        if pairs is not None:
            return pairs
    return None


def _read_off(enc, w: _Site, r: _Site, ew, er, common: int, held: int):
    """:func:`_witness` with ``w``'s first ``held`` loops (common to both) at the
    read's iteration."""
    mine = {L.iter for L in w.acc.loops[held:]}
    parts: dict = {}
    pending: dict = {}
    for wi, ri in zip(w.acc.idx, r.acc.idx):
        if not _invert(enc, wi, enc.int(ri, er), ew, mine, parts, pending):
            return None
    while pending:
        # an X whose two halves are both known: reading one off may give another X its
        # missing half (``(32 ch + cf) // 2`` gives ``32 ch + cf`` its quotient), so
        # the order is by readiness, not by when an X was first seen
        key = next((k for k, h in pending.items() if "//" in h and "%" in h), None)
        if key is None:
            return None  # X // d without X % d: X is not determined
        halves = pending.pop(key)
        if halves["//"][0] != halves["%"][0]:
            return None  # X // d and X % e with d != e: not a mixed-radix digit pair
        (d, quo), (_, rem) = halves["//"], halves["%"]
        if not _invert(enc, halves["expr"], d * quo + rem, ew, mine, parts, pending):
            return None
    pairs = []
    for k, L in enumerate(w.acc.loops):
        if L.iter in parts:
            pairs.append((ew[L.iter], parts[L.iter]))
        elif k < common:
            pairs.append((ew[L.iter], er[L.iter]))
        else:
            return None
    return pairs


def _invert(enc, e, value, ew, mine: set, parts: dict, pending: dict) -> bool:
    """Read off ``e == value`` as a mixed-radix number (see :func:`_witness`): each
    loop variable's value goes in ``parts``, each ``X // d`` and ``X % d`` in
    ``pending`` (keyed by ``X``'s text) until both halves of ``X`` are known."""
    lin = _mixed_radix(e, mine)
    if lin is None:
        return False
    terms, rest = lin
    value = value - sum((c * enc.int(x, ew) for c, x in rest), z3.IntVal(0))
    above = None
    for c, atom in sorted(terms, key=lambda t: -t[0]):
        v = value / c if above is None else (value % above) / c
        above = c
        if isinstance(atom, str):
            parts.setdefault(atom, v)
        else:
            op, x, d = atom
            slot = pending.setdefault(print_expr(x), {"expr": x})
            slot.setdefault(op, (d, v))
    return True


def _mixed_radix(e, mine: set):
    """``e`` as ``sum(c * atom) + sum(c * rest)``: atoms a loop variable's name (in
    ``mine``) or ``(op, X, d)`` for ``X // d`` / ``X % d`` with ``X`` depending on
    ``mine``; positive ``c`` and ``d``; ``rest`` the terms free of ``mine``.  None
    when ``e`` has another shape."""
    terms, rest = [], []

    def go(x, c):
        if not (free_vars(x) & mine):
            rest.append((c, x))
            return True
        if isinstance(x, Var):
            terms.append((c, x.name))
            return True
        if not isinstance(x, BinOp):
            return False
        if x.op == "+":
            return go(x.lhs, c) and go(x.rhs, c)
        if x.op == "-":
            return go(x.lhs, c) and go(x.rhs, -c)
        if x.op == "*":
            for a, b in ((x.lhs, x.rhs), (x.rhs, x.lhs)):
                if isinstance(a, Const) and isinstance(a.val, int):
                    return go(b, c * a.val)
            return False
        if (x.op in ("//", "%") and isinstance(x.rhs, Const)
                and isinstance(x.rhs.val, int) and x.rhs.val > 0):
            terms.append((c, (x.op, x.lhs, x.rhs.val)))
            return True
        return False

    if not go(e, 1) or any(c <= 0 for c, _ in terms):
        return None
    return terms, rest


__all__ = ["check_flow", "reads_covered"]
