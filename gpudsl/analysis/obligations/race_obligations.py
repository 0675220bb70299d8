"""Data races: two symbolic threads, one access each, same element, one a plain write.

Who runs concurrently (see docs/language.md (meaning), docs/checking.md):

- ``host``: two iterations of a host-level (unmapped) ``par`` loop: the outermost
  common loop where the two instances differ is that par loop.
- ``blocks``: the same kernel launch, different block indices; GLOBAL memory only
  (SHARED is per block, barriers do not order blocks).
- ``threads``: the same block, different thread coordinates, and equal barrier counts
  (:mod:`gpudsl.analysis.phases`): no barrier separates them.  SHARED and GLOBAL.
- ``iterations``: the same thread, the outermost common loop where the instances
  differ is an unmapped ``par`` loop (its iterations were promised independent).

Storage allocated inside par loops is private to the iteration that allocates it:
both instances must agree on the variables of the par loops enclosing the allocation
(a REGISTER array allocated in a thread loop is per thread).  Block-level REGISTER
arrays are per thread too; their rows are checked by :mod:`.ownership`.
"""
from __future__ import annotations

import z3

from ...ir.types import BLOCKS, THREADS
from ...ir.nodes import Const, For, Sync
from ..proc_effects import KernelAccess, loops_prefix
from ..check_report import Diagnostic
from ...ir.smt import DEFAULT_TIMEOUT_MS, SAT, UNKNOWN, Unsupported
from ..phases import PhaseRelation
from ..sync_chains import CHAIN_TIME, first_direct
from ..sync_counts import kernel_syncs
from ..tickets import ticket_facts
from . import Ctx
from .cluster_obligations import block_alternative, kernel_cluster

_PHASES = PhaseRelation()


def _host_loops(loops):
    out = []
    for l in loops:
        if l.mapping == BLOCKS:
            break
        out.append(l)
    return out


def added_races(before, after, timeout_ms: int = DEFAULT_TIMEOUT_MS,
                partial: bool = False) -> list:
    """The race (and undecided) diagnostics of ``after`` between threads of one block
    that ``before`` does not have, where ``after`` is ``before`` with barriers removed
    (the same accesses in the same order; only barrier counts differ).  A pair whose
    barrier counts did not change cannot race anew and is not asked, unless
    ``partial`` (a ranged or split barrier was removed: block-wide counts do not see
    it)."""
    from ..proc_effects import collect

    eff_b, eff_a = collect(before), collect(after)
    old = {a.uid: a for a in eff_b.accesses}
    aligned = len(old) == len(eff_a.accesses) and all(
        a.uid in old and old[a.uid].describe() == a.describe() for a in eff_a.accesses)
    ctx_a = Ctx(eff_a, {}, timeout_ms)
    ctx_b = Ctx(eff_b, {}, timeout_ms)
    out = []
    for info, a1, a2 in _candidates(eff_a):
        if aligned and not partial and repr(a1.bcount) == repr(old[a1.uid].bcount) and \
                repr(a2.bcount) == repr(old[a2.uid].bcount):
            continue  # the same query as before the removal
        d = _pair(ctx_a, info, a1, a2, only={"threads"})
        if d is None:
            continue
        if aligned:
            b1, b2 = old[a1.uid], old[a2.uid]
            d0 = _pair(ctx_b, eff_b.arrays[b1.array], b1, b2, only={"threads"})
            if d0 is not None and d0.kind == d.kind:
                continue  # there before the removal
        out.append(d)
        break
    return out


def _written_arrays(eff):
    """(array key, its accesses in program order) for every array something writes."""
    by_array: dict[str, list[KernelAccess]] = {}
    for a in eff.accesses:
        by_array.setdefault(a.array, []).append(a)
    for key, accs in by_array.items():
        if any(a.is_write for a in accs):
            yield key, accs


def _candidates(eff):
    """(array info, access, access) for every pair that may conflict."""
    for key, accs in _written_arrays(eff):
        for i, a1 in enumerate(accs):
            for a2 in accs[i:]:
                if not (a1.is_write or a2.is_write):
                    continue
                if a1.kind == "atomic" and a2.kind == "atomic":
                    continue
                yield eff.arrays[key], a1, a2


