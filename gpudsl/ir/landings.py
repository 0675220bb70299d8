"""Copies that land with a split barrier's phase, in one place: a ``tma_load``
(:mod:`gpudsl.ir.tma_meaning`) and an ``async_copy(dst, src, bar=b)`` (:mod:`gpudsl.ir.async_copy_meaning`).
One rule serves both (:mod:`gpudsl.ir.tma_meaning`, "Completion"): the copy lands with the phase of
its barrier that the issuing thread's next arrive on it completes.  check()
(analysis/obligations/tma_obligations.py) and the interpreter (interpreter/tma_copies.py) ask the
questions below of either kind alike."""
from __future__ import annotations

from .async_copy_meaning import bar_copy_of
from .nodes import AsyncCopy
from .tma_meaning import tma_of


def landing_of(stmt):
    """The copy that lands with a barrier phase (a ``tma_load``, or an ``async_copy`` with
    ``bar=``) an access's statement belongs to, else None."""
    return tma_of(stmt) or bar_copy_of(stmt)


def landing_barrier(op) -> tuple:
    """``(barrier name, ring index or None)`` of a copy :func:`landing_of` returns."""
    return (op.bar, op.index) if isinstance(op, AsyncCopy) else (op.name, op.index)


def landing_dst(op) -> str:
    """The array a copy :func:`landing_of` returns writes."""
    return op.dst if isinstance(op, AsyncCopy) else op.dst.name


__all__ = ["landing_of", "landing_barrier", "landing_dst"]
