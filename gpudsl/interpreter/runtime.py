"""Helpers that the Python code compiled from a proc calls at run time.

The generated code keeps one invariant: a float-typed value is a numpy scalar
of its dtype (so ``f32`` arithmetic rounds like float32), an integer-typed
value (``index``, ``i32``, ``i64``) is a Python ``int`` (exact; stores and casts
wrap to the width of the target), a bool is a Python or numpy bool.
"""
from __future__ import annotations

import numpy as np

from ..errors import InterpError
from ..ir.numeric import float_to_int, fmax, fmin  # noqa: F401 (fmin, fmax: the interpreter's)
from ..ir.types import DType

# ------------------------------------------------------------------ access sites


class AccessSite:
    """One place in the source that touches memory: where, what, how."""

    __slots__ = ("loc", "text", "how", "name")

    def __init__(self, loc, text: str, how: str, name: str):
        self.loc = loc
        self.text = text  # e.g. "s[t + 1]" or "s[t] = s[t] + s[t + 1]"
        self.how = how  # "read", "write", "update", "atomic", "call", "alloc", ...
        self.name = name  # the array named at this site

    def where(self) -> str:
        return f"{self.loc}" if self.loc is not None else "<unknown location>"

    def __repr__(self):
        return f"<{self.how} of {self.text} at {self.where()}>"


# ------------------------------------------------------------------ faults


def oob(acc: AccessSite, idx: tuple, dims: tuple):
    """Raise the error of an out-of-bounds access (never returns)."""
    bad = [k for k, (i, d) in enumerate(zip(idx, dims)) if not 0 <= i < d]
    k = bad[0] if bad else 0
    shown = ", ".join(str(i) for i in idx)
    raise InterpError(
        f"out-of-bounds {acc.how} of {acc.name}[{shown}] in `{acc.text}`: index {k} is "
        f"{idx[k]}, outside 0..{dims[k] - 1} (shape {tuple(dims)})",
        acc.loc, "guard the access with an `if`, or fix the loop bounds / asserts")


def const_write(acc: AccessSite):
    """A write of a CONST (read-only) array (never returns)."""
    raise InterpError(
        f"`{acc.text}` writes '{acc.name}', which is in CONST memory (read-only)", acc.loc,
        f"declare '{acc.name}' in GLOBAL memory, or write elsewhere")


def bad_window(acc: AccessSite, name: str, parts: tuple, dims: tuple):
    """A window argument reaches outside its array (never returns)."""
    shown = ", ".join(f"{p[0]}:{p[1]}" if isinstance(p, tuple) else str(p) for p in parts)
    raise InterpError(
        f"the window {name}[{shown}] passed in `{acc.text}` lies outside "
        f"{name} (shape {tuple(dims)})", acc.loc,
        "windows must lie inside the array they view")


def bad_extent(acc: AccessSite, param: str, got, want):
    raise InterpError(
        f"in `{acc.text}`, the argument for '{param}' has shape {tuple(got)} but the callee "
        f"declares {tuple(want)} for these sizes", acc.loc,
        "pass a window whose extents match the callee's parameter")


def callee_assert(acc: AccessSite, pred_loc, text: str, values: dict):
    vals = ", ".join(f"{k}={v}" for k, v in values.items())
    raise InterpError(
        f"the call `{acc.text}` breaks the callee's precondition `assert {text}` "
        f"(at {pred_loc}){' with ' + vals if vals else ''}", acc.loc,
        "pass arguments that satisfy the callee's asserts")


def bad_dim(acc: AccessSite, dims: tuple):
    raise InterpError(f"the allocation `{acc.text}` has a negative extent: shape {dims}",
                      acc.loc)


# ------------------------------------------------------------------ values


_WRAP = {32: (1 << 31, (1 << 32) - 1), 64: (1 << 63, (1 << 64) - 1),
         16: (1 << 15, (1 << 16) - 1), 8: (1 << 7, (1 << 8) - 1)}


