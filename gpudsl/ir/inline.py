"""The one inliner: a call of a ``@proc`` replaced by the callee's body.

The meaning it keeps (docs/language.md (parameters)): scalars are passed **by value**, windows **alias**
the caller's array.  For a call ``f(args)`` the callee's body is copied with

- size and index parameters replaced by the argument expressions;
- scalar parameters replaced by the argument expression when the callee cannot
  change what that expression reads (it reads no buffer the callee writes through
  a window); otherwise the argument is evaluated once, before the body, into a
  fresh local scalar (``a: f32`` + ``a = arg``), which the body reads.  The fresh
  scalar lives where the frontend puts an allocation without ``@ MEM``:
  ``REGISTER`` inside a ``@ BLOCKS`` loop, ``GLOBAL`` at host level;
- window parameters resolved into index arithmetic on the caller's array:
  ``w[i, j]`` with ``w = x[r, a:b, c:d]`` becomes ``x[r, a + i, c + j]``
  (:func:`compose_index`; a window of a window: :func:`compose_window`);
- every name the callee binds (loop variables, allocations) renamed when it
  clashes with a name of the caller: its parameters, the names it binds, and the
  free names of the call's arguments (``taken``).  A free name is kept, so code
  stays readable; every name an expansion binds becomes taken, so names stay
  unique across expansions.

Options of :class:`Inliner`:

- ``keep_instr``: calls of ``@instr`` procs stay calls (their window arguments
  resolved); otherwise their body (the scalar meaning) is inlined too;
- ``recursive``: also inline the calls inside an inlined body (otherwise they
  stay calls, with their arguments in the caller's names);
- ``obligations``: emit, before each inlined body, ``Assign(WINDOW_CHECK, (),
  window)`` for each window argument with indices (it must lie inside its array)
  and ``Assign(PRED_CHECK, (), cond)`` for each assert of the callee (the call
  must satisfy it); the effects pass turns them into proof obligations;
- ``fold``: applied to every composed index (e.g. the scheduler's normaliser);
- ``bind``: how a scalar argument is evaluated into the fresh name ``tmp``:
  ``bind(tmp, arg, mem, loc)`` returns the statements (default :func:`bind_local`,
  the allocation and assignment; the analysis uses :func:`bind_value`, which only
  reads ``arg`` at the call, through ``Assign(VALUE_CHECK, (), arg)``, and leaves
  ``tmp`` an opaque value, so no memory write stands at the call).

``Inliner.bounds`` maps ``id(node)`` of each access rewritten through a window
(``Read``, ``Assign``, ``Reduce``, ``Atomic``) to ``(index, extent)`` pairs: the
window's own extents, which the access must respect besides the array's bounds;
``Inliner.keep`` holds those nodes so their ids stay valid.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Callable, Optional

from .nodes import (Alloc, Assign, AsyncCopy, Atomic, BinOp, Call, Const, Expr, For, If,
                    Interval, Point, ProcDef, Read, Reduce, Stmt, TmaLoad, TmaStore, Var, Wgmma, WindowArg)
from ..errors import CompileError, SchedulingError
from .types import BLOCKS, GLOBAL, INDEX, REGISTER, i32
from .visitor import Transformer, bound_names, children, free_vars, fresh_name, walk

WINDOW_CHECK = "__window__"
PRED_CHECK = "__pred__"
VALUE_CHECK = "__value__"


class InlineRefused(SchedulingError, CompileError):
    """A call the inliner cannot expand without changing its meaning: a
    ``SchedulingError`` of the ``inline`` primitive, a ``CompileError`` to code
    generation (check() reports it as a diagnostic)."""

    def __init__(self, message: str, loc=None, hint: str | None = None):
        SchedulingError.__init__(self, "inline", message, loc, hint)


def walk_window_bounds(w: WindowArg) -> list:
    """The offset expressions of a window argument."""
    out = []
    for part in w.idx:
        out.extend([part.pt] if isinstance(part, Point) else [part.lo, part.hi])
    return out


def _hold_window(w: WindowArg, hold: Callable) -> WindowArg:
    parts = []
    for part in w.idx:
        if isinstance(part, Point):
            parts.append(replace(part, pt=hold(part.pt)))
        else:
            lo = hold(part.lo)
            parts.append(replace(part, lo=lo, hi=hold(part.hi)))
    return replace(w, idx=tuple(parts))


def _uses_outside_indices(callee: ProcDef, name: str) -> str:
    """Where ``callee`` uses the control parameter ``name`` other than inside an
    access index, a window offset or an assert ("" when nowhere)."""
    def uses(e) -> bool:
        return e is not None and any(isinstance(n, Var) and n.name == name for n in walk(e))

    def value_use(e) -> bool:  # outside the indices of the reads in ``e``
        if e is None:
            return False
        if isinstance(e, Var):
            return e.name == name
        return not isinstance(e, Read) and any(value_use(c) for c in children(e))

    def inside(stmts) -> str:
        for s in stmts:
            if isinstance(s, For):
                if uses(s.lo) or uses(s.hi):
                    return f"the bounds of the loop '{s.iter}'"
                r = inside(s.body)
            elif isinstance(s, If):
                r = inside(s.body) or inside(s.orelse)
            elif isinstance(s, Alloc):
                r = "the shape of '%s'" % s.name if any(uses(e) for e in s.shape) else ""
            elif isinstance(s, (Assign, Reduce, Atomic)):
                r = f"the value assigned to '{s.name}'" if value_use(s.rhs) or \
                    value_use(getattr(s, "cmp", None)) else ""
            elif isinstance(s, Call):
                r = ""
                for p, a in zip(s.proc.params, s.args):
                    if p.is_control and uses(a):
                        r = f"the {p.kind} argument '{p.name}' of {s.proc.name}"
                        break
            else:
                r = ""
            if r:
                return r
        return ""

    return inside(callee.body)


def bind_local(tmp: str, arg: Expr, mem, loc) -> tuple:
    """``tmp: ty @ mem`` then ``tmp = arg``."""
    return (Alloc(tmp, arg.ty, (), mem, loc), Assign(tmp, (), arg, loc))


def bind_value(tmp: str, arg: Expr, mem, loc) -> tuple:
    """Only the reads of ``arg`` at the call (``tmp`` stays an opaque value)."""
    return (Assign(VALUE_CHECK, (), arg, loc),)


def add(a: Expr, b: Expr) -> Expr:
    """``a + b`` with the trivial integer cases folded (keeps indices short)."""
    if isinstance(a, Const) and a.val == 0 and a.ty.is_integer:
        return b
    if isinstance(b, Const) and b.val == 0 and b.ty.is_integer:
        return a
    if isinstance(a, Const) and isinstance(b, Const) and a.ty == b.ty and a.ty.is_integer:
        return Const(a.val + b.val, a.ty, a.loc)
    return BinOp("+", a, b, INDEX, getattr(b, "loc", None))


def _same(e: Expr) -> Expr:
    return e


def compose_index(win: WindowArg, idx: tuple, fold: Callable = _same) -> tuple:
    """Indices into ``win``'s dimensions → indices into the underlying array."""
    if not win.idx:
        return tuple(idx)
    out = []
    it = iter(idx)
    for part in win.idx:
        if isinstance(part, Point):
            out.append(part.pt)
        else:
            out.append(fold(add(part.lo, next(it))))
    return tuple(out)


