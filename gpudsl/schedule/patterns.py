"""Patterns naming loops, allocations, statements and expressions, and parsing
small expressions (windows, conditions, indices) given as strings.

- loops: ``"i"`` (the first loop named ``i``), ``"i #1"`` (the second);
- allocations: ``"acc"``, ``"acc: _"``, ``"acc #1"``;
- statements: Python source with ``_`` for one expression or statement, e.g.
  ``"y[_] = _"``, ``"C[_, _] += _"``, ``"sync()"``, ``"for k in _: _"``,
  ``"if _: _"``, ``"acc: _"``; a trailing ``#k`` picks the k-th match;
- expressions: ``"A[_, k]"``, ``"a * x[_]"``: any pattern that is not a
  statement (a call of a builtin counts as an expression).

Matching compares the pattern's Python AST with the AST of the printed
statement, so a pattern matches what the printed proc shows.
"""
from __future__ import annotations

import ast
import re

from ..errors import SchedulingError
from ..ir.nodes import (BUILTINS, Alloc, BinOp, Builtin, Const, Expr, For, If, Interval,
                        Point, ProcDef, Read, UnOp, Var, WindowArg)
from ..ir.printer import print_expr, print_stmt
from ..ir.types import DTYPES, INDEX, bool_, f32
from .cursors import iter_stmts

_LOOP_RE = re.compile(r"^\s*(?:for\s+)?([A-Za-z_]\w*)\s*(?:#\s*(\d+))?\s*$")
_ALLOC_RE = re.compile(r"^\s*([A-Za-z_]\w*)\s*(?::\s*_\s*)?(?:#\s*(\d+))?\s*$")
_COUNT_RE = re.compile(r"^(.*?)\s*#\s*(\d+)\s*$", re.S)


def _pick(found: list, k):
    if k is None:
        return found
    k = int(k)
    return found[k:k + 1]


def match_loops(pdef: ProcDef, pattern: str) -> list:
    m = _LOOP_RE.match(pattern)
    if not m:
        return [a for a, _ in match_pattern(pdef, pattern) if isinstance(
            _stmt(pdef, a), For)]
    name, k = m.group(1), m.group(2)
    found = [a for a, s in iter_stmts(pdef) if isinstance(s, For) and s.iter == name]
    return _pick(found, k)


def match_allocs(pdef: ProcDef, pattern: str) -> list:
    m = _ALLOC_RE.match(pattern)
    if not m:
        raise SchedulingError("find_alloc", f"cannot read the allocation pattern {pattern!r}",
                              pdef.loc, "write the allocated name, e.g. \"acc\" or \"acc: _\"")
    name, k = m.group(1), m.group(2)
    found = [a for a, s in iter_stmts(pdef) if isinstance(s, Alloc) and s.name == name]
    return _pick(found, k)


def _stmt(pdef, a):
    from .cursors import stmt_at

    return stmt_at(pdef, a)


# ------------------------------------------------------------------ AST matching

_IGNORE = {"ctx", "lineno", "col_offset", "end_lineno", "end_col_offset", "type_comment",
           "kind"}


def _is_hole(n) -> bool:
    if isinstance(n, ast.Name) and n.id == "_":
        return True
    return isinstance(n, ast.Expr) and isinstance(n.value, ast.Name) and n.value.id == "_"


def ast_match(pat, node) -> bool:
    if _is_hole(pat):
        return True
    if isinstance(pat, list):
        if len(pat) == 1 and _is_hole(pat[0]):
            return True
        return len(pat) == len(node) and all(ast_match(a, b) for a, b in zip(pat, node))
    if not isinstance(pat, ast.AST):
        return pat == node
    if type(pat) is not type(node):
        return False
    for f in pat._fields:
        if f in _IGNORE:
            continue
        if f in ("body", "orelse") and isinstance(pat, (ast.For, ast.If)):
            pv = getattr(pat, f)
            if f == "orelse" and not pv:
                continue  # `if _: _` matches with or without else
        if not ast_match(getattr(pat, f), getattr(node, f, None)):
            return False
    return True


def _parse_pattern(pattern: str):
    text = pattern.strip()
    k = None
    m = _COUNT_RE.match(text)
    if m:
        text, k = m.group(1), m.group(2)
    try:
        mod = ast.parse(text)
    except SyntaxError:
        raise SchedulingError("find", f"cannot parse the pattern {pattern!r}", None,
                              "patterns are Python statements or expressions with `_` "
                              "holes, e.g. \"y[_] = _\"") from None
    if len(mod.body) != 1:
        raise SchedulingError("find", f"the pattern {pattern!r} must be one statement or "
                              "expression")
    return mod.body[0], k


