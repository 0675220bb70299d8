"""Structural matching of a pattern's Python AST against IR.

A pattern (``"y[_] = _"``, ``"for k in _: _"``, ``"a * x[_]"``) is Python
source with ``_`` holes.  It matches an IR statement or expression when it has
the shape the printer gives that node: ``x[i, j]`` is a subscript with a tuple
index (a hole in the index position matches all indices at once), ``a and b
and c`` one boolean operation, ``-3`` a negation of ``3``, ``s: f32[4] @
SHARED`` an annotated name.  In a list (arguments, statements of a body) a
single hole matches the whole list, however long.  The IR is never printed.
"""
from __future__ import annotations

import ast

from ..ir.nodes import (Alloc, Assign, AsyncCommit, AsyncCopy, AsyncWait, Atomic, BinOp,
                        Wgmma, WgmmaCommit, WgmmaWait,
                        Builtin, Call, Const, For, If, Interval, Pass, Point, Read, Reduce, Sync, SyncCluster,
                        UnOp, Var, WindowArg, Arrive, Wait, SetMaxNReg)

_ARITH = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
          ast.Mod: "%", ast.BitAnd: "&", ast.BitOr: "|", ast.BitXor: "^",
          ast.LShift: "<<", ast.RShift: ">>"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
        ast.GtE: ">="}
_AUG = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*"}


def is_hole(n) -> bool:
    if isinstance(n, ast.Name) and n.id == "_":
        return True
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Name) and n.value.id == "_"


def _all(pats: list, items, one) -> bool:
    """A list of patterns against a sequence; a lone hole matches any sequence."""
    if len(pats) == 1 and is_hole(pats[0]):
        return True
    return len(pats) == len(items) and all(one(p, x) for p, x in zip(pats, items))


def _name(pat, name: str) -> bool:
    return is_hole(pat) or (isinstance(pat, ast.Name) and pat.id == name)


def _value(pat, v) -> bool:
    return isinstance(pat, ast.Constant) and not isinstance(pat.value, str) and \
        pat.value == v


# ------------------------------------------------------------------ expressions


def match_expr(pat, e) -> bool:
    """Does the expression pattern ``pat`` match the IR expression ``e``?"""
    if is_hole(pat):
        return True
    if isinstance(e, Const):
        return _const(pat, e)
    if isinstance(pat, ast.Name):
        return isinstance(e, (Var, Read, WindowArg)) and not getattr(e, "idx", ()) and \
            pat.id == e.name
    if isinstance(pat, ast.Subscript):
        return isinstance(e, (Read, WindowArg)) and bool(e.idx) and \
            _name(pat.value, e.name) and _index(pat.slice, e.idx)
    if isinstance(pat, ast.BinOp):
        return isinstance(e, BinOp) and _ARITH.get(type(pat.op)) == e.op and \
            match_expr(pat.left, e.lhs) and match_expr(pat.right, e.rhs)
    if isinstance(pat, ast.Compare):
        return isinstance(e, BinOp) and len(pat.ops) == 1 and \
            _CMP.get(type(pat.ops[0])) == e.op and match_expr(pat.left, e.lhs) and \
            match_expr(pat.comparators[0], e.rhs)
    if isinstance(pat, ast.BoolOp):
        op = "and" if isinstance(pat.op, ast.And) else "or"
        return isinstance(e, BinOp) and e.op == op and \
            _all(pat.values, _chain(e, op), match_expr)
    if isinstance(pat, ast.UnaryOp):
        op = "not" if isinstance(pat.op, ast.Not) else \
            "-" if isinstance(pat.op, ast.USub) else None
        return isinstance(e, UnOp) and e.op == op and match_expr(pat.operand, e.arg)
    if isinstance(pat, ast.Call):
        return isinstance(e, Builtin) and not pat.keywords and _name(pat.func, e.name) and \
            _all(pat.args, e.args, match_expr)
    return False


def _const(pat, c: Const) -> bool:
    v = c.val
    if not isinstance(v, bool) and v < 0:  # printed -3: a negation of 3
        return isinstance(pat, ast.UnaryOp) and isinstance(pat.op, ast.USub) and \
            match_expr(pat.operand, Const(-v, c.ty))
    return _value(pat, v)


