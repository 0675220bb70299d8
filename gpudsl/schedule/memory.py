"""Memory primitives: set_memory, lift_alloc, sink_alloc, expand_dim, pad_dim,
rearrange_dim, divide_dim, bind_expr (and ``stage_mem``, in :mod:`.stage`).

Splitting or merging copies of an allocation (``sink_alloc``, ``expand_dim``,
``lift_alloc`` out of a loop) is proved to keep every read's value by
:mod:`.memflow`; memory changes inside a kernel keep the mapping rules (docs/language.md, "Meaning")
(:func:`~.parallel.keep_mapping`, through check()'s own rules).
"""
from __future__ import annotations

import dataclasses

import z3

from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Call, Const, Expr, For, If, Interval,
                        Pass, Point, Read, Reduce, TmaLoad, TmaStore, Var, Wgmma, WindowArg)
from ..ir.types import BLOCKS, GLOBAL, INDEX, REGISTER, SHARED, param_memory
from ..ir.visitor import Transformer, bound_names, free_vars, fresh_name, rename, walk
from .cursors import ancestors, block_of, iter_stmts, stmt_at
from .edits import insert, move, unchanged, update
from .fresh import all_names, uses
from .legality import prove
from .loops import _pe
from .memflow import check_flow
from .parallel import check_parallel, keep_mapping
from .patterns import parse_at, scope_at
from .primitive import (ALLOC, ANY, EXPR, NAME, NONNEG_INT, POSITIVE_INT, TEXT, choice,
                        current, fail, primitive)
from .simplify import const_value, normalize
from .stage import stage_mem


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


# ------------------------------------------------------------------ set_memory / pad_dim


@primitive("set_memory", alloc=ALLOC, memory=choice(SHARED, REGISTER, GLOBAL))
def set_memory(p, alloc, memory):
    """Change an allocation's memory (GLOBAL, SHARED or REGISTER).

    Legality: the meaning does not depend on where an array lives; inside a
    kernel the result keeps the mapping rules (docs/language.md, "Meaning") that the input kept
    (REGISTER arrays owned by one thread, SHARED arrays at block level), and no
    callee that takes the array expects another memory.

    Example: ``set_memory(p, "acc", REGISTER)``
    """
    c = alloc
    s = c.node()
    blk = block_of(p.ir, c.addr[:-1])
    for n in walk(blk[c.addr[-1] + 1:]):
        if isinstance(n, Call):
            for prm, arg in zip(n.proc.params, n.args):
                if isinstance(arg, WindowArg) and arg.name == s.name and \
                        param_memory(prm.mem) != memory:
                    raise fail(f"'{s.name}' is passed to {n.proc.name}, whose '{prm.name}' "
                               f"is in {param_memory(prm.mem).name} memory", n.loc,
                               "inline the call first")
    out = update(p.ir, c.addr, [s.with_(mem=memory)])
    if memory != s.mem:
        keep_mapping(p.ir, out.ir, s.loc, c.addr)
    return out


@primitive("pad_dim", alloc=ALLOC, dim=NONNEG_INT, size=TEXT)
def pad_dim(p, alloc, dim: int, size):
    """Grow dimension ``dim`` of an allocation to ``size`` (e.g. 32 → 33 to avoid
    shared-memory bank conflicts).

    Legality: proves that the new extent is at least the old one, so every
    access stays in bounds; ``size`` is an extent an allocation may have (sizes,
    index parameters and constants); a tile that a TMA copy or a wgmma reads or
    writes keeps its shape (their windows must stay contiguous, in the layout the
    hardware reads).

    Example: ``pad_dim(p, "tile", 1, "33")``
    """
    c = alloc
    s: Alloc = c.node()
    if not (0 <= dim < len(s.shape)):
        raise fail(f"'{s.name}' has no dimension {dim}", s.loc)
    for n in walk(block_of(p.ir, c.addr[:-1])[c.addr[-1] + 1:]):
        if isinstance(n, (TmaLoad, TmaStore, Wgmma)) and s.name in {
                w.name for w in (getattr(n, f, None) for f in ("dst", "src", "acc", "a", "b"))
                if w is not None}:
            raise fail(f"a TMA copy or a wgmma uses '{s.name}': its window must stay a "
                       "contiguous box in the layout the hardware reads", n.loc,
                       "pad a tile that only plain accesses use")
    new = normalize(parse_at(p.ir, c.addr, size, current(), "shape", s.loc, "the new extent"))
    old = s.shape[dim]
    prove(p.ir, c.addr, lambda enc, env: enc.int(new, env) >= enc.int(old, env),
          f"the new extent {_pe(new)} is at least the old one {_pe(old)}", s.loc)
    shape = s.shape[:dim] + (new,) + s.shape[dim + 1:]
    return update(p.ir, c.addr, [s.with_(shape=shape)])


