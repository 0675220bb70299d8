"""Integer meaning in Z3 for :mod:`.smt`: floor division and modulo (Python's, which
gpudsl's ``//`` and ``%`` are), fixed-width wrap-around (i32 arithmetic and casts wrap,
as in the interpreter), constant folding, and bit operations with constants as
arithmetic."""
from __future__ import annotations

import operator

import z3

from .nodes import Const
from .numeric import in_width


class Unsupported(Exception):
    """An expression the encoder cannot model soundly."""


def floordiv(a, b):
    if z3.is_int_value(b):
        v = b.as_long()
        if v > 0:
            return a / b
        if v == 0:
            raise Unsupported("division by zero")
    # Z3 '/' is Euclidean (remainder >= 0); Python floors: for b < 0 with a remainder,
    # the Euclidean quotient is one above the floor (2 / -3 is 0, 2 // -3 is -1)
    q = a / b
    r = a % b
    return z3.If(z3.Or(b > 0, r == 0), q, q - 1)


def floormod(a, b):
    if z3.is_int_value(b):
        v = b.as_long()
        if v > 0:
            return a % b
        if v == 0:
            raise Unsupported("modulo by zero")
    r = a % b
    return z3.If(z3.Or(b > 0, r == 0), r, r + b)


_BITS = ("&", "|", "^", "<<", ">>")


_WRAPPING = ("+", "-", "*", "<<", "//")  # may leave the range of a fixed-width int


def _is_i32(ty) -> bool:
    return ty.kind == "int" and ty.bits == 32


def _fits_i32(e) -> bool:
    """Whether ``e``'s values are i32 values by its type (no conversion needed)."""
    if isinstance(e, Const):
        return not isinstance(e.val, float) and -(1 << 31) <= int(e.val) < (1 << 31)
    return e.ty.kind == "bool" or (e.ty.kind == "int" and e.ty.bits <= 32)


def _int_bits(ty):
    """32 or 64 for the fixed-width integer types (which wrap), else None."""
    return ty.bits if ty.kind == "int" else None


def _fits(e, bits: int) -> bool:
    """Whether ``e``'s values are ``bits``-bit values by its type."""
    if isinstance(e, Const):
        h = 1 << (bits - 1)
        return not isinstance(e.val, float) and -h <= int(e.val) < h
    return e.ty.kind == "bool" or (e.ty.kind == "int" and e.ty.bits <= bits)


def _wrap(v, bits: int):
    """``v`` wrapped to a signed ``bits``-bit value; unchanged (linear) in range."""
    if bits == 32:
        return _wrap32(v)
    half = 1 << (bits - 1)
    if z3.is_int_value(v):
        return z3.IntVal((v.as_long() + half) % (2 * half) - half)
    return z3.If(z3.And(v >= -half, v < half), v, (v + half) % (2 * half) - half)


def _wrap32(v):
    """``v`` wrapped to a signed 32-bit value (two's complement); unchanged in range, so
    the common case stays linear."""
    half = 1 << 31
    if z3.is_int_value(v):
        return z3.IntVal((v.as_long() + half) % (2 * half) - half)
    return z3.If(z3.And(v >= -half, v < half), v, (v + half) % (2 * half) - half)


# the operations whose meaning is the same on Python ints and on Z3 integers
_RING = {"+": operator.add, "-": operator.sub, "*": operator.mul}


def _fold(op: str, a: int, b: int):
    """``a op b`` on two constants, exactly (None where the encoding must decide)."""
    if op in _RING:
        return _RING[op](a, b)
    if op == "//" and b != 0:
        return a // b
    if op == "%" and b != 0:
        return a % b
    if op == "<<" and 0 <= b < 64:
        return a << b
    if op == ">>" and 0 <= b < 64:
        return a >> b
    if op in ("&", "|", "^") and a >= 0 and b >= 0:
        return {"&": a & b, "|": a | b, "^": a ^ b}[op]
    return None


def _mask_bits(v: int):
    """k when v == 2**k - 1."""
    if v >= 0 and (v + 1) & v == 0:
        return (v + 1).bit_length() - 1
    return None


def _bits_const(op: str, x, c: int):
    """``x op c`` for a constant ``c`` with few set bits, by the bits of ``x`` that
    ``c`` touches (linear: divisions and remainders by powers of two); ``x >= 0``."""
    out = x if op in ("|", "^") else z3.IntVal(0)
    for i in range(c.bit_length()):
        if not (c >> i) & 1:
            continue
        bit = (x / (2 ** i)) % 2
        if op == "&":
            out = out + (2 ** i) * bit
        elif op == "|":
            out = out + (2 ** i) * (1 - bit)
        else:
            out = out + (2 ** i) * (1 - 2 * bit)
    return out


def shift(a, s, left: bool, bits, name: str):
    """``a << s`` / ``a >> s`` (before wrapping to ``bits``, None for ``index``): an
    amount outside ``[0, bits)`` acts as the width (:mod:`.numeric`: ``<<`` gives 0,
    ``>>`` the sign); by a variable amount, cases 0..24 and those edges, the unknown
    ``name`` between."""
    edge = z3.IntVal(0) if left else z3.If(a < 0, -1, 0)
    if z3.is_int_value(s):
        k = s.as_long()
        if not in_width(k, bits):
            return edge
        if k > 4096:
            raise Unsupported(f"a shift by {k}")
        return a * (2 ** k) if left else a / (2 ** k)
    out = z3.Int(name)
    for k in range(24, -1, -1):
        out = z3.If(s == k, a * (2 ** k) if left else a / (2 ** k), out)
    out = z3.If(s < 0, edge, out)
    return out if bits is None else z3.If(s >= bits, edge, out)
