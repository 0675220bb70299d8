"""``remove_guard``: an ``if`` whose body only computes values nobody reads where its
condition fails runs its body unconditionally.

The edges of a tiled kernel are guards (``divide_loop(tail="guard")``): ``if i < m:``
around a row's accumulation.  A warpgroup MMA computes a whole tile, rows past the edge
included; the rows' results are simply not stored.  That is this rewrite: the body of
``if g: S`` runs in every instance; where ``g`` fails it writes only elements of REGISTER
arrays that no later statement reads (the guarded epilogue does not), so no observable
value changes.

Legality, proved with the effect collector and the solver:

* the body is assignments and reductions in ``seq`` loops and ``if`` statements (no
  synchronization, asynchronous operation, call or atomic): running it more often
  changes nothing but the elements it writes;
* it writes only REGISTER arrays allocated in the proc (a thread's own elements);
* every access in it stays inside its array without ``g``;
* no *live* read touches an element the body writes where ``g`` fails: every read of
  the array outside the body, and the body's own reads where ``g`` holds, are proved to
  read other elements (the instances share the loops around the array's allocation).
"""
from __future__ import annotations

import z3

from ..ir.nodes import Alloc, Assign, For, If, Pass, Reduce, Stmt
from ..ir.stmt_effects import collect
from ..ir.smt import SAT, UNSAT, Unsupported
from ..ir.smt_scope import Scope
from ..ir.visitor import walk
from .cursors import Moved, MovedRange, block_of
from .edits import replace
from .legality import describe, find_bad
from .primitive import STMT, fail, primitive

_PLAIN = (Assign, Reduce, For, If, Pass)


@primitive("remove_guard", guard=STMT)
def remove_guard(p, guard):
    """Replace ``if g: S`` by ``S`` where the extra instances of ``S`` (those where
    ``g`` fails) compute only values nobody reads: the rows past a tile's edge that a
    warpgroup MMA computes and the guarded epilogue does not store.

    Legality: the ``if`` has no ``else``; its body is assignments and reductions
    (in ``seq`` loops and ``if`` statements) that write only REGISTER arrays allocated
    in the proc; each of its accesses stays inside its array without ``g`` (proved);
    where ``g`` fails, the elements it writes are read by no statement outside it and by
    none of its own instances where ``g`` holds (proved, with a witness otherwise).

    Example: ``remove_guard(p, p.find("if 64 * bi + ii < m: _"))``
    """
    c = guard
    g = c.node()
    if not isinstance(g, If):
        raise fail("the statement is not an if", getattr(g, "loc", None))
    if g.orelse:
        raise fail("the if has an else: both branches run where it is removed", g.loc)
    _plain_body(g)
    written = _written(p, c.addr, g)
    _inside_without_guard(p, c.addr, g)
    for name, alloc_addr in written.items():
        _dead_where_false(p, c.addr, g, name, alloc_addr)
    n = len(g.body)
    return replace(p.ir, c.addr, list(g.body),
                   keep=[MovedRange((0, "body"), 0, None, c.addr[:-1], c.addr[-1])]
                   if n else [])


def _plain_body(g: If):
    for s in walk(g.body):
        if isinstance(s, Stmt) and not isinstance(s, _PLAIN):
            raise fail(f"the if's body holds a {type(s).__name__} statement; only "
                       "assignments and reductions in seq loops run where it is removed",
                       s.loc)
        if isinstance(s, For) and (s.kind != "seq" or s.mapping is not None):
            raise fail(f"loop {s.iter} in the if's body is parallel; only seq loops run "
                       "where the guard is removed", s.loc)


def _written(p, addr, g: If) -> dict:
    """The arrays the body writes, each with the address of its allocation; refused
    unless each is a REGISTER array allocated in the proc around the if."""
    inner = {s.name for s in walk(g.body) if isinstance(s, Alloc)}
    names = {s.name for s in walk(g.body) if isinstance(s, (Assign, Reduce))} - inner
    allocs = _allocs_around(p.ir, addr)
    out = {}
    for name in sorted(names):
        a = allocs.get(name)
        if a is None:
            raise fail(f"the if's body writes '{name}', which is not allocated around it "
                       "(a parameter, or allocated inside): its values would be seen", g.loc)
        node, at = a
        if not node.mem.per_thread:
            raise fail(f"the if's body writes '{name}' in {node.mem.name}; only a thread's "
                       "own (REGISTER) elements may be computed and dropped", g.loc)
        out[name] = at
    return out


