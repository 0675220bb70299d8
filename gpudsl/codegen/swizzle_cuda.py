"""CUDA for swizzled SHARED tiles (docs/hopper.md; the layout is :mod:`gpudsl.ir.swizzle_meaning`).

A tile ``s: f16[64, 64] @ SHARED(swizzle=128)`` is declared as any shared array, aligned
to its pattern's period (``8 * W`` bytes: 1024 for 128), and every access goes through
``gpudsl_swz<W>(tile, i)``: the element at row-major index ``i`` at its swizzled byte
offset.  The emulator compiles the same code, so it runs the same addresses.  An
``@instr`` template, which addresses a window by its first element and strides, cannot
follow the layout: a window of a swizzled tile passed to one is refused.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import BinOp, Const, Expr
from ..ir.types import INDEX

SWIZZLE = r"""
// a swizzled SHARED tile (docs/hopper.md): the 16-byte chunk of each W-byte segment of a
// row XOR the index of its 128-byte line modulo W / 16 (CUTLASS's Swizzle<log2(W/16),4,3>)
template <int W, typename T> __device__ __forceinline__ T& gpudsl_swz(T* tile, long long i) {
  unsigned long long o = (unsigned long long)i * sizeof(T);
  o ^= ((o >> 7) & (unsigned long long)(W / 16 - 1)) << 4;
  return *reinterpret_cast<T*>(reinterpret_cast<char*>(tile) + o);
}
"""


def swizzled_access(kw, info, idx: tuple) -> str:
    """The element ``idx`` of the swizzled tile ``info`` (a C lvalue)."""
    kw.use_helper("gpudsl_swizzle")
    off: Expr = idx[0] if idx else Const(0, INDEX)
    for d in range(1, len(idx)):
        off = BinOp("+", BinOp("*", off, Const(info.shape[d], INDEX), INDEX), idx[d], INDEX)
    return f"gpudsl_swz<{info.swizzle}>(({info.dtype.ctype}*){info.cname}, {kw.expr(off)})"


def refuse_window(info, loc) -> None:
    raise CompileError(f"a window of the swizzled tile '{info.name}' is passed to an @instr, "
                       "whose template addresses it by its first element and strides: it "
                       "cannot follow the swizzled layout", loc,
                       "call a @proc (inlined, so each access is swizzled), or drop "
                       "swizzle= from the tile")


__all__ = ["SWIZZLE", "swizzled_access", "refuse_window"]
