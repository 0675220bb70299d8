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
    module = ast.parse(dedented)
    defs = [n for n in module.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))]
    if not defs:
        raise ProcError("no function definition found in the proc's source")
    fn = defs[0]
    if isinstance(fn, ast.AsyncFunctionDef):
        raise ProcError("a proc cannot be async", SrcLoc(file, first_line + fn.lineno - 1, 0))
    return Source(fn, file, first_line, indent)