def _pairs(eff):
    """(array info, access, access, modes or None) for the pairs worth asking:
    every pair within one part of the kernel between top-level unconditional
    barriers (``_segment``), and across parts only the ``blocks``/``host``
    questions, once per pair of access shapes (``_shape``).  Near-linear when the
    phases are independent."""
    for key, accs in _written_arrays(eff):
        info = eff.arrays[key]
        accs = _representatives(accs)
        buckets: dict = {}
        loose = []
        for a in accs:
            sg = _segment(a)
            if sg is None:
                loose.append(a)
            else:
                buckets.setdefault(sg, []).append(a)
        for grp in buckets.values():
            for i, a1 in enumerate(grp):
                for a2 in grp[i:]:
                    if _conflict(a1, a2):
                        yield info, a1, a2, None
        pos = {id(a): n for n, a in enumerate(accs)}
        for a1 in loose:   # no segment known: against every access, each pair once
            for a2 in accs:
                if (_segment(a2) is not None or pos[id(a2)] >= pos[id(a1)]) and \
                        _conflict(a1, a2):
                    yield info, a1, a2, None
        host_par = any(l.is_unmapped_par and l.level == "host" for a in accs for l in a.loops)
        if len(buckets) > 1 and (info.mem.scope == "grid" or host_par):
            classes: dict = {}
            for a in accs:
                if _segment(a) is not None:
                    # sync_cluster() orders blocks: an access's place matters, not its shape
                    key = (_shape(a), id(a)) if _cluster_synced(eff, a.kernel) else _shape(a)
                    classes.setdefault(key, []).append(a)
            reps = list(classes.values())
            for i, c1 in enumerate(reps):
                for c2 in reps[i:]:
                    if _conflict(c1[0], c2[-1]):
                        yield info, c1[0], c2[-1], {"blocks", "host"}


def _cluster_synced(eff, kernel) -> bool:
    """Does the kernel hold a sync_cluster() or an arrive on every block of the cluster
    (:mod:`.cluster_obligations`: its blocks meet, so an access's place matters)?"""
    if kernel is None:
        return False
    memo = eff.__dict__.setdefault("_cluster_synced", {})
    if kernel not in memo:
        from ...ir.visitor import walk
        from .cluster_obligations import _meets
        memo[kernel] = any(_meets(n) for n in walk(eff.kernels[kernel].loop))
    return memo[kernel]


def _representatives(accs: list) -> list:
    """One access per class of accesses that every race question treats alike: the
    same shape (:func:`_shape`: kind, indices, guards, loops), the same block-level
    path (so the same phase relations) and barrier count.  A thread body of N
    statements touching ``y[t]`` asks one question instead of N**2 / 2: the question
    about two members of classes A and B is the one about their representatives, and
    two members of one class ask what the representative asks with itself (an inner
    ``par`` loop of the representative is common to both copies there, so that
    question allows more, never less)."""
    seen: dict = {}
    for a in accs:
        path = tuple((id(L), i) for L, i in a.path) if a.path is not None else None
        k = (_shape(a), path, repr(a.bcount), a.level)
        if k not in seen:
            seen[k] = a
    return list(seen.values())


def _conflict(a1, a2) -> bool:
    if not (a1.is_write or a2.is_write):
        return False
    return not (a1.kind == "atomic" and a2.kind == "atomic")


def check_races(ctx: Ctx):
    """Every pair that may conflict (:func:`_pairs`), with cheap disproofs before
    the solver: two accesses of one block separated by an unconditional barrier at
    the kernel's top level never meet (``threads``), a kernel of one block has no
    ``blocks`` pair, and a ``blocks``/``host`` question is asked once per pair of
    access shapes."""
    found: dict[str, int] = {}
    asked: set = set()
    one_block: dict = {}
    reported: set = set()  # (array, statement pair): one race per pair of statements
    for info, a1, a2, only in _pairs(ctx.eff):
        if found.get(info.key, 0) >= 4:
            continue
        pair = (info.key, frozenset((_stmt_key(a1), _stmt_key(a2))))
        if pair in reported:  # another access of the same two statements: same fix
            continue
        if ctx.out_of_time():
            ctx.unknown(f"that {a1.describe()} and {a2.describe()} do not race",
                        [a1.loc, a2.loc], "check()'s overall time budget is spent")
            found[info.key] = 4
            continue
        modes = set(_modes(ctx, info, a1, a2))
        if only is not None:
            modes &= only
        if not modes:
            continue
        if "threads" in modes:
            s1, s2 = _segment(a1), _segment(a2)
            if s1 is not None and s2 is not None and s1 != s2:
                modes.discard("threads")
        if "blocks" in modes:
            k = a1.kernel
            if k not in one_block:
                one_block[k] = all(isinstance(l.hi, Const) and isinstance(l.lo, Const) and
                                   l.hi.val - l.lo.val <= 1
                                   for l in ctx.eff.kernels[k].block_loops)
            if one_block[k]:
                modes.discard("blocks")
        for m in ("blocks", "host"):
            if m in modes:
                if m == "blocks" and kernel_cluster(ctx, a1.kernel)[1]:
                    continue   # the cluster's phases depend on the path, not the shape
                key = (m, info.key) + tuple(sorted((_shape(a1), _shape(a2))))
                if key in asked:
                    modes.discard(m)
                else:
                    asked.add(key)
        if not modes:
            continue
        d = _pair(ctx, info, a1, a2, only=modes)
        if d is not None:
            ctx.diagnostics.append(d)
            found[info.key] = found.get(info.key, 0) + (d.kind == "race")
            if d.kind == "race":
                reported.add(pair)


