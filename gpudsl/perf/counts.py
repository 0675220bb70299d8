"""Whole-launch totals of a kernel: global bytes moved and floating-point operations.

Every statement runs (trip count of each enclosing loop, ``par`` loops included)
times, each trip count computed by the one evaluator with the outer loop
variables at their first value; an ``if`` counts its ``then`` block only (edge
guards run almost everywhere), its ``else`` block not.  The bytes of each global
array are the bytes its accesses move, read and write apart, each capped at the
array's size (what caches cannot remove: the compulsory traffic)."""
from __future__ import annotations

from ..ir.control import NotConstant, evaluate
from ..ir.effects import inline_call, reads_of
from ..ir.nodes import Alloc, Assign, Atomic, BinOp, Builtin, Call, For, If, Reduce, UnOp
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


class Counter:
    def __init__(self, buffers: dict, env: dict):
        self.buffers = dict(buffers)  # name -> warp.Buffer
        self.env = dict(env)
        self.moved: dict = {}  # (name, "r"/"w") -> bytes
        self.flops = 0
        self.exact = True

    def block(self, stmts, mult: int, env: dict):
        for s in stmts:
            self.stmt(s, mult, env)

    def stmt(self, s, mult, env):
        if isinstance(s, For):
            try:
                lo, hi = evaluate(s.lo, env), evaluate(s.hi, env)
            except (NotConstant, ZeroDivisionError):
                self.exact = False
                return
            if hi > lo:
                self.block(s.body, mult * (hi - lo), {**env, s.iter: lo})
        elif isinstance(s, If):
            self.exact = False if s.orelse else self.exact
            self.block(s.body, mult, env)
        elif isinstance(s, Alloc):
            from .warp import Buffer, elem_bytes

            try:
                shape = tuple(evaluate(e, env) for e in s.shape)
            except (NotConstant, ZeroDivisionError):
                return
            self.buffers[s.name] = Buffer(s.name, s.mem, shape, elem_bytes(s.ty))
        elif isinstance(s, (Assign, Reduce, Atomic)):
            for e in (getattr(s, "cmp", None), s.rhs, *s.idx):
                if e is not None:
                    for r in reads_of(e):
                        self.move(r.name, "r", mult)
            if not isinstance(s, Assign):
                self.move(s.name, "r", mult)
                self.flops += mult
            self.move(s.name, "w", mult)
            if s.rhs.ty.is_float:
                self.flops += mult * flops_of(s.rhs)
        elif isinstance(s, Call):
            self.block(inline_call(s, set(self.buffers) | set(env)), mult, env)

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
