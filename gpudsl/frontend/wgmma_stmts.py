"""The warpgroup MMA statements (docs/hopper.md): ``wgmma(acc, a, b)``, ``wgmma_commit()`` and
``wgmma_wait(n)`` (meaning: :mod:`gpudsl.ir.wgmma_meaning`).

``acc`` is a window of one range of ``N / 2`` f32 elements of a REGISTER array (the
thread's part of the accumulator), ``a`` a window ``[2, 64, 8]`` and ``b`` one
``[2, N, 8]`` of SHARED f16 or bf16 arrays whose last dimension is 8 (a whole array of
that shape may be named alone), or, from a tile ``@ SHARED(swizzle=W)`` with rows of
exactly ``W`` bytes, windows ``[64, 16]`` and ``[N, 16]`` (``a_s[r0:r0 + 64, c0:c0 + 16]``:
the swizzled K-major form, whose tile check() and codegen verify); N is a multiple of 8
from 8 to 256.  ``wgmma(acc, a, b, b_major="mn")`` takes B stored K x N (N contiguous):
``b_s[c0:c0 + N // E, k0:k0 + 16, 0:E]`` (or ``b_s[k0:k0 + 16, 0:N]`` when N = E), E the
elements of a row of ``b_s`` (8 of a plain tile, ``W // 2`` of a swizzled one).
"""
from __future__ import annotations

import ast

from ..ir.nodes import Const, Interval, Wgmma, WgmmaCommit, WgmmaWait, WindowArg
from ..ir.types import INDEX, f32
from ..ir.wgmma_meaning import (AB_TYPES, B_MAJORS, CORE, K, M, N_MAX, extents, mn_problem,
                                 operand_problem)

WGMMA_FUNCS = ("wgmma", "wgmma_commit", "wgmma_wait")

_FORM = ("wgmma(acc[t, 0:N // 2], a[0:2, 0:64, 0:8], b[0:2, 0:N, 0:8]): acc += A @ B, "
         "a[h, m, j] = A[m, 8h + j], b[h, n, j] = B[8h + j, n]; or, from tiles "
         "@ SHARED(swizzle=W) with rows of W bytes, wgmma(acc[t, 0:N // 2], "
         "a_s[r0:r0 + 64, c0:c0 + 16], b_s[n0:n0 + N, c0:c0 + 16]): a[m, kk] = A[m, kk], "
         "b[n, kk] = B[kk, n]")


def _operand(parser, node):
    """(window with explicit ranges, its symbol) of one operand."""
    w = parser.ex.window(node)
    sym = parser.scope.lookup(w.name)
    if not w.idx:
        w = WindowArg(w.name, tuple(Interval(Const(0, INDEX), e) for e in sym.shape), w.ty,
                      w.loc)
    return w, sym


def _acc(parser, node):
    w, sym = _operand(parser, node)
    if not sym.mem.per_thread or sym.ty != f32:
        raise parser.err(node, f"the accumulator of wgmma is a REGISTER array of f32; "
                         f"'{w.name}' is a {sym.mem.name} array of {sym.ty.name}",
                         "e.g. `acc: f32[128, 32] @ REGISTER` at block level, and "
                         "wgmma(acc[t, 0:32], a, b) for N = 64")
    ext = extents(w)
    if len(ext) != 1 or ext[0] is None:
        raise parser.err(node, "the accumulator of wgmma is one range of N // 2 elements "
                         "(the thread's part of D), e.g. acc[t, 0:32] for N = 64",
                         _FORM)
    n = 2 * ext[0]
    if n % 8 or not 8 <= n <= N_MAX:
        raise parser.err(node, f"the accumulator holds {ext[0]} elements: N = {n} is not a "
                         f"multiple of 8 from 8 to {N_MAX}", "N // 2 elements per thread")
    return w, n