def wrap_expr(src: str, bits: int) -> str:
    """Python source wrapping the int ``src`` to a signed ``bits``-bit value."""
    half, mask = _WRAP[bits]
    # parenthesised whole: it is the operand of the next operator (without the outer
    # parentheses ``x * 65536 * 65536`` became ``... - half * 65536``)
    return f"(((({src}) + {half}) & {mask}) - {half})"


def to_int(bits: int):
    """The cast ``i32(v)`` / ``i64(v)``: a float as :func:`gpudsl.ir.numeric.float_to_int`
    says (toward zero, saturating, NaN gives 0), an integer wraps to the width."""
    half, mask = _WRAP[bits]

    def cast(v):
        if not isinstance(v, int):
            if not isinstance(v, (np.integer, np.bool_)):  # a float (bf16 is no np.floating)
                return float_to_int(v, bits)
            v = int(v)
        return ((v + half) & mask) - half

    cast.__name__ = f"to_i{bits}"
    return cast


def converter(ty: DType):
    """The function that converts a value to the interpreter's form of ``ty``."""
    if ty.is_float:
        if ty.numpy is None:
            raise InterpError(f"the interpreter cannot compute in {ty.name}: numpy has no "
                              f"{ty.name} type", hint="use f16 or f32")
        return np.dtype(ty.numpy).type
    if ty.kind == "int":
        return to_int(ty.bits)
    if ty.kind == "bool":
        return bool
    return int  # index


def fill_value(ty: DType):
    """What fresh memory holds: NaN for floats (reads of uninitialised memory show),
    zero for integers, False for bools."""
    if ty.is_float:
        return np.dtype(ty.numpy).type("nan")
    if ty.kind == "bool":
        return False
    return 0


def alloc(n: int, ty: DType):
    """A fresh flat array of ``n`` elements of ``ty``."""
    return np.full(n, fill_value(ty), dtype=np.dtype(ty.numpy))


def noop_tracker(k, kind, acc):
    """The tracker of memory that the race detector does not watch."""
    return k


def _elementwise(fn):
    """``fn`` of Python floats applied to a numpy scalar or array, keeping its type."""
    def f(x):
        if np.ndim(x):
            return np.vectorize(lambda v: fn(float(v)), otypes=[x.dtype])(x)
        return type(x)(fn(float(x)))
    return f


def _erf(v: float) -> float:
    import math

    return math.erf(v) if v == v else v


erf = _elementwise(_erf)   # C's erf, computed in double and rounded to the type


def rsqrt(x):
    """``1 / sqrt(x)`` in the type of ``x`` (CUDA's rsqrtf is within 2 ulp of it)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.asarray(x).dtype.type(1) / np.sqrt(x)


def _c_pow(x: float, y: float) -> float:
    """C99's ``pow`` (Python's ``math.pow`` is libm's, but raises where C returns NaN or
    an infinity; numpy's differs at infinities: ``(-inf) ** 0.5`` is NaN there, +inf in C)."""
    import math

    odd = math.isfinite(y) and y == int(y) and int(y) % 2 == 1
    if x == 0 and y < 0:   # a pole: +inf, or an infinity of x's sign for odd powers
        return math.copysign(math.inf, x) if odd else math.inf
    try:
        return math.pow(x, y)
    except ValueError:    # a negative base and a non-integer power
        return math.nan
    except OverflowError:
        return -math.inf if x < 0 and odd else math.inf


def power(x, y):
    """C's ``pow`` in the type of ``x``, computed in double and rounded (``powf`` is
    within 1 ulp of that)."""
    if np.ndim(x) or np.ndim(y):
        return np.vectorize(lambda a, b: _c_pow(float(a), float(b)),
                            otypes=[np.asarray(x).dtype])(x, y)
    return type(x)(_c_pow(float(x), float(y)))
