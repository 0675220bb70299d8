"""Getting a decorated function's source and mapping AST positions to the file.

Works for functions in files and in Jupyter/IPython cells (both register their
text with ``linecache``, which ``inspect`` reads).
"""
from __future__ import annotations

import ast
import inspect
import textwrap
from dataclasses import dataclass

from ..errors import ProcError, SrcLoc


@dataclass(frozen=True)
class Source:
    """A function's parsed AST plus what is needed to map positions to the file."""

    tree: ast.FunctionDef
    file: str
    first_line: int  # file line of the source's line 1
    indent: int  # columns removed by dedenting

    def loc(self, node: ast.AST) -> SrcLoc:
        line = getattr(node, "lineno", 1)
        col = getattr(node, "col_offset", 0)
        return SrcLoc(self.file, self.first_line + line - 1, col + self.indent)


def get_source(func) -> Source:
    try:
        lines, first = inspect.getsourcelines(func)
        file = inspect.getsourcefile(func) or inspect.getfile(func)
    except (OSError, TypeError) as exc:
        raise ProcError(
            f"cannot read the source of {getattr(func, '__name__', func)!r}: {exc}",
            hint="define procs in a file or a notebook cell, not with exec() of a string "
                 "(or use gpudsl.proc_from_source)") from None
    text = "".join(lines)
    return parse_text(text, file, max(first, 1))


def parse_text(text: str, file: str, first_line: int = 1) -> Source:
    dedented = textwrap.dedent(text)
    first_src = next((l for l in text.splitlines() if l.strip()), "")
    first_ded = next((l for l in dedented.splitlines() if l.strip()), "")
    indent = len(first_src) - len(first_ded)
    try:
        module = ast.parse(dedented)
    except SyntaxError as e:  # TabError and IndentationError too
        line = first_line + (e.lineno or 1) - 1
        col = max((e.offset or 1) - 1, 0) + indent
        raise ProcError(f"the proc's source is not valid Python: {type(e).__name__}: {e.msg}",
                        SrcLoc(file, line, col)) from None
    except RecursionError:
        raise ProcError("the proc's source is nested more deeply than Python's parser allows",
                        SrcLoc(file, first_line, 0),
                        "split deep expressions into several statements") from None
    except (ValueError, MemoryError) as e:
        raise ProcError(f"the proc's source cannot be parsed: {e}",
                        SrcLoc(file, first_line, 0)) from None
    check_depth(module, file, first_line, indent)
    defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        raise ProcError("no function definition found in the proc's source",
                        SrcLoc(file, first_line, 0),
                        "a proc is a function: @proc def name(...): ...")
    fn = defs[0]
    if isinstance(fn, ast.AsyncFunctionDef):
        raise ProcError("a proc cannot be async", SrcLoc(file, first_line + fn.lineno - 1, 0))
    return Source(fn, file, first_line, indent)


MAX_EXPR_DEPTH = 120
"""The deepest expression nesting a proc may use (e.g. a sum of 120 terms written
``a + b + c ...``, which nests to the left): deeper ones are refused with a ProcError at
the expression, before any pass that walks expressions recursively can hit Python's
recursion limit."""


def check_depth(tree: ast.AST, file: str, first_line: int, indent: int) -> None:
    """Refuse expressions nested deeper than :data:`MAX_EXPR_DEPTH` (an iterative walk)."""
    stack = [(tree, 0)]
    while stack:
        node, depth = stack.pop()
        d = depth + 1 if isinstance(node, ast.expr) else 0
        if d > MAX_EXPR_DEPTH:
            top = node
            raise ProcError(
                f"this expression is nested more than {MAX_EXPR_DEPTH} levels deep",
                SrcLoc(file, first_line + getattr(top, "lineno", 1) - 1,
                       getattr(top, "col_offset", 0) + indent),
                "split it into several statements with intermediate variables")
        for child in ast.iter_child_nodes(node):
            stack.append((child, d))
