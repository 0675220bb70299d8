"""Kernel choice for the bandwidth-bound nodes: for given shapes, the
algorithm variant, its default schedule, and how the user's arrays map onto
the proc's canonical parameters."""
from __future__ import annotations

from functools import lru_cache

from . import algorithms as A
from .shapes import Broadcast, broadcast_pattern, require
from .stream_schedule import pick_vec, schedule_stream

THREADS_PER_BLOCK = 256  # H100 default: 256 threads x float4 = 4 KB per block step


@lru_cache(maxsize=None)
def binary_kernel(op: str, full: tuple[bool, ...], vec: int,
                  threads: int = THREADS_PER_BLOCK):
    p = A.binary(op, full, vec)
    rank = len(full)
    rows = [f"i{k}" for k in range(rank - 1)]
    inner = f"i{rank - 1}"
    prefix = "".join(f"i{k}, " for k in range(rank - 1))
    operands = [("a", prefix)]
    if full[-1]:  # b is contiguous along the inner axis too
        operands.append(("b", "".join(f"i{k}, " if full[k] else "0, "
                                      for k in range(rank - 1))))
    operands.append(("out", prefix))
    return schedule_stream(p, rows=rows, inner=inner, operands=operands if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_binary(op: str, a_shape: tuple, b_shape: tuple):
    """(proc, canonical a shape, canonical b shape) for ``a op b``."""
    bc: Broadcast = broadcast_pattern(a_shape, b_shape)
    require(len(bc.dims) <= 3, "this broadcast pattern needs more than 3 merged axes")
    vec = pick_vec(bc.dims[-1])
    p = binary_kernel(op, bc.full, vec)
    b_canon = tuple(d if f else 1 for d, f in zip(bc.dims, bc.full))
    return p, bc.dims, b_canon


@lru_cache(maxsize=None)
def unary_kernel(op: str, vec: int, threads: int = THREADS_PER_BLOCK):
    p = A.unary(op, vec)
    return schedule_stream(p, rows=[], inner="i",
                           operands=[("x", ""), ("out", "")] if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_unary(op: str, n: int):
    return unary_kernel(op, pick_vec(n))


@lru_cache(maxsize=None)
def slice_kernel(vec: int, threads: int = THREADS_PER_BLOCK):
    p = A.slice_rows(vec)
    return schedule_stream(p, rows=["i"], inner="j",
                           operands=[("x", "begin + i, "), ("out", "i, ")] if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_slice(c: int):
    return slice_kernel(pick_vec(c))


@lru_cache(maxsize=None)
def replace_slice_kernel(vec: int, threads: int = THREADS_PER_BLOCK):
    p = A.replace_slice_rows(vec)
    # The write is guarded by a data-dependent condition, so only r is staged.
    return schedule_stream(p, rows=["i"], inner="j",
                           operands=[("r", "i, ")] if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_replace_slice(c: int):
    return replace_slice_kernel(pick_vec(c))
