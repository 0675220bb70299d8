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
        return replace(p.ir, outer.addr, [new], keep=[...])  # an edit of
                                  # gpudsl.schedule.edits: the new IR, how cursors move

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
from dataclasses import dataclass
from typing import Callable

from ..errors import SchedulingError
from ..ir.smt_interrupt import ctrl_c_guard
from .block_order_kept import kept_block_orders
from .blocks_per_sm_kept import kept_blocks_per_sm
from .edits import Rewrite, same_shape
from .memo import alias
from .provenance import stamp
from .warp_rewrites import keep_warps as _KEEP_WARPS

_CURRENT: contextvars.ContextVar[str | None] = contextvars.ContextVar("primitive", default=None)


def current(default: str = "schedule") -> str:
    """The name of the outermost primitive running now (for error messages)."""
    return _CURRENT.get() or default


def fail(message: str, loc=None, hint: str | None = None, witness: dict | None = None):
    """A :class:`SchedulingError` of the running primitive (``raise fail(...)``)."""
    return SchedulingError(current(), message, loc, hint, witness)


def _not_a_barrier(s):
    """A split barrier (``bar: barrier @ SHARED``, docs/language.md (synchronization)) is no array: it stays
    alone, in SHARED memory, at the top of its block's code."""
    from ..ir.types import BARRIER

    if getattr(s, "ty", None) == BARRIER:
        raise fail(f"'{s.name}' is a split barrier, not an array: it stays where it is "
                   "allocated (alone, in SHARED memory, at block level)", s.loc)


def _keep_sync_orderings(old, new, name):
    """Ranged and split barriers (docs/language.md (synchronization)): see :mod:`.sync_guard`."""
    if new is None:
        return
    from .sync_guard import broken_sync_orderings
    bad = broken_sync_orderings(old, new)
    if bad is not None:
        raise SchedulingError(name, *bad)
    from .async_guard import broken_async
    bad = broken_async(old, new)
    if bad is not None:
        raise SchedulingError(name, *bad)
    from .cluster_guard import broken_clusters
    bad = broken_clusters(old, new, name)
    if bad is not None:
        raise SchedulingError(name, *bad)
    from .hopper_guard import broken_hopper
    bad = broken_hopper(old, new, allow_swizzle=name == "set_swizzle",
                        allow_registers=name == "set_registers")
    if bad is not None:
        raise SchedulingError(name, *bad)


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

        c = resolve(p, value, current(), want)
        if want == "alloc":
            _not_a_barrier(c.node())
        return c

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


def check_name(p, value, arg="name", proc: bool = False):
    """A new name, by the language's own rule (``frontend.scope.name_problem``;
    ``proc``: the rule for a proc's name)."""
    from ..frontend.scope import name_problem

    why = name_problem(value, proc)
    if why is not None:
        raise fail(f"{arg}: {why}", p.ir.loc, "pick another name")
    return value


def _proc_name(p, value, arg):
    return check_name(p, value, arg, proc=True)


def _bool(p, value, arg):
    if not isinstance(value, bool):
        raise fail(f"{arg} must be True or False, not {value!r}", p.ir.loc)
    return value


def _text(p, value, arg):
    from ..ir.nodes import Expr

    # numbers and IR are read by the string parser too, which checks their type
    if not isinstance(value, (str, int, float, Expr)):
        raise fail(f"{arg} must be a string, not {value!r}", p.ir.loc)
    return value


def _texts(p, value, arg):
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not value:
        raise fail(f"{arg} must be a string or a non-empty list of strings, not {value!r}",
                   p.ir.loc, "give at least one condition")
    return [_text(p, v, arg) for v in value]


def _proc(p, value, arg):
    from ..ir.nodes import ProcDef

    ir = getattr(value, "ir", value)
    if not isinstance(ir, ProcDef):
        raise fail(f"{arg} must be a proc, not {value!r}", p.ir.loc)
    return ir


def _any(p, value, arg):
    return value


POSITIVE_INT = Kind("positive int", _positive_int, "an integer >= 1")
NONNEG_INT = Kind("int >= 0", _nonneg_int, "an integer >= 0")
NAME = Kind("name", check_name, "a new identifier (not a keyword or a language name)")
PROC_NAME = Kind("proc name", _proc_name, "an identifier that may name a proc")
BOOL = Kind("bool", _bool, "True or False")
TEXT = Kind("text", _text, "a string in the language (or a number), parsed in the scope "
            "it applies to")
