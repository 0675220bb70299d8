"""``stage_mem``: stage a window of an array in a new allocation around a block.

``stage_mem(p, block, window, name, memory)`` allocates ``name`` (the shape of the
window's ranges) right before ``block``, copies the window in with ordinary ``seq``
loops when the block reads what was there before, rewrites the block's accesses that
lie in the window, and copies it back after the block when the block writes it.  The
copy loops are named after the staged array: ``NAME_in0, NAME_in1, ...`` (one per
range of the window) copy in, ``NAME_out0, ...`` copy back (``_1``, ``_2`` added only
where such a name is taken), so that both are found by name after other rewrites.
They are then the user's to map (``parallelize_loop``) and to separate with
``insert_sync``.

- The copy in is left out where no read sees its values: every read of the staged
  window in the block, and the copy back, reads an element the block wrote before
  (proved per read, :func:`gpudsl.schedule.memflow.reads_covered`): a write-only
  output costs no extra read of global memory.

- Accesses that the window does not cover are left alone, provided that they never
  touch the window's elements when either side writes (or the order would change).
- A window that may reach outside the array is accepted when every staged access is
  in the array: the copies are then guarded by the bounds conditions they need (so a
  point staged under ``if i < n:`` is copied under ``i < n``).  A *written* window past
  the edge (a block's output tile in the last block) is copied back under those bounds,
  the block's writes into the tile left as they are (guarded or not); the copy in is
  left out only where every element the guarded copy back reads is proved written by
  the block before, else the tile is first filled from the array (guarded too), so the
  copy back never writes an element inside the array the block did not write.
  ``make_tma_store`` takes that guarded copy back as a box the hardware clips.
- A range may have a step, ``lo:hi:s`` with ``s`` a positive integer literal: the
  window holds ``lo, lo + s, ...`` below ``hi`` (``(hi - lo + s - 1) // s`` elements),
  element ``i`` staged at ``(i - lo) // s``; an access covers it only where
  ``(i - lo) % s == 0`` is proved (a thread's strided register fragment,
  ``As[ti:ti + 49:16, ki]``).
"""
from __future__ import annotations

import ast

import z3

from ..errors import SchedulingError
from ..ir.nodes import (Alloc, Assign, AsyncCopy, Atomic, Wgmma, BinOp, Call, Const, For, If,
                        Interval, Point, Read, Stmt, TmaLoad, TmaStore, Var, WindowArg)
from ..ir.types import GLOBAL, INDEX, REGISTER, SHARED, bool_
from ..ir.visitor import Transformer, fresh_name, walk
from .cursors import block_of, stmt_at
from .edits import insert, update
from .fresh import all_names, uses
from .legality import collect, describe, find_bad as _find_bad, holds, prove
from .loops import _pe
from .memflow import reads_covered
from .patterns import parse_at, scope_at
from .primitive import BLOCK, BOOL, NAME, TEXT, choice, current, fail, primitive
from .simplify import const_value, normalize


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


def _c(op, a, b):
    return BinOp(op, a, b, bool_)


def _key(a):
    return (id(a.stmt), a.idx, a.mode == "r")


class _Redirect(Transformer):
    """Rewrites the staged accesses of ``buf`` (keys in ``staged``) into ``name``."""

    def __init__(self, buf, name, win: WindowArg, staged: set, steps: tuple = ()):
        self.buf, self.name, self.win, self.staged = buf, name, win, staged
        self.steps = steps or (1,) * len(win.idx)
        self.cur = None

    def visit(self, node):
        if isinstance(node, Stmt):
            prev, self.cur = self.cur, node
            try:
                return super().visit(node)
            finally:
                self.cur = prev
        return super().visit(node)

    def _idx(self, idx):
        out = []
        for i, w, s in zip(idx, self.win.idx, self.steps):
            if isinstance(w, Interval):
                off = _e("-", i, w.lo)
                out.append(normalize(_e("//", off, Const(s)) if s != 1 else off))
        return tuple(out)

    def visit_Read(self, e):
        key = (id(self.cur), e.idx, True)
        e = self.generic(e)
        if e.name != self.buf or key not in self.staged:
            return e
        return e.with_(name=self.name, idx=self._idx(e.idx))

    def _stmt(self, s):
        key = (id(s), s.idx, False)
        s = self.generic(s)
        if s.name != self.buf or key not in self.staged:
            return s
        return s.with_(name=self.name, idx=self._idx(s.idx))

    visit_Assign = visit_Reduce = _stmt


