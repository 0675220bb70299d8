"""Resource limits of the target (``ctx.target``, a ``gpudsl.targets.Target``; sm_90 unless
check() is given another).  The figures below are sm_90's.

- Threads per block: at most 1024 in all, x and y at most 1024, z at most 64 (error).
- Grid: x below 2**31 blocks (error); x is the innermost BLOCKS loop, or a grouped
  pair's product (``set_block_order``: ``gpudsl.ir.nests.block_units``, the grid code
  generation launches).  A y or z extent has no limit: code generation
  makes those loops grid-stride loops and the launch asks for at most the target's
  y / z limit (gpudsl/codegen/kernel_cuda.py, ``plan_launches``), so a constant
  70000-row loop on y is fine.
- Shared memory per block: the sum of a kernel's SHARED allocations (a swizzled tile with
  the padding its alignment may take).  Above 227 KB
  (232448 bytes, the opt-in maximum of sm_90; 163 KB on sm_80) is an error of kind
  ``"resource"``.  Between 48 KB (the static ``__shared__`` limit) and that maximum is a
  *warning*: the kernel runs only if the launch opts in to the larger carve-out (dynamic
  shared memory with ``cudaFuncAttributeMaxDynamicSharedMemorySize``), which code
  generation does.
- Registers per thread come from ptxas after compiling (``kernel.resources``).

Sizes that are not bound are symbolic: the check asks Z3 whether some sizes allowed
by the asserts exceed a limit, and shows them.
"""
from __future__ import annotations

import z3

from .check_report import Diagnostic
from ..ir.nests import block_units, direct_nest
from ..ir.swizzle_meaning import repeat_bytes
from ..ir.smt import SAT, UNKNOWN, Unsupported


def _max(vals):
    r = vals[0]
    for v in vals[1:]:
        r = z3.If(v > r, v, r)
    return r


def check_resources(ctx):
    """The block, grid and shared-memory limits of ``ctx.target`` for every kernel."""
    for ki in ctx.eff.kernels.values():
        t = ctx.thread("r")
        try:
            solve = _solver_with_host_loops(ctx, t, ki)
            _check_block(ctx, t, ki, solve)
            _check_grid(ctx, t, ki, solve)
            if ki.shared:
                _check_shared(ctx, t, ki, solve)
        except Unsupported as e:
            ctx.unknown("the resource limits", [ki.loc], str(e))


def _solver_with_host_loops(ctx, t, ki):
    """``ctx.solve`` with the host loop variables the launch's extents may use (a grid
    of (n - k + 255) // 256 blocks in ``for k in seq(0, n)``) in their ranges."""
    host = []
    for hl in ki.host_loops:
        lo, hi = t.expr(hl.lo), t.expr(hl.hi)
        v = t.declare(hl.iter)
        host += [v >= lo, v < hi]
    return (lambda cs: ctx.solve(host + cs)) if host else ctx.solve


def _check_block(ctx, t, ki, solve):
    tgt = ctx.target
    dims = []
    for d in range(3):
        his = ki.thread_extents.get(d, [])
        dims.append(_max([t.expr(h) for h in his]) if his else z3.IntVal(1))
    total = dims[0] * dims[1] * dims[2]
    bx, by, bz = tgt.max_block_dims
    over = [total > tgt.max_threads_per_block, dims[0] > bx, dims[1] > by, dims[2] > bz]
    r = solve([z3.Or(*over)])
    if r.status == SAT:
        m = r.model
        vals = ctx.eval_ints(m, dims)
        ctx.diagnostics.append(Diagnostic(
            "resource", f"the block of this kernel has {vals[0]} x {vals[1]} x "
            f"{vals[2]} = {vals[0] * vals[1] * vals[2]} threads; the limit of {tgt} "
            f"is {tgt.max_threads_per_block} (x <= {bx}, y <= {by}, z <= {bz})",
            [ki.loc], {"sizes": ctx.enc.size_values(m), "block_dim": vals},
            "divide the thread loop and make the outer part a seq loop"))
    elif r.status == UNKNOWN:
        ctx.unknown("the threads-per-block limit", [ki.loc], r.reason)


def _check_grid(ctx, t, ki, solve):
    """The grid code generation launches (:func:`gpudsl.ir.nests.block_units`): the
    last unit takes x (a grouped pair: the product of its two extents), the others y
    and z (grid-stride loops, no limit).  A constant x extent above the target's limit
    is an error; a symbolic one is checked at launch."""
    tgt = ctx.target
    chain = direct_nest(ki.loop)
    units = block_units(chain)
    ext = z3.IntVal(1)
    for b in units[-1]:
        ext = ext * (t.expr(b.hi) - t.expr(b.lo))
    ext = z3.simplify(ext)
    if len(units) > 3 or not z3.is_int_value(ext):  # > 3: a mapping error, reported there
        return
    r = solve([ext > tgt.max_grid_dims[0]])
    if r.status == SAT:
        m = r.model
        g = tgt.max_grid_dims
        x = " x ".join(b.iter for b in units[-1])
        sizes = " x ".join(str(v) for v in ctx.eval_ints(
            m, [t.expr(b.hi) - t.expr(b.lo) for b in units[-1]]))
        ctx.diagnostics.append(Diagnostic(
            "resource", f"the grid of this kernel is larger than {tgt} allows: "
            f"{x} ({sizes} blocks) on x (x <= {g[0]} blocks; y and z stride over the grid)",
            [ki.loc],
            {"sizes": ctx.enc.size_values(m),
             "grid": ctx.eval_ints(m, [t.expr(b.hi) - t.expr(b.lo) for b in chain])},
            "use larger tiles" if len(units[-1]) == 2 else
            "make the innermost block loop the largest one"))


def _check_shared(ctx, t, ki, solve):
    tgt = ctx.target
    tot = z3.IntVal(0)
    for info in ki.shared:
        n = z3.IntVal(max(1, info.ty.bits // 8))
        for e in info.shape:
            n = n * t.expr(e)
        # a swizzled tile is aligned to its pattern's period: count the padding it may take
        tot = tot + n + max(0, repeat_bytes(info.swizzle) - 16)
    r = solve([tot > tgt.max_shared_bytes])
    if r.status == SAT:
        m = r.model
        b = ctx.eval_ints(m, [tot])[0]
        ctx.diagnostics.append(Diagnostic(
            "resource", f"this kernel allocates {b} bytes of SHARED memory; an "
            f"{tgt} block can have at most {tgt.max_shared_bytes} "
            f"({tgt.max_shared_bytes // 1024} KB)",
            [ki.loc] + [i.loc for i in ki.shared],
            {"sizes": ctx.enc.size_values(m), "shared_bytes": b}, "use smaller tiles"))
        return
    if r.status == UNKNOWN:
        ctx.unknown("the shared memory limit", [ki.loc], r.reason)
        return
    r = solve([tot > tgt.static_shared_bytes])
    if r.status == SAT:
        b = ctx.eval_ints(r.model, [tot])[0]
        ctx.warnings.append(Diagnostic(
            "warning", f"this kernel may allocate {b} bytes of SHARED memory, more than "
            f"the {tgt.static_shared_bytes} bytes ({tgt.static_shared_bytes // 1024} KB) "
            "of static shared memory: the launch must opt in to the larger carve-out",
            [ki.loc], {"shared_bytes": b}))