def window_extents(win: WindowArg) -> list:
    """The extent of each interval dimension of ``win`` (the window's own shape)."""
    return [BinOp("-", w.hi, w.lo, INDEX) for w in win.idx if isinstance(w, Interval)]


def compose_window(win: WindowArg, inner: WindowArg, fold: Callable = _same) -> WindowArg:
    """``inner`` (a window of the window parameter bound to ``win``) as a window
    of ``win``'s underlying array."""
    if not inner.idx:
        return replace(win, loc=inner.loc or win.loc)
    if not win.idx:
        return WindowArg(win.name, inner.idx, win.ty, inner.loc)
    out = []
    it = iter(inner.idx)
    for part in win.idx:
        if isinstance(part, Point):
            out.append(part)
            continue
        q = next(it)
        if isinstance(q, Point):
            out.append(Point(fold(add(part.lo, q.pt)), q.loc))
        else:
            out.append(Interval(fold(add(part.lo, q.lo)), fold(add(part.lo, q.hi)), q.loc))
    return WindowArg(win.name, tuple(out), win.ty, inner.loc)


def written_names(body, generic_only: bool = False) -> set[str]:
    """Arrays and scalars written in ``body``, seeing through calls (the arguments
    of the window parameters a callee writes).  ``generic_only``: those written
    through the generic proxy (not by a TMA load's bulk copy, which the async proxy
    makes, as wgmma and TMA stores read)."""
    out: set[str] = set()
    for n in walk(body):
        if isinstance(n, AsyncCopy):
            out.add(n.dst)
        if isinstance(n, Wgmma):
            out.add(n.acc.name)
        if isinstance(n, TmaStore) or isinstance(n, TmaLoad) and not generic_only:
            out.add(n.dst.name)
        if isinstance(n, (Assign, Reduce, Atomic)):
            out.add(n.name)
            if isinstance(n, Atomic) and n.result is not None:
                out.add(n.result)  # the local receiving the old value
        elif isinstance(n, Call):
            w = written_names(n.proc.body, generic_only)
            for p, a in zip(n.proc.params, n.args):
                if isinstance(a, WindowArg) and p.name in w:
                    out.add(a.name)
    return out


