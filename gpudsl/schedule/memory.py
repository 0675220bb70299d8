"""Memory primitives: stage_mem, set_memory, lift_alloc, sink_alloc, expand_dim,
pad_dim, bind_expr.

``stage_mem(p, block, window, name, memory)`` allocates ``name`` (the shape of
the window's ranges) right before ``block``, copies the window in with ordinary
``seq`` loops (named ``i0, i1, ...``, fresh in the proc) when the block reads
it, rewrites the block's accesses, and copies it back after the block when the
block writes it.  The copy loops are then the user's to map
(``parallelize_loop``) and to separate with ``insert_sync``.
"""
from __future__ import annotations

import z3

from ..errors import SchedulingError
from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Call, Const, Expr, For, If, Interval,
                        Point, Read, Reduce, Var, WindowArg)
from ..ir.types import BLOCKS, GLOBAL, INDEX, REGISTER, SHARED, Memory
from ..ir.visitor import Transformer, bound_names, free_vars, fresh_name, walk
from .cursors import (Cursor, ancestors, block_of, fwd_identity, fwd_insert, fwd_splice,
                      iter_stmts, replace_block, resolve, result, splice, stmt_at)
from .legality import collect, find_bad, find_conflict, prove, raise_conflict
from .loops import _pe, check_parallel
from .patterns import parse_expr, parse_window, scope_at
from .simplify import const_value, normalize


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


def _all_names(pdef) -> set:
    return bound_names(pdef.body) | {p.name for p in pdef.params}


def _uses(stmts, buf) -> bool:
    for n in walk(tuple(stmts)):
        if isinstance(n, (Read, WindowArg, Assign, Reduce, Atomic)) and n.name == buf:
            return True
    return False


# ------------------------------------------------------------------ stage_mem


class _Redirect(Transformer):
    """Rewrites accesses of ``buf`` inside the window into accesses of ``name``."""

    def __init__(self, buf, name, win: WindowArg):
        self.buf, self.name, self.win = buf, name, win

    def _idx(self, idx):
        out = []
        for i, w in zip(idx, self.win.idx):
            if isinstance(w, Interval):
                out.append(normalize(_e("-", i, w.lo)))
        return tuple(out)

    def visit_Read(self, e):
        e = self.generic(e)
        if e.name != self.buf:
            return e
        return e.with_(name=self.name, idx=self._idx(e.idx))

    def _stmt(self, s):
        s = self.generic(s)
        if s.name != self.buf:
            return s
        return s.with_(name=self.name, idx=self._idx(s.idx))

    visit_Assign = visit_Reduce = _stmt