def _is_expr_pattern(st) -> bool:
    if not isinstance(st, ast.Expr):
        return False
    v = st.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
        name = v.func.id
        return name in BUILTINS or name in DTYPES
    return not isinstance(v, ast.Call)


_stmt_ast_cache: dict = {}


def _stmt_ast(s):
    key = id(s)
    hit = _stmt_ast_cache.get(key)
    if hit is not None and hit[0] is s:
        return hit[1]
    line = print_stmt(s)[0].strip()
    if isinstance(s, (For, If)):
        line += "\n    pass"
    try:
        node = ast.parse(line).body[0]
    except SyntaxError:
        node = None
    if len(_stmt_ast_cache) > 20000:
        _stmt_ast_cache.clear()
    _stmt_ast_cache[key] = (s, node)
    return node


def match_pattern(pdef: ProcDef, pattern: str) -> list:
    """[(address, expr_path or None)] of matches in program order."""
    pat, k = _parse_pattern(pattern)
    found = []
    if _is_expr_pattern(pat):
        epat = pat.value
        for a, s in iter_stmts(pdef):
            for path, e in _exprs_of(s):
                if ast_match(epat, _expr_ast(e)):
                    found.append((a, path))
        return _pick(found, k)
    if isinstance(pat, ast.AnnAssign):  # "acc: _"
        for a, s in iter_stmts(pdef):
            if isinstance(s, Alloc) and isinstance(pat.target, ast.Name) and \
                    pat.target.id == s.name:
                if _is_hole(pat.annotation) or ast_match(pat.annotation,
                                                        _stmt_ast(s).annotation):
                    found.append((a, None))
        return _pick(found, k)
    for a, s in iter_stmts(pdef):
        node = _stmt_ast(s)
        if node is not None and ast_match(pat, node):
            found.append((a, None))
    return _pick(found, k)


def _expr_ast(e: Expr):
    return ast.parse(print_expr(e), mode="eval").body


def _exprs_of(s):
    """(path, expr) of the expressions directly in statement ``s`` (pre-order),
    not descending into nested statements."""
    out = []

    def rec(node, path):
        if isinstance(node, Expr):
            out.append((path, node))
        for f in ("lhs", "rhs", "arg", "args", "idx", "pt", "lo", "hi", "cond"):
            if not hasattr(node, f):
                continue
            v = getattr(node, f)
            if isinstance(v, tuple):
                for i, x in enumerate(v):
                    if isinstance(x, (Expr, Point, Interval)):
                        rec(x, path + (f, i))
            elif isinstance(v, (Expr, Point, Interval)):
                rec(v, path + (f,))

    if isinstance(s, For):
        rec(s.lo, ("lo",))
        rec(s.hi, ("hi",))
    elif isinstance(s, If):
        rec(s.cond, ("cond",))
    else:
        for f in ("idx", "rhs", "args", "shape"):
            v = getattr(s, f, None)
            if isinstance(v, tuple):
                for i, x in enumerate(v):
                    if isinstance(x, Expr):
                        rec(x, (f, i))
            elif isinstance(v, Expr):
                rec(v, (f,))
    return out


# ------------------------------------------------------------------ scopes and parsing


def scope_at(pdef: ProcDef, addr) -> dict:
    """Names visible before the statement at ``addr``: name → (kind, ty, shape)
    with kind "var" (control integer), "scalar" or "array"."""
    from .cursors import block_of

    env = {}
    for p in pdef.params:
        if p.kind in ("size", "index"):
            env[p.name] = ("var", INDEX, ())
        elif p.kind == "scalar":
            env[p.name] = ("scalar", p.ty, ())
        else:
            env[p.name] = ("array", p.ty, p.shape)
    for k in range(1, len(addr) + 1, 2):
        blk = block_of(pdef, addr[:k - 1])
        for s in blk[:addr[k - 1]]:
            if isinstance(s, Alloc):
                env[s.name] = ("array" if s.shape else "scalar", s.ty, s.shape)
        if k < len(addr):
            s = blk[addr[k - 1]]
            if isinstance(s, For):
                env[s.iter] = ("var", INDEX, ())
    return env


_OPS = {ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
        ast.Mod: "%"}
_CMP = {ast.Eq: "==", ast.NotEq: "!=", ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">",
        ast.GtE: ">="}