class _Subst(Transformer):
    """Rewrites one callee body into the caller's names."""

    def __init__(self, var_env: dict, scalar_env: dict, win_env: dict, renames: dict,
                 owner: "Inliner"):
        self.var_env = var_env
        self.scalar_env = scalar_env
        self.win_env = win_env
        self.renames = renames
        self.owner = owner

    def visit_Var(self, e: Var):
        if e.name in self.var_env:
            return self.var_env[e.name]
        if e.name in self.renames:
            return replace(e, name=self.renames[e.name])
        return e

    def _access(self, new):
        """``new`` (children rewritten) redirected through a window or a rename."""
        w = self.win_env.get(new.name)
        if w is None:
            if new.name in self.renames:
                return replace(new, name=self.renames[new.name])
            return new
        out = replace(new, name=w.name, idx=compose_index(w, new.idx, self.owner.fold))
        if w.idx:
            self.owner.keep.append(out)
            self.owner.bounds[id(out)] = list(zip(new.idx, window_extents(w)))
        return out

    def visit_Read(self, e: Read):
        if not e.idx and e.name in self.scalar_env:
            return self.scalar_env[e.name]
        return self._access(self.generic(e))

    def _target(self, s):
        return self._access(self.generic(s))

    visit_Assign = visit_Reduce = _target

    def visit_Atomic(self, s):
        s = self._target(s)
        # the old value's local is allocated in the callee: renamed, never a window
        return replace(s, result=self.renames[s.result]) if s.result in self.renames else s

    def visit_WindowArg(self, e: WindowArg):
        e2 = self.generic(e)
        if e2.name in self.win_env:
            return compose_window(self.win_env[e2.name], e2, self.owner.fold)
        if e2.name in self.renames:
            return replace(e2, name=self.renames[e2.name])
        return e2

    def visit_Alloc(self, s: Alloc):
        s = self.generic(s)
        return replace(s, name=self.renames[s.name]) if s.name in self.renames else s

    def visit_AsyncCopy(self, s):
        """An async copy (docs/async_copies.md) of whole arrays passed by name: renamed; through a
        window with offsets: refused (its alignment would depend on the caller)."""
        s = self.generic(s)
        for side in ("dst", "src"):
            name = getattr(s, side)
            w = self.win_env.get(name)
            if w is not None and w.idx:
                raise InlineRefused(
                    f"the async copy `async_copy({s.dst}, {s.src})` of the callee works on "
                    f"the window parameter '{name}', passed a window {w.name}[...]", s.loc,
                    "pass whole arrays to a proc holding async copies, or inline it by hand")
            new = w.name if w is not None else self.renames.get(name)
            if new is not None:
                s = replace(s, **{side: new})
        return s

    def visit_For(self, s: For):
        s = self.generic(s)
        return replace(s, iter=self.renames[s.iter]) if s.iter in self.renames else s