def stage_mem(p, block, window, name: str, memory: Memory = SHARED):
    """Stage ``window`` of an array into a new ``name`` in ``memory`` around ``block``."""
    prim = "stage_mem"
    c = resolve(p, block, prim, "block")
    stmts = c.node()
    loc = stmts[0].loc
    env = scope_at(p.ir, c.addr)
    win = parse_window(window, env, prim, loc)
    if not win.idx:  # the whole array or a scalar
        shape = env[win.name][2]
        win = win.with_(idx=tuple(Interval(Const(0), x) for x in shape))
    win = win.with_(idx=tuple(Point(normalize(w.pt)) if isinstance(w, Point) else
                              Interval(normalize(w.lo), normalize(w.hi)) for w in win.idx))
    buf = win.name
    ty, shape = env[buf][1], env[buf][2]
    if name in _all_names(p.ir) or name in env:
        raise SchedulingError(prim, f"the name '{name}' is already used", loc)
    if memory not in (SHARED, REGISTER, GLOBAL):
        raise SchedulingError(prim, f"unknown memory {memory!r}", loc)
    accs = collect(stmts)
    for n in walk(tuple(stmts)):
        if isinstance(n, Call) and any(isinstance(a, WindowArg) and a.name == buf
                                       for a in n.args):
            raise SchedulingError(prim, f"a call in the block takes '{buf}'; inline it first",
                                  n.loc)
    mine = [a for a in accs if a.buf == buf and not a.local]
    if not mine:
        raise SchedulingError(prim, f"the block does not access '{buf}'", loc)
    for a in mine:
        if a.mode == "atomic":
            raise SchedulingError(prim, f"the block updates '{buf}' atomically; atomics "
                                  "cannot be staged", a.stmt.loc)
    # every access lies inside the window
    for a in mine:
        def bad(enc, aenv, a=a):
            outs = []
            for i, w in zip(a.idx, win.idx):
                x = enc.int(i, aenv)
                if isinstance(w, Point):
                    outs.append(x != enc.int(w.pt, {}))
                else:
                    outs.append(z3.Or(x < enc.int(w.lo, {}), x >= enc.int(w.hi, {})))
            return z3.Or(*outs)

        w = find_bad(p.ir, c.addr, a, bad)
        if w is not None:
            from .legality import describe

            msg = f"the window {_pe(win)} misses {describe(a)}"
            if w == "unknown":
                raise SchedulingError(prim, "could not prove that " + msg.replace(
                    "misses", "covers"), a.stmt.loc)
            raise SchedulingError(prim, msg, a.stmt.loc,
                                  "widen the window or stage a smaller block", w)
    # the window lies inside the array
    def inside(enc, e_):
        conds = []
        for w, ext in zip(win.idx, shape):
            X = enc.int(ext, e_)
            if isinstance(w, Point):
                conds += [enc.int(w.pt, e_) >= 0, enc.int(w.pt, e_) < X]
            else:
                conds += [enc.int(w.lo, e_) >= 0, enc.int(w.hi, e_) <= X,
                          enc.int(w.lo, e_) <= enc.int(w.hi, e_)]
        return z3.And(*conds) if conds else z3.BoolVal(True)

    prove(p.ir, c.addr, inside, prim, f"the window {_pe(win)} lies inside '{buf}'", loc)
    # rewrite
    ext = [normalize(_e("-", w.hi, w.lo)) for w in win.idx if isinstance(w, Interval)]
    taken = _all_names(p.ir)
    iters = []
    for d in range(len(ext)):
        n_ = fresh_name(f"i{d}", taken)
        taken.add(n_)
        iters.append(n_)

    def copy(into_stage: bool):
        src_idx, k = [], 0
        for w in win.idx:
            if isinstance(w, Point):
                src_idx.append(w.pt)
            else:
                src_idx.append(normalize(_e("+", w.lo, Var(iters[k]))))
                k += 1
        st_idx = tuple(Var(v) for v in iters)
        if into_stage:
            st = Assign(name, st_idx, Read(buf, tuple(src_idx), ty), loc)
        else:
            st = Assign(buf, tuple(src_idx), Read(name, st_idx, ty), loc)
        for v, x in reversed(list(zip(iters, ext))):
            st = For(v, Const(0), x, (st,), "seq", None, False, loc)
        return st

    writes = any(a.writes for a in mine)
    reads = any(not a.writes or a.mode != "w" for a in mine)
    copy_in = not _overwritten_first(stmts, buf, win)
    new = [Alloc(name, ty, tuple(ext), memory, loc)]
    if copy_in:
        new.append(copy(True))
    off = len(new)
    new += list(_Redirect(buf, name, win).visit_block(tuple(stmts)))
    if writes:
        new.append(copy(False))
    a0 = c.addr
    baddr = a0[:-1]
    blk = block_of(p.ir, baddr)
    ir = replace_block(p.ir, baddr, blk[:a0[-1]] + tuple(new) + blk[a0[-1] + len(stmts):])

    def inner_map(r):
        return baddr + (a0[-1] + off + r[0],) + r[1:]

    return result(p, ir, fwd_splice(a0, len(new), inner_map, n_old=len(stmts)))


def _overwritten_first(stmts, buf, win) -> bool:
    """The block's first access of the window overwrites all of it: a plain
    top-level write of a point window, or a loop ``for v in seq(0, W)`` whose
    only statement writes element ``lo + v`` of a one-interval window of
    extent ``W`` without reading ``buf``."""
    if any(isinstance(w, Interval) for w in win.idx):
        return _loop_overwrites_first(stmts, buf, win)
    for s in stmts:
        if isinstance(s, Assign) and s.name == buf:
            return not any(isinstance(n, Read) and n.name == buf for n in walk(s.rhs))
        if _uses((s,), buf):
            return False
    return False


