"""The warp collectives (docs/language.md (synchronization)): the one table that the frontend, the printer,
the interpreter, check(), code generation and the performance report read.

A collective is an expression inside a ``@ THREADS`` loop that all 32 lanes of a
warp evaluate together, each on the values it has there (:class:`Collective` in
:mod:`gpudsl.ir.nodes`).  ``lane`` in a definition names what the second argument
is: the source lane of ``shfl``, the xor mask of ``shfl_xor``, the distance of
``shfl_down`` / ``shfl_up``; it must lie in ``[0, 32)`` (check(): ``"bounds"``).

Types: shuffles and warp reductions take ``f32``, ``f64``, ``i32`` or ``i64``
values and return the same type (an ``index`` value is taken as ``i64``);
``ballot(c)`` returns an ``i64`` holding the 32-bit lane mask as a non-negative
number (gpudsl has no unsigned type, and bit operations are defined on
non-negative integers); ``any_lanes`` / ``all_lanes`` return ``bool``.

``uniform``: every lane of the warp gets the same result (so a condition on it is
the same in every lane).  The meaning of each collective on the 32 lanes' operands
is :func:`evaluate`, shared by the interpreter; float ``warp_*`` reductions follow
the 5-step xor butterfly that code generation emits, so results agree bit for bit.
"""
from __future__ import annotations

from dataclasses import dataclass

from .types import DType, bool_, f32, f64, i32, i64

WARP = 32
VALUE_TYPES = (f32, f64, i32, i64)


@dataclass(frozen=True)
class CollectiveDef:
    name: str
    operand: str            # "value" (a number) or "cond" (a bool)
    lane: str | None        # what the second argument is, None for one argument
    result: str             # "same", "bool" or "mask"
    uniform: bool           # every lane gets the same result
    cuda: str               # the CUDA intrinsic (or the butterfly's step)

    @property
    def arity(self) -> int:
        return 1 if self.lane is None else 2

    def result_type(self, operand: DType) -> DType:
        return {"same": operand, "bool": bool_, "mask": i64}[self.result]


COLLECTIVES: dict[str, CollectiveDef] = {c.name: c for c in (
    CollectiveDef("shfl", "value", "source lane", "same", False, "__shfl_sync"),
    CollectiveDef("shfl_xor", "value", "xor mask", "same", False, "__shfl_xor_sync"),
    CollectiveDef("shfl_down", "value", "distance", "same", False, "__shfl_down_sync"),
    CollectiveDef("shfl_up", "value", "distance", "same", False, "__shfl_up_sync"),
    CollectiveDef("ballot", "cond", None, "mask", True, "__ballot_sync"),
    CollectiveDef("any_lanes", "cond", None, "bool", True, "__any_sync"),
    CollectiveDef("all_lanes", "cond", None, "bool", True, "__all_sync"),
    CollectiveDef("warp_sum", "value", None, "same", True, "__reduce_add_sync"),
    CollectiveDef("warp_max", "value", None, "same", True, "__reduce_max_sync"),
    CollectiveDef("warp_min", "value", None, "same", True, "__reduce_min_sync"),
)}


def source_lanes(name: str, lanes: list) -> list:
    """For a shuffle, the lane each lane reads (own lane past the ends, as CUDA);
    ``lanes`` holds each lane's lane argument.  Raises ValueError for a lane
    argument outside [0, 32)."""
    out = []
    for me, k in enumerate(lanes):
        k = int(k)
        if not 0 <= k < WARP:
            raise ValueError(k)
        if name == "shfl":
            out.append(k)
        elif name == "shfl_xor":
            out.append(me ^ k)
        elif name == "shfl_down":
            out.append(me + k if me + k < WARP else me)
        else:  # shfl_up
            out.append(me - k if me - k >= 0 else me)
    return out


def evaluate(name: str, values: list, lanes: list | None, ty: DType, combine=None) -> list:
    """The results of collective ``name`` in each of the 32 lanes, given each
    lane's operand (``values``) and lane argument (``lanes``).  ``combine(op, a, b)``
    computes one step of a float reduction in the operand's type."""
    if name.startswith("shfl"):
        return [values[s] for s in source_lanes(name, lanes)]
    if name == "ballot":
        return [sum(1 << k for k, c in enumerate(values) if c)] * WARP
    if name == "any_lanes":
        return [any(bool(c) for c in values)] * WARP
    if name == "all_lanes":
        return [all(bool(c) for c in values)] * WARP
    op = name[5:]  # sum / max / min
    if ty.is_float:
        vals = list(values)
        for m in (16, 8, 4, 2, 1):  # the butterfly of code generation
            vals = [combine(op, vals[k], vals[k ^ m]) for k in range(WARP)]
        return vals
    r = {"sum": sum, "max": max, "min": min}[op](int(v) for v in values)
    if op == "sum":
        half = 1 << (ty.bits - 1)
        r = ((r + half) % (1 << ty.bits)) - half
    return [r] * WARP


__all__ = ["WARP", "VALUE_TYPES", "CollectiveDef", "COLLECTIVES", "source_lanes", "evaluate"]
