"""Scheduling strings parsed with the language's own expression parser.

A primitive that takes an expression (``cut_loop``'s cut point, ``specialize``'s
conditions, ``pad_dim``'s extent), a window (``stage_mem``'s
``"x[32*io:32*io+32, 0:n]"``) or a new name reads it here, in the scope of the
statement it applies to, with the same :class:`~gpudsl.frontend.exprs.ExprParser`
that parses procs.  So a string means what the same text means in a proc, and
what a proc may not say (``"n * 0.5"`` as a loop bound, ``"min(n)"``, a float
extent, ``for if in ...``) is refused, with a :class:`SchedulingError` naming the
primitive.
"""
from __future__ import annotations

import ast

from ..errors import ProcError, SchedulingError
from ..ir.nodes import Alloc, Expr, For, Param, WindowArg
from ..ir.types import GLOBAL, INDEX, bool_
from .exprs import ExprParser
from .scope import RESERVED, Scope, Sym, name_problem


def check_new_name(name, prim: str, loc=None, proc: bool = False) -> str:
    """``name`` if it may name a new variable, allocation or loop (a proc with
    ``proc``), else a SchedulingError of ``prim``: what a proc may not bind."""
    why = name_problem(name, proc)
    if why is not None:
        raise SchedulingError(prim, why, loc, "pick another name")
    return name


# ------------------------------------------------------------------ scopes


def param_sym(p: Param) -> Sym:
    if p.is_control:
        return Sym(p.name, p.kind, INDEX, param=True, loc=p.loc)
    if p.kind == "scalar":
        return Sym(p.name, "scalar", p.ty, param=True, loc=p.loc)
    return Sym(p.name, "array", p.ty, p.shape, p.mem or GLOBAL, p.loc, param=True)


def stmt_sym(s) -> Sym:
    """The name an allocation or a loop brings into scope."""
    if isinstance(s, Alloc):
        return Sym(s.name, "array" if s.shape else "local", s.ty, s.shape, s.mem, s.loc,
                   swizzle=s.swizzle)
    assert isinstance(s, For)
    return Sym(s.iter, "loop", INDEX, loc=s.loc, mapping=s.mapping)


def scope_of(params, visible) -> Scope:
    """The scope of a statement: the proc's ``params``, then ``visible``, the
    allocations and loops in scope there, outermost first (a later one of a
    name hides an earlier one)."""
    sc = Scope()
    for p in params:
        sc.frames[0][p.name] = param_sym(p)
    sc.push()
    for s in visible:
        sym = stmt_sym(s)
        sc.frames[-1][sym.name] = sym
    return sc


# ------------------------------------------------------------------ parsing


class _Text:
    """What ExprParser asks of a source: every node sits at the statement."""

    def __init__(self, loc):
        self._loc = loc

    def loc(self, node):
        return self._loc


WANTS = ("expr", "int", "bool", "shape", "window")
_WHAT = {"expr": "the expression", "int": "the expression", "bool": "the condition",
         "shape": "an extent", "window": "the window"}


def parse_string(text, scope: Scope, prim: str, want: str = "expr", loc=None,
                 what: str | None = None):
    """``text`` (a string, a Python number, or IR already) as IR in ``scope``.

    ``want``: ``"expr"`` any expression; ``"int"`` an integer expression;
    ``"bool"`` a condition; ``"shape"`` an extent as an allocation's shape
    allows (sizes, index parameters, constants); ``"window"`` an array, a
    window ``x[lo:hi, j]`` or a scalar (a :class:`WindowArg`).
    """
    assert want in WANTS, want
    what = what or _WHAT[want]
    if isinstance(text, Expr):
        return _check_ir(text, want, prim, loc, what)
    if isinstance(text, (bool, int, float)):
        node = ast.Constant(text)
    elif isinstance(text, str):
        try:
            node = ast.parse(text.strip(), mode="eval").body
        except SyntaxError:
            raise SchedulingError(prim, f"cannot parse {what} {text!r}", loc,
                                  "write it as in a proc, e.g. \"n // 2\" or "
                                  "\"x[0:16, j]\"") from None
    else:
        raise SchedulingError(prim, f"{what} must be a string, not {text!r}", loc)
    ex = ExprParser(_Text(loc), scope)
    try:
        if want == "window":
            return _window(ex, node, scope)
        if want == "int":
            return ex.int_expr(node, what)
        if want == "bool":
            return ex.bool_expr(node, what)
        if want == "shape":
            return ex.control_expr(node, what)
        return ex.expr(node)
    except ProcError as exc:
        hint = exc.hint
        if exc.raw_message.startswith("unknown name"):
            hint = ("scheduling strings use the names visible at the statement: parameters, "
                    "enclosing loop variables and allocations before it")
        raise SchedulingError(prim, f"{exc.raw_message} in {text!r}", loc, hint) from None


def _window(ex: ExprParser, node, scope: Scope) -> WindowArg:
    if isinstance(node, ast.Name):
        sym = scope.lookup(node.id)
        if sym is not None and sym.kind in ("scalar", "local"):
            return WindowArg(node.id, (), sym.ty)
    return ex.window(node)


_KIND = {"int": "an integer expression", "shape": "an integer expression",
         "bool": "a condition", "window": "a window"}


def _check_ir(e: Expr, want, prim, loc, what):
    ok = {"expr": True, "int": e.ty.is_integer, "shape": e.ty.is_integer,
          "bool": e.ty == bool_, "window": isinstance(e, WindowArg)}[want]
    if not ok:
        raise SchedulingError(prim, f"{what} must be {_KIND[want]}, not {e.ty.name}", loc)
    return e


__all__ = ["RESERVED", "name_problem", "check_new_name", "scope_of", "parse_string",
           "param_sym", "stmt_sym"]