def _allocs_around(pdef, addr) -> dict:
    """name -> (Alloc, its address) for the allocations visible at ``addr`` (the
    innermost wins)."""
    out = {}
    blk, prefix = pdef.body, ()
    for k in range(0, len(addr), 2):
        i = addr[k]
        for j, s in enumerate(blk[:i]):
            if isinstance(s, Alloc):
                out[s.name] = (s, prefix + (j,))
        if k + 1 >= len(addr):
            break
        s = blk[i]
        prefix = prefix + (i, addr[k + 1])
        blk = getattr(s, addr[k + 1])
    return out


def _inside_without_guard(p, addr, g: If):
    accs = collect(g.body)
    for a in accs:
        if a.local:
            continue
        shape = _shape_at(p, addr, a.buf)
        if shape is None:
            continue

        def oob(sc, env, a=a, shape=shape):
            return z3.Or(*[z3.Or(sc.int(i, env) < 0, sc.int(i, env) >= sc.int(X, env))
                           for i, X in zip(a.idx, shape)])
        w = find_bad(p.ir, addr, a, oob)
        if w is not None:
            raise fail(f"without the guard, {describe(a)} may leave its array", a.stmt.loc,
                       "stage the operands in tiles first (stage_mem(..., zeros=True))",
                       None if w == "unknown" else w)


def _shape_at(p, addr, name):
    from .patterns import scope_at

    ent = scope_at(p.ir, addr).get(name)
    return None if ent is None or ent[0] != "array" else ent[2]


def _context(pdef, frm, to):
    """(loops, guards) of the statements between the block at ``frm`` (a block address)
    and the statement at ``to`` (below it)."""
    loops, guards = [], []
    blk = block_of(pdef, frm)
    rel = to[len(frm):]
    for k in range(0, len(rel) - 1, 2):
        s = blk[rel[k]]
        if isinstance(s, For):
            loops.append(s)
        elif isinstance(s, If):
            guards.append((s.cond, rel[k + 1] == "body"))
        blk = getattr(s, rel[k + 1])
    return loops, guards


def _dead_where_false(p, addr, g: If, name: str, alloc_addr):
    """No live read sees an element of ``name`` that the body writes where ``g`` fails."""
    pdef = p.ir
    region = alloc_addr[:-1]
    loops, guards = _context(pdef, region, addr)
    writes = [a for a in collect(g.body, loops, guards) if a.buf == name and a.writes]
    mine = [a for a in collect(g.body, loops, guards + [(g.cond, True)])
            if a.buf == name and a.mode != "w"]
    hollow = replace(pdef, addr, [g.with_(body=(Pass(g.loc),))]).ir
    outside = [a for a in collect(block_of(hollow, region)[alloc_addr[-1] + 1:])
               if a.buf == name and (a.mode != "w")]
    sc = Scope(pdef, alloc_addr)
    with sc.session() as check:
        for w in writes:
            for r in outside + mine:
                wi = sc.instance(w.loops, w.guards, "_w")
                ri = sc.instance(r.loops, r.guards, "_r")
                try:
                    false = z3.Not(sc.cond(g.cond, wi.env))
                    same = [sc.int(i, wi.env) == sc.int(j, ri.env) for i, j in zip(w.idx, r.idx)]
                except Unsupported as e:
                    raise fail(f"could not decide whether {describe(r)} reads what the body "
                               f"computes where the guard fails ({e})", g.loc) from None
                res = check(wi.facts + ri.facts + [false] + same)
                if res.status == UNSAT:
                    continue
                if res.status == SAT:
                    names = {f"{L.iter}_w": wi[L.iter] for L in w.loops}
                    names.update({f"{L.iter}_r": ri[L.iter] for L in r.loops})
                    raise fail(f"where the guard fails, the body writes an element of "
                               f"'{name}' that {describe(r)} reads", g.loc,
                               "guard the statements that read it with the same condition",
                               sc.witness(res.model, names))
                raise fail(f"could not prove that {describe(r)} never reads what the body "
                           f"computes where the guard fails (solver: {res.reason})", g.loc)


__all__ = ["remove_guard"]
