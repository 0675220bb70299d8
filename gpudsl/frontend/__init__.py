"""Python source → IR.  ``parse_function`` is what ``@proc`` calls."""
from __future__ import annotations

import ast
import builtins

from .parser import ProcParser
from .source import get_source, parse_text


def _resolver(func, extra: dict | None = None):
    """Resolves callee names the way Python would inside ``func``: closure
    variables, then the function's globals, then ``extra``."""
    closure = {}
    code = getattr(func, "__code__", None)
    if code is not None and func.__closure__:
        for name, cell in zip(code.co_freevars, func.__closure__):
            try:
                closure[name] = cell.cell_contents
            except ValueError:
                pass
    glb = getattr(func, "__globals__", {}) or {}
    env = dict(extra or {})

    def lookup(name):
        for d in (closure, glb, env):
            if name in d:
                return d[name]
        return getattr(builtins, name, None)

    def resolve(node):
        if isinstance(node, ast.Name):
            return lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = resolve(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    return resolve


def parse_function(func, instr: str | None = None):
    src = get_source(func)
    return ProcParser(src, _resolver(func), instr).parse()


def parse_source_text(text: str, file: str, first_line: int, namespace: dict,
                      instr: str | None = None):
    """Parse a proc from text (used for procs whose source ``inspect`` cannot find)."""
    src = parse_text(text, file, first_line)
    return ProcParser(src, _resolver(None, namespace), instr).parse()
