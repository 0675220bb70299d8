"""What a swizzled SHARED tile is, in one place (docs/hopper.md, "Swizzled shared tiles").

``s: f16[64, 64] @ SHARED(swizzle=W)`` with ``W`` in 32, 64, 128 keeps the tile's
meaning (element ``s[i, j]`` is what it always is) and changes only where each element
lives: the hardware's (TMA's and wgmma's) swizzle of ``W`` bytes, CUTLASS's
``Swizzle<log2(W / 16), 4, 3>`` on byte offsets.  With ``o`` the byte offset of an
element in the row-major tile, its 16-byte chunk index inside the aligned ``W``-byte
segment (bits 4.. of ``o``) is XORed with the index of its 128-byte line (``o >> 7``)
modulo ``W / 16``::

    swizzled(o) = o ^ (((o >> 7) % (W // 16)) << 4)

For 128 bytes and rows of 128 bytes (``f16[.., 64]``, ``f32[.., 32]``): the chunk
``c`` of row ``r`` is stored as chunk ``c ^ (r % 8)``.  The pattern repeats every
``8 * W`` bytes (256, 512, 1024), the alignment a swizzled tile gets.

**A permutation inside the tile.**  ``swizzled`` changes only bits 4.. 4 + log2(W / 16)
of ``o``, so it keeps ``o`` in its aligned ``W``-byte segment, and it is its own
inverse (the XOR reads bits 7 and up, which it never changes).  A tile whose rows are a
multiple of ``W`` bytes is a whole number of segments, so ``swizzled`` maps its bytes
onto themselves one to one: an element inside the tile is stored inside the tile, and
two elements never share bytes.  check()'s bounds proofs on indices therefore hold for
addresses (``prove_permutation`` proves it with Z3 for every offset, and the tests
call it).  The rule it needs, rows a multiple of ``W`` bytes, is what ``row_bytes_ok``
says and check() proves for every size.
"""
from __future__ import annotations

WIDTHS = (32, 64, 128)
CHUNK = 16   # bytes: the unit the swizzle moves (an element never straddles two)
LINE = 128   # bytes: the line whose index is XORed in


def swizzled(offset: int, width: int) -> int:
    """The byte offset where the byte at row-major ``offset`` of a tile swizzled with
    ``width`` bytes lives (``width`` 0: no swizzle)."""
    if not width:
        return offset
    return offset ^ (((offset >> 7) % (width // CHUNK)) << 4)


def swizzled_element(index: int, elem_bytes: int, width: int) -> int:
    """The element slot (in elements of ``elem_bytes``) where row-major element
    ``index`` lives: elements of 1 to 16 bytes never straddle a 16-byte chunk."""
    if not width:
        return index
    return swizzled(index * elem_bytes, width) // elem_bytes


def repeat_bytes(width: int) -> int:
    """The period of the pattern, and the alignment of a swizzled tile: ``8 * width``."""
    return 8 * width if width else 16


def row_bytes(ty, shape_values: tuple) -> int:
    """The bytes of one row (the last dimension) of a tile of ``ty`` elements."""
    last = shape_values[-1] if shape_values else 1
    return last * max(1, ty.bits // 8)


def row_bytes_ok(ty, shape_values: tuple, width: int) -> bool:
    """Whether rows of this constant shape are a whole number of ``width``-byte segments."""
    return not width or (bool(shape_values) and row_bytes(ty, shape_values) % width == 0)


def prove_permutation(width: int, bits: int = 32) -> bool:
    """Z3 proof that ``swizzled`` with ``width`` maps ``[0, size)`` onto itself one to one
    for every ``size`` that is a multiple of ``width`` (offsets of ``bits`` bits): it
    stays below ``size`` and it is its own inverse."""
    import z3

    from .smt import UNSAT, solve

    o, size, k = z3.BitVecs("swz_o swz_size swz_k", bits)
    w = z3.BitVecVal(width, bits)

    def swz(x):
        return x ^ (z3.URem(z3.LShR(x, 7), w / CHUNK) << 4)

    return solve([size == k * w, z3.ULT(k, z3.BitVecVal(2 ** (bits - 8), bits)),
                  z3.ULT(o, size), z3.Or(z3.UGE(swz(o), size), swz(swz(o)) != o)],
                 timeout_ms=10_000).status == UNSAT


__all__ = ["WIDTHS", "swizzled", "swizzled_element", "repeat_bytes", "row_bytes",
           "row_bytes_ok", "prove_permutation"]
