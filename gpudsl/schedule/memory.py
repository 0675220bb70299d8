"""Memory primitives: set_memory, lift_alloc, sink_alloc, expand_dim, pad_dim,
bind_expr (and ``stage_mem``, in :mod:`.stage`).

Splitting or merging copies of an allocation (``sink_alloc``, ``expand_dim``,
``lift_alloc`` out of a loop) is proved to keep every read's value by
:mod:`.memflow`; memory changes inside a kernel keep the mapping rules of SPEC 2.4
(:func:`keep_mapping`, through check()'s own rules).
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Call, Const, Expr, For, If, Interval,
                        Point, Read, Reduce, Var, WindowArg)
from ..ir.types import BLOCKS, GLOBAL, INDEX, REGISTER, SHARED, Memory
from ..ir.visitor import Transformer, bound_names, free_vars, fresh_name, rename, walk
from .cursors import (Cursor, ancestors, block_of, fwd_identity, fwd_insert, fwd_splice,
                      iter_stmts, replace_block, resolve, result, splice, stmt_at)
from .legality import prove
from .loops import _pe, check_parallel
from .memflow import check_flow
from .patterns import check_new_name, parse_at, scope_at
from .simplify import const_value, normalize
from .stage import stage_mem


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


def _all_names(pdef) -> set:
    return bound_names(pdef.body) | {p.name for p in pdef.params}


def _uses(stmts, buf) -> bool:
    for n in walk(tuple(stmts)):
        if isinstance(n, (Read, WindowArg, Assign, Reduce, Atomic)) and n.name == buf:
            return True
    return False


# ------------------------------------------------------------------ set_memory / pad_dim


def set_memory(p, alloc, memory: Memory):
    """Change an allocation's memory (kept within the mapping rules of SPEC 2.4 and
    the memories that callees expect)."""
    prim = "set_memory"
    c = resolve(p, alloc, prim, "alloc")
    if memory not in (SHARED, REGISTER, GLOBAL):
        raise SchedulingError(prim, f"unknown memory {memory!r}", c.loc)
    s = c.node()
    blk = block_of(p.ir, c.addr[:-1])
    for n in walk(blk[c.addr[-1] + 1:]):
        if isinstance(n, Call):
            for prm, arg in zip(n.proc.params, n.args):
                if isinstance(arg, WindowArg) and arg.name == s.name and \
                        (prm.mem or GLOBAL) != memory:
                    raise SchedulingError(prim, f"'{s.name}' is passed to {n.proc.name}, whose "
                                          f"'{prm.name}' is in {(prm.mem or GLOBAL).name} "
                                          "memory", n.loc, "inline the call first")
    ir = splice(p.ir, c.addr, [s.with_(mem=memory)])
    if memory != s.mem:
        keep_mapping(p.ir, ir, prim, s.loc, c.addr)
    return result(p, ir, fwd_identity)


def keep_mapping(old, new, prim, loc, addr):
    """Refuse when ``new`` breaks a mapping rule of SPEC 2.4 (kinds "mapping" and
    "divergence" of check(), REGISTER ownership included) that ``old`` kept.  Only
    for an allocation (at ``addr`` in ``old``) inside a kernel: outside one, a memory
    is a choice made before mapping the loops."""
    if not any(isinstance(x, For) and x.mapping == BLOCKS for x in ancestors(old, addr)):
        return
    from ..analysis.mapping import check_uniformity, issues_to_diagnostics

    def diags(ir):
        from ..analysis.effects import collect as effects
        from ..analysis.obligations import Ctx
        from ..analysis.obligations.ownership import check_ownership
        from ..ir.smt import DEFAULT_TIMEOUT_MS

        eff = effects(ir)
        ctx = Ctx(eff, {}, DEFAULT_TIMEOUT_MS)
        issues_to_diagnostics(eff, ctx.diagnostics, ctx.warnings)
        check_uniformity(eff, ctx.diagnostics)
        check_ownership(ctx)
        return [d for d in ctx.diagnostics if d.kind in ("mapping", "divergence", "unknown")]

    after = diags(new)
    if not after:
        return
    before = {(d.kind, d.message) for d in diags(old)}
    for d in after:
        if (d.kind, d.message) not in before:
            raise SchedulingError(prim, f"the result breaks a mapping rule (SPEC 2.4): "
                                  f"{d.message}", loc, d.hint or None, d.witness or None)


def pad_dim(p, alloc, dim: int, size):
    """Grow dimension ``dim`` of an allocation to ``size`` (e.g. 32 → 33 to avoid
    shared-memory bank conflicts)."""
    prim = "pad_dim"
    c = resolve(p, alloc, prim, "alloc")
    s: Alloc = c.node()
    if not (0 <= dim < len(s.shape)):
        raise SchedulingError(prim, f"'{s.name}' has no dimension {dim}", s.loc)
    new = normalize(parse_at(p.ir, c.addr, size, prim, "shape", s.loc, "the new extent"))
    old = s.shape[dim]
    prove(p.ir, c.addr, lambda enc, env: enc.int(new, env) >= enc.int(old, env), prim,
          f"the new extent {_pe(new)} is at least the old one {_pe(old)}", s.loc)
    shape = s.shape[:dim] + (new,) + s.shape[dim + 1:]
    return result(p, splice(p.ir, c.addr, [s.with_(shape=shape)]), fwd_identity)


# ------------------------------------------------------------------ lift / sink


def lift_alloc(p, alloc, n_lifts: int = 1):
    """Move an allocation out of its enclosing loop or ``if`` (``n_lifts`` times)."""
    prim = "lift_alloc"
    c = resolve(p, alloc, prim, "alloc")
    q = p
    for _ in range(n_lifts):
        q, c = _lift_once(q, c, prim)
    return q


def _lift_once(p, c, prim):
    s: Alloc = c.node()
    a = c.addr
    if len(a) < 3:
        raise SchedulingError(prim, f"'{s.name}' is already at the top of the proc", s.loc)
    pa = a[:-2]
    P = stmt_at(p.ir, pa)
    fld, j = a[-2], a[-1]
    if isinstance(P, For) and P.iter in free_vars(s.shape):
        raise SchedulingError(prim, f"the shape of '{s.name}' depends on {P.iter}", s.loc)
    outer_blk = block_of(p.ir, pa[:-1])
    inner = getattr(P, fld)
    P2 = P.with_(**{fld: inner[:j] + inner[j + 1:]})
    others = bound_names(outer_blk[:pa[-1]] + outer_blk[pa[-1] + 1:]) | bound_names(P2)
    if s.name in others:
        # another allocation of the name next to the statement or inside it: the
        # lifted one takes a fresh name (its uses follow it in its block)
        new = fresh_name(s.name, _all_names(p.ir))
        tail = rename(inner[j + 1:], {s.name: new})
        s = s.with_(name=new)
        P2 = P.with_(**{fld: inner[:j] + tail})
    ir = splice(p.ir, pa, [s, P2])
    if isinstance(P, For):
        # one copy for all iterations: no read may see another iteration's value
        check_flow(ir, pa[:-1] + (pa[-1] + 1,), (P2,), s.name, Var(P.iter), prim, s.loc,
                   f"a read of '{s.name}' would see a value from another iteration of "
                   f"{P.iter}")
    if isinstance(P, For) and P.kind == "par":
        check_parallel(ir, pa[:-1] + (pa[-1] + 1,), P2, prim, only={s.name})

    def inner_map(r):
        if len(r) == 1:
            return pa[:-1] + (pa[-1] + 1,)
        f2, jj = r[1], r[2]
        if f2 == fld and jj == j:
            return pa + r[3:]
        if f2 == fld and jj > j:
            jj -= 1
        return pa[:-1] + (pa[-1] + 1, f2, jj) + r[3:]

    q = result(p, ir, fwd_splice(pa, 2, inner_map))
    return q, Cursor(q, "stmt", pa)


def sink_alloc(p, alloc):
    """Move an allocation into the loop (or ``if``) right after it, its only user."""
    prim = "sink_alloc"
    c = resolve(p, alloc, prim, "alloc")
    s: Alloc = c.node()
    a = c.addr
    blk = block_of(p.ir, a[:-1])
    i = a[-1]
    if i + 1 >= len(blk) or not isinstance(blk[i + 1], (For, If)):
        raise SchedulingError(prim, f"'{s.name}' must be followed by a loop or an if", s.loc)
    S = blk[i + 1]
    for later in blk[i + 2:]:
        if _uses((later,), s.name):
            raise SchedulingError(prim, f"'{s.name}' is used after the statement it would "
                                  "sink into", later.loc)
    if isinstance(S, If):
        if _uses(S.orelse, s.name) and _uses(S.body, s.name):
            raise SchedulingError(prim, f"both branches use '{s.name}'", S.loc)
        fld = "orelse" if _uses(S.orelse, s.name) else "body"
    else:
        fld = "body"
        if S.iter in free_vars(s.shape):
            raise SchedulingError(prim, "impossible: the shape uses the loop variable", s.loc)
    hdr = (S.lo, S.hi) if isinstance(S, For) else (S.cond,)
    if any(isinstance(n, Read) and n.name == s.name for e in hdr for n in walk(e)):
        raise SchedulingError(prim, f"the header of the statement reads '{s.name}'", S.loc)
    if isinstance(S, For):
        # one copy per iteration: no value may flow from one iteration to another
        check_flow(p.ir, a[:-1] + (i + 1,), (S,), s.name, Var(S.iter), prim, S.loc,
                   f"a value of '{s.name}' flows from one iteration of {S.iter} to a "
                   "later one")
    S2 = S.with_(**{fld: (s,) + getattr(S, fld)})
    ir = splice(p.ir, a, [])
    ir = splice(ir, a, [S2])
    keep_mapping(p.ir, ir, prim, s.loc, a)

    def fwd(addr):
        L = len(a) - 1
        if len(addr) <= L or addr[:L] != a[:-1] or addr[L] < i:
            return addr
        if addr[L] == i:
            return a + (fld, 0) + addr[L + 1:]
        if addr[L] == i + 1:
            rest = addr[L + 1:]
            if rest and rest[0] == fld:
                return a + (fld, rest[1] + 1) + rest[2:]
            return a + rest
        return a[:-1] + (addr[L] - 1,) + addr[L + 1:]

    return result(p, ir, fwd)


# ------------------------------------------------------------------ expand_dim


def expand_dim(p, alloc, size, index):
    """Add a leading dimension of ``size`` to an allocation, indexed by ``index``
    at every access (proved in bounds)."""
    prim = "expand_dim"
    c = resolve(p, alloc, prim, "alloc")
    s: Alloc = c.node()
    sz = normalize(parse_at(p.ir, c.addr, size, prim, "shape", s.loc, "the new extent"))
    ix = normalize(parse_at(p.ir, c.addr, index, prim, "int", s.loc, "the index",
                            all_loops=True))
    bad_vars = free_vars(sz) - set(scope_at(p.ir, c.addr))
    if bad_vars:
        raise SchedulingError(prim, f"the size uses {', '.join(sorted(bad_vars))}, not "
                              "visible at the allocation", s.loc)
    a = c.addr
    baddr = a[:-1]
    prefix_len = len(baddr)
    # every access site
    for addr, st in iter_stmts(p.ir):
        if addr[:prefix_len] != baddr or addr[prefix_len] <= a[-1]:
            continue
        if not _stmt_mentions(st, s.name):
            continue
        visible = set(scope_at(p.ir, addr))
        missing = free_vars(ix) - visible
        if missing:
            raise SchedulingError(prim, f"the index {_pe(ix)} uses "
                                  f"{', '.join(sorted(missing))}, not visible here",
                                  st.loc)
        prove(p.ir, addr, lambda enc, e_: z3.And(enc.int(ix, e_) >= 0,
                                                 enc.int(ix, e_) < enc.int(sz, e_)),
              prim, f"0 <= {_pe(ix)} < {_pe(sz)} where '{s.name}' is used", st.loc)

    rest0 = block_of(p.ir, baddr)[a[-1] + 1:]
    if rest0:
        check_flow(p.ir, baddr + (a[-1] + 1,), rest0, s.name, ix, prim, s.loc,
                   f"a value of '{s.name}' written where {_pe(ix)} has one value is read "
                   "where it has another")

    class Ex(Transformer):
        def visit_Read(self, e):
            e = self.generic(e)
            return e.with_(idx=(ix,) + e.idx) if e.name == s.name else e

        def _st(self, st):
            st = self.generic(st)
            return st.with_(idx=(ix,) + st.idx) if st.name == s.name else st

        visit_Assign = visit_Reduce = visit_Atomic = _st

        def visit_WindowArg(self, e):
            if e.name != s.name:
                return e
            idx = e.idx or tuple(Interval(Const(0), x) for x in s.shape)
            return e.with_(idx=(Point(ix),) + idx)

    blk = block_of(p.ir, baddr)
    rest = Ex().visit_block(blk[a[-1] + 1:])
    new_alloc = s.with_(shape=(sz,) + s.shape)
    ir = replace_block(p.ir, baddr, blk[:a[-1]] + (new_alloc,) + rest)
    keep_mapping(p.ir, ir, prim, s.loc, a)
    return result(p, ir, fwd_identity)


def _stmt_mentions(st, name) -> bool:
    if isinstance(st, (Assign, Reduce, Atomic)) and st.name == name:
        return True
    if isinstance(st, For):
        exprs = (st.lo, st.hi)
    elif isinstance(st, If):
        exprs = (st.cond,)
    elif isinstance(st, (Assign, Reduce, Atomic)):
        exprs = (st.rhs,) + st.idx
    elif isinstance(st, Call):
        exprs = st.args
    else:
        return False
    return any(isinstance(n, (Read, WindowArg)) and n.name == name
               for e in exprs for n in walk(e))


# ------------------------------------------------------------------ bind_expr


def bind_expr(p, expr, name: str):
    """Compute an expression into a new scalar ``name`` right before its
    statement, and use the scalar there."""
    prim = "bind_expr"
    c = resolve(p, expr, prim, "expr")
    e: Expr = c.node()
    st = stmt_at(p.ir, c.addr)
    if not isinstance(st, (Assign, Reduce, Atomic)):
        raise SchedulingError(prim, "only expressions of assignments and reductions can be "
                              "bound", st.loc)
    if e.ty.kind == "index" or e.ty.kind == "bool":
        raise SchedulingError(prim, "index expressions and conditions stay symbolic; bind "
                              "values", st.loc)
    check_new_name(name, prim, st.loc)
    if name in _all_names(p.ir) or name in scope_at(p.ir, c.addr):
        raise SchedulingError(prim, f"the name '{name}' is already used", st.loc)
    in_blocks = any(isinstance(x, For) and x.mapping == BLOCKS
                    for x in ancestors(p.ir, c.addr))
    mem = REGISTER if in_blocks else GLOBAL
    rd = Read(name, (), e.ty, e.loc)

    class Sub(Transformer):
        def visit(self, node):
            if isinstance(node, Expr) and node == e:
                return rd
            return super().visit(node)

    st2 = st.with_(rhs=Sub().visit(st.rhs))
    new = [Alloc(name, e.ty, (), mem, st.loc), Assign(name, (), e, st.loc), st2]
    return result(p, splice(p.ir, c.addr, new), fwd_insert(c.addr, 2))


__all__ = ["stage_mem", "set_memory", "pad_dim", "lift_alloc", "sink_alloc", "expand_dim",
           "bind_expr"]