def _one_cluster(ctx, a1, w) -> bool:
    """Whether a race's two threads (witness ``w``) are in two blocks of one cluster."""
    loop = kernel_cluster(ctx, a1.kernel)[0] if a1.kernel is not None else None
    if loop is None:
        return False
    b1, b2 = w["thread1"]["block"], w["thread2"]["block"]
    return all(b1.get(k) == b2.get(k) for k in b1 if k != loop.iter)


def _stmt_key(a: KernelAccess):
    """The statement an access belongs to (its source position; the object without)."""
    loc = a.loc
    return (loc.file, loc.line, loc.col) if loc is not None else id(a.stmt)


def _prefix_syncs(L) -> list:
    r = _sync_memo.get(id(L))
    if r is None or r[0] is not L:
        out, n = [], 0
        for x in L:
            out.append(n)
            n += isinstance(x, Sync) and not x.ranged
        if len(_sync_memo) > 10000:
            _sync_memo.clear()
        r = _sync_memo[id(L)] = (L, out)
    return r[1]


_sync_memo: dict = {}


def _segment(a: KernelAccess):
    """The part of the kernel's top-level statement list (between unconditional
    barriers) that holds the access; None when unknown."""
    if not a.path:
        return None
    for L, i in a.path:
        s = L[i]
        if isinstance(s, For) and s.mapping == BLOCKS:
            continue
        return (a.kernel, id(L), _prefix_syncs(L)[i])
    return None


def _shape(a: KernelAccess):
    """What a ``blocks``/``host`` question about the access depends on: the access,
    its guards, the host-level loops (by identity) and the structure of the rest."""
    k = a.__dict__.get("_shape")
    if k is None:
        loops = []
        for l in a.loops:
            if l.level == "host" and l.mapping != BLOCKS:
                loops.append(l.uid)
            else:
                loops.append((l.iter, repr(l.lo), repr(l.hi), l.kind, repr(l.mapping), l.dim))
        k = (a.kind, a.reduce, repr(a.idx), repr(a.guards), tuple(loops), a.kernel,
             a.same_from, a.same_access, a.__dict__.get("summary_at"))
        a.__dict__["_shape"] = k
    return k


def _v(t, name: str):
    """Thread ``t``'s copy of loop variable ``name``; a loop that does not enclose
    the access placed in ``t`` (a misplaced @ BLOCKS loop of the kernel, reported as a
    mapping issue) leaves it unconstrained."""
    v = t.vars.get(name)
    return v if v is not None else t.declare(name)


def _differs(ls1, ls2, t1, t2, j):
    eq = [_v(t1, ls1[k].iter) == _v(t2, ls2[k].iter) for k in range(j)]
    return z3.And(*eq, _v(t1, ls1[j].iter) != _v(t2, ls2[j].iter))