def _ab(parser, node, what: str, rows: int):
    w, sym = _operand(parser, node)
    if not sym.mem.per_block or sym.ty.name not in AB_TYPES:
        raise parser.err(node, f"the {what} operand of wgmma is a SHARED array of f16 or "
                         f"bf16; '{w.name}' is a {sym.mem.name} array of {sym.ty.name}",
                         "stage the tile into SHARED memory")
    last = sym.shape[-1].val if sym.shape and isinstance(sym.shape[-1], Const) else None
    why = operand_problem(w, len(sym.shape), last, sym.ty.bits // 8,
                          getattr(sym, "swizzle", None), rows)
    if why is not None:
        raise parser.err(node, f"the {what} operand `{ast.unparse(node)}` of wgmma is not a "
                         f"[2, {rows}, {CORE}] or [{rows}, {K}] window in a layout the "
                         f"hardware reads: {why}", _FORM)
    return w


_MN_FORM = ("wgmma(acc[t, 0:N // 2], a, b_s[c0:c0 + N // E, k0:k0 + 16, 0:E], b_major=\"mn\"): "
            "B stored K x N, b[c, kk, j] = B[kk, E c + j], E the elements of a row of b_s "
            "(8 of a plain tile, W // 2 of a tile @ SHARED(swizzle=W)); with N = E, "
            "b_s[k0:k0 + 16, 0:N]")


def _b_major(parser, v: ast.Call, fname: str) -> str:
    """The ``b_major=`` keyword of ``wgmma`` (``"k"`` without it)."""
    major = "k"
    for kw in v.keywords:
        ok = isinstance(kw.value, ast.Constant) and kw.value.value in B_MAJORS
        if fname != "wgmma" or kw.arg != "b_major" or not ok:
            raise parser.err(v, f"{fname}() takes no keyword arguments" if fname != "wgmma"
                             else "wgmma takes one keyword, b_major=\"k\" (B stored N x K, "
                             "the default) or b_major=\"mn\" (B stored K x N)", _MN_FORM)
        major = kw.value.value
    return major


def _b_mn(parser, node, n: int):
    w, sym = _operand(parser, node)
    if not sym.mem.per_block or sym.ty.name not in AB_TYPES:
        raise parser.err(node, f"the B operand of wgmma is a SHARED array of f16 or bf16; "
                         f"'{w.name}' is a {sym.mem.name} array of {sym.ty.name}",
                         "stage the tile into SHARED memory")
    last = sym.shape[-1].val if sym.shape and isinstance(sym.shape[-1], Const) else None
    why = mn_problem(w, len(sym.shape), last, sym.ty.bits // 8,
                     getattr(sym, "swizzle", None), n)
    if why is not None:
        raise parser.err(node, f"the MN-major B operand `{ast.unparse(node)}` of wgmma is not "
                         f"a window in a layout the hardware reads: {why}", _MN_FORM)
    return w


def parse_wgmma_call(parser, s: ast.stmt, v: ast.Call, fname: str):
    loc = parser.src.loc(s)
    major = _b_major(parser, v, fname)
    if fname == "wgmma_commit":
        if v.args:
            raise parser.err(v, "wgmma_commit() takes no arguments")
        return WgmmaCommit(loc)
    if fname == "wgmma_wait":
        a = v.args[0] if len(v.args) == 1 else None
        if not (isinstance(a, ast.Constant) and type(a.value) is int and a.value >= 0):
            raise parser.err(v, "wgmma_wait(n) takes one integer constant n >= 0: the number "
                             "of committed wgmma groups that may stay pending",
                             "e.g. wgmma_wait(0) (all landed) or wgmma_wait(1)")
        return WgmmaWait(a.value, loc)
    if len(v.args) != 3:
        raise parser.err(v, "wgmma(acc, a, b) takes the accumulator and the two SHARED "
                         "operands", _FORM)
    acc, n = _acc(parser, v.args[0])
    a = _ab(parser, v.args[1], "A", M)
    b = _b_mn(parser, v.args[2], n) if major == "mn" else _ab(parser, v.args[2], "B", n)
    if a.ty != b.ty:
        raise parser.err(v, f"the operands of wgmma hold one type; A holds {a.ty.name}, B "
                         f"{b.ty.name}")
    return Wgmma(acc, a, b, n, loc, major)


__all__ = ["WGMMA_FUNCS", "parse_wgmma_call"]