def _outside(win, steps=()):
    steps = steps or (1,) * len(win.idx)

    def bad(enc, aenv, a):
        outs = []
        for i, w, s in zip(a.idx, win.idx, steps):
            x = enc.int(i, aenv)
            if isinstance(w, Point):
                outs.append(x != enc.int(w.pt, {}))
            else:
                lo = enc.int(w.lo, {})
                outs.append(z3.Or(x < lo, x >= enc.int(w.hi, {})))
                if s != 1:  # between the window's elements
                    outs.append((x - lo) % s != 0)
        return z3.Or(*outs)
    return bad


def _steps(window: str, loc):
    """``window`` without the steps of its ranges, and the step of each subscript
    (1 where none is given); a step must be a positive integer literal."""
    try:
        tree = ast.parse(window.strip(), mode="eval")
    except SyntaxError:
        return window, ()
    sub = tree.body
    if not isinstance(sub, ast.Subscript):
        return window, ()
    elts = sub.slice.elts if isinstance(sub.slice, ast.Tuple) else [sub.slice]
    steps = []
    for el in elts:
        step = el.step if isinstance(el, ast.Slice) else None
        if step is None:
            steps.append(1)
            continue
        if not (isinstance(step, ast.Constant) and type(step.value) is int and
                step.value >= 1):
            raise fail(f"the step {ast.unparse(step)!r} of the window {window!r} must be a "
                       "positive integer literal", loc)
        steps.append(step.value)
        el.step = None
    if all(s == 1 for s in steps):
        return window, ()
    return ast.unparse(tree), tuple(steps)


@primitive("stage_mem", block=BLOCK, window=TEXT, name=NAME,
           memory=choice(SHARED, REGISTER, GLOBAL), zeros=BOOL)
def stage_mem(p, block, window, name: str, memory=SHARED, zeros: bool = False):
    """Stage ``window`` of an array (``"x[i, 0:m]"``) into a new array ``name`` in
    ``memory`` around ``block``: copied in before it (unless the block writes every
    element it or the copy back reads before reading it: a write-only output), the
    block's accesses in the window redirected, copied back after it when the block
    writes it.

    The copy loops are ordinary ``seq`` loops, one per range of the window, named
    ``NAME_in0, NAME_in1, ...`` (the copy in) and ``NAME_out0, NAME_out1, ...``
    (the copy back; ``_1`` is added where a name is taken), the user's to map and to
    separate with ``insert_sync``. A window that may reach outside the array gets guarded
    copies (a written one: the copy back writes only elements inside the array, the
    block's writes into the tile unchanged); with ``zeros=True`` the copy in writes 0 where the window leaves the array
    (what a TMA box reads there: ``make_tma`` then makes one box of it), elements the
    block never reads. A range may have a step (``"As[ti:ti + 49:16, ki]"``: every 16th row, a
    thread's strided register fragment).

    Legality: proves which accesses the window covers in every instance (on a
    stepped range: on the step, ``(i - lo) % step == 0``); an
    access left alone must never touch the window's elements where it or a staged
    access writes (the copy would reorder them); where the window may leave the
    array, every staged access is proved inside it; atomics and calls taking the
    array are refused. The copy in is left out only where every read of the staged
    array (the copy back's too, under its bounds guard) is proved to read an element
    the block wrote before; otherwise the tile is filled from the array first.

    Example: ``stage_mem(p, p.find_loop("j"), "x[i, 0:m]", "row", SHARED)``
    """
    c = block
    stmts = c.node()
    loc = stmts[0].loc
    env = scope_at(p.ir, c.addr)
    win, steps = _window(p.ir, c.addr, window, env, loc)
    buf = win.name
    ty, shape = env[buf][1], env[buf][2]
    if name in all_names(p.ir) or name in env:
        raise fail(f"the name '{name}' is already used", loc)
    mine = _accesses(stmts, buf, loc)
    shown = window.strip() if steps else _pe(win)  # a stepped window as the user wrote it
    staged, cov, guards = _covered(p.ir, c.addr, mine, win, steps, shape, shown, loc)
    # rewrite
    cp = _Copies(p.ir, buf, name, ty, shape, win, steps, guards, loc, zeros)
    writes = any(a.writes for a in cov)
    alloc = Alloc(name, ty, tuple(cp.ext), memory, loc)
    a0 = c.addr
    # the statements redirected in place, the copy back after them, the allocation
    # before them
    body = update(p.ir, a0, _Redirect(buf, name, win, staged, steps).visit_block(tuple(stmts)))
    if writes:
        body = body.then(insert, a0[:-1] + (a0[-1] + len(stmts),), [cp.copy(False)])
    out = body.then(insert, a0, [alloc])
    # the copy in is left out when no read sees its values: the block (and the copy
    # back) read only elements the block wrote before (a write-only output)
    n_body = len(stmts) + writes
    dead = (not steps and _overwritten_first(stmts, buf, win)) or \
        reads_covered(out.ir, a0[:-1] + (a0[-1] + 1,),
                      block_of(out.ir, a0[:-1])[a0[-1] + 1:a0[-1] + 1 + n_body], name)
    if not dead:
        out = out.then(insert, a0[:-1] + (a0[-1] + 1,), [cp.copy(True)])
    _copies_stay_parallel(p.ir, out.ir, a0, {buf, name})
    return out


