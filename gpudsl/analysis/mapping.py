"""The mapping rules of docs/language.md (meaning) and uniformity of block-level control flow.

Structural rules are found while collecting effects (:mod:`.effects` records them as
issues): ``sync()`` only at block level, ``@ THREADS`` only inside ``@ BLOCKS``, at
most 3 directly nested grid / block dimensions, SHARED allocated at block level, no
memory writes at block level outside thread loops, thread loop bounds fixed once
sizes are known.  Unmapped ``par`` loops are accepted (they are checked as parallel
loops); code at host level with memory effects is a warning.

Uniformity (kind ``"divergence"``): every ``if`` and ``seq`` loop at block level is
run by all threads of the block, so its condition and bounds must be the same for all
of them.  At block level thread variables are not in scope; what can differ between
threads is data they hold privately: reads of REGISTER memory.  Reads of SHARED or
GLOBAL memory there are made by every thread at the same location; they are included
as accesses in the race obligations, so when those pass the value is uniform.
"""
from __future__ import annotations

from ..ir.nodes import For, If, Read
from ..ir.printer import print_expr
from ..ir.types import BLOCKS, THREADS
from ..ir.visitor import walk
from .check_report import Diagnostic


def issues_to_diagnostics(eff, diagnostics: list, warnings: list):
    seen = set()
    for iss in eff.issues:
        key = (iss.kind, iss.message, tuple(str(l) for l in iss.locs))
        if key in seen:
            continue
        seen.add(key)
        d = Diagnostic(iss.kind, iss.message, list(iss.locs), {}, iss.hint)
        (warnings if iss.kind == "warning" else diagnostics).append(d)


def check_uniformity(eff, diagnostics: list):
    reg_names = {info.name for info in eff.arrays.values() if info.mem.per_thread}

    def private_reads(exprs):
        out = []
        for e in exprs:
            for n in walk(e):
                if isinstance(n, Read) and n.name in reg_names:
                    out.append(n.name)
        return out

    def block(stmts, level, has_sync_inside):
        for s in stmts:
            if isinstance(s, For):
                lv = level
                if s.mapping == BLOCKS:
                    lv = "block"
                elif s.mapping == THREADS or (s.kind == "par" and level == "block"):
                    lv = "thread"
                elif level == "block":
                    bad = private_reads([s.lo, s.hi])
                    if bad:
                        diagnostics.append(Diagnostic(
                            "divergence", f"the bounds of the block-level loop '{s.iter}' "
                            f"read per-thread REGISTER data ({', '.join(sorted(set(bad)))}): "
                            "threads of a block may run different numbers of iterations"
                            + (" and reach the sync() inside a different number of times"
                               if _has_sync(s) else ""), [s.loc], {},
                            "compute the bound from sizes, block indices or shared data"))
                block(s.body, lv, False)
            elif isinstance(s, If):
                if level == "block":
                    bad = private_reads([s.cond])
                    if bad:
                        diagnostics.append(Diagnostic(
                            "divergence", f"the block-level condition {print_expr(s.cond)} "
                            f"reads per-thread REGISTER data ({', '.join(sorted(set(bad)))}): "
                            "threads of a block may take different branches"
                            + (" and some would skip a sync()" if _has_sync(s) else ""),
                            [s.loc], {},
                            "branch on sizes, block indices or shared data, or move the "
                            "branch into the thread loop"))
                block(s.body, level, False)
                block(s.orelse, level, False)

    block(eff.body, "host", False)


def _has_sync(s) -> bool:
    from ..ir.sync_meaning import is_sync

    return any(is_sync(n) for n in walk(s))
