"""Patterns naming loops, allocations, statements and expressions; scheduling
strings read in the scope of a statement.

- loops: ``"i"`` (the first loop named ``i``), ``"i #1"`` (the second);
- allocations: ``"acc"``, ``"acc: _"``, ``"acc #1"``;
- statements: Python source with ``_`` for one expression or statement, e.g.
  ``"y[_] = _"``, ``"C[_, _] += _"``, ``"sync()"``, ``"for k in _: _"``,
  ``"if _: _"``, ``"acc: _"``; a trailing ``#k`` picks the k-th match;
- expressions: ``"A[_, k]"``, ``"a * x[_]"``: any pattern that is not a
  statement (a call of a builtin counts as an expression).

A pattern is parsed once with Python's ``ast`` and matched structurally
against the IR (:mod:`gpudsl.schedule.match`), so it matches what the printed
proc shows.  Expressions, conditions and windows given as strings are parsed
by the frontend's typed expression parser (:mod:`gpudsl.frontend.strings`).
"""
from __future__ import annotations

import ast
import re
from functools import lru_cache

from ..errors import SchedulingError
from ..frontend.scope import Scope
from ..frontend.strings import check_new_name, parse_string, scope_of
from ..ir.nodes import BUILTINS, Alloc, Expr, For, If, Interval, Point, ProcDef
from ..ir.addresses import block_of, iter_stmts, stmt_at
from ..ir.types import DTYPES
from .match import is_hole, match_alloc, match_expr, match_stmt

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
        return [a for a, _ in match_pattern(pdef, pattern)
                if isinstance(stmt_at(pdef, a), For)]
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


# ------------------------------------------------------------------ statement patterns


@lru_cache(maxsize=512)
def _parse_pattern(pattern: str):
    """(pattern AST, k or None, is an expression pattern)."""
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
    st = mod.body[0]
    return st, k, _is_expr_pattern(st)


def _is_expr_pattern(st) -> bool:
    if not isinstance(st, ast.Expr):
        return False
    v = st.value
    if isinstance(v, ast.Call) and isinstance(v.func, ast.Name):
        name = v.func.id
        return name in BUILTINS or name in DTYPES
    return not isinstance(v, ast.Call)


def match_pattern(pdef: ProcDef, pattern: str) -> list:
    """[(address, expr_path or None)] of matches in program order."""
    pat, k, is_expr = _parse_pattern(pattern)
    found = []
    if is_expr:
        for a, s in iter_stmts(pdef):
            for path, e in _exprs_of(s):
                if match_expr(pat.value, e):
                    found.append((a, path))
    elif isinstance(pat, ast.AnnAssign):  # "acc: _"
        for a, s in iter_stmts(pdef):
            if isinstance(s, Alloc) and match_alloc(pat, s):
                found.append((a, None))
    else:
        found = [(a, None) for a, s in iter_stmts(pdef) if match_stmt(pat, s)]
    return _pick(found, k)


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


# ------------------------------------------------------------------ scopes and strings


def visible_at(pdef: ProcDef, addr) -> list:
    """The allocations and loops in scope at the statement ``addr`` (before it
    runs), outermost first."""
    out = []
    for k in range(1, len(addr) + 1, 2):
        blk = block_of(pdef, addr[:k - 1])
        out += [s for s in blk[:addr[k - 1]] if isinstance(s, Alloc)]
        if k < len(addr) and isinstance(blk[addr[k - 1]], For):
            out.append(blk[addr[k - 1]])
    return out


def string_scope(pdef: ProcDef, addr, all_loops: bool = False) -> Scope:
    """The frontend scope at ``addr``; ``all_loops`` adds every loop variable of
    the proc (for an index that is substituted at each access)."""
    vis = visible_at(pdef, addr)
    if all_loops:
        seen = {s.iter for s in vis if isinstance(s, For)}
        for _, s in iter_stmts(pdef):
            if isinstance(s, For) and s.iter not in seen:
                seen.add(s.iter)
                vis.insert(0, s)
    return scope_of(pdef.params, vis)


def scope_at(pdef: ProcDef, addr) -> dict:
    """Names visible before the statement at ``addr``: name → (kind, ty, shape)
    with kind "var" (control integer), "scalar" or "array"."""
    sc = string_scope(pdef, addr)
    out = {}
    for f in sc.frames:
        for name, sym in f.items():
            kind = "var" if sym.is_int_control else "array" if sym.kind == "array" \
                else "scalar"
            out[name] = (kind, sym.ty, sym.shape)
    return out


def parse_at(pdef: ProcDef, addr, text, prim: str, want: str = "expr", loc=None,
             what: str | None = None, all_loops: bool = False):
    """A scheduling string (or number) as typed IR in the scope of the statement
    at ``addr``; ``want`` as in :func:`gpudsl.frontend.strings.parse_string`."""
    return parse_string(text, string_scope(pdef, addr, all_loops), prim, want, loc, what)


__all__ = ["match_loops", "match_allocs", "match_pattern", "scope_at", "string_scope",
           "visible_at", "parse_at", "check_new_name", "is_hole"]