def _window(pdef, addr, window: str, env, loc):
    """The window (parsed at ``addr``, every subscript normalized, the whole array
    for a bare name) and the steps of its ranges (``()`` when none is given)."""
    plain, steps = _steps(window, loc)
    win = parse_at(pdef, addr, plain, current(), "window", loc)
    if steps and (len(steps) != len(win.idx) or any(
            s != 1 and not isinstance(w, Interval) for s, w in zip(steps, win.idx))):
        raise fail(f"the window {window!r} has a step on a subscript that is not a range",
                   loc)
    if not win.idx:  # the whole array or a scalar
        shape = env[win.name][2]
        win = win.with_(idx=tuple(Interval(Const(0), x) for x in shape))
    win = win.with_(idx=tuple(Point(normalize(w.pt)) if isinstance(w, Point) else
                              Interval(normalize(w.lo), normalize(w.hi)) for w in win.idx))
    return win, steps


def _accesses(stmts, buf: str, loc) -> list:
    """The block's accesses of ``buf`` (not of a local copy); a call taking it, an
    async or TMA copy of it, a wgmma on it or an atomic on it is refused."""
    accs = collect(stmts)
    for n in walk(tuple(stmts)):
        if isinstance(n, Call) and any(isinstance(a, WindowArg) and a.name == buf
                                       for a in n.args):
            raise fail(f"a call in the block takes '{buf}'; inline it first", n.loc)
        if isinstance(n, AsyncCopy) and buf in (n.dst, n.src):
            raise fail(f"an async copy in the block copies '{buf}': it lands where its "
                       "wait runs, not where the staged copies are made", n.loc,
                       "stage a block without async copies of it")
        if isinstance(n, (TmaLoad, TmaStore)) and buf in (n.dst.name, n.src.name):
            raise fail(f"a TMA copy in the block copies '{buf}': a tensor map describes the "
                       "array itself, and the copy lands with its barrier's phase or its "
                       "group's wait, not where the staged copies are made", n.loc,
                       "stage a block without TMA copies of it")
        if isinstance(n, Wgmma) and buf in (n.acc.name, n.a.name, n.b.name):
            raise fail(f"a wgmma in the block uses '{buf}': it reads and writes it until its "
                       "wgmma_wait, and its operands keep their hardware layout", n.loc,
                       "stage a block without wgmmas on it")
    mine = [a for a in accs if a.buf == buf and not a.local]
    if not mine:
        raise fail(f"the block does not access '{buf}'", loc)
    for a in mine:
        if a.mode == "atomic" or isinstance(a.stmt, Atomic):
            raise fail(f"the block updates '{buf}' atomically (or receives an atomic's old "
                       "value in it); atomics cannot be staged", a.stmt.loc)
    return mine


def _covered(pdef, addr, mine, win, steps, shape, shown: str, loc):
    """``(staged, cov, guards)``: the keys of the accesses the window covers, those
    accesses, and the bounds guards of the copies (:func:`_bounds`); refused when
    it covers none, or an access left alone may touch the window."""
    staged, missed, first_miss = _split(pdef, addr, mine, win, steps)
    if not staged:
        a, w = first_miss
        raise fail(f"the window {shown} misses {describe(a)}", a.stmt.loc,
                   "widen the window or stage a smaller block", w)
    cov = [a for a in mine if _key(a) in staged]
    _keep_order(pdef, addr, cov, [a for a in mine if _key(a) not in staged], win, steps,
                shown)
    guards = _bounds(pdef, addr, win, shape, cov, win.name, loc, shown)
    return staged, cov, guards