class _Reindex(Transformer):
    """Every access of the array ``s`` after its allocation with its index tuple
    rewritten by ``fn`` (a layout change: the same elements, named anew).  ``moves_last``:
    the change moves the last dimension (an async copy's contiguous run: refused, as
    ``atomic`` results and windows passed on, which would see another layout)."""

    def __init__(self, s: Alloc, fn, moves_last: str | None, window_hint: str):
        self.s, self.fn, self.moves_last, self.window_hint = s, fn, moves_last, window_hint

    def visit_Read(self, e):
        e = self.generic(e)
        return e.with_(idx=self.fn(e.idx)) if e.name == self.s.name else e

    def _st(self, st):
        if isinstance(st, Atomic) and st.result == self.s.name:
            raise fail(f"'{self.s.name}' receives an atomic's old value", st.loc)
        st = self.generic(st)
        return st.with_(idx=self.fn(st.idx)) if st.name == self.s.name else st

    visit_Assign = visit_Reduce = visit_Atomic = _st

    def visit_AsyncCopy(self, st):
        name = self.s.name
        if name in (st.dst, st.src) and self.moves_last:
            raise fail(f"an async copy moves contiguous elements of '{name}' along its last "
                       f"dimension, which {self.moves_last}", st.loc)
        if st.dst == name:
            st = st.with_(dst_idx=self.fn(st.dst_idx))
        if st.src == name:
            st = st.with_(src_idx=self.fn(st.src_idx))
        return st

    def visit_WindowArg(self, e):
        if e.name == self.s.name:
            raise fail(f"a window of '{e.name}' is passed on (to a call, a wgmma or a TMA "
                       "copy)", e.loc, self.window_hint)
        return e


def _reindexed(p, c, s: Alloc, new_alloc: Alloc, re: _Reindex):
    """The allocation at cursor ``c`` replaced by ``new_alloc`` and every later access
    rewritten by ``re``, the mapping rules kept."""
    a = c.addr
    rest = re.visit_block(block_of(p.ir, a[:-1])[a[-1] + 1:])
    out = update(p.ir, a, (new_alloc,) + rest)
    keep_mapping(p.ir, out.ir, s.loc, a)
    return out


@primitive("rearrange_dim", alloc=ALLOC, perm=ANY)
def rearrange_dim(p, alloc, perm):
    """Permute the dimensions of an allocation: dimension ``d`` of the new layout
    is dimension ``perm[d]`` of the old one, at the allocation and every access
    (e.g. ``[1, 0]`` stores a ``[128, 8]`` tile transposed as ``[8, 128]``).

    Legality: ``perm`` is a permutation of the dimensions; the layout of a local
    allocation is not part of the meaning (a bijection of its elements), so every
    access is rewritten alike; a window of the array passed to a call is refused
    (its callee would see another layout); inside a kernel the mapping rules
    stay kept.

    Example: ``rearrange_dim(p, "As", [1, 0])``
    """
    c = alloc
    s: Alloc = c.node()
    rank = len(s.shape)
    if not isinstance(perm, (list, tuple)) or any(
            isinstance(d, bool) or not isinstance(d, int) for d in perm) \
            or sorted(perm) != list(range(rank)):
        raise fail(f"perm must be a permutation of 0..{rank - 1} (the dimensions of "
                   f"'{s.name}'), not {perm!r}", s.loc)
    perm = tuple(perm)

    def permute(idx):
        return tuple(idx[d] for d in perm)

    moves = "this permutation moves" if perm and perm[-1] != rank - 1 else None
    re = _Reindex(s, permute, moves, "rearrange the allocation before vectorizing or "
                  "replacing its copies")
    return _reindexed(p, c, s, s.with_(shape=permute(s.shape)), re)


