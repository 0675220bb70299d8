"""What a bulk tensor copy (TMA, docs/hopper.md "TMA loads") is, in one place:
``tma_load(dst, src, bar=b)`` (:class:`gpudsl.ir.nodes.TmaLoad`).

**Meaning, per thread.**  The running thread starts a copy of a *box*: ``src`` is a window
of a GLOBAL array whose every index is a point or a range of constant extent (at most
:data:`BOX_MAX` elements, at most :data:`RANK_MAX` ranges); ``dst`` is a window of a SHARED
array with ranges of the same extents, in the same order, laid out contiguously (its
ranges are its last dimensions, all but the first of them whole).  Element ``i`` of the
box (``i`` running over the ranges' extents) gets ``src`` at the box's coordinate, or 0
where that coordinate lies outside ``src``'s dimensions (``shape``): windows running past
an array's edge are clipped, as the hardware does.

**Completion.**  The copy belongs to the split barrier ``b`` (``b[e]`` of a ring): it lands
when the phase that the issuing thread's *next* arrive on ``b`` completes has completed
(the hardware: ``mbarrier.expect_tx`` of the box's bytes, then the copy completing its
transaction count on the barrier; the thread's arrive follows).  Between the issue and
that completion the destination may not be read or written, nor the source written, by
anyone; a thread waiting for that phase (or one ordered after such a wait) sees the
copy.  A copy whose issuing thread never arrives on ``b`` after it lands nowhere.

:func:`elements` gives the meaning as statements (a ``seq`` loop per range around one
guarded :class:`TmaElement` assignment): the effect collector, check() and the
interpreter see a copy's accesses through it.

**Swizzled tiles.**  The SHARED tile may be ``@ SHARED(swizzle=W)``
(:mod:`gpudsl.ir.swizzle_meaning`): the tensor map then has the hardware's ``W``-byte swizzle
mode, and the copy writes (or reads) each element at its swizzled offset, exactly where
the tile's other accesses find it; the meaning is unchanged.  The hardware's rules: the
box's innermost range holds at most ``W`` bytes (:func:`swizzle_problem`; with a tile of
rows of ``W`` bytes, the whole row), and the tile starts at a multiple of the pattern's
period, ``8 * W`` bytes (:func:`dst_align`, which check() proves).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from .async_copy_meaning import const_extent
from .async_copy_meaning import Family
from .nodes import (Assign, BinOp, Const, For, If, Interval, Point, Read, TmaCommit, TmaLoad,
                    TmaStore, TmaWait, Var, WindowArg)
from .types import INDEX, bool_
from .visitor import kinds

BOX_MAX = 256        # elements per range of a box (cuTensorMapEncodeTiled's boxDim)
RANK_MAX = 5         # ranges of a box (a tensor map's rank)
INNER_BYTES = 16     # the innermost range's bytes: a multiple of this
PITCH_BYTES = 16     # a global array's row pitch: a multiple of this
DST_ALIGN = 128      # bytes: the shared destination's start
I_VAR = "__tma_i"    # the loops of :func:`elements`: __tma_i0, __tma_i1, ...
ELEM_TYPES = ("f16", "bf16", "f32", "f64", "i32", "i64")   # a tensor map's data types


TMA_STMTS = (TmaLoad, TmaStore, TmaCommit, TmaWait)


def uses_tma(pdef) -> bool:
    """Does ``pdef`` (or a callee) hold a bulk tensor copy, commit or wait?"""
    return bool(kinds(pdef.body) & set(TMA_STMTS))


def box(w: WindowArg) -> list:
    """The constant extents of ``w``'s ranges (None where not constant)."""
    return [const_extent(p.lo, p.hi) for p in w.idx if isinstance(p, Interval)]


def global_side(s) -> WindowArg:
    """The GLOBAL box of a bulk tensor copy (the source of a load, the destination of a
    store)."""
    return s.src if isinstance(s, TmaLoad) else s.dst


def shared_side(s) -> WindowArg:
    return s.dst if isinstance(s, TmaLoad) else s.src


def box_bytes(s) -> int:
    """The bytes of the copy's box (a load's transaction count, clipped or not)."""
    n = 1
    for e in box(global_side(s)):
        n *= e
    return n * global_side(s).ty.bits // 8


