"""The rule of swizzled SHARED tiles (docs/hopper.md, :mod:`gpudsl.ir.swizzle_meaning`), kind
``"mapping"``: a tile ``@ SHARED(swizzle=W)`` lives in a memory that swizzles, is an
array, and its rows (the last dimension) are a multiple of ``W`` bytes for every size the
asserts allow.  Then the swizzle is a permutation of the tile's bytes (proved once for
all in :func:`gpudsl.ir.swizzle_meaning.prove_permutation`), so the bounds proved on indices
hold for the addresses the swizzle gives: nothing else is left to prove."""
from __future__ import annotations

import z3

from ...ir.smt import SAT, UNKNOWN, Unsupported
from ..check_report import Diagnostic


def check_layouts(ctx) -> None:
    for info in ctx.eff.arrays.values():
        w = getattr(info, "swizzle", 0)
        if not w:
            continue
        if not info.mem.swizzles or not info.shape:
            what = f"{info.mem.name} memory" if not info.mem.swizzles else "a scalar"
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"'{info.name}' is {what}: only SHARED arrays have a swizzled layout",
                [info.loc], {}, "drop swizzle=, or allocate the tile in SHARED"))
            continue
        _rows(ctx, info, w)


def _rows(ctx, info, w) -> None:
    t = ctx.thread("layout")
    eb = max(1, info.ty.bits // 8)
    try:
        row = t.expr(info.shape[-1]) * eb
    except Unsupported as e:
        ctx.unknown(f"that the rows of '{info.name}' fit its {w}-byte swizzle", [info.loc],
                    str(e))
        return
    r = ctx.solve([row % w != 0])
    if r.status == SAT:
        b = ctx.eval_ints(r.model, [row])[0]
        ctx.diagnostics.append(Diagnostic(
            "mapping", f"a row of the swizzled tile '{info.name}' is {b} bytes, not a multiple "
            f"of its {w}-byte swizzle (the swizzle permutes 16-byte chunks inside {w}-byte "
            "segments of a row)", [info.loc],
            {"sizes": ctx.enc.size_values(r.model), "row_bytes": b},
            f"make the last dimension a multiple of {w // eb} {info.ty.name} elements for every "
            "size (an assert), or use a narrower swizzle"))
    elif r.status == UNKNOWN:
        ctx.unknown(f"that the rows of '{info.name}' fit its {w}-byte swizzle", [info.loc],
                    r.reason)


__all__ = ["check_layouts"]
