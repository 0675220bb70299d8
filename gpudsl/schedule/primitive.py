"""Declaring a rewrite primitive once.

A primitive is a legality check plus a rewrite that returns its cursor
forwarding.  It is declared with :func:`primitive`, which says its name and the
kind of each argument::

    @primitive("reorder_loops", outer=LOOP)
    def reorder_loops(p, outer):
        '''Swap loop ``outer`` with the loop directly nested in it.

        Legality: no dependence between two iterations changes order.
        Example: ``reorder_loops(p, "i")``
        '''
        s = outer.node()              # `outer` is already a Cursor into p
        ...                           # legality: raise fail("why", s.loc)
        return Rewrite(new_ir, fwd)   # the new proc, and how old cursors move

The declaration does, in one place, what every primitive needs: it binds the
arguments, turns each into what its kind says (a pattern string or a cursor into
a :class:`~gpudsl.schedule.cursors.Cursor`, a checked positive integer, a fresh
identifier, one of a set of choices...), refuses anything else with a
:class:`~gpudsl.SchedulingError` naming the primitive, names the primitive in
every error raised while it runs (:func:`fail`, and legality checks through
:func:`current`), and wraps the rewritten IR into a proc of the caller's class
(``p._derive(ir, forward)``) without this layer importing the public ``Proc``.

Every declared primitive is in :data:`PRIMITIVES` (name → :class:`Primitive`),
which ``gpudsl.schedule.__all__`` and ``docs/primitives.md`` are made from.
"""
from __future__ import annotations

import contextvars
import functools
import inspect
from dataclasses import dataclass, field
from typing import Callable

from ..errors import SchedulingError

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("primitive", default=None)


def current(default: str = "schedule") -> str:
    """The name of the outermost primitive running now (for error messages)."""
    return _CURRENT.get() or default


def fail(message: str, loc=None, hint: str | None = None, witness: dict | None = None):
    """A :class:`SchedulingError` of the running primitive (``raise fail(...)``)."""
    return SchedulingError(current(), message, loc, hint, witness)


@dataclass(frozen=True)
class Rewrite:
    """What a primitive's body returns: the new IR and the forwarding function
    from addresses in the old proc to addresses in the new one."""

    ir: object
    forward: Callable


# ------------------------------------------------------------------ argument kinds


@dataclass(frozen=True)
class Kind:
    """How one argument of a primitive is checked and converted."""

    name: str
    convert: Callable  # (proc, value, argname) -> converted value; raises fail(...)
    doc: str = ""

    def __call__(self, p, value, arg):
        return self.convert(p, value, arg)


def _cursor(want: str, doc: str) -> Kind:
    def conv(p, value, arg):
        from .cursors import resolve

        return resolve(p, value, current(), want)

    return Kind(want, conv, doc)


LOOP = _cursor("loop", "a loop: a name such as \"i\" or \"i #1\", or a cursor")
ALLOC = _cursor("alloc", "an allocation: \"x\", \"x: _\" or a cursor")
STMT = _cursor("stmt", "a statement: a pattern such as \"y[_] = _\" or a cursor")
BLOCK = _cursor("block", "statements: a pattern, a loop name or a block cursor")
GAP = _cursor("gap", "a gap between statements: cursor.before() / cursor.after()")
EXPR = _cursor("expr", "an expression cursor (p.find(\"a * _\"))")


def _positive_int(p, value, arg):
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise fail(f"{arg} must be a positive integer, not {value!r}", p.ir.loc)
    return value


def _nonneg_int(p, value, arg):
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise fail(f"{arg} must be a non-negative integer, not {value!r}", p.ir.loc)
    return value


def check_name(p, value, arg="name"):
    """A new name, by the language's own rule (``frontend.scope.name_problem``)."""
    from ..frontend.scope import name_problem

    why = name_problem(value)
    if why is not None:
        raise fail(f"{arg}: {why}", p.ir.loc, "pick another name")
    return value