TEXTS = Kind("texts", _texts, "a string in the language, or a non-empty list of them")
PROC = Kind("proc", _proc, "a proc (its IR is used)")
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
        raise fail(f"{arg} must be one of {shown}, not {value!r}", p.ir.loc)

    shown = ", ".join(_show(o) for o in options)
    return Kind("choice", conv, "one of " + shown)


def _show(o) -> str:
    """An option as a user writes it: ``BLOCKS``, ``None``, ``'guard'``, ``4``."""
    return o.name if hasattr(o, "name") and not isinstance(o, str) else repr(o)


# ------------------------------------------------------------------ declaring


@dataclass
class Primitive:
    """A declared primitive: ``apply`` is the public function (proc -> proc),
    ``rewrite`` the body it wraps, ``kinds`` the kind of each checked argument."""

    name: str
    kinds: dict
    apply: Callable
    rewrite: Callable
    doc: str = ""
    module: str = ""

    def _paragraphs(self) -> list[str]:
        return [" ".join(x.split()) for x in self.doc.split("\n\n") if x.strip()]

    def _labelled(self, label: str) -> str:
        for para in self._paragraphs():
            if para.startswith(label):
                return para[len(label):].strip()
        return ""

    @property
    def summary(self) -> str:
        """The docstring's first paragraph."""
        paras = self._paragraphs()
        return paras[0] if paras else ""

    @property
    def details(self) -> list[str]:
        """The paragraphs between the summary and ``Legality:`` / ``Example:``."""
        return [x for x in self._paragraphs()[1:]
                if not x.startswith(("Legality:", "Example:"))]

    @property
    def legality(self) -> str:
        """The ``Legality:`` paragraph: the rule the primitive proves."""
        return self._labelled("Legality:")

    @property
    def example(self) -> str:
        """The ``Example:`` line."""
        return self._labelled("Example:")

    @property
    def signature(self) -> str:
        """``name(p, arg, arg=default)`` as a user calls it."""
        parts = []
        for prm in inspect.signature(self.rewrite).parameters.values():
            d = prm.default
            parts.append(prm.name if d is inspect.Parameter.empty
                         else f"{prm.name}={_show(d)}")
        return f"{self.name}({', '.join(parts)})"


PRIMITIVES: dict[str, Primitive] = {}


def primitive(name: str, /, **kinds: Kind):
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
                raise SchedulingError(current(name), f"bad arguments: {exc}",
                                      p.ir.loc) from None
            bound.apply_defaults()
            outermost = _CURRENT.get() is None
            token = _CURRENT.set(_CURRENT.get() or name)
            try:
                with ctrl_c_guard():   # Ctrl-C in a legality proof: KeyboardInterrupt
                    for arg, kind in kinds.items():
                        bound.arguments[arg] = kind(p, bound.arguments[arg], arg)
                    out = fn(*bound.args, **bound.kwargs)
                if outermost and hasattr(out, "ir"):
                    why = _KEEP_WARPS(p.ir, out.ir)  # no lane regrouping of collectives
                    if why is not None:
                        raise fail(why[0], p.ir.loc, why[1])
            finally:
                _CURRENT.reset(token)
            if outermost:
                _keep_sync_orderings(p.ir, getattr(out, "ir", None), name)
            if isinstance(out, Rewrite):
                ir = stamp(p.ir, out.ir, name) if outermost else out.ir
                if outermost and name != "set_block_order":
                    ir = kept_block_orders(p.ir, ir)
                if outermost:
                    ir = kept_blocks_per_sm(ir)
                alias(ir, out.ir)
                return p._derive(ir, out.forward)
            if outermost and hasattr(out, "ir") and hasattr(out, "_origin"):
                # a proc already derived from p (a primitive built on others)
                ir = kept_blocks_per_sm(kept_block_orders(p.ir, stamp(p.ir, out.ir, name)))
                if ir is not out.ir:  # same statements, new locations
                    return out._derive(ir, same_shape(out.ir, ir).forward)
            return out

        PRIMITIVES[name] = Primitive(name, dict(kinds), apply, fn,
                                     inspect.getdoc(fn) or "", fn.__module__)
        return apply

    return deco


