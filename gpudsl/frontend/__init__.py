"""Python source → IR.  ``parse_function`` is what ``@proc`` calls."""
from __future__ import annotations

import ast
import builtins
import numbers

from ..ir.types import DType
from ..language import constexpr
from .parser import ProcParser
from .source import get_source, parse_text


class _Resolver:
    """Resolves names the way Python would inside ``func``: closure variables, then the
    function's globals, then ``extra`` (``proc_from_source``'s namespace), then builtins.
    Calling it resolves a callee (a name or dotted name, or None); :meth:`constant`
    gives the value of a compile-time constant (:class:`gpudsl.constexpr`)."""

    def __init__(self, func, extra: dict | None = None, enclosing: dict | None = None):
        self.closure = {}
        code = getattr(func, "__code__", None)
        if code is not None and func.__closure__:
            for name, cell in zip(code.co_freevars, func.__closure__):
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass
        # the variables of the function that applies @proc: a dtype named only in the
        # annotations (``x: T[n]``, strings) is no closure cell of the proc's function
        for name, v in (enclosing or {}).items():
            self.closure.setdefault(name, v)
        self.glb = getattr(func, "__globals__", {}) or {}
        self.env = dict(extra or {})

    def lookup(self, name):
        for d in (self.closure, self.glb, self.env):
            if name in d:
                return d[name]
        return getattr(builtins, name, None)

    def __call__(self, node):
        if isinstance(node, ast.Name):
            return self.lookup(node.id)
        if isinstance(node, ast.Attribute):
            base = self(node.value)
            return getattr(base, node.attr, None) if base is not None else None
        return None

    def constant(self, node):
        """``(value, None)`` for a name (or dotted name) that is a compile-time constant:
        a :class:`constexpr`, a global annotated ``constexpr``, or a variable of an
        enclosing function; ``(None, why)`` for a Python value that may not be used so
        (``why`` says how to declare it); ``(None, None)`` for a name Python does not
        know either."""
        if isinstance(node, ast.Name) and node.id in self.closure:
            return _unwrap(self.closure[node.id]), None
        if isinstance(node, ast.Name):
            for d in (self.glb, self.env):
                if node.id in d:
                    if _declared(d.get("__annotations__", {}).get(node.id)):
                        return _unwrap(d[node.id]), None
                    return _global(node.id, d[node.id])
            return None, None
        v = self(node)
        if isinstance(v, constexpr):
            return v.value, None
        if v is not None and isinstance(node, ast.Attribute) and _is_value(v):
            return v, None   # math.inf, cfg.BLOCK: named through a module or object
        return None, None


def _declared(annotation) -> bool:
    """``X: constexpr = ...`` (a string under ``from __future__ import annotations``)."""
    return annotation is constexpr or annotation in ("constexpr", "gpudsl.constexpr")


def _unwrap(v):
    return v.value if isinstance(v, constexpr) else v


def _is_value(v) -> bool:
    return isinstance(v, (numbers.Number, DType)) and not isinstance(v, complex)


def _global(name, v):
    if isinstance(v, constexpr):
        return v.value, None
    if _is_value(v):
        return None, (f"'{name}' is a Python global ({v!r}); declare it "
                      f"`{name} = gpudsl.constexpr({v!r})` (or annotate it "
                      f"`{name}: constexpr = ...`) to use its value in procs")
    return None, None


def _resolver(func, extra: dict | None = None, enclosing: dict | None = None) -> _Resolver:
    return _Resolver(func, extra, enclosing)


def parse_function(func, instr: str | None = None, enclosing: dict | None = None):
    """``func`` as a proc; ``enclosing``: the local variables of the function that
    defines it (the frame applying the decorator), seen as enclosing variables."""
    src = get_source(func)
    return ProcParser(src, _resolver(func, None, enclosing), instr).parse()


def parse_source_text(text: str, file: str, first_line: int, namespace: dict,
                      instr: str | None = None):
    """Parse a proc from text (used for procs whose source ``inspect`` cannot find)."""
    src = parse_text(text, file, first_line)
    return ProcParser(src, _resolver(None, namespace), instr).parse()