def _modes(ctx: Ctx, info, a1: KernelAccess, a2: KernelAccess) -> list:
    """Which kinds of concurrency may bring the two accesses together."""
    common = loops_prefix(a1.loops, a2.loops)
    host = _host_loops(common)
    same_kernel = a1.kernel is not None and a1.kernel == a2.kernel
    block_reg = info.mem.per_thread and info.level == "block"
    alloc_threads = any(l.mapping == THREADS for l in info.loops)
    alloc_blocks = any(l.mapping == BLOCKS for l in info.loops)
    modes = []
    if any(l.is_unmapped_par for l in host):
        modes.append("host")
    if same_kernel:
        if info.mem.scope == "grid" and not alloc_blocks and not block_reg:
            modes.append("blocks")
        if info.mem.scope != "thread" and not alloc_threads and not block_reg:
            modes.append("threads")
        if any(l.is_unmapped_par for l in common[len(host):]):
            modes.append("iterations")
    return modes


def _pair(ctx: Ctx, info, a1: KernelAccess, a2: KernelAccess, only=None):
    """The race diagnostic of two accesses, or None; orderings through chains of
    barriers are asked for only when the direct ones leave a pair (:mod:`..sync_chains`)."""
    ks = kernel_syncs(ctx, a1.kernel) if a1.kernel is not None else None
    return first_direct(ks, lambda relays: _pair_at(ctx, info, a1, a2, only, relays))


def _pair_at(ctx: Ctx, info, a1: KernelAccess, a2: KernelAccess, only, relays):
    common = loops_prefix(a1.loops, a2.loops)
    host = _host_loops(common)
    host_par = [j for j, l in enumerate(host) if l.is_unmapped_par]
    same_kernel = a1.kernel is not None and a1.kernel == a2.kernel
    alloc_threads = any(l.mapping == THREADS for l in info.loops)
    kernel_common = [l for l in common[len(host):]]
    inner_par = [j for j, l in enumerate(kernel_common) if l.is_unmapped_par]
    modes = _modes(ctx, info, a1, a2)
    if only is not None:
        modes = [m for m in modes if m in only]
    if not modes:
        return None
    if "host" not in modes:
        host_par = []
    ctx.enc.data_dependent = False
    try:
        t1, t2, cons, i1, i2 = ctx.two_threads(a1, a2)
        # the same allocation instance
        for l in info.loops:
            if l.is_par:
                cons.append(_v(t1, l.iter) == _v(t2, l.iter))
        if alloc_threads and t1.tc is not None and t2.tc is not None:
            cons += [x == y for x, y in zip(t1.tc, t2.tc)]
        alts = []
        tags = []
        for j in host_par:
            alts.append(_differs(host, host, t1, t2, j))
            tags.append(("host", host[j].iter))
        if same_kernel:
            eq_host = [_v(t1, l.iter) == _v(t2, l.iter) for l in host]
            ki = ctx.eff.kernels[a1.kernel]
            bl = [l for l in ki.block_loops]
            eq_block = [_v(t1, l.iter) == _v(t2, l.iter) for l in bl]
            if "blocks" in modes and bl:
                alts.append(z3.And(*eq_host, block_alternative(ctx, a1, a2, t1, t2, bl, _v)))
                tags.append(("blocks", None))
            if "threads" in modes:
                phase = []
                same = _PHASES.same_phase(a1.path, a2.path, t1, t2)
                if same is not True:
                    phase = [same]
                if same is not False:
                    alts.append(z3.And(*eq_host, *eq_block,
                                   z3.Or(*[x != y for x, y in zip(t1.tc, t2.tc)]), *phase,
                                   *_unordered(ctx, a1, a2, t1, t2, relays)))
                    tags.append(("threads", None))
            if "iterations" in modes:
                for j in inner_par:
                    alts.append(z3.And(*eq_host, *eq_block,
                                       *[x == y for x, y in zip(t1.tc, t2.tc)],
                                       _differs(kernel_common, kernel_common, t1, t2, j)))
                    tags.append(("iterations", kernel_common[j].iter))
        if not alts:
            return None
        cons.append(z3.Or(*alts))
        if same_kernel and (t1.tickets or t2.tickets):
            cons += ticket_facts(t1, t2, [_v(t1, l.iter) == _v(t2, l.iter) for l in host])
    except Unsupported as e:
        return ctx.undecided(f"that {a1.describe()} and {a2.describe()} do not race",
                           [a1.loc, a2.loc], str(e) or "unsupported expression")
    r = ctx.solve(cons, CHAIN_TIME if relays else 1)
    if r.status == SAT and not _exact_order(ctx, a1, a2):
        return ctx.undecided(f"that {a1.describe()} and {a2.describe()} do not race",
                           [a1.loc, a2.loc], "the number of ranged or split barrier instances "
                           "between them depends on loop variables")
    if r.status == SAT:
        return _race(ctx, info, a1, a2, t1, t2, i1, alts, tags, r.model)
    if r.status == UNKNOWN:
        return ctx.undecided(f"that {a1.describe()} and {a2.describe()} do not race",
                           [a1.loc, a2.loc], f"solver: {r.reason or 'unknown'}")
    return None


