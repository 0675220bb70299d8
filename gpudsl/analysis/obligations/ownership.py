"""REGISTER ownership: a REGISTER array allocated at block level is per thread; its
leading dimensions are the thread coordinates (outermost thread dimension first) and
every access from a thread loop must index its own row (docs/language.md (meaning))."""
from __future__ import annotations

import z3

from ..check_report import Diagnostic
from ...ir.smt import SAT, UNKNOWN, Unsupported
from . import Ctx


def check_ownership(ctx: Ctx):
    eff = ctx.eff
    for a in eff.accesses:
        info = eff.arrays[a.array]
        if not info.mem.per_thread or info.level != "block" or a.kernel is None:
            continue
        k = info.thread_dims
        if a.level != "thread":
            continue  # block-level reads: see mapping.uniformity
        if len(a.idx) < k:
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"the REGISTER {'array' if info.shape else 'scalar'} "
                f"'{info.name}' is allocated at block level, so each thread has its own "
                f"copy, but it has fewer than the {k} leading thread dimension(s) the block "
                "has: threads would share it", [info.loc, a.loc], {},
                f"allocate it inside the thread loop, or give it leading dimensions for "
                f"the threads and index them with the thread variables",
                ["allocation", a.describe()]))
            continue
        t = ctx.thread("o")
        try:
            cons = ctx.place(t, a)
            tc = ctx.coords(t, a.kernel)
            idx = [t.expr(e) for e in a.idx[:k]]
        except Unsupported as e:
            ctx.unknown(f"that {a.describe()} touches only its own row", [a.loc], str(e))
            continue
        own = [idx[j] == tc[k - 1 - j] for j in range(k)]
        r = ctx.solve(cons + [z3.Not(z3.And(*own))])
        if r.status == SAT:
            m = r.model
            ctx.diagnostics.append(Diagnostic(
                "mapping", f"{a.describe()} touches a row of the block-level REGISTER "
                f"array '{info.name}' that belongs to another thread", [a.loc, info.loc],
                {"sizes": ctx.enc.size_values(m), "thread": ctx.thread_witness(t, a, m),
                 "array": info.name, "element": ctx.eval_ints(m, idx)},
                "index the leading dimensions with the thread loop variables",
                [a.describe(), "allocation"]))
        elif r.status == UNKNOWN:
            ctx.unknown(f"that {a.describe()} touches only its own row", [a.loc], r.reason)
