"""Names in scope while parsing a proc, with what each one is."""
from __future__ import annotations

import keyword
from dataclasses import dataclass

from ..errors import ProcError, SrcLoc
from ..ir.nodes import ATOMIC_OPS, BUILTINS
from ..ir.types import DTYPES, MAPPINGS, MEMORIES, DType, Mapping, Memory

# Names the language gives a meaning of its own: a variable, allocation or loop
# of that name would read as something else (``min(a, b)`` is the builtin,
# ``f32`` the type, ``seq`` a loop), and a proc named ``sync`` or ``atomic_add``
# would be called as the barrier or the atomic.
STATEMENT_NAMES = frozenset(("sync", "arrive", "wait", "barrier")) | frozenset(f"atomic_{op}" for op in ATOMIC_OPS)
RESERVED = frozenset(BUILTINS) | frozenset(DTYPES) | frozenset(MEMORIES) | \
    frozenset(MAPPINGS) | STATEMENT_NAMES | \
    frozenset(("bool_", "size", "index", "seq", "par", "range"))


def name_problem(name, proc: bool = False) -> str | None:
    """Why ``name`` cannot name a new variable, allocation or loop (a proc with
    ``proc``); None if it can."""
    if not isinstance(name, str) or not name.isidentifier():
        return f"{name!r} is not a valid name"
    if keyword.iskeyword(name):
        return f"'{name}' is a Python keyword"
    if name in (STATEMENT_NAMES if proc else RESERVED):
        return f"'{name}' is a name of the language (a builtin, type, memory or statement)"
    return None


# kinds: "size", "index", "loop", "scalar" (parameter), "local" (allocated
# scalar), "array" (tensor, window or allocated array)


@dataclass(frozen=True)
class Sym:
    name: str
    kind: str
    ty: DType
    shape: tuple = ()
    mem: Memory | None = None
    loc: SrcLoc | None = None
    mapping: Mapping | None = None  # loops: BLOCKS / THREADS / None
    param: bool = False
    swizzle: int | None = None      # an allocation's swizzle width (0: none; None: unknown)

    @property
    def is_int_control(self) -> bool:
        return self.kind in ("size", "index", "loop")

    def describe(self) -> str:
        return {"size": "a size parameter", "index": "an index parameter",
                "loop": "a loop variable", "scalar": "a scalar parameter",
                "local": "a scalar", "array": "an array",
                "barrier": "a split barrier"}[self.kind]


class Scope:
    """A stack of blocks.  Binding a name that is visible already is an error
    (gpudsl names mean one thing in a proc), sibling blocks may reuse names."""

    def __init__(self):
        self.frames: list[dict[str, Sym]] = [{}]

    def push(self):
        self.frames.append({})

    def pop(self):
        self.frames.pop()

    def lookup(self, name: str) -> Sym | None:
        for f in reversed(self.frames):
            if name in f:
                return f[name]
        return None

    def bind(self, sym: Sym, loc: SrcLoc | None):
        why = name_problem(sym.name)
        if why is not None:
            raise ProcError(f"{why}; it cannot name {sym.describe()}", loc,
                            "pick another name")
        old = self.lookup(sym.name)
        if old is not None:
            where = f" (at line {old.loc.line})" if old.loc else ""
            raise ProcError(f"'{sym.name}' is already defined{where} as {old.describe()}", loc,
                            "pick another name: gpudsl does not allow shadowing")
        self.frames[-1][sym.name] = sym

    def all_names(self) -> set[str]:
        out: set[str] = set()
        for f in self.frames:
            out |= set(f)
        return out

    def enclosing_loops(self) -> list[Sym]:
        return [s for f in self.frames for s in f.values() if s.kind == "loop"]
