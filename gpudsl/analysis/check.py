"""``check(proc, **bindings)``: run every obligation and build the Report.

``timeout=seconds`` (check()'s overall budget, default 60 s of this process's CPU time,
so that a loaded machine does not change a verdict) may be passed among the
bindings unless the proc has a parameter of that name (then use ``_timeout``); so may
``target=`` (``"sm_80"``, ``"sm_90"`` or a ``gpudsl.targets.Target``; ``_target``), the
architecture whose limits the resource rules apply (default sm_90).  Each
solver query gets at most 3 s (``DEFAULT_TIMEOUT_MS``) or, when a ``timeout`` is given,
at most the budget left; an obligation undecided at its limit, or not reached when
the budget is spent, is "unknown" (never "ok").  Results are cached per (proc,
bindings, timeout): procs are immutable values.
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict

from ..ir.locations import location_key
from ..errors import Error
from ..ir.inline import InlineRefused
from .proc_effects import collect
from .mapping import check_uniformity, issues_to_diagnostics
from .obligations import Ctx
from .obligations.async_copy_obligations import check_asyncs
from .obligations.wgmma_obligations import check_wgmma
from .obligations.tma_obligations import check_store_alignment, check_tma
from .obligations.barriers import check_barriers
from .obligations.bounds import check_bounds
from .obligations.collective_obligations import check_collectives
from .obligations.cluster_arrives import check_cluster_arrives
from .obligations.cluster_obligations import check_cluster_uniformity
from .obligations.features import check_features
from .obligations.swizzle_obligations import check_layouts
from .obligations.setmaxnreg_obligations import check_setmaxnreg
from .obligations.ownership import check_ownership
from .obligations.race_obligations import check_races
from .check_report import Diagnostic, Report
from .resources import check_resources
from ..ir.smt import DEFAULT_TIMEOUT_MS, SAT
from ..ir.smt_interrupt import ctrl_c_guard
from ..targets import Target, target

_cache: OrderedDict = OrderedDict()   # the one cache of proofs: compile() asks it too
_cache_lock = threading.Lock()
_CACHE_MAX = 1024
DEFAULT_BUDGET_MS = 60_000   # check()'s overall budget when no timeout= is given
_ORDER = {"mapping": 0, "target": 1, "divergence": 2, "resource": 3, "race": 4, "bounds": 5,
          "unknown": 6}


def check(p, /, **bindings) -> Report:
    ir = p.ir if hasattr(p, "ir") else p
    names = {q.name: q for q in ir.params}
    timeout = _option(bindings, names, "timeout")
    tgt = _target_of(_option(bindings, names, "target"), ir)
    timeout_ms = int(timeout * 1000) if timeout is not None else DEFAULT_BUDGET_MS
    for k, v in bindings.items():
        q = names.get(k)
        if q is None or q.kind not in ("size", "index"):
            sizes = [q.name for q in ir.params if q.is_control]
            raise Error(f"check({ir.name}): '{k}' is not a size or index parameter of "
                        f"{ir.name}", ir.loc, f"bind one of: {', '.join(sizes) or '(none)'}")
        if isinstance(v, bool) or not isinstance(v, int):
            try:
                v = int(v)
            except (TypeError, ValueError):
                raise Error(f"check({ir.name}): {k}={v!r} is not an integer", ir.loc)
            bindings[k] = v
        if q.kind == "size" and v < 1:
            raise Error(f"check({ir.name}): the size {k} must be positive, got {v}", ir.loc)
    # equal procs from other places (cells, primitive calls) get their own locations
    try:
        key = (ir, location_key(ir), tuple(sorted(bindings.items())), timeout_ms, tgt)
        with _cache_lock:
            hit = _cache.get(key)
            if hit is not None:
                _cache.move_to_end(key)
                return hit
        with ctrl_c_guard():   # Ctrl-C: a KeyboardInterrupt, never a verdict
            rep = _run(ir, bindings, timeout_ms, tgt)
    except RecursionError:
        raise Error(f"check({ir.name}): the proc nests calls or expressions too "
                         "deeply for the checker (Python's recursion limit)", ir.loc,
                         "nest fewer calls: inline some of them") from None
    with _cache_lock:
        _cache[key] = rep
        while len(_cache) > _CACHE_MAX:   # the least recently used goes first
            _cache.popitem(last=False)
    return rep


def _option(bindings: dict, names, key: str):
    """Take check()'s own option ``key`` out of ``bindings``: under its name unless the
    proc has a parameter of that name, and always under ``_key``."""
    value = None
    for k in (key, "_" + key):
        if k in bindings and (k not in names or k.startswith("_")):
            value = bindings.pop(k)
    return value


def _target_of(value, ir) -> Target:
    try:
        return target(value)
    except ValueError as e:
        raise Error(f"check({ir.name}): {e}", ir.loc,
                    "name a target gpudsl describes (gpudsl.targets.TARGETS) or register one "
                    "with gpudsl.targets.register_target") from None


def _run(ir, bindings, timeout_ms, tgt: Target) -> Report:
    t0 = time.perf_counter()
    try:
        eff = collect(ir)
    except InlineRefused as e:  # a call whose by-value meaning the IR cannot express
        d = Diagnostic("unknown", f"could not analyse {ir.name}: {e.raw_message}",
                       [e.loc] if e.loc is not None else [], {}, e.hint or "")
        return Report(ir.name, [d], [], dict(bindings),
                      {"queries": 0, "seconds": time.perf_counter() - t0, "accesses": 0})
    per_query = DEFAULT_TIMEOUT_MS if timeout_ms == DEFAULT_BUDGET_MS else timeout_ms
    ctx = Ctx(eff, bindings, per_query, timeout_ms / 1000, tgt)
    if bindings:
        r = ctx.solve([])
        if r.status != SAT:
            raise Error(f"check({ir.name}): the bindings "
                        f"{', '.join(f'{k}={v}' for k, v in bindings.items())} violate the "
                        "proc's asserts", ir.loc)
    issues_to_diagnostics(eff, ctx.diagnostics, ctx.warnings)
    check_uniformity(eff, ctx.diagnostics)
    check_resources(ctx)
    check_features(ctx)
    check_cluster_uniformity(ctx)
    check_cluster_arrives(ctx)
    check_layouts(ctx)
    if eff.setmaxnregs:
        check_setmaxnreg(ctx)
    if eff.collectives:
        check_collectives(ctx)
    check_wgmma(ctx)
    check_ownership(ctx)
    check_barriers(ctx)
    check_races(ctx)
    check_asyncs(ctx)
    check_tma(ctx)
    check_store_alignment(ctx)
    check_bounds(ctx)
    diags = sorted(ctx.diagnostics, key=lambda d: _ORDER.get(d.kind, 9))
    rep = Report(ir.name, diags, ctx.warnings, dict(bindings),
                 {"queries": ctx.queries, "seconds": time.perf_counter() - t0,
                  "accesses": len(eff.accesses)}, trusted_instrs(ir))
    return rep


def trusted_instrs(ir) -> list:
    """The names of the ``@instr`` procs ``ir`` calls, directly or through its callees
    (sorted): each one's template is trusted to compute what its body says."""
    from ..ir.nodes import Call
    from ..ir.visitor import block_stmts

    found, seen = set(), set()

    def block(stmts):
        for s in block_stmts(stmts):
            if isinstance(s, Call):
                if s.proc.instr is not None:
                    found.add(s.proc.name)
                elif id(s.proc) not in seen:
                    seen.add(id(s.proc))
                    block(s.proc.body)

    block(ir.body)
    return sorted(found)