def src_problem(w: WindowArg, rank: int) -> Optional[str]:
    """Why ``w`` (of an array of ``rank`` dimensions) is not a box a tensor map reads."""
    if len(w.idx) != rank:
        return f"it indexes {len(w.idx)} of the array's {rank} dimensions; name every one"
    ext = box(w)
    if not ext:
        return "it has no range: a box has at least one"
    if len(ext) > RANK_MAX:
        return f"it has {len(ext)} ranges; a box has at most {RANK_MAX}"
    if rank > RANK_MAX:
        return f"the array has {rank} dimensions; a tensor map has at most {RANK_MAX}"
    if any(e is None for e in ext):
        return "a range's extent is not a constant"
    if any(not 1 <= e <= BOX_MAX for e in ext):
        return f"a range's extent is outside 1..{BOX_MAX}"
    if not isinstance(w.idx[-1], Interval):
        return "its last index is a point: the box's innermost range is the array's last dimension"
    if ext[-1] * w.ty.bits // 8 % INNER_BYTES:
        return (f"its last range holds {ext[-1] * w.ty.bits // 8} bytes, not a multiple of "
                f"{INNER_BYTES}")
    return None


@dataclass(frozen=True)
class PitchRule:
    """A tensor map's row pitch over the GLOBAL array ``name`` (rank > 1): its rows, the
    last dimension's ``extent`` elements of ``ty_name``, lie a multiple of
    :data:`PITCH_BYTES` bytes apart: ``extent % per == 0``.  The one home of the rule:
    check() (:mod:`gpudsl.analysis.obligations.tma_obligations`) and ``make_tma`` /
    ``make_tma_store`` (:func:`gpudsl.schedule.tma_from_copies.prove_box_copies`)."""

    name: str
    ty_name: str
    extent: object   # Expr
    per: int

    def _subject(self) -> str:
        return f"the rows of '{self.name}' ({self.ty_name})"

    def broken(self) -> str:
        return f"{self._subject()} are not a multiple of {PITCH_BYTES} bytes apart"

    def holds(self) -> str:
        return f"{self._subject()} are a multiple of {PITCH_BYTES} bytes apart " \
               "(a tensor map's row pitch)"

    def hint(self) -> str:
        from .printer import print_expr
        return f"keep the last dimension of '{self.name}' a multiple of {self.per} " \
               f"(e.g. `assert {print_expr(self.extent)} % {self.per} == 0`)"