def _unordered(ctx, a1, a2, t1, t2, relays) -> list:
    """Not ordered by a ranged or split barrier or a chain of them (docs/language.md
    (synchronization), :mod:`..sync_counts`, :mod:`..sync_chains`)."""
    ks = kernel_syncs(ctx, a1.kernel)
    if ks is None or a1.path is None or a2.path is None:
        return []
    from ..sync_chains import thread_span
    return ks.unordered(a1.path, t1, a2.path, t2, span1=thread_span(a1.loops, ks),
                        span2=thread_span(a2.loops, ks), relays=relays)


def _exact_order(ctx, a1, a2) -> bool:
    ks = kernel_syncs(ctx, a1.kernel) if a1.kernel is not None else None
    if ks is None or a1.path is None or a2.path is None:
        return True
    return ks.exact(a1.path) and ks.exact(a2.path)


def _race(ctx, info, a1, a2, t1, t2, i1, alts, tags, model):
    mode, var = tags[0]
    for alt, tag in zip(alts, tags):
        if z3.is_true(model.eval(alt, model_completion=True)):
            mode, var = tag
            break
    between = {"host": f"iterations of the par loop '{var}'",
               "blocks": "threads of different blocks",
               "threads": "threads of one block between the same barriers",
               "iterations": f"iterations of the unmapped par loop '{var}'"}[mode]
    element = ctx.eval_ints(model, i1)
    w = {"sizes": ctx.enc.size_values(model), "array": info.name, "element": element,
         "thread1": ctx.thread_witness(t1, a1, model),
         "thread2": ctx.thread_witness(t2, a2, model), "between": mode}
    data = ctx.enc.data_dependent
    if data:
        w["data_dependent"] = True
    el = f"{info.name}[{', '.join(str(x) for x in element)}]" if element else info.name
    msg = (f"data race on {info.mem.name} array '{info.name}': {between} both access {el}"
           f" ({a1.describe()} and {a2.describe()})")
    if data:
        msg += "; the indices depend on data read at run time, so this may not happen for " \
               "every input"
    hint = {"threads": "separate the accesses with sync(), or make each thread touch "
                       "its own elements",
            "blocks": "blocks cannot synchronise within a kernel: give each block its own "
                      "elements, use atomics, or split the kernel",
            "host": "make the iterations touch distinct elements, or use a seq loop",
            "iterations": "make the iterations touch distinct elements, or use a seq loop"}[
        mode]
    if mode == "blocks" and _one_cluster(ctx, a1, w):
        from .cluster_arrives import cluster_bars
        arrived = bool(cluster_bars(ctx, a1.kernel))
        between = "threads of two blocks of one cluster between the same sync_cluster()s" + \
            (" and not ordered by an arrive on every block's barrier" if arrived else "")
        msg = msg.replace("threads of different blocks", between)
        hint = ("order them with sync_cluster() between the write and the other block's "
                "access (docs/hopper.md (clusters)), or give each block its own elements")
        if arrived:
            hint += ("; or arrive with cluster=True after the write (the writing thread in "
                     "the range) and wait on the block's own barrier before the access")
    if a1.kind == "atomic" or a2.kind == "atomic":
        hint = "an atomic and a plain access to one element conflict; make both atomic " \
               "or separate them with sync()"
    elif mode == "threads" and a1.kind == a2.kind == "write" and a1.stmt is a2.stmt:
        # one statement, every thread writing the same element: a barrier cannot help
        tv = [l.iter for l in a1.loops if l.mapping == THREADS]
        cond = " and ".join(f"{v} == 0" for v in tv) or "t == 0"
        hint = (f"the threads of a block all write this element: if they write the same "
                f"value, guard the write with `if {cond}:` so that one thread does; "
                "otherwise give each thread its own element")
    return Diagnostic("race", msg, [a1.loc, a2.loc], w, hint,
                      [f"{a1.describe()}, thread 1", f"{a2.describe()}, thread 2"])