class Inliner:
    """Inlines calls into a caller whose names are ``taken`` (see the module doc)."""

    def __init__(self, taken: set, *, keep_instr: bool = False, recursive: bool = True,
                 obligations: bool = False, fold: Optional[Callable] = None,
                 bind: Callable = bind_local):
        self.taken = set(taken)
        self.keep_instr = keep_instr
        self.recursive = recursive
        self.obligations = obligations
        self.fold = fold or _same
        self.bind = bind
        self.bounds: dict = {}
        self.keep: list = []

    def fresh(self, base: str) -> str:
        name = fresh_name(base, self.taken)
        self.taken.add(name)
        return name

    # ------------------------------------------------------------ traversal

    def block(self, body: tuple, in_blocks: bool = False) -> tuple:
        """``body`` with every call inlined (``in_blocks``: inside a BLOCKS loop)."""
        out: list[Stmt] = []
        for s in body:
            out.extend(self.stmt(s, in_blocks))
        return tuple(out)

    def stmt(self, s: Stmt, in_blocks: bool) -> tuple:
        if isinstance(s, Call):
            if self.keep_instr and s.proc.instr is not None:
                return (s,)
            return self.expand(s, in_blocks)
        if isinstance(s, For):
            inner = in_blocks or s.mapping == BLOCKS
            return (replace(s, body=self.block(s.body, inner)),)
        if isinstance(s, If):
            return (replace(s, body=self.block(s.body, in_blocks),
                            orelse=self.block(s.orelse, in_blocks)),)
        return (s,)

    # ------------------------------------------------------------ one call

    def expand(self, call: Call, in_blocks: bool = False) -> tuple:
        """The statements that replace ``call``."""
        callee: ProcDef = call.proc
        self.taken |= free_vars(call.args)
        renames = {}
        for name in sorted(bound_names(callee.body)):
            new = self.fresh(name)
            if new != name:
                renames[name] = new
        var_env, scalar_env, win_env = {}, {}, {}
        for p, a in zip(callee.params, call.args):
            if p.is_control:
                var_env[p.name] = a
            elif p.kind == "scalar":
                scalar_env[p.name] = a
            else:
                win_env[p.name] = a
        pre: list[Stmt] = []
        if self.obligations:
            for w in win_env.values():
                if w.idx:
                    pre.append(Assign(WINDOW_CHECK, (), w, call.loc))
        # By value: an argument reading memory the callee writes is evaluated
        # once, before the body, into a fresh scalar.
        writes = {win_env[n].name if n in win_env else renames.get(n, n)
                  for n in written_names(callee.body)}
        mem = REGISTER if in_blocks else GLOBAL

        def stale(a) -> bool:
            return any(isinstance(n, Read) and n.name in writes for n in walk(a))

        def hold(base: str, a: Expr) -> Read:
            ty = a.ty if a.ty.is_integer and a.ty != INDEX else i32
            tmp = self.fresh(base)
            pre.extend(self.bind(tmp, replace(a, ty=ty) if a.ty != ty else a, mem, call.loc))
            return Read(tmp, (), ty, call.loc)

        for pname, a in list(scalar_env.items()):
            if stale(a):
                tmp = self.fresh(pname)
                pre.extend(self.bind(tmp, a, mem, call.loc))
                scalar_env[pname] = Read(tmp, (), a.ty, call.loc)
        # A size or index argument, or a window offset, is a value too: one that reads
        # memory the callee writes is held in a fresh integer scalar, read back where
        # an index may read data (access indices, window offsets, asserts); a size
        # the callee needs elsewhere (loop bounds, shapes) cannot be held: refused.
        for pname, a in list(var_env.items()):
            if stale(a):
                where = _uses_outside_indices(callee, pname)
                if where:
                    raise InlineRefused(
                        f"the {callee.param(pname).kind} argument "
                        f"'{pname}' of {callee.name} reads memory {callee.name} writes, and "
                        f"{callee.name} uses it in {where}: passed by value it cannot be "
                        "read back there", call.loc,
                        "compute the argument into a size or index the callee does not "
                        "change, or inline a copy of the callee that reads it first")
                var_env[pname] = hold(pname, a)
        for pname, w in list(win_env.items()):
            if any(stale(e) for e in walk_window_bounds(w)):
                win_env[pname] = _hold_window(w, lambda e: hold(pname, e) if stale(e) else e)
        sub = _Subst(var_env, scalar_env, win_env, renames, self)
        if self.obligations:
            for pred in callee.preds:
                pre.append(Assign(PRED_CHECK, (), sub.visit(pred), call.loc))
        body = sub.visit_block(callee.body)
        if self.recursive:
            body = self.block(body, in_blocks)
        return tuple(pre) + tuple(body)


def caller_names(p: ProcDef) -> set[str]:
    """Every name of ``p``: parameters, bound names and the names it uses."""
    return free_vars(p.body) | bound_names(p.body) | {q.name for q in p.params}


def inline_calls(p: ProcDef, keep_instr: bool = True) -> ProcDef:
    """``p`` with every call inlined (``@instr`` calls kept unless ``keep_instr``
    is false)."""
    if not any(isinstance(n, Call) and not (keep_instr and n.proc.instr is not None)
               for n in walk(p.body)):
        return p
    return replace(p, body=Inliner(caller_names(p), keep_instr=keep_instr).block(p.body))


__all__ = ["Inliner", "InlineRefused", "inline_calls", "caller_names", "compose_index", "compose_window", "written_names",
           "window_extents", "add", "bind_local", "bind_value", "WINDOW_CHECK", "PRED_CHECK",
           "VALUE_CHECK"]
