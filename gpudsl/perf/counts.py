"""Whole-launch totals of a kernel: global bytes moved and floating-point operations.

Every statement runs (trip count of each enclosing loop, ``par`` loops included)
times, each trip count computed by the one evaluator with the outer loop
variables at their first value; an ``if`` counts its ``then`` block only (edge
guards run almost everywhere), its ``else`` block not.  The bytes of each global
array are the bytes its accesses move, read and write apart, each capped at the
array's size (what caches cannot remove: the compulsory traffic)."""
from __future__ import annotations

from ..ir.control import NotConstant, evaluate
from ..ir.effects import Walker
from ..ir.nodes import Assign, BinOp, Builtin, UnOp
from ..ir.types import GLOBAL
from ..ir.visitor import walk

_FLOAT_BUILTINS = ("exp", "log", "sqrt", "tanh", "min", "max", "abs")


def flops_of(e) -> int:
    n = 0
    for x in walk(e):
        if isinstance(x, BinOp) and x.op in ("+", "-", "*", "/") and x.ty.is_float:
            n += 1
        elif isinstance(x, Builtin) and x.name in _FLOAT_BUILTINS and x.ty.is_float:
            n += 1
        elif isinstance(x, UnOp) and x.op == "-" and x.ty.is_float:
            n += 1
    return n


class Counter(Walker):
    """The one effect walker with a context ``(multiplicity, env)``."""

    def __init__(self, buffers: dict, env: dict):
        super().__init__()
        self.buffers = dict(buffers)  # name -> warp.Buffer
        self.moved: dict = {}  # (name, "r"/"w") -> bytes
        self.flops = 0

    def run(self, stmts, env: dict):
        self.block(stmts, (1, dict(env)))

    def stmt(self, s, ctx):
        if ctx[0]:
            super().stmt(s, ctx)

    def enter_loop(self, s, ctx):
        mult, env = ctx
        try:
            lo, hi = evaluate(s.lo, env), evaluate(s.hi, env)
        except (NotConstant, ZeroDivisionError):
            return (0, env)
        return (mult * max(0, hi - lo), {**env, s.iter: lo})

    def enter_branch(self, s, positive, ctx):
        return ctx if positive else (0, ctx[1])

    def declare(self, s, ctx):
        from .warp import Buffer, elem_bytes

        try:
            shape = tuple(evaluate(e, ctx[1]) for e in s.shape)
            self.buffers[s.name] = Buffer(s.name, s.mem, shape, elem_bytes(s.ty))
        except (NotConstant, ZeroDivisionError):
            pass
        return s.name

    def read(self, n, s, ctx):
        self.move(n.name, "r", ctx[0])

    def write(self, s, ctx):
        mult = ctx[0]
        if not isinstance(s, Assign):
            self.move(s.name, "r", mult)
            self.flops += mult
        self.move(s.name, "w", mult)
        if s.rhs.ty.is_float:
            self.flops += mult * flops_of(s.rhs)

    def taken(self, ctx):
        return super().taken(ctx) | set(self.buffers) | set(ctx[1])

    def move(self, name, mode, mult):
        b = self.buffers.get(name)
        if b is None or b.memory != GLOBAL:
            return
        self.moved[(name, mode)] = self.moved.get((name, mode), 0) + mult * b.elem_bytes

    def total_bytes(self) -> int:
        total = 0
        for (name, _), n in self.moved.items():
            b = self.buffers[name]
            size = b.elem_bytes
            for d in b.shape:
                size *= d
            total += min(n, size)
        return total
