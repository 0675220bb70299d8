"""Warp-uniform role branches in kernels holding wgmma (docs/hopper.md, "Code").

A warp-specialized kernel runs its roles in branches on the thread index: ``if
(threadIdx.x < 128)`` for the consumer warpgroup, ``if (128 <= threadIdx.x)`` for the
producer.  ptxas cannot see that such a condition is the same for the 32 threads of a
warp, so a wgmma group left in flight across another role's branch (a consumer that
waits with ``wgmma_wait(1)``) is "in a divergent path": ptxas then waits after every
wgmma (``C7518 ... serialized due to program dependence on compiler-inserted WG.DP in
divergent path``).  CUTLASS names its roles by a warp-uniform value, the warp index
broadcast from lane 0 (``__shfl_sync``); so do the kernels here that hold a wgmma, in a
block of one dimension:

- ``gpudsl_warp`` = ``threadIdx.x / 32`` broadcast from lane 0, declared once at the top
  of the kernel (all threads converged there);
- a bound of a thread loop, or of a ranged statement (``arrive``, ``wait``,
  ``setmaxnreg``), that is a multiple of 32 compares ``gpudsl_warp`` (``128 <=
  threadIdx.x`` is ``4 <= gpudsl_warp``); other bounds keep ``threadIdx.x``;
- ``wgmma_commit()`` and ``wgmma_wait(n)`` at block level run in a branch of the warps
  that issue the kernel's wgmmas (the warps of its thread loops holding one): the other
  threads have no wgmma group, for them both are nothing; a commit that the producer's
  warps also run makes ptxas commit an empty group of its own there.

The emulator (and any build without sm_90a's features) computes the same index without
the shuffle.
"""
from __future__ import annotations

from ..ir.nodes import For, Wgmma
from ..ir.types import THREADS
from ..ir.visitor import walk
from .role_split import conjunction, decided

WARP = 32
NAME = "gpudsl_warp"

DECLARE = (
    "#ifdef GPUDSL_WGMMA_PTX",
    f"const int {NAME} = __shfl_sync(__activemask(), (int)(threadIdx.x / {WARP}), 0);"
    "  // warp-uniform roles",
    "#else",
    f"const int {NAME} = (int)(threadIdx.x / {WARP});",
    "#endif")


def scan_roles(kw, body) -> None:
    """Whether the kernel names its roles by ``gpudsl_warp``, and the warps that issue its
    wgmmas (``kw.wg_warps``: ``(lo, hi)`` thread bounds, None when not whole warps)."""
    kw.uniform_roles = bool(getattr(kw, "wg_accs", None)) and \
        kw.block_dim[1] == kw.block_dim[2] == 1
    spans = []
    for s in walk(tuple(body)):
        if isinstance(s, For) and s.mapping == THREADS and \
                any(isinstance(n, Wgmma) for n in walk(tuple(s.body))):
            lo, hi = getattr(s.lo, "val", None), getattr(s.hi, "val", None)
            if not isinstance(lo, int) or not isinstance(hi, int):
                spans = None
                break
            spans.append((lo, hi))
    kw.wg_warps = None
    if spans:
        lo, hi = min(a for a, _ in spans), max(b for _, b in spans)
        if lo % WARP == 0 and hi % WARP == 0:
            kw.wg_warps = (lo, hi)


def declare_roles(kw) -> None:
    if getattr(kw, "uniform_roles", False):
        for ln in DECLARE:
            kw.w.line(ln)


def lower(kw, lo: int, tid: str) -> str:
    """The condition ``lo <= tid`` (warp-uniform where it can be; ``true`` / ``false``
    in a role branch that decides it: :mod:`.role_split`)."""
    known = decided(kw, tid, lo=lo)
    if known is not None:
        return known
    if getattr(kw, "uniform_roles", False) and tid == "threadIdx.x" and lo % WARP == 0:
        return f"{lo // WARP} <= {NAME}"
    return f"{lo} <= {tid}"


def upper(kw, hi: int, tid: str) -> str:
    """The condition ``tid < hi`` (warp-uniform where it can be; decided in a role
    branch)."""
    known = decided(kw, tid, hi=hi)
    if known is not None:
        return known
    if getattr(kw, "uniform_roles", False) and tid == "threadIdx.x" and hi % WARP == 0:
        return f"{NAME} < {hi // WARP}"
    return f"{tid} < {hi}"


def group_guard(kw, level: str) -> str:
    """The branch around a block-level ``wgmma_commit`` / ``wgmma_wait``: the warps that
    issue wgmmas ("" elsewhere, or where it is not whole warps)."""
    if level != "block" or not getattr(kw, "uniform_roles", False) or kw.wg_warps is None:
        return ""
    lo, hi = kw.wg_warps
    conds = conjunction(([lower(kw, lo, "threadIdx.x")] if lo else []) +
                        ([upper(kw, hi, "threadIdx.x")] if hi < kw.block_dim[0] else []))
    return f"if ({conds}) " if conds else ""


__all__ = ["scan_roles", "declare_roles", "lower", "upper", "group_guard"]
