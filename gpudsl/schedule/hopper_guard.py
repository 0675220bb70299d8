"""Rewrites around ``setmaxnreg`` and swizzled SHARED tiles (docs/hopper.md).

Neither has a meaning a primitive's legality rule could break: setmaxnreg places
registers, a swizzle places elements.  What a rewrite can break is where they stand and
what they apply to: a setmaxnreg moved under a loop, past a barrier or into a thread
loop, a swizzled tile reshaped so that its rows no longer fit the swizzle or moved out
of SHARED memory.  For a proc that holds either, every primitive's result is compared
with its input through check()'s own obligations (:mod:`gpudsl.analysis.obligations.
registers` and ``layouts``, for the target that has them): the result may have no
problem the input does not have, it keeps every setmaxnreg statement and every swizzled
tile (their count and widths), and it passes no window of a swizzled tile to an
``@instr`` template (``vectorize``, ``replace``), which code generation refuses."""
from __future__ import annotations

from collections import Counter

from ..analysis.proc_effects import collect
from ..analysis.obligations import Ctx
from ..analysis.obligations.swizzle_obligations import check_layouts
from ..analysis.obligations.setmaxnreg_obligations import check_setmaxnreg
from ..ir.nodes import Alloc, Call, SetMaxNReg, WindowArg
from ..ir.smt import DEFAULT_TIMEOUT_MS
from ..ir.visitor import walk
from ..targets import EMULATED_TARGET


def _marks(pdef) -> Counter:
    """What must survive a rewrite: the setmaxnreg statements and the swizzle widths."""
    out: Counter = Counter()
    for n in walk(pdef.body):
        if isinstance(n, SetMaxNReg):
            out[("setmaxnreg", n.regs, n.lo.val, n.hi.val)] += 1
        elif isinstance(n, Alloc) and n.swizzle:
            out[("swizzle", n.swizzle)] += 1
    return out


def _templated_tiles(pdef) -> int:
    """Windows of swizzled tiles passed to ``@instr`` templates (which code generation
    refuses: a template addresses a window by its first element and strides)."""
    tiles = {n.name for n in walk(pdef.body) if isinstance(n, Alloc) and n.swizzle}
    return sum(1 for n in walk(pdef.body) if isinstance(n, Call) and n.proc.instr is not None
               for a in n.args if isinstance(a, WindowArg) and a.name in tiles)


def hopper_issues(pdef) -> list:
    """check()'s setmaxnreg and layout diagnostics on ``pdef``, with its mapping issues
    about setmaxnreg."""
    eff = collect(pdef)
    ctx = Ctx(eff, {}, DEFAULT_TIMEOUT_MS, 30.0, EMULATED_TARGET)
    check_layouts(ctx)
    if eff.setmaxnregs:
        check_setmaxnreg(ctx)
    out = [(str(d.kind), d.message, d.locations[0] if d.locations else None, d.witness)
           for d in ctx.diagnostics]
    out += [(i.kind, i.message, i.locs[0] if i.locs else None, {}) for i in eff.issues
            if "setmaxnreg" in i.message]
    return out


def broken_hopper(old, new, allow_swizzle: bool = False, allow_registers: bool = False):
    """None, or ``(message, loc, hint, witness)`` when ``new`` loses a setmaxnreg or a
    swizzled layout of ``old``, or has a problem with them that ``old`` has not
    (``allow_swizzle``: ``set_swizzle``, whose work is to change one tile's layout;
    ``allow_registers``: ``set_registers``, whose work is to add one setmaxnreg)."""
    if old is new:
        return None
    before, after = _marks(old), _marks(new)
    if allow_registers and before != after:
        added = after - before
        if before - after or sum(added.values()) != 1 or \
                next(iter(added))[0] != "setmaxnreg":
            return ("set_registers changed something else than one added setmaxnreg", None,
                    None, None)
        before = after
    if allow_swizzle and before != after:   # the one change asked for, then checked
        keep = Counter({k: v for k, v in before.items() if k[0] != "swizzle"})
        if keep != Counter({k: v for k, v in after.items() if k[0] != "swizzle"}):
            return ("set_swizzle changed something else than a tile's swizzle", None, None,
                    None)
        before = after
    if not before and not after:
        return None
    if before != after:
        lost = before - after or after - before
        what = ", ".join(f"{k[0]}{k[1:]}" for k in lost)
        return (f"the rewrite would change the proc's setmaxnreg statements or swizzled tiles "
                f"({what})", None, "keep them where they are, as they are", None)
    if _templated_tiles(new) > _templated_tiles(old):
        return ("the rewrite would pass a window of a swizzled tile to an @instr template, "
                "which addresses it by its first element and strides: it cannot follow the "
                "swizzled layout", None, "keep the tile's accesses plain, or drop swizzle=",
                None)
    seen = {(k, m) for k, m, _, _ in hopper_issues(old)}
    for kind, msg, loc, w in hopper_issues(new):
        if (kind, msg) not in seen:
            return (f"the rewrite breaks a setmaxnreg or a swizzled tile: {msg}", loc,
                    "keep setmaxnreg at the top of the block's code and swizzled tiles in "
                    "SHARED memory with rows a multiple of the swizzle", w or None)
    return None


__all__ = ["hopper_issues", "broken_hopper"]