def pitch_rule(name: str, ty, shape) -> Optional[PitchRule]:
    """The row-pitch rule of a tensor map over the GLOBAL array ``name`` of element type
    ``ty`` and ``shape`` (None for one dimension: no pitch)."""
    if len(shape) <= 1:
        return None
    return PitchRule(name, ty.name, shape[-1], PITCH_BYTES * 8 // ty.bits)


def dst_align(swizzle: int) -> int:
    """The bytes the shared side of a copy starts at a multiple of: 128, or the period
    ``8 * W`` of a tile swizzled with ``W`` bytes (the hardware's swizzle follows the
    address, the tile's layout its offset: they agree from a period's start)."""
    from .swizzle_meaning import repeat_bytes
    return max(DST_ALIGN, repeat_bytes(swizzle)) if swizzle else DST_ALIGN


def swizzle_problem(s, swizzle: int) -> Optional[str]:
    """Why copy ``s`` cannot move its box through a tile swizzled with ``swizzle`` bytes
    (the hardware's swizzle modes take an innermost box range of at most that many
    bytes), or None."""
    ext = box(global_side(s))
    if not ext or ext[-1] is None:
        return None
    inner = ext[-1] * global_side(s).ty.bits // 8
    if inner > swizzle:
        return (f"the box's innermost range holds {inner} bytes, more than the {swizzle}-byte "
                f"swizzle (the hardware's limit: at most {swizzle * 8 // global_side(s).ty.bits} "
                f"elements of {global_side(s).ty.name})")
    return None


def dst_problem(w: WindowArg, shape: tuple, want: list) -> Optional[str]:
    """Why ``w`` (of a SHARED array of ``shape``) is not a contiguous box of extents
    ``want``."""
    ext = box(w)
    if ext != want:
        shown = ", ".join("?" if e is None else str(e) for e in ext)
        return f"its ranges have extents [{shown}], the source's box [{', '.join(map(str, want))}]"
    first = next(k for k, p in enumerate(w.idx) if isinstance(p, Interval))
    if any(isinstance(p, Point) for p in w.idx[first:]):
        return "its ranges must be its last dimensions (points only before them)"
    for k in range(first + 1, len(w.idx)):
        p, d = w.idx[k], shape[k]
        if not (isinstance(d, Const) and p.lo == Const(0) and isinstance(p.hi, Const)
                and p.hi.val == d.val):
            return "every range after its first must cover its whole dimension (contiguous)"
    return None


@dataclass(frozen=True)
class TmaElement(Assign):
    """One element of a bulk tensor copy, ``dst[..] = src[..]`` (or ``= 0`` outside the
    source), as the effect walk and the interpreter see it: an :class:`Assign` that
    remembers its copy."""

    tma: Optional[TmaLoad] = field(default=None, compare=False, repr=False)


def tma_of(stmt) -> Optional[TmaLoad]:
    """The bulk tensor load an access's statement belongs to, else None."""
    t = stmt.tma if isinstance(stmt, TmaElement) else None
    return t if isinstance(t, TmaLoad) else None


def store_of(stmt) -> Optional[TmaStore]:
    """The bulk tensor store an access's statement belongs to, else None."""
    t = stmt.tma if isinstance(stmt, TmaElement) else None
    return t if isinstance(t, TmaStore) else None


def _add(a, b):
    if isinstance(b, Const) and b.val == 0:
        return a
    return BinOp("+", a, b, INDEX)


def _at(w: WindowArg, vals) -> tuple:
    out, it = [], iter(vals)
    for p in w.idx:
        out.append(p.pt if isinstance(p, Point) else _add(p.lo, next(it)))
    return tuple(out)


def _inside(idx, shape):
    cond = None
    for e, d in zip(idx, shape):
        c = BinOp("and", BinOp(">=", e, Const(0), bool_), BinOp("<", e, d, bool_), bool_)
        cond = c if cond is None else BinOp("and", cond, c, bool_)
    return cond


def elements(s: TmaLoad) -> tuple:
    """The meaning of ``s`` for its issuing thread: one loop per range of the box around
    ``dst[..] = src[..] if inside else 0``."""
    ext = box(s.src)
    vs = [Var(f"{I_VAR}{k}", INDEX) for k in range(len(ext))]
    si, di = _at(s.src, vs), _at(s.dst, vs)
    ty = s.dst.ty
    copy = TmaElement(s.dst.name, di, Read(s.src.name, si, s.src.ty, s.loc), s.loc, tma=s)
    zero = TmaElement(s.dst.name, di, Const(0.0 if ty.is_float else 0, ty), s.loc, tma=s)
    body = (If(_inside(si, s.shape), (copy,), (zero,), s.loc),)
    for k in reversed(range(len(ext))):
        body = (For(vs[k].name, Const(0), Const(ext[k]), body, "seq", None, False, s.loc),)
    return body


def store_elements(s: TmaStore) -> tuple:
    """The meaning of a store for its issuing thread: one loop per range of the box around
    ``if inside: dst[..] = src[..]`` (nothing written outside the destination)."""
    ext = box(s.dst)
    vs = [Var(f"{I_VAR}{k}", INDEX) for k in range(len(ext))]
    di, si = _at(s.dst, vs), _at(s.src, vs)
    copy = TmaElement(s.dst.name, di, Read(s.src.name, si, s.src.ty, s.loc), s.loc, tma=s)
    body = (If(_inside(di, s.shape), (copy,), (), s.loc),)
    for k in reversed(range(len(ext))):
        body = (For(vs[k].name, Const(0), Const(ext[k]), body, "seq", None, False, s.loc),)
    return body


STORES = Family("bulk tensor store", TmaCommit, TmaWait, "tma_commit", "tma_wait", store_of,
                lambda op: 1, "destination", "source")

__all__ = ["dst_align", "PitchRule", "pitch_rule", "swizzle_problem", "TMA_STMTS", "STORES", "store_of", "store_elements", "global_side", "shared_side", "BOX_MAX", "RANK_MAX", "INNER_BYTES", "PITCH_BYTES", "DST_ALIGN", "ELEM_TYPES",
           "uses_tma", "box", "box_bytes", "src_problem", "dst_problem", "TmaElement",
           "tma_of", "elements"]
