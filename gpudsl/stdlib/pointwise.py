"""The elementwise nodes (``add`` and ``mul``, with broadcasting, ``relu``, ``silu`` and
any node declared with ``node_table.pointwise_node``): their readable algorithms as
procs built from the element expression of the node's declaration (``Node.expr``; one
proc per canonical shape pattern, see ``shapes.py``; sizes stay symbolic), their
default schedule (:func:`gpudsl.stdlib.stream_schedule.schedule_stream`) and the
kernel choice for given shapes."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import dims, loops, make_proc, vec_assert
from .halves import is_half, load, store
from .node_registry import all_nodes, get
from .shapes import Broadcast, broadcast_pattern, require
from .stream_schedule import THREADS_PER_BLOCK, pick_vec, schedule_stream


def expression(op: str, kind: str) -> str:
    """The element expression of pointwise node ``op`` (its declaration's ``expr``),
    which must be a ``kind`` ("binary" / "unary") node."""
    decl = get(op)
    require(decl is not None and decl.pointwise == kind,
            f"{op!r} is not a {kind} pointwise node of the node table")
    return decl.expr


def _ops(kind: str) -> dict:
    return {n.name: n.expr for n in all_nodes() if n.pointwise == kind}


def __getattr__(name: str):
    """``BINARY_OPS`` / ``UNARY_OPS``: the table's pointwise nodes now (name ->
    expression)."""
    if name in ("BINARY_OPS", "UNARY_OPS"):
        return _ops("binary" if name == "BINARY_OPS" else "unary")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _suffix(dt: str) -> str:
    return "" if dt == "f32" else f"_{dt}"


def binary(op: str, full: tuple[bool, ...], vec: int = 1, dt: str = "f32") -> Proc:
    """``out = a op b`` where axis k of b is full (``full[k]``) or broadcast.
    ``vec > 1`` states that the innermost extent is a multiple of ``vec``.  ``dt``:
    the tensors' dtype (``f16``/``bf16``: computed in f32, rounded once)."""
    return _binary(op, expression(op, "binary"), tuple(full), vec, dt)


@lru_cache(maxsize=None)
def _binary(op: str, expr: str, full: tuple[bool, ...], vec: int, dt: str) -> Proc:
    rank = len(full)
    d = dims(rank)
    bshape = [d[k] if full[k] else "1" for k in range(rank)]
    aidx = ", ".join(f"i{k}" for k in range(rank))
    bidx = ", ".join(f"i{k}" if full[k] else "0" for k in range(rank))
    key = "".join("f" if f else "b" for f in full)
    name = f"{op}_{key}" + (f"_v{vec}" if vec > 1 else "") + _suffix(dt)
    sizes = ", ".join(f"{x}: size" for x in d)
    value = store(expr.format(a=load(f"a[{aidx}]", dt), b=load(f"b[{bidx}]", dt)), dt)
    text = (
        f"def {name}({sizes}, a: {dt}[{', '.join(d)}], b: {dt}[{', '.join(bshape)}], "
        f"out: {dt}[{', '.join(d)}]):\n" + vec_assert(d[-1], vec)
        + loops(rank, f"out[{aidx}] = {value}") + "\n")
    return make_proc(name, text)


def unary(op: str, vec: int = 1, dt: str = "f32") -> Proc:
    """``out = f(x)`` elementwise over the flattened tensor (halves: in f32)."""
    return _unary(op, expression(op, "unary"), vec, dt)


@lru_cache(maxsize=None)
def _unary(op: str, template: str, vec: int, dt: str) -> Proc:
    if is_half(dt):  # the value read once, widened
        expr = store(template.format(x="xf"), dt)
        name = op + (f"_v{vec}" if vec > 1 else "") + _suffix(dt)
        text = (f"def {name}(n: size, x: {dt}[n], out: {dt}[n]):\n" + vec_assert("n", vec) +
                f"    for i in seq(0, n):\n"
                f"        xf: f32 @ REGISTER\n"
                f"        xf = f32(x[i])\n"
                f"        out[i] = {expr}\n")
        return make_proc(name, text)
    expr = template.format(x="x[i]")
    name = op + (f"_v{vec}" if vec > 1 else "")
    text = (f"def {name}(n: size, x: f32[n], out: f32[n]):\n" + vec_assert("n", vec) +
            f"    for i in seq(0, n):\n"
            f"        out[i] = {expr}\n")
    return make_proc(name, text)


def binary_kernel(op: str, full: tuple[bool, ...], vec: int,
                  threads: int = THREADS_PER_BLOCK, dt: str = "f32"):
    return _binary_kernel(op, expression(op, "binary"), tuple(full), vec, threads, dt)


@lru_cache(maxsize=None)
def _binary_kernel(op: str, expr: str, full: tuple[bool, ...], vec: int, threads: int,
                   dt: str):
    p = _binary(op, expr, full, vec, dt)
    rank = len(full)
    # at most three BLOCKS loops per kernel: beyond two row loops, the leading ones
    # stay host loops (one launch of the inner kernel per iteration)
    rows = [f"i{k}" for k in range(max(0, rank - 3), rank - 1)]
    inner = f"i{rank - 1}"
    prefix = "".join(f"i{k}, " for k in range(rank - 1))
    operands = [("a", prefix)]
    if full[-1]:  # b is contiguous along the inner axis too
        operands.append(("b", "".join(f"i{k}, " if full[k] else "0, "
                                      for k in range(rank - 1))))
    operands.append(("out", prefix))
    return schedule_stream(p, rows=rows, inner=inner, operands=operands if vec > 1 else [],
                           vec=vec, threads=threads)


def half_widths(dt: str) -> tuple:
    """Vector widths to try: 128-bit accesses first (8 halves, 4 floats)."""
    return (8, 4, 2) if is_half(dt) else (4, 2)


def plan_binary(op: str, a_shape: tuple, b_shape: tuple, dt: str = "f32"):
    """(proc, canonical a shape, canonical b shape) for ``a op b``."""
    bc: Broadcast = broadcast_pattern(a_shape, b_shape)
    vec = pick_vec(bc.dims[-1], half_widths(dt))
    p = binary_kernel(op, bc.full, vec, dt=dt)
    b_canon = tuple(d if f else 1 for d, f in zip(bc.dims, bc.full))
    return p, bc.dims, b_canon


def unary_kernel(op: str, vec: int, threads: int = THREADS_PER_BLOCK, dt: str = "f32"):
    return _unary_kernel(op, expression(op, "unary"), vec, threads, dt)


@lru_cache(maxsize=None)
def _unary_kernel(op: str, expr: str, vec: int, threads: int, dt: str):
    p = _unary(op, expr, vec, dt)
    return schedule_stream(p, rows=[], inner="i",
                           operands=[("x", ""), ("out", "")] if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_unary(op: str, n: int, dt: str = "f32"):
    return unary_kernel(op, pick_vec(n, half_widths(dt)), dt=dt)


__all__ = ["expression", "binary", "unary", "binary_kernel", "unary_kernel",
           "plan_binary", "plan_unary"]
