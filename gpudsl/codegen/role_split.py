"""Role branches for kernels that move registers with setmaxnreg (docs/hopper.md, "Code").

ptxas allocates registers per instruction, not per thread: after a warpgroup's
``setmaxnreg.dec 40`` every instruction that warpgroup can reach must fit in 40
registers.  In the kernel's one straight-line body, the producer warpgroup's threads
reach the consumers' code too (their branches are skipped at run time, not at compile
time), so ptxas drops the setmaxnreg (``C7507 ... 'setmaxnreg' ignored to maintain
minimum register requirements``).  CUTLASS writes one branch per role, each holding its
setmaxnreg and its own loop.  Code generation does the same for a kernel holding wgmma
(a block of one dimension, roles named by the warp-uniform ``gpudsl_warp``) whose block
code starts with setmaxnreg statements of disjoint warpgroup ranges: the block's code is
written once per role (each setmaxnreg range, and the threads no range names), around the
grid-stride loops, with every thread range decided where the role lies wholly inside or
outside it (``true`` / ``false``: the C++ compiler drops what the role never runs).

The meaning is the same: every thread runs the statements of its range in the same
order, and every thread meets the same sequence of block barriers (``__syncthreads``,
``bar.sync 0``: the barrier counts warps, whichever instruction they arrive at; each
branch is warp-uniform).  SHARED arrays are carved out of dynamic shared memory, so that
both branches name the same bytes.
"""
from __future__ import annotations

from ..ir.nodes import Arrive, For, SetMaxNReg, Wait
from ..ir.types import THREADS
from ..ir.visitor import walk

WARPGROUP = 128


def role_ranges(kw, body) -> list | None:
    """The roles ``[(lo, hi), ...]`` covering the block, or None (no split): the block
    code's leading setmaxnreg statements, whole warpgroups, disjoint, and the threads
    between them; without setmaxnreg, the warps that issue the wgmmas and the others,
    where some thread range of the others is not whole warps (one producer thread in a
    block of whole warps: its branch on ``threadIdx.x`` is not warp-uniform, and a wgmma
    group in flight across it would be serialized, ``C7518``)."""
    if not getattr(kw, "uniform_roles", False):
        return None
    lead = []
    for s in body:
        if not isinstance(s, SetMaxNReg):
            break
        lead.append((s.lo.val, s.hi.val))
    n = kw.block_dim[0]
    if not lead:
        return _wgmma_roles(kw, body, n)
    if n % WARPGROUP:
        return None
    lead.sort()
    if any(lo % WARPGROUP or hi % WARPGROUP or hi > n for lo, hi in lead) or \
            any(a[1] > b[0] for a, b in zip(lead, lead[1:])):
        return None
    out, at = [], 0
    for lo, hi in lead:
        if at < lo:
            out.append((at, lo))
        out.append((lo, hi))
        at = hi
    if at < n:
        out.append((at, n))
    return out if len(out) > 1 else None


def _wgmma_roles(kw, body, n: int) -> list | None:
    ww = getattr(kw, "wg_warps", None)
    if ww is None or n % 32 or ww == (0, n):
        return None
    bounds = set()
    for s in walk(tuple(body)):
        if isinstance(s, For) and s.mapping == THREADS or isinstance(s, (Arrive, Wait)):
            bounds |= {getattr(e, "val", None) for e in (s.lo, s.hi)}
    if all(isinstance(b, int) and (b % 32 == 0 or b >= n) for b in bounds):
        return None
    cuts = sorted({0, ww[0], ww[1], n})
    return [(a, b) for a, b in zip(cuts, cuts[1:]) if a < b]


def emit_roles(kw, roles, emit, warp: str):
    """``if (role 0) { emit() } else if (role 1) { emit() } ... else { emit() }`` on the
    warp-uniform index ``warp``, each written with ``kw.role`` set (the writer's
    per-statement state restored between them); returns what the last ``emit()``
    returned."""
    w, out, NAME = kw.w, None, warp
    for i, (lo, hi) in enumerate(roles):
        cond = f"{lo // 32} <= {NAME} && {NAME} < {hi // 32}"
        head = "if" if i == 0 else "} else if"
        w.line(f"{head} ({cond}) {{  // threads [{lo}, {hi})" if i < len(roles) - 1 else
               f"}} else {{  // threads [{lo}, {hi})")
        w.indent += 1
        saved = (dict(kw.hoisted), dict(kw.var_nonneg), len(kw.scopes), kw.nest)
        kw.role = (lo, hi)
        try:
            out = emit()
        finally:
            kw.role = None
            kw.hoisted, kw.var_nonneg, kw.nest = saved[0], saved[1], saved[3]
            del kw.scopes[saved[2]:]
        w.indent -= 1
    w.line("}")
    return out


def decided(kw, tid: str, lo: int | None = None, hi: int | None = None) -> str | None:
    """``"true"`` / ``"false"`` where the role being written lies wholly inside or outside
    ``lo <= tid`` (or ``tid < hi``), else None."""
    role = getattr(kw, "role", None)
    if role is None or tid != "threadIdx.x":
        return None
    rlo, rhi = role
    if lo is not None:
        return "true" if lo <= rlo else "false" if lo >= rhi else None
    return "true" if hi >= rhi else "false" if hi <= rlo else None


def conjunction(conds) -> str:
    """``a && b`` of the conditions, ``true`` ones dropped (``""``: none left), ``false``
    where one is."""
    conds = [c for c in conds if c != "true"]
    if "false" in conds:
        return "false"
    return " && ".join(conds)


__all__ = ["role_ranges", "emit_roles", "decided", "conjunction"]
