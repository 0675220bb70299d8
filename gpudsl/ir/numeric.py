"""The meaning of numbers at their edges (issue 39), one home: the interpreter computes
with these functions, check()'s encoding (:mod:`.smt`) encodes the same cases, and the
generated C calls the helpers of :mod:`gpudsl.codegen.helpers` that say the same in C.
Each is what the GPU does for the code we generate (PTX ISA: ``cvt``, ``shl``/``shr``,
``min``/``max``).

* **Float to integer** (``i32(x)``, ``i64(x)`` of an ``f16``, ``bf16``, ``f32`` or
  ``f64``): toward zero, saturating at the type's limits (±inf too), NaN gives 0.
  PTX's ``cvt.rzi`` saturates; it gives 0 for a NaN from ``f32`` to ``s32`` and the
  minimum for an ``f64`` source or a 64-bit destination, where the C helper tests for
  NaN first.
* **Shifts** ``a << s`` and ``a >> s``: an amount outside ``[0, width)`` (negative ones
  included: PTX reads the amount as unsigned) acts as the width: ``<<`` gives 0, ``>>``
  the sign (-1 for a negative ``a``, else 0).  The width is 32 for ``i32``, 64 for
  ``i64``; ``index`` is exact, so only a negative amount is an edge there
  (``1 << 40`` is 2^40).
* **Float min/max**: a NaN operand is ignored (two NaNs give NaN), and -0.0 < +0.0,
  whatever the order of the operands (PTX ``min``/``max``: "if values of both inputs are
  0.0, then +0.0 > -0.0").
"""
from __future__ import annotations

import numpy as np


def int_limits(bits: int) -> tuple[int, int]:
    """The smallest and largest ``bits``-bit signed integers."""
    return -(1 << (bits - 1)), (1 << (bits - 1)) - 1


def float_to_int(v, bits: int) -> int:
    """A float converted to a ``bits``-bit signed integer: toward zero, saturating,
    NaN gives 0."""
    lo, hi = int_limits(bits)
    v = float(v)  # exact for every float type; Python compares floats and ints exactly
    if v != v:
        return 0
    if v >= hi:
        return hi
    if v <= lo:
        return lo
    return int(v)


def shift_out(a: int, left: bool) -> int:
    """``a`` shifted by the width or more: 0 to the left, the sign to the right."""
    return 0 if left or a >= 0 else -1


def in_width(s: int, bits: int | None) -> bool:
    """Whether ``s`` shifts within the width (``bits`` None: ``index``, no upper end)."""
    return s >= 0 and (bits is None or s < bits)


def shift_left(a: int, s: int, bits: int | None = None) -> int:
    """``a << s`` before wrapping to ``bits`` (None: exact, ``index``)."""
    return a << s if in_width(s, bits) else 0


def shift_right(a: int, s: int, bits: int | None = None) -> int:
    """``a >> s`` (arithmetic: the sign fills)."""
    return a >> s if in_width(s, bits) else shift_out(a, False)


def _zero_sign(a) -> bool:
    return bool(np.signbit(a))


def fmin(a, b):
    """The smaller float; a NaN operand is ignored, -0.0 < +0.0."""
    if b != b:
        return a
    if a != a or b < a:
        return b
    if a == b and _zero_sign(b) and not _zero_sign(a):
        return b
    return a


def fmax(a, b):
    """The larger float; a NaN operand is ignored, +0.0 > -0.0."""
    if b != b:
        return a
    if a != a or b > a:
        return b
    if a == b and _zero_sign(a) and not _zero_sign(b):
        return b
    return a


__all__ = ["float_to_int", "shift_left", "shift_right", "shift_out", "in_width", "fmin",
           "fmax", "int_limits"]