class _Copies:
    """The copies between the window of ``buf`` and the staged array ``name``:
    loops over ``name_in0, name_in1, ...`` in and ``name_out0, ...`` back (one per
    range, of the range's extent; ``_1``, ... added where a name is taken),
    guarded where the window may leave the array (``guards``, from :func:`_bounds`)."""

    def __init__(self, pdef, buf, name, ty, shape, win, steps, guards, loc, zeros=False):
        self.buf, self.name, self.ty, self.shape = buf, name, ty, shape
        self.zeros = zeros
        self.win, self.guards, self.loc = win, guards, loc
        self.stp = steps or (1,) * len(win.idx)
        self.ext = [normalize(_e("-", w.hi, w.lo) if s == 1 else
                              _e("//", _e("+", _e("-", w.hi, w.lo), Const(s - 1)), Const(s)))
                    for w, s in zip(win.idx, self.stp) if isinstance(w, Interval)]
        taken = all_names(pdef)
        self.iters = {}
        for way in ("in", "out"):
            self.iters[way] = []
            for d in range(len(self.ext)):
                n_ = fresh_name(f"{name}_{way}{d}", taken)
                taken.add(n_)
                self.iters[way].append(n_)

    def _source(self, iters) -> list:
        """The element of ``buf`` that iteration ``iters`` of the copy loops copies."""
        src_idx, k = [], 0
        for w, s in zip(self.win.idx, self.stp):
            if isinstance(w, Point):
                src_idx.append(w.pt)
            else:
                v = Var(iters[k]) if s == 1 else _e("*", Const(s), Var(iters[k]))
                src_idx.append(normalize(_e("+", w.lo, v)))
                k += 1
        return src_idx

    def copy(self, into_stage: bool):
        """The copy loops in (``into_stage``: ``NAME_in0, NAME_in1, ...``) or back
        (``NAME_out0, ...``)."""
        buf, name, ty, loc = self.buf, self.name, self.ty, self.loc
        iters = self.iters["in" if into_stage else "out"]
        src_idx = self._source(iters)
        st_idx = tuple(Var(v) for v in iters)
        if into_stage:
            st = Assign(name, st_idx, Read(buf, tuple(src_idx), ty), loc)
        else:
            st = Assign(buf, tuple(src_idx), Read(name, st_idx, ty), loc)
        conds = []
        for d, lower, upper in self.guards:
            if lower:
                conds.append(_c(">=", src_idx[d], Const(0)))
            if upper:
                conds.append(_c("<", src_idx[d], self.shape[d]))
        if conds:
            cond = conds[0]
            for x in conds[1:]:
                cond = _c("and", cond, x)
            zero = (Assign(name, st_idx, Const(0.0 if ty.is_float else 0, ty), loc),) \
                if into_stage and self.zeros else ()
            st = If(cond, (st,), zero, loc)
        for v, x in reversed(list(zip(iters, self.ext))):
            st = For(v, Const(0), x, (st,), "seq", None, False, loc)
        return st


def _copies_stay_parallel(old, new, addr, bufs: set):
    """The copies run once per iteration of every loop around the block: refuse when
    they make two iterations of an enclosing ``par`` loop (mapped or not) conflict on
    the staged or the new buffer where the original's iterations did not (a whole
    window copied in and out by every thread races where each thread touched its
    own element)."""
    from .parallel import check_parallel

    for k in range(1, len(addr), 2):
        la = addr[:k]
        loop = stmt_at(new, la)
        if not (isinstance(loop, For) and loop.kind == "par"):
            continue
        accs = [x for x in collect(loop.body) if x.buf in bufs]
        if not any(x.writes for x in accs if not x.local):
            continue  # only reads, or buffers of one iteration: nothing to conflict
        try:
            check_parallel(new, la, loop, only=bufs)
        except SchedulingError as exc:
            try:
                check_parallel(old, la, stmt_at(old, la), only=bufs)
            except SchedulingError:
                continue  # the original's iterations conflicted already
            raise fail(f"the copies of the window would run in every iteration of the "
                       f"parallel loop {loop.iter} and conflict: {exc.reason}",
                       loop.loc, "stage a window that each iteration owns, or stage "
                       "outside the parallel loop", exc.witness) from None