@primitive("divide_dim", alloc=ALLOC, dim=NONNEG_INT, quotient=POSITIVE_INT)
def divide_dim(p, alloc, dim: int, quotient: int):
    """Cut dimension ``dim`` of an allocation (a constant extent ``E``, a multiple of
    ``quotient``) into two, ``E // quotient`` and ``quotient``: every index ``e`` of it
    becomes ``e // quotient, e % quotient`` (e.g. a ``[64, 16]`` tile as ``[64, 2, 8]``,
    the two 8-column halves a wgmma operand reads).

    Legality: the elements keep their places in memory (row-major order is the same)
    and every access names the same element, so the meaning is kept; ``quotient``
    divides the extent; a window of the array (a call's, a wgmma's or a TMA copy's
    argument) or an async copy along the cut dimension is refused (it would name a
    range across the cut); inside a kernel the mapping rules stay kept.

    Example: ``divide_dim(p, "As", 1, 8)``
    """
    c = alloc
    s: Alloc = c.node()
    if not (0 <= dim < len(s.shape)):
        raise fail(f"'{s.name}' has no dimension {dim}", s.loc)
    ext = const_value(s.shape[dim])
    if ext is None or ext % quotient:
        raise fail(f"dimension {dim} of '{s.name}' has extent {_pe(s.shape[dim])}, not a "
                   f"constant multiple of {quotient}", s.loc)
    q = Const(quotient)

    def cut(idx):
        e = idx[dim]
        return idx[:dim] + (normalize(_e("//", e, q)), normalize(_e("%", e, q))) + idx[dim + 1:]

    moves = "the cut divides" if dim == len(s.shape) - 1 else None
    re = _Reindex(s, cut, moves, "cut the dimension before making the window")
    shape = s.shape[:dim] + (Const(ext // quotient), q) + s.shape[dim + 1:]
    return _reindexed(p, c, s, s.with_(shape=shape), re)


# ------------------------------------------------------------------ lift / sink


@primitive("lift_alloc", alloc=ALLOC, n_lifts=POSITIVE_INT)
def lift_alloc(p, alloc, n_lifts: int = 1):
    """Move an allocation out of its enclosing loop or ``if`` (``n_lifts`` times);
    it takes a fresh name where the name is taken at its new place.

    Legality: the shape does not use the loop variable; out of a loop, one copy
    serves all iterations, so proves (data flow) that no read sees a value written
    in another iteration; out of a par loop, proves that no two iterations
    conflict on it.

    Example: ``lift_alloc(p, "acc", n_lifts=2)``
    """
    out, addr = unchanged(p.ir), alloc.addr
    for _ in range(n_lifts):
        step, addr = _lift_once(out.ir, addr)
        out = out.then(step)
    return out


def _or_pass(body: tuple, fld: str, s) -> tuple:
    """A loop or ``then`` block left empty by the lift is a ``pass``, the form the
    parser gives it (an empty block printed as ``pass`` parsed back unequal); an
    empty ``else`` is no ``else``."""
    return body if body or fld == "orelse" else (Pass(s.loc),)


def _lift_once(pdef, a):
    """One lift of the allocation at ``a``: the edit, and the allocation's new address."""
    s: Alloc = stmt_at(pdef, a)
    if len(a) < 3:
        raise fail(f"'{s.name}' is already at the top of the proc", s.loc)
    pa = a[:-2]
    P = stmt_at(pdef, pa)
    fld, j = a[-2], a[-1]
    if isinstance(P, For) and P.iter in free_vars(s.shape):
        raise fail(f"the shape of '{s.name}' depends on {P.iter}", s.loc)
    outer_blk = block_of(pdef, pa[:-1])
    inner = getattr(P, fld)
    P2 = P.with_(**{fld: _or_pass(inner[:j] + inner[j + 1:], fld, s)})
    others = bound_names(outer_blk[:pa[-1]] + outer_blk[pa[-1] + 1:]) | bound_names(P2)
    if s.name in others:
        # another allocation of the name next to the statement or inside it: the
        # lifted one takes a fresh name (its uses follow it in its block)
        new = fresh_name(s.name, all_names(pdef))
        tail = rename(inner[j + 1:], {s.name: new})
        s = s.with_(name=new)
        P2 = P.with_(**{fld: _or_pass(inner[:j] + tail, fld, s)})
    # the allocation moves before the statement; a block left empty keeps a pass; the
    # names are rewritten in place
    out = move(pdef, a, pa)
    nxt = pa[:-1] + (pa[-1] + 1,)
    if len(getattr(P2, fld)) > len(inner) - 1:
        out = out.then(insert, nxt + (fld, 0), getattr(P2, fld))
    out = out.then(update, pa, [s, P2])
    ir = out.ir
    if isinstance(P, For):
        # one copy for all iterations: no read may see another iteration's value
        check_flow(ir, pa[:-1] + (pa[-1] + 1,), (P2,), s.name, Var(P.iter), s.loc,
                   f"a read of '{s.name}' would see a value from another iteration of "
                   f"{P.iter}")
    if isinstance(P, For) and P.kind == "par":
        check_parallel(ir, pa[:-1] + (pa[-1] + 1,), P2, only={s.name})
    return out, pa


@primitive("sink_alloc", alloc=ALLOC)
def sink_alloc(p, alloc):
    """Move an allocation into the loop (or ``if`` branch) right after it, its
    only user.

    Legality: nothing after that statement uses the allocation and its header
    does not read it; into a loop, one copy per iteration, so proves (data flow,
    element by element) that no value flows from one iteration to a later one;
    inside a kernel the mapping rules (docs/language.md, "Meaning") stay kept.

    Example: ``sink_alloc(p, "acc")``
    """
    c = alloc
    s: Alloc = c.node()
    a = c.addr
    blk = block_of(p.ir, a[:-1])
    i = a[-1]
    if i + 1 >= len(blk) or not isinstance(blk[i + 1], (For, If)):
        raise fail(f"'{s.name}' must be followed by a loop or an if", s.loc)
    S = blk[i + 1]
    for later in blk[i + 2:]:
        if uses((later,), s.name):
            raise fail(f"'{s.name}' is used after the statement it would sink into",
                       later.loc)
    if isinstance(S, If):
        if uses(S.orelse, s.name) and uses(S.body, s.name):
            raise fail(f"both branches use '{s.name}'", S.loc)
        fld = "orelse" if uses(S.orelse, s.name) else "body"
    else:
        fld = "body"
        if S.iter in free_vars(s.shape):
            raise fail("impossible: the shape uses the loop variable", s.loc)
    hdr = (S.lo, S.hi) if isinstance(S, For) else (S.cond,)
    if any(isinstance(n, Read) and n.name == s.name for e in hdr for n in walk(e)):
        raise fail(f"the header of the statement reads '{s.name}'", S.loc)
    if isinstance(S, For):
        # one copy per iteration: no value may flow from one iteration to another
        check_flow(p.ir, a[:-1] + (i + 1,), (S,), s.name, Var(S.iter), S.loc,
                   f"a value of '{s.name}' flows from one iteration of {S.iter} to a "
                   "later one")
    # the allocation moves to the front of S's block
    out = move(p.ir, a, a[:-1] + (i + 1, fld, 0))
    keep_mapping(p.ir, out.ir, s.loc, a)
    return out


# ------------------------------------------------------------------ expand_dim


@primitive("expand_dim", alloc=ALLOC, size=TEXT, index=TEXT)
def expand_dim(p, alloc, size, index):
    """Add a leading dimension of ``size`` to an allocation, indexed by ``index``
    (an expression over the loops around its uses) at every access.

    Legality: proves ``0 <= index < size`` at every access; proves (data flow)
    that a value written where ``index`` has one value is never read where it has
    another (one copy per value of ``index`` must keep every read's value); inside
    a kernel the mapping rules (docs/language.md, "Meaning") stay kept.

    Example: ``expand_dim(p, "acc", "16", "t")``
    """
    c = alloc
    s: Alloc = c.node()
    sz, ix = _size_and_index(p.ir, c.addr, s, size, index)
    a = c.addr
    baddr = a[:-1]
    _index_in_bounds(p.ir, a, s.name, ix, sz)
    rest0 = block_of(p.ir, baddr)[a[-1] + 1:]
    if rest0:
        check_flow(p.ir, baddr + (a[-1] + 1,), rest0, s.name, ix, s.loc,
                   f"a value of '{s.name}' written where {_pe(ix)} has one value is read "
                   "where it has another")
    blk = block_of(p.ir, baddr)
    rest = _Expand(s, ix).visit_block(blk[a[-1] + 1:])
    new_alloc = s.with_(shape=(sz,) + s.shape)
    out = update(p.ir, a, (new_alloc,) + rest)
    keep_mapping(p.ir, out.ir, s.loc, a)
    return out


def _size_and_index(pdef, addr, s: Alloc, size: str, index: str):
    """The new extent (of names visible at the allocation ``s`` at ``addr``) and
    the index, parsed and normalized."""
    prim = current()
    sz = normalize(parse_at(pdef, addr, size, prim, "shape", s.loc, "the new extent"))
    ix = normalize(parse_at(pdef, addr, index, prim, "int", s.loc, "the index",
                            all_loops=True))
    bad_vars = free_vars(sz) - set(scope_at(pdef, addr))
    if bad_vars:
        raise fail(f"the size uses {', '.join(sorted(bad_vars))}, not visible at the "
                   "allocation", s.loc)
    return sz, ix


def _index_in_bounds(pdef, a, name: str, ix, sz):
    """Prove ``0 <= ix < sz`` at every statement after the allocation at ``a`` that
    uses ``name`` (its names visible there)."""
    baddr = a[:-1]
    prefix_len = len(baddr)
    # every access site (the bound depends only on the enclosing statements: one
    # proof per block, not per statement; issue 28)
    proved: set = set()
    for addr, st in iter_stmts(pdef):
        if addr[:prefix_len] != baddr or addr[prefix_len] <= a[-1]:
            continue
        if not _stmt_mentions(st, name):
            continue
        visible = set(scope_at(pdef, addr))
        missing = free_vars(ix) - visible
        if missing:
            raise fail(f"the index {_pe(ix)} uses {', '.join(sorted(missing))}, not "
                       "visible here", st.loc)
        if addr[:-1] in proved:
            continue
        proved.add(addr[:-1])
        prove(pdef, addr, lambda enc, e_: z3.And(enc.int(ix, e_) >= 0,
                                                 enc.int(ix, e_) < enc.int(sz, e_)),
              f"0 <= {_pe(ix)} < {_pe(sz)} where '{name}' is used", st.loc)


class _Expand(Transformer):
    """Every access of the allocation ``s`` given the leading index ``ix``."""

    def __init__(self, s: Alloc, ix):
        self.s, self.ix = s, ix

    def visit_Read(self, e):
        e = self.generic(e)
        return e.with_(idx=(self.ix,) + e.idx) if e.name == self.s.name else e

    def _st(self, st):
        s = self.s
        if isinstance(st, Atomic) and st.result == s.name:
            raise fail(f"'{s.name}' receives an atomic's old value, which goes into a "
                       "scalar", st.loc)
        st = self.generic(st)
        return st.with_(idx=(self.ix,) + st.idx) if st.name == s.name else st

    visit_Assign = visit_Reduce = visit_Atomic = _st

    def visit_AsyncCopy(self, st):
        st = self.generic(st)
        if st.dst == self.s.name:
            st = st.with_(dst_idx=(self.ix,) + st.dst_idx)
        if st.src == self.s.name:
            st = st.with_(src_idx=(self.ix,) + st.src_idx)
        return st

    def visit_WindowArg(self, e):
        if e.name != self.s.name:
            return e
        idx = e.idx or tuple(Interval(Const(0), x) for x in self.s.shape)
        return e.with_(idx=(Point(self.ix),) + idx)


def _stmt_mentions(st, name) -> bool:
    """Whether ``st`` itself accesses ``name``: a loop or an ``if`` by its header (its
    body's statements are asked one by one), any other statement by any of its parts
    (an element, a window, an async copy's ``dst``/``src``, a TMA box, a wgmma operand,
    an atomic's result: every statement kind, today's and tomorrow's)."""
    if isinstance(st, For):
        exprs = (st.lo, st.hi)
    elif isinstance(st, If):
        exprs = (st.cond,)
    else:
        if any(isinstance(getattr(st, f.name), str) and getattr(st, f.name) == name
               for f in dataclasses.fields(st)):
            return True
        exprs = (st,)
    return any(isinstance(n, (Read, WindowArg)) and n.name == name
               for e in exprs for n in walk(e))


# ------------------------------------------------------------------ bind_expr


@primitive("bind_expr", expr=EXPR, name=NAME)
def bind_expr(p, expr, name: str):
    """Compute an expression into a new scalar ``name`` right before its
    statement, and use the scalar there (every occurrence in the statement).

    Legality: none needed beyond a fresh name: the scalar is computed right
    before the statement, from the values the statement would read (only
    value expressions of assignments and reductions are bound).

    Example: ``bind_expr(p, "x[_] * a", "xa")``
    """
    c = expr
    e: Expr = c.node()
    st = stmt_at(p.ir, c.addr)
    if not isinstance(st, (Assign, Reduce, Atomic)):
        raise fail("only expressions of assignments and reductions can be bound", st.loc)
    if e.ty.kind == "index" or e.ty.kind == "bool":
        raise fail("index expressions and conditions stay symbolic; bind values", st.loc)
    if name in all_names(p.ir) or name in scope_at(p.ir, c.addr):
        raise fail(f"the name '{name}' is already used", st.loc)
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
    return update(p.ir, c.addr, [st2]).then(insert, c.addr, new[:2])


__all__ = ["stage_mem", "set_memory", "pad_dim", "divide_dim", "lift_alloc", "sink_alloc", "expand_dim",
           "bind_expr"]
