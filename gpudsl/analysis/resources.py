"""Resource limits of the target (sm_90, H100).

- Threads per block: at most 1024 in all, x and y at most 1024, z at most 64 (error).
- Grid: x below 2**31, y and z at most 65535 blocks (error).
- Shared memory per block: the sum of a kernel's SHARED allocations.  Above 227 KB
  (232448 bytes, the opt-in maximum of sm_90) is an error of kind ``"resource"``.
  Between 48 KB (the static ``__shared__`` limit) and 227 KB is a *warning*: the kernel
  runs only if the launch opts in to the larger carve-out (dynamic shared memory with
  ``cudaFuncAttributeMaxDynamicSharedMemorySize``), which code generation must do.
- Registers per thread come from ptxas after compiling (``kernel.resources``).

Sizes that are not bound are symbolic: the check asks Z3 whether some sizes allowed
by the asserts exceed a limit, and shows them.
"""
from __future__ import annotations

import z3

from .report import Diagnostic
from ..ir.smt import SAT, UNKNOWN, Unsupported

STATIC_SHARED = 48 * 1024
MAX_SHARED = 227 * 1024
MAX_THREADS = 1024


def _max(vals):
    r = vals[0]
    for v in vals[1:]:
        r = z3.If(v > r, v, r)
    return r


def check_resources(ctx):
    eff = ctx.eff
    for ki in eff.kernels.values():
        t = ctx.thread("r")
        try:
            # host loop variables the launch's extents may use (a grid of
            # (n - k + 255) // 256 blocks in `for k in seq(0, n)`): in their ranges
            host = []
            for hl in ki.host_loops:
                lo, hi = t.expr(hl.lo), t.expr(hl.hi)
                v = t.declare(hl.iter)
                host += [v >= lo, v < hi]
            solve = (lambda cs: ctx.solve(host + cs)) if host else ctx.solve
            dims = []
            for d in range(3):
                his = ki.thread_extents.get(d, [])
                dims.append(_max([t.expr(h) for h in his]) if his else z3.IntVal(1))
            total = dims[0] * dims[1] * dims[2]
            over = [total > MAX_THREADS, dims[0] > 1024, dims[1] > 1024, dims[2] > 64]
            r = solve([z3.Or(*over)])
            if r.status == SAT:
                m = r.model
                vals = ctx.eval_ints(m, dims)
                ctx.diagnostics.append(Diagnostic(
                    "resource", f"the block of this kernel has {vals[0]} x {vals[1]} x "
                    f"{vals[2]} = {vals[0] * vals[1] * vals[2]} threads; the limit is 1024 "
                    "(x, y <= 1024, z <= 64)", [ki.loc],
                    {"sizes": ctx.enc.size_values(m), "block_dim": vals},
                    "divide the thread loop and make the outer part a seq loop"))
            elif r.status == UNKNOWN:
                ctx.unknown("the threads-per-block limit", [ki.loc], r.reason)
            gdims = []
            for l in ki.block_loops:
                gdims.append((l, t.expr(l.hi) - t.expr(l.lo)))
            over = []
            for l, ext in gdims:
                ext = z3.simplify(ext)
                if z3.is_int_value(ext):  # symbolic grids are checked at launch
                    over.append(ext > (2 ** 31 - 1 if l.dim == 0 else 65535))
            if over:
                r = solve([z3.Or(*over)])
                if r.status == SAT:
                    m = r.model
                    ctx.diagnostics.append(Diagnostic(
                        "resource", "the grid of this kernel is larger than CUDA allows "
                        "(x < 2**31, y and z <= 65535 blocks)", [ki.loc],
                        {"sizes": ctx.enc.size_values(m),
                         "grid": ctx.eval_ints(m, [e for _, e in gdims])},
                        "make the innermost block loop the largest one"))
            if ki.shared:
                tot = z3.IntVal(0)
                for info in ki.shared:
                    n = z3.IntVal(max(1, info.ty.bits // 8))
                    for e in info.shape:
                        n = n * t.expr(e)
                    tot = tot + n
                r = solve([tot > MAX_SHARED])
                if r.status == SAT:
                    m = r.model
                    b = ctx.eval_ints(m, [tot])[0]
                    ctx.diagnostics.append(Diagnostic(
                        "resource", f"this kernel allocates {b} bytes of SHARED memory; an "
                        f"sm_90 block can have at most {MAX_SHARED} (227 KB)",
                        [ki.loc] + [i.loc for i in ki.shared],
                        {"sizes": ctx.enc.size_values(m), "shared_bytes": b},
                        "use smaller tiles"))
                elif r.status == UNKNOWN:
                    ctx.unknown("the shared memory limit", [ki.loc], r.reason)
                else:
                    r = solve([tot > STATIC_SHARED])
                    if r.status == SAT:
                        b = ctx.eval_ints(r.model, [tot])[0]
                        ctx.warnings.append(Diagnostic(
                            "warning", f"this kernel may allocate {b} bytes of SHARED memory, "
                            f"more than the {STATIC_SHARED} bytes (48 KB) of static shared "
                            "memory: the launch must opt in to the larger carve-out",
                            [ki.loc], {"shared_bytes": b}))
        except Unsupported as e:
            ctx.unknown("the resource limits", [ki.loc], str(e))