def _loop_overwrites_first(stmts, buf, win) -> bool:
    ivs = [k for k, w in enumerate(win.idx) if isinstance(w, Interval)]
    if len(ivs) != 1:
        return False
    first = next((s for s in stmts if _uses((s,), buf)), None)
    if not (isinstance(first, For) and const_value(first.lo) == 0 and len(first.body) == 1):
        return False
    st = first.body[0]
    if not isinstance(st, Assign) or st.name != buf or \
            any(isinstance(n, Read) and n.name == buf for n in walk(st.rhs)):
        return False
    k = ivs[0]
    w = win.idx[k]
    if normalize(_e("-", w.hi, w.lo)) != normalize(first.hi):
        return False
    for d, (ix, wd) in enumerate(zip(st.idx, win.idx)):
        want = normalize(_e("+", wd.lo, Var(first.iter))) if d == k else normalize(wd.pt)
        if normalize(ix) != want:
            return False
    return True


# ------------------------------------------------------------------ set_memory / pad_dim


def set_memory(p, alloc, memory: Memory):
    """Change an allocation's memory."""
    c = resolve(p, alloc, "set_memory", "alloc")
    if memory not in (SHARED, REGISTER, GLOBAL):
        raise SchedulingError("set_memory", f"unknown memory {memory!r}", c.loc)
    s = c.node()
    return result(p, splice(p.ir, c.addr, [s.with_(mem=memory)]), fwd_identity)


def pad_dim(p, alloc, dim: int, size):
    """Grow dimension ``dim`` of an allocation to ``size`` (e.g. 32 → 33 to avoid
    shared-memory bank conflicts)."""
    prim = "pad_dim"
    c = resolve(p, alloc, prim, "alloc")
    s: Alloc = c.node()
    if not (0 <= dim < len(s.shape)):
        raise SchedulingError(prim, f"'{s.name}' has no dimension {dim}", s.loc)
    new = normalize(parse_expr(size, scope_at(p.ir, c.addr), prim, s.loc))
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
    for k, other in enumerate(outer_blk):
        if k != pa[-1] and s.name in bound_names((other,)):
            raise SchedulingError(prim, f"another '{s.name}' is allocated next to the loop",
                                  s.loc)
    inner = getattr(P, fld)
    P2 = P.with_(**{fld: inner[:j] + inner[j + 1:]})
    ir = splice(p.ir, pa, [s, P2])
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
        if not _overwritten_first(S.body, s.name, WindowArg(s.name, (), s.ty)) and \
                s.shape:
            accs = collect(S.body, loops=(S,))
            mine = [x for x in accs if x.buf == s.name]
            w = [x for x in mine if x.writes]
            r = [x for x in mine if not x.writes or x.mode != "w"]
            hit = find_conflict(p.ir, a[:-1] + (i + 1,), w, r,
                                lambda e1, e2: e1[S.iter] < e2[S.iter])
            if hit:
                raise_conflict(prim, f"a value of '{s.name}' flows from one iteration of "
                               f"{S.iter} to a later one", hit, S.loc)
        elif not s.shape and not _overwritten_first(S.body, s.name,
                                                    WindowArg(s.name, (), s.ty)):
            raise SchedulingError(prim, f"'{s.name}' may carry a value between iterations "
                                  f"of loop {S.iter}", S.loc)
    S2 = S.with_(**{fld: (s,) + getattr(S, fld)})
    ir = splice(p.ir, a, [])
    ir = splice(ir, a, [S2])

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
    env = scope_at(p.ir, c.addr)
    for _, st in iter_stmts(p.ir):
        if isinstance(st, For):
            env.setdefault(st.iter, ("var", INDEX, ()))
    sz = normalize(parse_expr(size, env, prim, s.loc))
    ix = normalize(parse_expr(index, env, prim, s.loc))
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
