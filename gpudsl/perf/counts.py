"""Whole-launch totals of a kernel: global bytes moved and floating-point operations.

Every statement runs (trip count of each enclosing loop, ``par`` loops included)
times, each trip count computed by the one evaluator with the outer loop
variables at their first value.  An ``if`` whose condition reads enclosing loop
variables (an edge guard: ``if 128 * bj + tj < k``) is counted exactly: its
blocks run for the number of those variables' value tuples (over their loops'
ranges, under the guards already around it) that satisfy or fail it, enumerated
with numpy arrays through the one evaluator.  An ``if`` whose condition reads
memory (data-dependent) counts its ``then`` block, its ``else`` block not (the
report says so); past ``MAX_TUPLES`` tuples a guard is assumed to hold and
``approximate`` names it.  The bytes of each global
array are the bytes its accesses move, read and write apart, each capped at the
array's size (what caches cannot remove: the compulsory traffic).  Warp collectives
count as warp instructions (``shuffles``: a float warp reduction is 5 shuffles)."""
from __future__ import annotations

import numpy as np

from ..ir.control import NotConstant, control_names, evaluate
from ..ir.stmt_effects import Walker
from ..ir.nodes import Assign, BinOp, Builtin, Collective, UnOp
from ..ir.printer import print_expr
from ..ir.visitor import walk

# (tf32(x), a mask of the operand's bits, is not a flop: a GEMM's readable tf32
# algorithm counts 2 per product, as the f32 one)
_FLOAT_BUILTINS = ("exp", "log", "sqrt", "tanh", "sin", "cos", "erf", "rsqrt", "pow", "min",
                   "max", "abs")
MAX_TUPLES = 1 << 24  # value tuples one guard's count may enumerate


class _Unknown(Exception):
    pass


def _truth(e, env):
    """The truth of a control condition, elementwise when ``env`` holds numpy arrays
    (``and`` / ``or`` / ``not`` combined here, everything else by the one evaluator)."""
    if isinstance(e, BinOp) and e.op in ("and", "or"):
        f = np.logical_and if e.op == "and" else np.logical_or
        return f(_truth(e.lhs, env), _truth(e.rhs, env))
    if isinstance(e, UnOp) and e.op == "not":
        return np.logical_not(_truth(e.arg, env))
    return np.asarray(evaluate(e, env), dtype=bool)


def _holds(guards, loops, env):
    """A boolean array over the value tuples of ``loops`` [(iter, lo, hi)]: which
    satisfy every (cond, positive) of ``guards``."""
    shape = tuple(max(0, hi - lo) for _, lo, hi in loops)
    if int(np.prod(shape, dtype=np.int64)) > MAX_TUPLES:
        raise _Unknown
    env = dict(env)
    for ax, (name, lo, hi) in enumerate(loops):
        env[name] = np.arange(lo, hi, dtype=np.int64).reshape(
            [-1 if a == ax else 1 for a in range(len(loops))])
    ok = np.ones(shape, dtype=bool)
    for cond, positive in guards:
        try:
            t = np.broadcast_to(_truth(cond, env), shape)
        except (NotConstant, ZeroDivisionError, TypeError, ValueError) as e:
            raise _Unknown from e
        ok &= t if positive else ~t
    return ok


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
    """The one effect walker with a context ``(multiplicity, env, loops, guards)``:
    ``loops`` the enclosing loops [(iter, lo, hi)], ``guards`` the loop-dependent
    conditions [(cond, positive)] the statement sits under."""

    def __init__(self, buffers: dict, env: dict):
        super().__init__()
        self.buffers = dict(buffers)  # name -> warp.Buffer
        self.moved: dict = {}  # (name, "r"/"w") -> bytes
        self.flops = 0
        self.shuffle_lanes = 0  # lanes x warp instructions of collectives (see shuffles)
        self.approximate: list = []  # guards assumed to hold (too many tuples to count)

    def run(self, stmts, env: dict):
        self.block(stmts, (1, dict(env), (), ()))

    def stmt(self, s, ctx):
        if ctx[0]:
            super().stmt(s, ctx)

    def enter_loop(self, s, ctx):
        mult, env, loops, guards = ctx
        try:
            lo, hi = evaluate(s.lo, env), evaluate(s.hi, env)
        except (NotConstant, ZeroDivisionError):
            return (0, env, loops, guards)
        return (mult * max(0, hi - lo), {**env, s.iter: lo}, loops + ((s.iter, lo, hi),),
                guards)

    def enter_branch(self, s, positive, ctx):
        mult, env, loops, guards = ctx
        try:
            names = control_names(s.cond)
            if not names & {lp[0] for lp in loops}:
                taken = bool(evaluate(s.cond, env))
                return ctx if taken == positive else (0, env, loops, guards)
            new = guards + ((s.cond, positive),)
            names |= {n for g, _ in new for n in control_names(g)}
            dep = [lp for lp in loops if lp[0] in names]
            before, after = _holds(guards, dep, env), _holds(new, dep, env)
        except (NotConstant, ZeroDivisionError):  # data-dependent: assume it holds
            return ctx if positive else (0, env, loops, guards)
        except _Unknown:
            if positive:
                self.approximate.append(print_expr(s.cond))
            return ctx if positive else (0, env, loops, guards)
        n_before, n_after = int(before.sum()), int(after.sum())
        if not n_after:
            return (0, env, loops, guards)
        first = np.unravel_index(int(np.argmax(after)), after.shape)
        env = {**env, **{lp[0]: lp[1] + int(i) for lp, i in zip(dep, first)}}
        return (mult * n_after // n_before, env, loops, new)

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

    def exprs(self, es, s, ctx):
        super().exprs(es, s, ctx)
        from ..codegen.collective_cuda import count_shuffles

        for e in es:
            if e is not None:
                for x in walk(e):
                    if isinstance(x, Collective):
                        self.shuffle_lanes += ctx[0] * count_shuffles(x)

    @property
    def shuffles(self) -> int:
        """Warp instructions of the collectives (shuffles, votes, warp reductions; a
        float reduction is 5 shuffles): each is run by the 32 lanes of a warp."""
        return self.shuffle_lanes // 32

    def taken(self, ctx):
        return super().taken(ctx) | set(self.buffers) | set(ctx[1])

    def move(self, name, mode, mult):
        b = self.buffers.get(name)
        if b is None or b.memory.warp_access != "sectors":
            return
        self.moved[(name, mode)] = self.moved.get((name, mode), 0) + mult * b.elem_bytes

    def total_bytes(self, mode: str | None = None) -> int:
        """Compulsory global bytes: read and written (``mode`` "r" or "w": one of them)."""
        total = 0
        for (name, m), n in self.moved.items():
            if mode is not None and m != mode:
                continue
            b = self.buffers[name]
            size = b.elem_bytes
            for d in b.shape:
                size *= d
            total += min(n, size)
        return total