def _chain(e: BinOp, op: str) -> list:
    """``a and b and c`` (left-nested in the IR) as the list Python's parser gives."""
    out = []
    while isinstance(e, BinOp) and e.op == op:
        out.append(e.rhs)
        e = e.lhs
    out.append(e)
    return out[::-1]


def _index(pat, idx: tuple) -> bool:
    """The subscript of a pattern against the indices of a read or a window."""
    if is_hole(pat):
        return True
    pats = pat.elts if isinstance(pat, ast.Tuple) else [pat]
    return _all(pats, idx, _one_index)


def _one_index(pat, i) -> bool:
    if isinstance(i, Interval):
        return isinstance(pat, ast.Slice) and pat.step is None and \
            pat.lower is not None and pat.upper is not None and \
            match_expr(pat.lower, i.lo) and match_expr(pat.upper, i.hi)
    if isinstance(i, Point):
        i = i.pt
    return not isinstance(pat, ast.Slice) and match_expr(pat, i)


# ------------------------------------------------------------------ statements


def match_stmt(pat, s) -> bool:
    """Does the statement pattern ``pat`` match the IR statement ``s``?"""
    if is_hole(pat):
        return True
    if isinstance(pat, ast.Assign):
        return isinstance(s, Assign) and _all(pat.targets, [s], _target) and \
            match_expr(pat.value, s.rhs)
    if isinstance(pat, ast.AugAssign):
        return isinstance(s, Reduce) and _AUG.get(type(pat.op)) == s.op and \
            _target(pat.target, s) and match_expr(pat.value, s.rhs)
    if isinstance(pat, ast.AnnAssign):
        return isinstance(s, Alloc) and match_alloc(pat, s)
    if isinstance(pat, ast.Pass):
        return isinstance(s, Pass)
    if isinstance(pat, ast.Expr) and isinstance(pat.value, ast.Call):
        return _call_stmt(pat.value, s)
    if isinstance(pat, ast.For):
        return isinstance(s, For) and _name(pat.target, s.iter) and \
            _loop_header(pat.iter, s) and _body(pat.body, s.body) and \
            (not pat.orelse or _body(pat.orelse, ()))
    if isinstance(pat, ast.If):
        return isinstance(s, If) and match_expr(pat.test, s.cond) and \
            _body(pat.body, s.body) and (not pat.orelse or _body(pat.orelse, s.orelse))
    return False


def _body(pats: list, stmts: tuple) -> bool:
    return _all(pats, stmts, match_stmt)


def _target(pat, s) -> bool:
    """An assignment target ``x[i]`` / ``x`` against a statement's name and indices."""
    if is_hole(pat):
        return True
    if isinstance(pat, ast.Name):
        return not s.idx and pat.id == s.name
    return isinstance(pat, ast.Subscript) and bool(s.idx) and _name(pat.value, s.name) and \
        _index(pat.slice, s.idx)


def _barrier(pat, s) -> bool:
    """``bar`` (any element of a ring ``bar``), ``bar[e]`` (the element ``e``) or ``_``."""
    if is_hole(pat) or _name(pat, s.name):
        return True
    return isinstance(pat, ast.Subscript) and s.index is not None and \
        _name(pat.value, s.name) and match_expr(pat.slice, s.index)