def _split(pdef, addr, mine, win, steps=()):
    """The keys of the accesses the window covers in every instance, the others,
    and the first miss (access, witness)."""
    bad = _outside(win, steps)
    missed, first = set(), None
    answers: dict = {}  # one question per class of accesses (issue 28: N statements)
    for a in mine:
        k = (repr(a.idx), tuple(id(L) for L in a.loops), repr(a.guards))
        if k not in answers:
            answers[k] = _find_bad(pdef, addr, a, lambda enc, e_, a=a: bad(enc, e_, a))
        w = answers[k]
        if w is not None:
            missed.add(_key(a))
            if first is None:
                first = (a, w if w != "unknown" else None)
    staged = {_key(a) for a in mine} - missed
    return staged, missed, first


def _keep_order(pdef, addr, cov, unc, win, steps=(), shown=None):
    """An access left alone must not touch the window's elements where it or a
    staged access writes: the staged copy would reorder them."""
    cov_writes = any(a.writes for a in cov)
    bad = _outside(win, steps)
    for u in unc:
        if not (u.writes or cov_writes):
            continue
        w = _find_bad(pdef, addr, u, lambda enc, e_, u=u: z3.Not(bad(enc, e_, u)))
        if w is not None:
            msg = f"the window {shown or _pe(win)} misses {describe(u)}, which may touch " \
                  "its elements"
            raise fail(msg, u.stmt.loc, "widen the window or stage a smaller block",
                       None if w == "unknown" else w)


def _bounds(pdef, addr, win, shape, cov, buf, loc, shown=None):
    """(dim, lower, upper) guards the copies need where the window may leave the
    array; each staged access must then be proved inside the array."""
    out = []
    for d, (w, X) in enumerate(zip(win.idx, shape)):
        lo, hi = (w.pt, w.pt) if isinstance(w, Point) else (w.lo, w.hi)
        if isinstance(w, Interval):
            prove(pdef, addr, lambda enc, e_, lo=lo, hi=hi: enc.int(lo, e_) <= enc.int(hi, e_),
                  f"the window {shown or _pe(win)} has lo <= hi", loc)
            up = lambda enc, e_, hi=hi, X=X: enc.int(hi, e_) <= enc.int(X, e_)  # noqa: E731
        else:
            up = lambda enc, e_, hi=hi, X=X: enc.int(hi, e_) < enc.int(X, e_)  # noqa: E731
        lower = not holds(pdef, addr, lambda enc, e_, lo=lo: enc.int(lo, e_) >= 0)
        upper = not holds(pdef, addr, up)
        if lower or upper:
            out.append((d, lower, upper))
    if not out:
        return out
    for a in cov:
        def oob(enc, e_, a=a):
            return z3.Or(*[z3.Or(enc.int(i, e_) < 0, enc.int(i, e_) >= enc.int(X, e_))
                           for i, X in zip(a.idx, shape)])
        w = _find_bad(pdef, addr, a, oob)
        if w is not None:
            raise fail(f"the window {shown or _pe(win)} lies partly outside '{buf}' and "
                       f"{describe(a)} "
                       "may reach outside it too", a.stmt.loc, "stage a window inside the array",
                       None if w == "unknown" else w)
    return out


def _overwritten_first(stmts, buf, win) -> bool:
    """The block's first access of the window overwrites all of it: a plain
    top-level write of a point window, or a loop ``for v in seq(0, W)`` whose
    only statement writes element ``lo + v`` of a one-interval window of
    extent ``W`` without reading ``buf``."""
    if any(isinstance(w, Interval) for w in win.idx):
        return _loop_overwrites_first(stmts, buf, win)
    for s in stmts:
        if isinstance(s, Assign) and s.name == buf:
            return not any(isinstance(n, Read) and n.name == buf for n in walk(s.rhs)) \
                and tuple(normalize(i) for i in s.idx) == tuple(w.pt for w in win.idx)
        if uses((s,), buf):
            return False
    return False


def _loop_overwrites_first(stmts, buf, win) -> bool:
    ivs = [k for k, w in enumerate(win.idx) if isinstance(w, Interval)]
    if len(ivs) != 1:
        return False
    first = next((s for s in stmts if uses((s,), buf)), None)
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


__all__ = ["stage_mem"]
