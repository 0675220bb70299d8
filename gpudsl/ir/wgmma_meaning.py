"""What the warpgroup MMA (docs/hopper.md, "Warpgroup MMA (wgmma)") is, in one place:
``wgmma(acc, a, b)``, ``wgmma_commit()`` and ``wgmma_wait(n)`` (:class:`Wgmma`,
:class:`WgmmaCommit`, :class:`WgmmaWait` in :mod:`gpudsl.ir.nodes`).

**Meaning, per thread.**  A warpgroup is 128 consecutive values of the innermost
``@ THREADS`` loop's variable ``t`` from a multiple of 128; the thread's *lane* in it is
``t % 128``.  ``wgmma(acc, a, b)`` is the PTX ISA's ``wgmma.mma_async .m64nNk16`` with f32
accumulation: for ``A`` 64 x 16 and ``B`` 16 x N, thread ``lane`` holds ``N / 2``
elements of ``D`` 64 x N, element ``i`` being ``D[frag_row(lane, i), frag_col(lane, i)]``
(:func:`frag_row`, :func:`frag_col`: the "wgmma 64N16 D" fragment), and adds to each

    acc[i] += f32(A[r, 0]) * f32(B[0, c]) + ... + f32(A[r, 15]) * f32(B[15, c])

summed one product at a time, in order of ``k``, in f32 (products of halves are exact in
f32; the tensor cores sum in another order, so results agree exactly where the sums are
exact, e.g. on small integers).  The operands are windows: ``acc`` one interval of ``N / 2``
f32 elements of a REGISTER array; ``a`` three intervals ``[2, 64, 8]`` of a SHARED array,
``a[h, m, j]`` being ``A[m, 8 h + j]``; ``b`` three intervals ``[2, N, 8]``, ``b[h, n, j]``
being ``B[8 h + j, n]`` (B stored N x K, "K-major", as CUTLASS's TN GEMM).  The last two
intervals of ``a`` and ``b`` are the array's last two dimensions and the last one is a
whole dimension of 8 halves (16 bytes): that is the PTX ISA's canonical no-swizzle K-major
layout of 8 x 16-byte core matrices, which code generation describes to the hardware with
a matrix descriptor (:func:`layout_problem` says why a window is not one).

**Swizzled operands.**  ``a`` may instead be two intervals ``[64, 16]`` of a tile
``@ SHARED(swizzle=W)`` whose rows are exactly ``W`` bytes (``f16[rows, W / 2]``),
``a[m, kk]`` being ``A[m, kk]``; ``b`` likewise ``[N, 16]``, ``b[n, kk]`` being
``B[kk, n]``: the K-major layout of the hardware's ``W``-byte swizzle modes (a descriptor
with the swizzle mode, the stride of 8 rows, the start advanced by the window's column
offset).  :func:`swizzled_problem` says why a window is not one; check() proves the
rest (the column offset a multiple of 16 elements, the rows' start at a multiple of the
pattern's period ``8 * W`` bytes).

**MN-major B** (``wgmma(acc, a, b, b_major="mn")``, the PTX ISA's ``imm-trans-b = 1``):
B stored K x N with N contiguous (attention's V, ``a @ b`` of a row-major ``b``).  Its
window is ``[N // E, 16, E]``, ``b[c, kk, j]`` being ``B[kk, E c + j]``, whose last range is
the array's whole last dimension of ``E`` elements (a row): ``E`` = 8 halves (16 bytes, a
core matrix's row) of a plain tile, or ``W / 2`` halves of a tile ``@ SHARED(swizzle=W)``
(rows of exactly ``W`` bytes, the layout a TMA box of ``W``-byte rows lands in); with one
block (``N == E``) the window may be ``[16, N]``, ``b[kk, n]`` being ``B[kk, n]``.  The
three ranges are the array's last three dimensions (the two, its last two).
:func:`mn_problem` says why a window is not one; check() proves the rest for swizzled
tiles (the rows start at a multiple of the period, and the blocks of ``E`` columns lie
a whole number of periods apart).

**TF32** (f32 operands): ``a`` and ``b`` SHARED f32 arrays make the PTX ISA's
``wgmma.mma_async .m64nNk8.f32.tf32.tf32``: K = 8 per wgmma, K-major only, the canonical
windows ``[2, 64, 4]`` / ``[2, N, 4]`` (core-matrix rows of 4 f32, 16 bytes) or the
swizzled ``[64, 8]`` / ``[N, 8]`` of tiles with rows of ``W`` bytes (``f32[rows, W / 4]``).
Each operand is read as tf32, its low 13 mantissa bits dropped (:func:`tf32_truncate`, the
tensor cores' reading; values already rounded to tf32 pass unchanged), then multiplied
and summed in f32 as above.  The language's builtin ``tf32(x)`` is that reading, so a
nest of ``tf32(a[..]) * tf32(b[..])`` products states the meaning (``make_wgmma``).

**Asynchrony** (as :mod:`gpudsl.ir.async_copy_meaning`, a family of its own): ``wgmma`` adds its
operation to the thread's open wgmma group; ``wgmma_commit`` closes it; ``wgmma_wait(n)``
completes every committed group but the ``n`` most recent.  Between a wgmma and the wait
that completes its group, its ``acc`` elements may not be read or written, nor its ``a``
/ ``b`` elements written, by anyone, except by later wgmmas of the same shape on the same
accumulator (the hardware orders those).  Every wgmma lands before its block ends.

:func:`elements` gives the meaning as statements (two ``seq`` loops around one reduction
:class:`WgmmaElement`): the effect collector, check() and the interpreter see a wgmma's
accesses through it.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .async_copy_meaning import COPIES, Family, const_extent
from .nodes import (BinOp, Builtin, Const, For, Interval, Point, Read, Reduce, Var,
                    Wgmma, WgmmaCommit, WgmmaWait, WindowArg)
from .types import INDEX, f32
from .visitor import kinds

WARPGROUP = 128
M = 64
K = 16
CORE = 8              # halves in a 16-byte core-matrix row
CORE_BYTES = 16       # bytes in a row of a core matrix
B_MAJORS = ("k", "mn")   # how B is stored: N x K (K contiguous) or K x N (N contiguous)
N_MAX = 256
HALF_TYPES = ("f16", "bf16")
AB_TYPES = HALF_TYPES + ("f32",)   # f32: read as tf32 (m64nNk8)
TF32 = "tf32"         # the meaning's rounding of an f32 operand (:func:`tf32_truncate`)
WGMMA_STMTS = (Wgmma, WgmmaCommit, WgmmaWait)
I_VAR, K_VAR = "__wg_i", "__wg_k"   # the loops of :func:`elements`


def uses_wgmma(pdef) -> bool:
    """Does ``pdef`` (or a callee) hold a wgmma statement?"""
    return any(k in WGMMA_STMTS for k in kinds(pdef.body))


def n_values() -> tuple:
    return tuple(range(8, N_MAX + 1, 8))


def frag_row(lane: int, i: int) -> int:
    """The row of D that element ``i`` of lane ``lane``'s accumulator holds."""
    return 16 * (lane // 32) + (lane % 32) // 4 + 8 * ((i // 2) % 2)


def frag_col(lane: int, i: int) -> int:
    """The column of D that element ``i`` of lane ``lane``'s accumulator holds."""
    return 8 * (i // 4) + 2 * (lane % 4) + i % 2


# ------------------------------------------------------------------ windows


def intervals(w: WindowArg) -> list:
    """``(position in w.idx, Interval)`` of each interval of a window."""
    return [(k, p) for k, p in enumerate(w.idx) if isinstance(p, Interval)]


def extents(w: WindowArg) -> list:
    """The constant extents of a window's intervals (None where not constant)."""
    return [const_extent(p.lo, p.hi) for _, p in intervals(w)]


def k_of(elem_bytes: int) -> int:
    """K of one wgmma: 32 bytes of elements (16 halves; 8 f32 read as tf32)."""
    return 2 * CORE_BYTES // elem_bytes


def core_of(elem_bytes: int) -> int:
    """The elements of a 16-byte core-matrix row (8 halves, 4 f32)."""
    return CORE_BYTES // elem_bytes


def layout_problem(w: WindowArg, rank: int, last: Optional[int], want: tuple) -> Optional[str]:
    """Why window ``w`` of an array of ``rank`` dimensions (the last of extent ``last``,
    None if not constant) is not a ``want``-shaped (``(2, R, 8)``; of f32, ``(2, R, 4)``)
    canonical operand, or None."""
    iv = intervals(w)
    if len(iv) != 3:
        return f"it has {len(iv)} range(s); an operand of wgmma has 3: [2, rows, 8]"
    got = extents(w)
    if tuple(got) != tuple(want):
        shown = ", ".join("?" if g is None else str(g) for g in got)
        return f"its ranges have extents [{shown}], not [{', '.join(map(str, want))}]"
    (k0, _), (k1, _), (k2, p2) = iv
    if k2 != rank - 1 or k1 != rank - 2:
        return "its last two ranges must be the array's last two dimensions"
    core = want[2]
    if last != core or p2.lo != Const(0) or not (isinstance(p2.hi, Const) and p2.hi.val == core):
        return (f"its last range must be a whole last dimension of {core} elements (`0:{core}`,"
                " 16 bytes: one row of a core matrix)")
    return None


def swizzled_problem(w: WindowArg, rank: int, last: Optional[int], elem_bytes: int,
                     swizzle: Optional[int], rows: int) -> Optional[str]:
    """Why window ``w`` of an array of ``rank`` dimensions (the last of extent ``last``)
    is not a ``[rows, 16]`` K-major operand of a tile swizzled with ``swizzle`` bytes
    (None: not known yet, the shape only), or None."""
    iv = intervals(w)
    k = k_of(elem_bytes)
    if len(iv) != 2:
        return f"it has {len(iv)} range(s); a swizzled operand of wgmma has 2: [rows, {k}]"
    got = extents(w)
    if tuple(got) != (rows, k):
        shown = ", ".join("?" if g is None else str(g) for g in got)
        return f"its ranges have extents [{shown}], not [{rows}, {k}]"
    (k0, _), (k1, _) = iv
    if k1 != rank - 1 or k0 != rank - 2:
        return "its two ranges must be the array's last two dimensions"
    if swizzle is None:
        return None
    if not swizzle:
        return ("a [rows, 16] window is the swizzled K-major form: its tile must be "
                "`@ SHARED(swizzle=W)` with rows of W bytes (or use the [2, rows, 8] form)")
    if last is None or last * elem_bytes != swizzle:
        got_b = "?" if last is None else str(last * elem_bytes)
        return (f"its tile's rows hold {got_b} bytes; a swizzled operand's rows are exactly "
                f"the swizzle's {swizzle} bytes ({swizzle // elem_bytes} elements)")
    return None


def operand_problem(w: WindowArg, rank: int, last: Optional[int], elem_bytes: int,
                    swizzle: Optional[int], rows: int) -> Optional[str]:
    """Why ``w`` is neither a canonical ``[2, rows, 8]`` operand of a plain tile nor a
    swizzled ``[rows, 16]`` one (``swizzle`` None: the shape only), or None."""
    k, core = k_of(elem_bytes), core_of(elem_bytes)
    if len(intervals(w)) == 2:
        return swizzled_problem(w, rank, last, elem_bytes, swizzle, rows)
    if swizzle:
        return (f"its tile is swizzled ({swizzle} bytes): name a [{rows}, {k}] window of it "
                f"(rows of exactly {swizzle} bytes)")
    why = layout_problem(w, rank, last, (2, rows, core))
    if why is not None and len(intervals(w)) != 3:
        return (f"it has {len(intervals(w))} range(s): an operand is [2, {rows}, {core}] "
                f"(a plain tile) or [{rows}, {k}] (a swizzled tile)")
    return why


def row_elements(elem_bytes: int, swizzle: int) -> int:
    """``E``: the elements of one row of an MN-major B operand (16 bytes, or the swizzle's)."""
    return (swizzle or CORE_BYTES) // elem_bytes


def mn_problem(w: WindowArg, rank: int, last: Optional[int], elem_bytes: int,
               swizzle: Optional[int], n: int) -> Optional[str]:
    """Why ``w`` (of an array of ``rank`` dimensions, the last of extent ``last``, in a tile
    swizzled with ``swizzle`` bytes: 0 none, None not known yet) is not an MN-major B
    operand of ``n`` columns, ``[n // E, 16, E]`` or (``n == E``) ``[16, E]``, or None."""
    iv = intervals(w)
    if len(iv) not in (2, 3):
        return (f"it has {len(iv)} range(s); an MN-major B operand is [N // E, {K}, E] or, "
                f"with N = E, [{K}, N] (E the elements of a row of its tile)")
    if any(k != rank - len(iv) + j for j, (k, _) in enumerate(iv)):
        return f"its {len(iv)} ranges must be the array's last {len(iv)} dimensions"
    if swizzle is None:
        return None
    e = row_elements(elem_bytes, swizzle)
    kind = (f"a row of its {swizzle}-byte swizzled tile" if swizzle else
            f"a {CORE_BYTES}-byte row of a core matrix (its tile is not swizzled)")
    if last != e:
        got_b = "?" if last is None else str(last * elem_bytes)
        return (f"its tile's rows hold {got_b} bytes; an MN-major operand's rows are {kind}: "
                f"exactly {e * elem_bytes} bytes ({e} elements)")
    if n % e:
        return (f"N = {n} is not a multiple of the {e} elements of {kind}: the hardware "
                f"reads whole rows")
    want = (K, e) if len(iv) == 2 else (n // e, K, e)
    got = extents(w)
    if tuple(got) != want:
        shown = ", ".join("?" if g is None else str(g) for g in got)
        return (f"its ranges have extents [{shown}], not [{', '.join(map(str, want))}]"
                + ("" if len(iv) == 3 or n == e else
                   f" (N = {n} spans {n // e} rows of {e}: name [{n // e}, {K}, {e}])"))
    if iv[-1][1].lo != Const(0):
        return f"its last range must be a whole row `0:{e}`"
    return None


def b_problem(s: Wgmma, rank: int, last: Optional[int], elem_bytes: int,
              swizzle: Optional[int]) -> Optional[str]:
    """Why the B window of ``s`` is not an operand of its majorness, or None."""
    if s.b_major == "mn":
        return mn_problem(s.b, rank, last, elem_bytes, swizzle, s.n)
    return operand_problem(s.b, rank, last, elem_bytes, swizzle, s.n)


def is_swizzled_form(w: WindowArg) -> bool:
    """A ``[rows, 16]`` window (the swizzled K-major form)."""
    return len(intervals(w)) == 2


def _at(w: WindowArg, vals) -> tuple:
    """The index of ``w``'s element at window coordinates ``vals`` (one per interval)."""
    out, it = [], iter(vals)
    for p in w.idx:
        if isinstance(p, Point):
            out.append(p.pt)
        else:
            v = next(it)
            out.append(_add(p.lo, v))
    return tuple(out)


def _add(a, b):
    if isinstance(a, Const) and a.val == 0:
        return b
    return BinOp("+", a, b, INDEX)


def _b(op, a, b):
    return BinOp(op, a, b if not isinstance(b, int) else Const(b), INDEX)


def row_expr(lane, i):
    """:func:`frag_row` on IR expressions."""
    return _b("+", _b("+", _b("*", Const(16), _b("//", lane, 32)), _b("//", _b("%", lane, 32), 4)),
              _b("*", Const(8), _b("%", _b("//", i, 2), 2)))


def col_expr(lane, i):
    """:func:`frag_col` on IR expressions."""
    return _b("+", _b("+", _b("*", Const(8), _b("//", i, 4)), _b("*", Const(2), _b("%", lane, 4))),
              _b("%", i, 2))


def lane_of(thread_var: str):
    """The lane of the thread whose innermost thread loop variable is ``thread_var``."""
    return _b("%", Var(thread_var, INDEX), WARPGROUP)


@dataclass(frozen=True)
class WgmmaElement(Reduce):
    """``acc[.., i] += f32(a[h, r, j]) * f32(b[h, c, j])``, one step of a wgmma as the
    effect walk and the interpreter see it: a :class:`Reduce` that remembers its wgmma."""

    wgmma: Optional[Wgmma] = field(default=None, compare=False, repr=False)


def elements(s: Wgmma, lane) -> tuple:
    """The meaning of ``s`` for the thread of lane ``lane`` (an index expression)."""
    i, k = Var(I_VAR, INDEX), Var(K_VAR, INDEX)
    ty = s.a.ty
    core = core_of(ty.bits // 8)
    h, j = _b("//", k, core), _b("%", k, core)
    row, col = row_expr(lane, i), col_expr(lane, i)
    ra = Read(s.a.name, _at(s.a, (row, k) if is_swizzled_form(s.a) else (h, row, j)), ty, s.loc)
    rb = Read(s.b.name, _at(s.b, b_coords(s, col, k)), ty, s.loc)
    cast = TF32 if ty == f32 else f32.name     # f32 operands are read as tf32
    prod = BinOp("*", Builtin(cast, (ra,), f32, s.loc), Builtin(cast, (rb,), f32, s.loc),
                 f32, s.loc)
    red = WgmmaElement(s.acc.name, _at(s.acc, (i,)), "+", prod, s.loc, wgmma=s)
    inner = For(K_VAR, Const(0), Const(k_of(ty.bits // 8)), (red,), "seq", None, False,
                s.loc)
    return (For(I_VAR, Const(0), Const(s.n // 2), (inner,), "seq", None, False, s.loc),)


def b_coords(s: Wgmma, col, k) -> tuple:
    """The window coordinates of ``B[k, col]`` in the B operand of ``s``."""
    if s.b_major == "mn":
        if len(intervals(s.b)) == 2:
            return (k, col)
        e = extents(s.b)[-1]
        return (_b("//", col, e), k, _b("%", col, e))
    if is_swizzled_form(s.b):
        return (col, k)
    core = core_of(s.b.ty.bits // 8)
    return (_b("//", k, core), col, _b("%", k, core))


#: ``tf32(x)`` on the bits of an f32 (an unsigned int named ``{u}``), as C: the low 13
#: mantissa bits cleared; a NaN stays a NaN (quieted first: a payload only in the low
#: bits would leave an infinity).  The one text of the rule the generated C (the
#: builtin's helper, the wgmma and mma.sync CPU bodies) reads: :func:`tf32_truncate_c`.
_TF32_C = "((((({u}) & 0x7fffffffu) > 0x7f800000u) ? (({u}) | 0x00400000u) : ({u})) & 0xffffe000u)"


def tf32_truncate_c(u: str) -> str:
    """The C expression of :func:`tf32_truncate` on the bits ``u`` (``unsigned``) of an
    f32: the bits of the f32 read as tf32."""
    return _TF32_C.format(u=u)


def tf32_truncate(x):
    """``x`` (f32, numpy scalar or array) as the tensor cores read an f32 operand of a
    tf32 MMA: its low 13 mantissa bits dropped (sign, exponent and 10 mantissa bits kept),
    as the stdlib's mma.sync tf32 kernels' meaning (``gpudsl.stdlib.matmul_tf32``) and the
    emulator do (:func:`tf32_truncate_c`).  A NaN stays a NaN (the tensor cores read it
    as one): its quiet bit set before the low bits go, so a payload only in those bits
    does not leave an infinity."""
    import numpy as np
    a = np.asarray(x, dtype=np.float32)
    u = a.view(np.uint32)
    nan = (u & np.uint32(0x7FFFFFFF)) > np.uint32(0x7F800000)
    u = np.where(nan, u | np.uint32(0x00400000), u).astype(np.uint32)
    out = (u & np.uint32(0xFFFFE000)).view(np.float32)
    return out if out.ndim else np.float32(out)


def wgmma_of(stmt) -> Optional[Wgmma]:
    """The wgmma an access's statement belongs to, else None."""
    return stmt.wgmma if isinstance(stmt, WgmmaElement) else None


def same_shape(a: Wgmma, b: Wgmma) -> bool:
    """Two wgmmas the hardware orders on one accumulator (same shape and types)."""
    return a.n == b.n and a.a.ty == b.a.ty and a.acc.name == b.acc.name


def chained(fam, c_stmt, x_stmt, x_name: str) -> bool:
    """An access (statement ``x_stmt``, array ``x_name``) by a later wgmma of the same shape
    on the accumulator of the wgmma of ``c_stmt``: ordered by the hardware, no conflict
    (``fam``: the family asked about)."""
    if fam is not WGMMAS:
        return False
    co, xo = wgmma_of(c_stmt), wgmma_of(x_stmt)
    return co is not None and xo is not None and same_shape(co, xo) and x_name == xo.acc.name


WGMMAS = Family("wgmma", WgmmaCommit, WgmmaWait, "wgmma_commit", "wgmma_wait", wgmma_of,
                 lambda op: 1, "accumulator", "operand")
FAMILIES = (COPIES, WGMMAS)

__all__ = ["chained", "WGMMAS", "FAMILIES", "WARPGROUP", "M", "K", "CORE", "N_MAX", "AB_TYPES", "WGMMA_STMTS", "uses_wgmma",
           "n_values", "frag_row", "frag_col", "intervals", "extents", "layout_problem",
           "swizzled_problem", "operand_problem", "is_swizzled_form", "mn_problem",
           "b_problem", "b_coords", "row_elements", "CORE_BYTES", "B_MAJORS", "HALF_TYPES",
           "TF32", "tf32_truncate", "tf32_truncate_c", "k_of", "core_of",
           "row_expr", "col_expr", "lane_of", "WgmmaElement", "elements", "wgmma_of",
           "same_shape"]