def _call_stmt(pat: ast.Call, s) -> bool:
    if pat.keywords:
        return False
    if isinstance(s, SyncCluster):
        return _name(pat.func, "sync_cluster") and not pat.args
    if isinstance(s, Sync):
        return _name(pat.func, "sync") and \
            _all(pat.args, (s.lo, s.hi) if s.ranged else (), match_expr)
    if isinstance(s, (Arrive, Wait)):
        return _name(pat.func, type(s).__name__.lower()) and len(pat.args) == 3 and \
            _barrier(pat.args[0], s) and _all(pat.args[1:], (s.lo, s.hi), match_expr)
    if isinstance(s, SetMaxNReg):
        return _name(pat.func, "setmaxnreg") and len(pat.args) == 3 and \
            _all(pat.args, (Const(s.regs), s.lo, s.hi), match_expr)
    if isinstance(s, AsyncCommit):
        return _name(pat.func, "async_commit") and not pat.args
    if isinstance(s, AsyncWait):
        return _name(pat.func, "async_wait") and len(pat.args) == 1 and \
            (is_hole(pat.args[0]) or match_expr(pat.args[0], Const(s.depth)))
    if isinstance(s, AsyncCopy):
        return _name(pat.func, "async_copy") and len(pat.args) == 2 and \
            _async_side(pat.args[0], s.dst, s.dst_idx, s.n) and \
            _async_side(pat.args[1], s.src, s.src_idx, s.n)
    if isinstance(s, WgmmaCommit):
        return _name(pat.func, "wgmma_commit") and not pat.args
    if isinstance(s, WgmmaWait):
        return _name(pat.func, "wgmma_wait") and len(pat.args) == 1 and \
            (is_hole(pat.args[0]) or match_expr(pat.args[0], Const(s.depth)))
    if isinstance(s, Wgmma):   # operands by hole or by their array's name
        return _name(pat.func, "wgmma") and len(pat.args) == 3 and all(
            is_hole(a) or _name(a, w.name) or isinstance(a, ast.Subscript) and
            _name(a.value, w.name) for a, w in zip(pat.args, (s.acc, s.a, s.b)))
    if isinstance(s, Atomic):
        return _name(pat.func, f"atomic_{s.op}") and \
            _all(pat.args, (s,) + ((s.cmp,) if s.cmp is not None else ()) + (s.rhs,),
                 _atomic_arg)
    if isinstance(s, Call):
        return _name(pat.func, s.proc.name) and _all(pat.args, s.args, match_expr)
    return False


def _async_side(pat, name, idx, n) -> bool:
    """One window of an async copy: a hole, its array's name, or ``x[...]`` (indices
    compared for a one-element copy, the name only for a range)."""
    if is_hole(pat):
        return True
    if isinstance(pat, ast.Name):
        return pat.id == name
    if not isinstance(pat, ast.Subscript) or not _name(pat.value, name):
        return False
    return n > 1 or _index(pat.slice, idx)


def _atomic_arg(pat, x) -> bool:
    return _target(pat, x) if isinstance(x, Atomic) else match_expr(pat, x)


def _loop_header(pat, s: For) -> bool:
    """``seq(lo, hi, unroll=True) @ THREADS`` against a loop's kind, bounds and hints."""
    if is_hole(pat):
        return True
    if isinstance(pat, ast.BinOp) and isinstance(pat.op, ast.MatMult):
        if s.mapping is None or not _name(pat.right, s.mapping.name):
            return False
        pat = pat.left
    elif s.mapping is not None:
        return False
    if is_hole(pat):
        return True
    if not (isinstance(pat, ast.Call) and (_name(pat.func, s.kind) or
                                           (s.kind == "seq" and _name(pat.func, "range")))):
        return False
    hints = ([("unroll", True)] if s.unroll else []) + \
        ([("blocks_per_sm", s.blocks_per_sm)] if s.blocks_per_sm else []) + \
        ([("group", s.group)] if s.group else [])
    return _all(pat.args, (s.lo, s.hi), match_expr) and \
        len(pat.keywords) == len(hints) and \
        all(k.arg == name and (is_hole(k.value) or _value(k.value, v))
            for k, (name, v) in zip(pat.keywords, hints))


def match_alloc(pat: ast.AnnAssign, s: Alloc) -> bool:
    """``acc: _``, ``acc: f32``, ``t: f32[16, 16] @ SHARED`` against an allocation
    (without ``@ MEM`` the memory is not compared)."""
    if not (isinstance(pat.target, ast.Name) and pat.target.id == s.name):
        return False
    ann = pat.annotation
    if is_hole(ann):
        return True
    if isinstance(ann, ast.BinOp) and isinstance(ann.op, ast.MatMult):
        mem = ann.right
        if isinstance(mem, ast.Call):   # SHARED(swizzle=128): the layout is compared too
            sw = [k.value for k in mem.keywords if k.arg == "swizzle"]
            if len(sw) != 1 or mem.args or not match_expr(sw[0], Const(s.swizzle)):
                return False
            mem = mem.func
        if not _name(mem, s.mem.name):
            return False
        ann = ann.left
    if is_hole(ann):
        return True
    if isinstance(ann, ast.Subscript):
        return bool(s.shape) and _name(ann.value, s.ty.name) and _index(ann.slice, s.shape)
    return not s.shape and _name(ann, s.ty.name)


__all__ = ["is_hole", "match_expr", "match_stmt", "match_alloc"]
