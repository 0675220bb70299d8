"""Legality of parallel code, shared by the primitives: iterations of a ``par``
loop that must not conflict (:func:`check_parallel`), two fused BLOCKS loops
whose threads must not race (:func:`check_fused_blocks`), and the mapping rules
(docs/language.md, "Meaning") that a rewrite must keep (:func:`refuse_new_mapping_issues` on the
structural rules, :func:`keep_mapping` through check()'s own obligations).

Errors name the running primitive (:func:`gpudsl.schedule.primitive.current`).
"""
from __future__ import annotations

import z3

from ..ir.nodes import For
from ..ir.types import BLOCKS, THREADS
from .cursors import ancestors
from .legality import collect, find_conflict, raise_conflict
from .memo import recall
from .primitive import fail

# Mapping issues that a schedule passes through on its way to a legal proc (the
# outer loop mapped to BLOCKS before the inner one to THREADS, an allocation before
# the loop that will make it block level): not refused.
_TRANSIENT = ("a memory write at block level", "a memory write inside an unmapped par loop",
              "a SHARED array must be allocated", "a REGISTER allocation outside")


def _mapping_issues(pdef, strict: bool) -> set:
    """The broken mapping rules (docs/language.md, "Meaning") (structural, no solver) in ``pdef``."""
    issues = recall(pdef, "mapping issues", _all_mapping_issues)
    return {i for i in issues if strict or not i[1].startswith(_TRANSIENT)}


def _all_mapping_issues(pdef) -> list:
    from ..analysis.proc_effects import collect as collect_effects

    return [(i.kind, i.message, tuple(f"{x.file}:{x.line}:{x.col}" for x in i.locs if x))
            for i in collect_effects(pdef, mapping_only=True).issues
            if i.kind == "mapping"]


def refuse_new_mapping_issues(old, new, loc, strict: bool = True):
    """Refuse a rewrite that breaks a mapping rule the input kept (``strict=False``:
    except the transient ones of a top-down mapping, see ``_TRANSIENT``)."""
    added = _mapping_issues(new, strict) - _mapping_issues(old, strict)
    if added:
        raise fail("the result would break a mapping rule: "
                   + "; ".join(sorted({m for _, m, _ in added})), loc,
                   "BLOCKS loops stand at host level (up to 3 directly nested), "
                   "THREADS loops at block level (up to 3 directly nested)")


def keep_mapping(old, new, loc, addr):
    """Refuse when ``new`` breaks a mapping rule (docs/language.md, "Meaning") (kinds "mapping" and
    "divergence" of check(), REGISTER ownership included) that ``old`` kept.  Only
    for an allocation (at ``addr`` in ``old``) inside a kernel: outside one, a memory
    is a choice made before mapping the loops."""
    if not any(isinstance(x, For) and x.mapping == BLOCKS for x in ancestors(old, addr)):
        return
    from ..analysis.mapping import check_uniformity, issues_to_diagnostics

    def diags(ir):
        from ..analysis.proc_effects import collect as effects
        from ..analysis.obligations import Ctx
        from ..analysis.obligations.ownership import check_ownership
        from ..ir.smt import DEFAULT_TIMEOUT_MS

        eff = effects(ir)
        ctx = Ctx(eff, {}, DEFAULT_TIMEOUT_MS)
        issues_to_diagnostics(eff, ctx.diagnostics, ctx.warnings)
        check_uniformity(eff, ctx.diagnostics)
        check_ownership(ctx)
        return [d for d in ctx.diagnostics if d.kind in ("mapping", "divergence", "unknown")]

    after = diags(new)
    if not after:
        return
    before = {(d.kind, d.message) for d in diags(old)}
    for d in after:
        if (d.kind, d.message) not in before:
            raise fail(f"the result breaks a mapping rule: {d.message}", loc,
                       d.hint or None, d.witness or None)


def check_parallel(pdef, addr, s: For, only: set | None = None):
    """Refuse unless no two iterations of loop ``s`` (at ``addr``) conflict (on the
    buffers ``only``, when given)."""
    accs = collect(s.body, loops=(s,))
    if only is not None:
        accs = [x for x in accs if x.buf in only]
    hit = find_conflict(pdef, addr, accs, accs,
                        lambda e1, e2: e1[s.iter] != e2[s.iter], allow_reduce=False)
    if hit:
        raise_conflict(f"iterations of loop {s.iter} conflict", hit, s.loc,
                       "stage the data, expand the allocation, or keep the loop sequential")


def _thread_id(acc, enc_env):
    """The (x, y, z) thread coordinates of an access instance: the variables of its
    directly nested THREADS loops, innermost on x; any thread outside them."""
    th = [L for L in acc.loops if L.mapping == THREADS]
    if not th:
        return None
    ids = [enc_env[L.iter] for L in reversed(th)]
    return ids + [z3.IntVal(0)] * (3 - len(ids))


def check_fused_blocks(pdef, addr, F, acc_a, acc_b, loc):
    """Fusing two BLOCKS loops puts both kernels' code in one block with no barrier
    between them: an access of the second by one thread must not conflict with an
    access of the first by another thread of the same block."""
    for a in acc_b:
        for b in acc_a:
            def relate(e1, e2, a=a, b=b):
                t1, t2 = _thread_id(a, e1), _thread_id(b, e2)
                same_block = e1[F.iter] == e2[F.iter]
                if t1 is None or t2 is None:
                    return same_block
                return z3.And(same_block, z3.Or(*[x != y for x, y in zip(t1, t2)]))

            hit = find_conflict(pdef, addr, [a], [b], relate, allow_reduce=False)
            if hit:
                raise_conflict("in the fused kernel, two threads of one block would "
                               "conflict with no barrier between them", hit, loc,
                               "fuse the thread loops only where each thread reads what it "
                               "wrote itself")


__all__ = ["check_parallel", "check_fused_blocks", "refuse_new_mapping_issues",
           "keep_mapping"]