def _bool(p, value, arg):
    if not isinstance(value, bool):
        raise fail(f"{arg} must be True or False, not {value!r}", p.ir.loc)
    return value


def _text(p, value, arg):
    if not isinstance(value, str):
        raise fail(f"{arg} must be a string, not {value!r}", p.ir.loc)
    return value


def _any(p, value, arg):
    return value


POSITIVE_INT = Kind("positive int", _positive_int, "an integer >= 1")
NONNEG_INT = Kind("int >= 0", _nonneg_int, "an integer >= 0")
NAME = Kind("name", check_name, "a new identifier (not a keyword or a language name)")
BOOL = Kind("bool", _bool, "True or False")
TEXT = Kind("text", _text, "a string in the language, parsed in the scope it applies to")
ANY = Kind("any", _any, "checked by the primitive itself")


def names(count: int) -> Kind:
    """A list of ``count`` distinct new names."""

    def conv(p, value, arg):
        if not isinstance(value, (list, tuple)) or len(value) != count:
            raise fail(f"{arg} must be a list of {count} names, not {value!r}", p.ir.loc)
        out = [check_name(p, v, arg) for v in value]
        if len(set(out)) != len(out):
            raise fail("the new names must differ", p.ir.loc)
        return out

    return Kind(f"{count} names", conv, f"a list of {count} distinct new identifiers")


def choice(*options) -> Kind:
    """One of ``options`` (compared with ``==``; ``None`` may be one)."""

    def conv(p, value, arg):
        for o in options:
            if value is o or (value == o and type(value) is type(o)):
                return o
        shown = ", ".join(repr(getattr(o, "name", o)) for o in options)
        raise fail(f"{arg} must be one of {shown}, not {value!r}", p.ir.loc)

    return Kind("choice", conv, "one of " + ", ".join(str(getattr(o, "name", o))
                                                         for o in options))


# ------------------------------------------------------------------ declaring


@dataclass
class Primitive:
    name: str
    kinds: dict
    apply: Callable
    rewrite: Callable
    doc: str = ""
    module: str = ""
    extra: dict = field(default_factory=dict)


PRIMITIVES: dict[str, Primitive] = {}


def primitive(name: str, **kinds: Kind):
    """Declare the rewrite below as the primitive ``name`` whose arguments have
    the given kinds (arguments not named are passed through unchanged)."""

    def deco(fn):
        sig = inspect.signature(fn)
        for arg in kinds:
            if arg not in sig.parameters:
                raise TypeError(f"primitive {name}: no argument {arg!r}")

        @functools.wraps(fn)
        def apply(p, *args, **kwargs):
            if not hasattr(p, "ir") or not hasattr(p, "_derive"):
                raise TypeError(f"{name}: the first argument must be a proc, not {p!r}")
            try:
                bound = sig.bind(p, *args, **kwargs)
            except TypeError as exc:
                raise SchedulingError(name, f"bad arguments: {exc}", p.ir.loc) from None
            bound.apply_defaults()
            token = _CURRENT.set(_CURRENT.get() or name)
            try:
                for arg, kind in kinds.items():
                    bound.arguments[arg] = kind(p, bound.arguments[arg], arg)
                out = fn(*bound.args, **bound.kwargs)
            finally:
                _CURRENT.reset(token)
            if isinstance(out, Rewrite):
                return p._derive(out.ir, out.forward)
            return out

        PRIMITIVES[name] = Primitive(name, dict(kinds), apply, fn,
                                     inspect.getdoc(fn) or "", fn.__module__)
        return apply

    return deco


__all__ = ["primitive", "Primitive", "PRIMITIVES", "Rewrite", "Kind", "fail", "current",
           "check_name", "names", "choice", "LOOP", "ALLOC", "STMT", "BLOCK", "GAP", "EXPR",
           "POSITIVE_INT", "NONNEG_INT", "NAME", "BOOL", "TEXT", "ANY"]