def parse_expr(text, env: dict, prim: str, loc=None):
    """A string (or int, or IR expression) → IR expression in scope ``env``."""
    if isinstance(text, Expr):
        return text
    if isinstance(text, bool):
        return Const(text, bool_)
    if isinstance(text, int):
        return Const(text, INDEX)
    try:
        node = ast.parse(str(text).strip(), mode="eval").body
    except SyntaxError:
        raise SchedulingError(prim, f"cannot parse the expression {text!r}", loc) from None
    return _conv(node, env, prim, loc, text)


def parse_window(text, env: dict, prim: str, loc=None) -> WindowArg:
    """``"x[32*io:32*io+32, j]"`` → WindowArg."""
    if isinstance(text, WindowArg):
        return text
    try:
        node = ast.parse(str(text).strip(), mode="eval").body
    except SyntaxError:
        raise SchedulingError(prim, f"cannot parse the window {text!r}", loc) from None
    if isinstance(node, ast.Name):
        ent = env.get(node.id)
        if ent is None or ent[0] not in ("array", "scalar"):
            raise SchedulingError(prim, f"'{node.id}' is not an array here", loc)
        return WindowArg(node.id, (), ent[1])
    if not (isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name)):
        raise SchedulingError(prim, f"a window is written x[lo:hi, j], not {text!r}", loc)
    name = node.value.id
    ent = env.get(name)
    if ent is None or ent[0] != "array":
        raise SchedulingError(prim, f"'{name}' is not an array visible here", loc)
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(parts) != len(ent[2]):
        raise SchedulingError(prim, f"'{name}' has {len(ent[2])} dimension(s), the window "
                              f"gives {len(parts)}", loc)
    idx = []
    for p, ext in zip(parts, ent[2]):
        if isinstance(p, ast.Slice):
            lo = _conv(p.lower, env, prim, loc, text) if p.lower else Const(0, INDEX)
            hi = _conv(p.upper, env, prim, loc, text) if p.upper else ext
            idx.append(Interval(lo, hi))
        else:
            idx.append(Point(_conv(p, env, prim, loc, text)))
    return WindowArg(name, tuple(idx), ent[1])


def _conv(node, env, prim, loc, text):
    def c(n):
        return _conv(n, env, prim, loc, text)

    if isinstance(node, ast.Constant):
        v = node.value
        if isinstance(v, bool):
            return Const(v, bool_)
        if isinstance(v, int):
            return Const(v, INDEX)
        if isinstance(v, float):
            return Const(v, f32)
    elif isinstance(node, ast.Name):
        ent = env.get(node.id)
        if ent is None:
            raise SchedulingError(prim, f"unknown name '{node.id}' in {text!r}", loc,
                                  "use sizes, index parameters and enclosing loop "
                                  "variables")
        if ent[0] == "var":
            return Var(node.id, INDEX)
        if ent[0] == "scalar":
            return Read(node.id, (), ent[1])
        raise SchedulingError(prim, f"'{node.id}' is an array; index it", loc)
    elif isinstance(node, ast.Subscript) and isinstance(node.value, ast.Name):
        ent = env.get(node.value.id)
        if ent is None or ent[0] != "array":
            raise SchedulingError(prim, f"'{node.value.id}' is not an array here", loc)
        parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
        return Read(node.value.id, tuple(c(p) for p in parts), ent[1])
    elif isinstance(node, ast.BinOp) and type(node.op) in _OPS:
        a, b = c(node.left), c(node.right)
        ty = a.ty if a.ty != INDEX else b.ty
        return BinOp(_OPS[type(node.op)], a, b, ty)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        a = c(node.operand)
        if isinstance(a, Const):
            return Const(-a.val, a.ty)
        return UnOp("-", a, a.ty)
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        return UnOp("not", c(node.operand), bool_)
    elif isinstance(node, ast.Compare):
        out = None
        left = c(node.left)
        for op, r in zip(node.ops, node.comparators):
            right = c(r)
            cmp = BinOp(_CMP[type(op)], left, right, bool_)
            out = cmp if out is None else BinOp("and", out, cmp, bool_)
            left = right
        return out
    elif isinstance(node, ast.BoolOp):
        vals = [c(v) for v in node.values]
        op = "and" if isinstance(node.op, ast.And) else "or"
        out = vals[0]
        for v in vals[1:]:
            out = BinOp(op, out, v, bool_)
        return out
    elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and \
            node.func.id in ("min", "max"):
        args = tuple(c(a) for a in node.args)
        return Builtin(node.func.id, args, args[0].ty)
    raise SchedulingError(prim, f"cannot understand {ast.unparse(node)!r} in {text!r}", loc)


__all__ = ["match_loops", "match_allocs", "match_pattern", "scope_at", "parse_expr",
           "parse_window", "ast_match"]