# ------------------------------------------------------------------ documentation

# the sections of docs/primitives.md: module (under gpudsl.schedule) -> title
SECTIONS = {"loops": "Loops", "fission": "Loops", "merge": "Loops", "memory": "Memory", "stage": "Memory", "sync": "Sync",
            "async_copy_primitives": "Asynchronous copies", "producers": "Asynchronous copies",
            "wgmma_from_loops": "Hopper", "wgmma_pipeline": "Hopper", "persistent": "Hopper", "tma_store_from_copies": "Hopper", "tma_from_copies": "Hopper", "swizzle_tiles": "Hopper",
            "call_primitives": "Calls", "hints": "Compiler hints", "block_order": "Compiler hints", "asserts": "Preconditions"}


def render(prims: dict | None = None) -> str:
    """``docs/primitives.md``: every primitive of ``prims`` (default
    :data:`PRIMITIVES`) with its signature, argument kinds, summary, legality rule
    and example, in sections per module."""
    prims = PRIMITIVES if prims is None else prims
    groups: dict[str, list[Primitive]] = {}
    for pr in prims.values():
        mod = pr.module.rsplit(".", 1)[-1]
        groups.setdefault(SECTIONS.get(mod, "Other"), []).append(pr)
    order = list(dict.fromkeys(list(SECTIONS.values()) + ["Other"]))
    out = ["# Scheduling primitives", "",
           "<!-- generated by `python -m gpudsl.schedule.primitive > docs/primitives.md`;",
           "     do not edit: edit the primitive's docstring and regenerate -->", "",
           "Each primitive takes a proc and returns a new proc with the same meaning, or",
           "raises `SchedulingError` naming the primitive, the statement and the reason",
           "(with a witness where a proof failed); `add_assert` alone narrows the domain",
           "(the same meaning wherever its new assertion holds). Arguments are checked by their kind",
           "before the primitive runs; cursors of the old proc forward into the new one",
           "(`new.forward(cursor)`).", "",
           "To add a primitive, declare it with `@primitive(name, arg=KIND, ...)`",
           "(`gpudsl/schedule/primitive.py`) in the module of its family, with a",
           "docstring of a summary, a `Legality:` paragraph and an `Example:` line;",
           "its body raises `fail(...)` or returns the `Rewrite` (new IR and cursor forwarding)",
           "that an edit of `gpudsl/schedule/edits.py` makes (`replace`, `move`, `wrap`...). Add its",
           "tests and its name to `EXPECTED` in tests/schedule/test_primitive_decl.py,",
           "and regenerate this file.", ""]
    for title in order:
        if title not in groups:
            continue
        out += [f"## {title}", ""]
        for pr in groups[title]:  # in the order of declaration
            # the signature as a line of code, not a ```python block: the docs' python
            # blocks are run as tests, and a signature is no program
            out += [f"### `{pr.name}`", "", f"`{pr.signature}`", "", pr.summary, ""]
            for para in pr.details:
                out += [para, ""]
            if pr.kinds:
                out += ["Arguments:", ""]
                out += [f"- `{arg}` ({kind.name}): {kind.doc}" for arg, kind in pr.kinds.items()]
                out.append("")
            out += [f"**Legality.** {_sentence(pr.legality) or '(not documented)'}", "",
                    f"**Example.** {pr.example or '(none)'}", ""]
    return "\n".join(out).rstrip("\n") + "\n"


def _sentence(text: str) -> str:
    return text[:1].upper() + text[1:]


__all__ = ["primitive", "Primitive", "PRIMITIVES", "Rewrite", "Kind", "fail", "current",
           "check_name", "names", "choice", "render", "LOOP", "ALLOC", "STMT", "BLOCK", "GAP",
           "EXPR", "POSITIVE_INT", "NONNEG_INT", "NAME", "PROC_NAME", "BOOL", "TEXT", "TEXTS",
           "PROC", "ANY"]


if __name__ == "__main__":
    import sys

    # `python -m gpudsl.schedule.primitive` imports the package gpudsl.schedule
    # first, which declares every primitive into the registry of the module
    # gpudsl.schedule.primitive; this file then runs again as __main__, with an
    # empty registry of its own: render the real one.
    sys.stdout.write(sys.modules[__spec__.name].render())
