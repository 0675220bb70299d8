"""Effects: every memory access of a proc, with the context it happens in.

API (reusable by the scheduling primitives)::

    from gpudsl.analysis.proc_effects import collect, Effects, KernelAccess, Loop, ArrayInfo

    eff = collect(proc_def)          # a ProcDef (or gpudsl.Proc: pass proc.ir)
    eff.accesses                      # list[KernelAccess], in program order
    eff.arrays                        # dict key -> ArrayInfo (params and allocations)
    eff.kernels                       # dict kernel uid -> KernelInfo
    eff.written                       # set of array keys written (plain, reduce or atomic)
    eff.syncs                         # list[SyncInfo]
    eff.window_checks, eff.call_preds # bounds obligations of windows and callee asserts

Calls are inlined first (:mod:`gpudsl.ir.inline`), so a window ``s[t:t+2]``
passed to a proc shows up as accesses of ``s`` itself.  The walk is the one effect
collector's (:class:`gpudsl.ir.stmt_effects.Walker`, which the legality checks use through
:func:`gpudsl.ir.stmt_effects.collect`); this module extends it with what check() needs
(storage keys per allocation, kernels, levels, barrier counts, mapping issues).

An :class:`KernelAccess` has: ``array`` (key of :class:`ArrayInfo`, unique per allocation),
``name`` (source name), ``mem``, ``kind`` (``"read"``, ``"write"`` or ``"atomic"``;
``x[i] += e`` is a ``"write"`` with ``reduce=True``), ``idx`` (IR index expressions in
terms of loop variables, sizes and index parameters), ``bounds`` (``(index, extent)``
pairs to prove in range), ``guards`` (IR boolean expressions: enclosing ``if``
conditions, negated for ``else``), ``loops`` (enclosing :class:`Loop` s, outermost
first), ``kernel`` (uid of the outermost ``@ BLOCKS`` loop, or None at host level),
``level`` (``"host"``, ``"block"`` or ``"thread"``), ``bcount`` (an IR integer
expression: how many barriers the block has passed when the access runs; see
:mod:`gpudsl.analysis.phases`), ``loc`` and ``stmt`` (the statement).

A :class:`Loop` has ``iter``, ``lo``, ``hi``, ``kind`` (``"seq"``/``"par"``),
``mapping`` (None/BLOCKS/THREADS), ``level`` (where the loop itself stands),
``uid`` (unique per loop statement), ``dim`` (0=x, 1=y, 2=z for mapped loops), ``loc``.
"""
from __future__ import annotations

from ..ir.inline import (PRED_CHECK, VALUE_CHECK, WINDOW_CHECK, Inliner, bind_value,
                         caller_names)
from ..ir.nodes import (Alloc, Assign, Atomic, Collective, Const, For, If, Point,
                        ProcDef, Read, Reduce, Stmt, Sync, SyncCluster, UnOp, Var)
from ..ir.types import BLOCKS, GLOBAL, THREADS, bool_, memory_with
from ..ir.stmt_effects import Walker, innermost_lane
from ..ir.nests import direct_nest, nest_dim
from ..ir.visitor import walk
from .effect_records import (ArrayInfo, CollectiveSite, Effects, Issue, KernelAccess,
                             KernelInfo, Loop, SyncInfo)
from .cluster_rules import cluster_rules
from .phases import PhaseCounter
from .quick import interval, loop_ranges


_CHECKS = (WINDOW_CHECK, PRED_CHECK, VALUE_CHECK)


class _Collector(Walker):
    """check()'s use of the one walk (:class:`gpudsl.ir.stmt_effects.Walker`).  The
    context is a dict (loops, guards, kernel, level, enclosing statements, and the
    barrier counter with the count at the block's start and at the statement).
    Scopes map a name to its :class:`ArrayInfo` key.  An assignment's index reads
    come before its right-hand side's, so race witnesses are found in that order."""

    rhs_first = False

    def __init__(self, p: ProcDef, mapping_only: bool = False):
        super().__init__()
        self.p = p
        self.mapping_only = mapping_only
        inl = Inliner(caller_names(p), obligations=True, bind=bind_value)
        self.extra = inl.bounds
        self.eff = Effects(p, inl.block(p.body), keep=inl.keep)
        self.uid = 0
        for q in p.params:
            if q.is_array:
                info = ArrayInfo(q.name, q.name, q.mem or GLOBAL, q.shape, q.ty, True,
                                 loc=q.loc)
                self.eff.arrays[q.name] = info
                self.scopes[0][q.name] = q.name
        self.scalar_params = {q.name for q in p.params if q.kind == "scalar"}
        self.scalar_names = {q.name for q in p.params if q.is_control}
        self._defs_memo: dict = {}
        self._pure_memo: dict = {}

    def next_uid(self) -> int:
        self.uid += 1
        return self.uid

    # ------------------------------------------------------------------ walk

    def run(self) -> Effects:
        st = dict(loops=(), guards=(), kernel=None, level="host", inside=(), counter=None,
                  tdepth_left=0, bdepth_left=0, bstart=None, bpos=None, path=None, tpath=None)
        self.block(self.eff.body, st)
        return self.eff

    def step(self, stmts, i, st):
        if self.mapping_only:
            return st  # barrier positions and index locals: no mapping rule uses them
        st = self._locals(stmts, i, st)
        if st.get("pure") and i > _first_impure(stmts, self._pure_memo):
            st = dict(st, pure=False)
        c = st["counter"]
        if c is None:
            return st
        new = dict(st, bpos=c.position(st["bstart"], stmts, i))
        if st["level"] == "block" and st["path"] is not None:
            new["path"] = st["path"] + ((stmts, i),)
        if st.get("tpath") is not None:
            new["tpath"] = st["tpath"] + ((stmts, i),)
        return new

    # ------------------------------------------------------------------ index locals

    def _locals(self, stmts, i, st):
        """Integer scalar locals that hold a control value: allocated in ``stmts``,
        assigned only by statements of ``stmts`` itself (from sizes, index parameters,
        loop variables and constants) and never written otherwise.  Reads of them
        after such an assignment, up to the next, are replaced by its value in indices
        and guards (``st["subst"]``), so ``j = t; out[j] = ...`` is ``out[t] = ...``
        and ``a = 0; a = t; glob[a] = t`` is ``glob[t] = t`` (GPUVerify's
        pointertests/test13).  Sound: the statements of one list run in order, each
        once per execution of the list, and no write of the local stands anywhere
        else (not inside a nested loop or ``if``, not through an atomic's old value),
        so between assignment ``j`` and ``j + 1`` the local holds exactly the value
        of assignment ``j``; a read before the first assignment is left alone (an
        unknown)."""
        defs = self._defs_memo.get(id(stmts))
        if defs is None or defs[0] is not stmts:
            allocated = {x.name for x in walk(tuple(stmts)) if isinstance(x, Alloc)} \
                if st.get("subst") or any(isinstance(x, Alloc) for x in stmts) else set()
            defs = self._defs_memo[id(stmts)] = (
                stmts, _index_locals(stmts, self.scalar_names), allocated)
        inherited = st.get("subst") or {}
        sub = {k: v for k, v in inherited.items() if k not in defs[2]}
        for k, ds in defs[1].items():
            d = next((d for d in reversed(ds) if i > d[0]), None)
            if d is not None:   # the last assignment before statement i is in force
                at, value, rhs, lo, hi = d
                r = interval(rhs, loop_ranges(st["loops"]))
                sub[k] = rhs if r is not None and lo <= r[0] and r[1] < hi else value
        if sub == inherited:
            return st
        return dict(st, subst=sub)

    def _subst(self, e, st):
        sub = st.get("subst")
        if not sub or e is None:
            return e
        return _replace_reads(e, sub)

    def exprs(self, es, s, st):
        super().exprs(es, s, st)
        for e in es:
            if e is None:
                continue
            for n in walk(e):
                if isinstance(n, Collective):
                    self.eff.collectives.append(CollectiveSite(
                        self._subst(n, st), st["loops"], st["guards"], st["kernel"],
                        st["level"], st["inside"], n.loc or s.loc, s))

    def issue(self, kind, msg, locs, hint=""):
        self.eff.issues.append(Issue(kind, msg, [l for l in locs if l is not None], hint))

    def stmt(self, s: Stmt, st):
        if isinstance(s, Assign) and s.name in _CHECKS:
            if s.name == WINDOW_CHECK:
                self.eff.window_checks.append((self.ctx_access(s, st), s.rhs))
                self.exprs([i.pt if isinstance(i, Point) else i for i in s.rhs.idx], s, st)
            elif s.name == PRED_CHECK:
                self.eff.call_preds.append((self.ctx_access(s, st), s.rhs))
            else:
                self.exprs([s.rhs], s, st)  # a scalar argument, read once at the call
            return
        super().stmt(s, st)

    def assign(self, s, st):
        level = st["level"]
        if level == "block":
            self.issue("mapping", "a memory write at block level (inside @ BLOCKS, outside "
                       "any @ THREADS loop) would run once per thread", [s.loc],
                       "move it into a `par(...) @ THREADS` loop")
        elif level == "host" and st["kernel"] is None:
            self.host_effect(s)
        super().assign(s, st)

    def write(self, s, st):
        kind = "atomic" if isinstance(s, Atomic) else "write"
        key = self.lookup(s.name)
        if key is not None and not self.eff.arrays[key].mem.writable:
            info = self.eff.arrays[key]
            self.issue("mapping", f"'{info.name}' is in CONST memory (read-only) but this "
                       "statement writes it", [s.loc, info.loc],
                       f"declare '{info.name}' in GLOBAL memory, or write elsewhere")
        self.access(s.name, s.idx, kind, s, st, reduce=isinstance(s, Reduce), node=s)

    def write_result(self, s, st):
        # the old value of an atomic: a plain write of the local scalar, by each
        # thread (per-thread data; REGISTER reads at block level are divergence)
        self.access(s.result, (), "write", s, st)

    def enter_branch(self, s: If, positive: bool, st):
        cond = self._subst(s.cond, st)
        g = cond if positive else UnOp("not", cond, bool_)
        run = st.get("run") if st.get("pure") and st.get("run") is not None \
            else len(st["guards"])
        return dict(st, guards=st["guards"] + (g,), inside=st["inside"] + (s,),
                    bstart=st.get("bpos"), run=run, pure=True)

    def call(self, s, st):  # pragma: no cover - inlined before
        raise AssertionError("calls are inlined")

    def host_effect(self, s):
        if not getattr(self, "_host_warned", False):
            self._host_warned = True
            self.issue("warning", "code at host level (outside any @ BLOCKS loop) reads or "
                       "writes memory: it runs as a single-thread kernel", [s.loc],
                       "map its loops with parallelize_loop(..., BLOCKS/THREADS)")

    def ctx_access(self, s, st) -> KernelAccess:
        return KernelAccess("", "", GLOBAL, "read", (), [], st["guards"], st["loops"], st["kernel"],
                      st["level"], st.get("bpos"), s.loc, s)

    def sync(self, s: Sync, st):
        at = self.ctx_access(s, st)
        at.path = st.get("path")
        self.eff.syncs.append(SyncInfo(s.loc, st["loops"], st["guards"], st["kernel"],
                                       st["level"], list(st["inside"]), s, at))
        what = "sync_cluster()" if isinstance(s, SyncCluster) else \
            "sync()" if isinstance(s, Sync) else f"{type(s).__name__.lower()}()"
        if isinstance(s, SyncCluster) and st["kernel"] is not None and \
                not any(l.cluster for l in st["loops"]):
            self.issue("mapping", "sync_cluster() outside any @ CLUSTERS loop", [s.loc],
                       "sync_cluster() meets the blocks of one cluster: put it inside the "
                       "`par(0, c) @ CLUSTERS` loop, at block level")
        if st["kernel"] is None:
            self.issue("mapping", f"{what} outside any @ BLOCKS loop", [s.loc],
                       f"{what} orders the threads of one block; put it inside the block loop")
        elif st["level"] != "block":
            self.issue("mapping", f"{what} inside a @ THREADS or unmapped par loop: it must "
                       "stand at block level", [s.loc],
                       f"end the thread loop, {what}, and open a new thread loop")

    def setmaxnreg(self, s, st):
        """``setmaxnreg(n, lo, hi)`` (docs/hopper.md): where it stands, for
        :mod:`.obligations.registers`; at block level only, like a barrier."""
        at = self.ctx_access(s, st)
        at.path = st.get("path")
        self.eff.setmaxnregs.append(SyncInfo(s.loc, st["loops"], st["guards"], st["kernel"],
                                             st["level"], list(st["inside"]), s, at))
        if st["kernel"] is None or st["level"] != "block":
            self.issue("mapping", "setmaxnreg() stands at block level: it sets the registers "
                       "of whole warpgroups", [s.loc], "put it inside the BLOCKS loop, outside "
                       "the THREADS loops")

    def elem_type(self, name):
        key = self.lookup(name)
        return self.eff.arrays[key].ty if key is not None else super().elem_type(name)

    def async_copy(self, s, st):
        """An async copy (docs/async_copies.md): its element accesses, and the rules of where it
        stands and what it copies (mapping)."""
        if st["level"] != "thread":
            self.issue("mapping", "async_copy outside any @ THREADS loop: each copy is "
                       "started by one thread", [s.loc], "put it inside a THREADS loop")
        for name, end in ((s.dst, "async_destination"), (s.src, "async_source")):
            key = self.lookup(name)
            if key is not None and not getattr(self.eff.arrays[key].mem, end):
                info = self.eff.arrays[key]
                self.issue("mapping", f"async_copy copies from {memory_with(async_source=True)} "
                           f"to {memory_with(async_destination=True)} memory; "
                           f"'{name}' is in {info.mem.name}", [s.loc, info.loc],
                           f"keep '{name}' in {memory_with(**{end: True}).name} memory")
        super().async_copy(s, st)

    def async_sync(self, s, st):
        at = self.ctx_access(s, st)
        at.path, at.tpath = st.get("path"), st.get("tpath")
        self.eff.asyncs.append(SyncInfo(s.loc, st["loops"], st["guards"], st["kernel"],
                                        st["level"], list(st["inside"]), s, at))
        if st["kernel"] is None:
            what = "wgmmas" if "Wgmma" in type(s).__name__ else "async copies"
            self.issue("mapping", f"{type(s).__name__} outside any @ BLOCKS loop: {what} "
                       "belong to the threads of a kernel", [s.loc],
                       "put it inside the block loop")

    def wgmma_lane(self, st):
        return innermost_lane(st["loops"])

    def wgmma(self, s, st):
        """A wgmma (docs/hopper.md): its site for the warpgroup obligations, the rules of
        where it stands and what it reads (mapping), and its meaning's accesses."""
        if st["level"] != "thread":
            self.issue("mapping", "wgmma outside any @ THREADS loop: the 128 threads of a "
                       "warpgroup issue it together", [s.loc],
                       "put it inside a `par(...) @ THREADS` loop of 128 threads")
        for w, scope in ((s.acc, "thread"), (s.a, "block"), (s.b, "block")):
            key = self.lookup(w.name)
            if key is not None and self.eff.arrays[key].mem.scope != scope:
                mem = memory_with(scope=scope)
                info = self.eff.arrays[key]
                self.issue("mapping", f"wgmma takes its accumulator in REGISTER and its "
                           f"operands in SHARED memory; '{w.name}' is in {info.mem.name}",
                           [s.loc, info.loc], f"keep '{w.name}' in {mem.name} memory")
        self._wgmma_layout(s)
        self.eff.wgmmas.append(CollectiveSite(s, st["loops"], st["guards"], st["kernel"],
                                              st["level"], st["inside"], s.loc, s))
        super().wgmma(s, st)

    def tma_load(self, s, st):
        """A bulk tensor load (docs/hopper.md): started by one thread of a kernel, from a
        GLOBAL parameter to SHARED memory (mapping); its meaning's accesses."""
        self._bulk_rules("tma_load", s, st, s.src, s.dst)
        super().tma_load(s, st)

    def tma_store(self, s, st):
        """A bulk tensor store: one thread, SHARED to a GLOBAL array parameter (mapping);
        its meaning's accesses."""
        self._bulk_rules("tma_store", s, st, s.dst, s.src)
        super().tma_store(s, st)

    def _bulk_rules(self, what: str, s, st, glob, tile) -> None:
        """Where a bulk tensor copy stands and what it copies: in a thread loop of a kernel,
        between a whole GLOBAL array parameter (``glob``: the tensor map is made from the
        argument at launch) and a SHARED tile; a swizzled tile's box rows fit its swizzle
        (:func:`gpudsl.ir.tma_meaning.swizzle_problem`; the alignment is proved in
        :mod:`.obligations.tma`)."""
        if st["kernel"] is None or st["level"] != "thread":
            self.issue("mapping", f"{what} outside any @ THREADS loop of a kernel: each copy "
                       "is started by one thread", [s.loc], "put it inside a THREADS loop")
        for w, end in ((tile, "async_destination"), (glob, "async_source")):
            key = self.lookup(w.name)
            if key is not None and not getattr(self.eff.arrays[key].mem, end):
                info = self.eff.arrays[key]
                self.issue("mapping", f"{what} copies between a {memory_with(async_source=True)} "
                           f"box and a {memory_with(async_destination=True)} tile; '{w.name}' "
                           f"is in {info.mem.name}", [s.loc, info.loc],
                           f"keep '{w.name}' in {memory_with(**{end: True})} memory")
        key = self.lookup(tile.name)
        if key is not None and self.eff.arrays[key].swizzle:
            from ..ir.tma_meaning import swizzle_problem
            why = swizzle_problem(s, self.eff.arrays[key].swizzle)
            if why is not None:
                self.issue("mapping", f"the bulk tensor copy into or out of the swizzled tile "
                           f"'{tile.name}' cannot use the hardware's swizzle mode: {why}",
                           [s.loc], "copy boxes whose innermost range is the tile's whole "
                           "row of exactly the swizzle's width")
        key = self.lookup(glob.name)
        if (key is not None and not self.eff.arrays[key].is_param) or any(
                q.name == glob.name and q.kind == "window" for q in self.eff.proc.params):
            self.issue("mapping", f"the GLOBAL array '{glob.name}' of {what} is not a whole "
                       "array parameter: the tensor map the hardware uses is made from the "
                       "argument's address, dimensions and strides at launch", [s.loc],
                       "pass the array itself as a parameter of the kernel's proc")

    def _wgmma_layout(self, s):
        """The operands are windows in a layout the hardware reads: the canonical
        ``[2, rows, 8]`` of a plain tile or ``[rows, 16]`` of a tile swizzled with rows of
        its width (a primitive that reshapes an array may break it)."""
        from ..ir.wgmma_meaning import M, core_of, extents, k_of, mn_problem, operand_problem

        if extents(s.acc) != [s.n // 2]:
            self.issue("mapping", f"the accumulator of wgmma is not one range of {s.n // 2} "
                       "elements", [s.loc])
        for w, rows in ((s.a, M), (s.b, s.n)):
            key = self.lookup(w.name)
            if key is None:
                continue
            info = self.eff.arrays[key]
            shape = info.shape
            last = shape[-1].val if shape and isinstance(shape[-1], Const) else None
            if w is s.b and s.b_major == "mn":
                why = mn_problem(w, len(shape), last, max(1, w.ty.bits // 8), info.swizzle,
                                 rows)
                if why is not None:
                    self.issue("mapping", f"the MN-major B operand '{w.name}' of wgmma is not "
                               f"a window in a layout the hardware reads: {why}", [s.loc])
                continue
            why = operand_problem(w, len(shape), last, max(1, w.ty.bits // 8),
                                  info.swizzle, rows)
            if why is not None:
                nb = max(1, w.ty.bits // 8)
                self.issue("mapping", f"the operand '{w.name}' of wgmma is not a [2, {rows}, "
                           f"{core_of(nb)}] or [{rows}, {k_of(nb)}] window in a layout the "
                           f"hardware reads: {why}", [s.loc])

    def alloc(self, s: Alloc, st):
        super().alloc(s, st)
        self.exprs(list(s.shape), s, st)

    def declare(self, s: Alloc, st):
        key = s.name if s.name not in self.eff.arrays else f"{s.name}#{self.next_uid()}"
        info = ArrayInfo(key, s.name, s.mem, s.shape, s.ty, False, st["level"], st["loops"],
                         st["kernel"], s.loc, swizzle=s.swizzle)
        self.eff.arrays[key] = info
        if s.mem.scope == "block":   # one copy per block
            if st["level"] not in s.mem.allocated_at:
                self.issue("mapping", "a SHARED array must be allocated at block level (inside "
                           "@ BLOCKS, outside @ THREADS loops)", [s.loc],
                           "move the allocation to just inside the block loop")
            if st["kernel"] is not None:
                self.eff.kernels[st["kernel"]].shared.append(info)
        if s.mem.scope == "grid" and st["kernel"] is not None:   # codegen cannot either
            self.issue("mapping", f"the {s.mem.name} array '{s.name}' is allocated inside a "
                       "kernel (each block or thread would need its own copy in global "
                       "memory)", [s.loc], f"allocate it at host level, or `{s.name}: "
                       f"{s.ty.name} @ REGISTER` for one per thread")
        if s.mem.per_thread and st["level"] == "block" and st["kernel"] is not None:
            self.eff.kernels[st["kernel"]].block_registers.append(info)
        if s.mem.per_thread and st["kernel"] is None:
            self.issue("mapping", "a REGISTER allocation outside any @ BLOCKS loop", [s.loc],
                       "allocate registers inside the kernel")
        return key

    def enter_loop(self, s: For, st):
        level, kernel = st["level"], st["kernel"]
        uid = self.next_uid()
        new = dict(st)
        dim = -1
        if s.mapping == BLOCKS:
            if kernel is None and level == "host":
                if any(l.is_par for l in st["loops"]):
                    self.issue("mapping", "a @ BLOCKS loop inside a par loop", [s.loc])
                depth = len(direct_nest(s))
                if depth > 3:
                    self.issue("mapping", f"{depth} nested @ BLOCKS loops; the grid has at "
                               "most 3 dimensions", [s.loc], "fuse block loops")
                kernel = uid
                self.eff.kernels[uid] = KernelInfo(uid, s, loc=s.loc,
                                                   host_loops=tuple(st["loops"]))
                new.update(kernel=uid, bdepth_left=depth - 1, counter=PhaseCounter(),
                           bpos=Const(0), path=(), tpath=())
                dim = depth - 1
                new["level"] = "block"
            elif st["bdepth_left"] > 0 and st["loops"] and st["loops"][-1].mapping == BLOCKS:
                dim = st["bdepth_left"] - 1
                new["bdepth_left"] = st["bdepth_left"] - 1
            else:
                self.issue("mapping", "a @ BLOCKS loop must be at host level or directly "
                           "nested in another @ BLOCKS loop", [s.loc])
            if kernel is not None:
                new["level"] = "block" if level != "thread" else "thread"
        elif s.mapping == THREADS:
            if kernel is None:
                self.issue("mapping", "a @ THREADS loop outside any @ BLOCKS loop", [s.loc],
                           "THREADS loops map to threads of a block: nest them inside a "
                           "`par(...) @ BLOCKS` loop")
            if level == "block":
                depth = len(direct_nest(s))
                if depth > 3:
                    self.issue("mapping", f"{depth} nested @ THREADS loops; a block has at "
                               "most 3 dimensions", [s.loc])
                dim = nest_dim(depth - 1)
                new["tdepth_left"] = depth - 1
            elif level == "thread" and st["tdepth_left"] > 0 and st["loops"] and \
                    st["loops"][-1].mapping == THREADS:
                dim = nest_dim(st["tdepth_left"] - 1)
                new["tdepth_left"] = st["tdepth_left"] - 1
            elif kernel is not None:
                self.issue("mapping", "a @ THREADS loop must stand at block level or directly "
                           "nested in another @ THREADS loop", [s.loc])
                dim = 0
            for e in (s.lo, s.hi):
                bad = [n.name for n in walk(e) if isinstance(n, Var) and
                       any(l.iter == n.name for l in st["loops"])]
                if bad or any(isinstance(n, Read) for n in walk(e)):
                    self.issue("mapping", "the bounds of a @ THREADS loop must be fixed once "
                               "sizes are known (they set the block size)", [s.loc],
                               "use a constant or size bound and guard with an if")
                    break
            if kernel is not None:
                new["level"] = "thread"
                ki = self.eff.kernels[kernel]
                ki.thread_extents.setdefault(max(dim, 0), []).append(s.hi)
        elif s.kind == "par" and level == "block":
            # an unmapped par loop at block level: every thread runs it (see access())
            new["level"] = "thread-ish"
        if s.cluster:
            cluster_rules(self, s, st)
        loopv = Loop(s.iter, s.lo, s.hi, s.kind, s.mapping, level, uid, dim, s.loc, s.cluster)
        if s.mapping == BLOCKS and kernel is not None:
            ki = self.eff.kernels[kernel]
            ki.block_loops = ki.block_loops + (loopv,)
        if s.mapping == THREADS and kernel is not None:
            self.eff.kernels[kernel].thread_loops.append(loopv)
        if new.get("subst"):  # a loop variable shadowing a name of a local's value
            new["subst"] = {k: v for k, v in new["subst"].items()
                            if s.iter not in _var_names(v)}
        new["loops"] = st["loops"] + (loopv,)
        new["inside"] = st["inside"] + (s,)
        new["run"], new["pure"] = None, False   # other iterations come between
        counter = new.get("counter")
        if counter is not None:
            start = new.get("bpos") if new.get("bpos") is not None else Const(0)
            new["bstart"] = counter.loop_body_start(start, s) \
                if level == "block" and s.kind == "seq" else start
        return new

    # ------------------------------------------------------------------ accesses

    def read(self, n: Read, s, st):
        if not (not n.idx and n.name in self.scalar_params and self.lookup(n.name) is None):
            self.access(n.name, n.idx, "read", s, st, node=n)

    def access(self, name, idx, kind, s, st, reduce=False, node=None):
        key = self.lookup(name)
        if key is None:
            return  # scalar parameter or unknown
        info = self.eff.arrays[key]
        level = st["level"]
        if level == "thread-ish":
            if kind != "read":
                self.issue("mapping", "a memory write inside an unmapped par loop at block "
                           "level", [s.loc], "map the loop to THREADS")
            level = "block"
        if self.mapping_only:
            return
        shown = None
        if st.get("subst"):
            shown, idx = tuple(idx), tuple(self._subst(i, st) for i in idx)
        bounds = [(i, e) for i, e in zip(idx, info.shape)]
        if node is not None and id(node) in self.extra:
            bounds = bounds + list(self.extra[id(node)])
        if len(idx) != len(info.shape):
            bounds = None  # rank mismatch cannot happen after parsing
        a = KernelAccess(key, info.name, info.mem, kind, tuple(idx), bounds or [], st["guards"],
                   st["loops"], st["kernel"], level, st.get("bpos"),
                   getattr(node, "loc", None) or s.loc, s, reduce, self.next_uid(),
                   st.get("path"), shown, st.get("tpath"), st.get("run"),
                   bool(st.get("pure")) and st.get("run") is not None)
        if a.loc is None or (isinstance(node, Read) and s.loc is not None):
            a.loc = s.loc
        self.eff.accesses.append(a)


def _first_impure(stmts, memo: dict) -> int:
    """The index of the first statement of ``stmts`` that may write memory (an array,
    a local) or synchronize, ``len(stmts)`` when none does (a read-only statement:
    ``pass``, or a loop or ``if`` of read-only statements).

    Guard reads that only such statements separate form one *region*
    (``KernelAccess.same_from``/``same_access``): a thread's reads of one location in
    a region see one value.  Sound by the first-race argument: in an execution where
    two such reads differ, some other thread (or block, or an atomic) wrote the
    location between them, and that write races with the first read (same barrier
    interval, nothing orders them, not both atomic); take the earliest-completed
    race or out-of-bounds access of the execution: every region read before it saw
    one value, so the query about it (whose reads all come before it) is satisfied
    by the execution, and check() reports it."""
    got = memo.get(id(stmts))
    if got is not None and got[0] is stmts:
        return got[1]
    n = next((k for k, x in enumerate(stmts) if not _read_only(x)), len(stmts))
    memo[id(stmts)] = (stmts, n)
    return n


def _read_only(s) -> bool:
    from ..ir.nodes import Pass
    if isinstance(s, Pass):
        return True
    if isinstance(s, If):
        return all(_read_only(x) for x in s.body) and all(_read_only(x) for x in s.orelse)
    if isinstance(s, For):
        return all(_read_only(x) for x in s.body)
    return False


def _var_names(e) -> set:
    return {n.name for n in walk(e) if isinstance(n, Var)}


def _index_locals(stmts, params: set) -> dict:
    """name -> [(index of an assignment, the value read after it, ...)] in program
    order, for the integer scalar locals of ``stmts`` that hold a control value (see
    ``_locals``)."""
    if not any(isinstance(s, Alloc) and not s.shape for s in stmts):
        return {}
    from ..ir.nodes import Builtin, BinOp as _Bin
    from ..ir.types import INDEX

    out = {}
    for a, s in enumerate(stmts):
        if not (isinstance(s, Alloc) and not s.shape and s.ty.is_integer):
            continue
        name = s.name
        rest = stmts[a + 1:]
        # every write of the local: assignments, reductions, and the old value an
        # atomic returns into it (``old = atomic_add(...)`` is data, never control)
        writes = [x for x in walk(tuple(rest))
                  if isinstance(x, (Assign, Reduce, Atomic)) and x.name == name
                  or isinstance(x, Atomic) and getattr(x, "result", None) == name]
        allocs = [x for x in walk(tuple(rest)) if isinstance(x, Alloc) and x.name == name]
        if not writes or allocs:
            continue
        # the value in the local's type; out of its range, the local's own value
        bits = {"i8": 7, "i16": 15, "i32": 31, "i64": 63, "u8": 8, "u16": 16,
                "u32": 32, "u64": 64}.get(getattr(s.ty, "name", ""), 31)
        lo = 0 if getattr(s.ty, "name", "").startswith("u") else -(2 ** bits)
        hi = 2 ** bits
        defs = []
        for w in writes:
            at = next((k for k in range(a + 1, len(stmts)) if stmts[k] is w), None)
            if at is None or not isinstance(w, Assign) or w.idx:
                break   # a write nested in a loop or if, or not a plain assignment
            rhs = w.rhs
            if not rhs.ty.is_integer or any(isinstance(n, Read) for n in walk(rhs)):
                break
            fits = _Bin("and", _Bin(">=", rhs, Const(lo), bool_),
                        _Bin("<", rhs, Const(hi), bool_), bool_)
            defs.append((at, Builtin("select", (fits, rhs, Read(name, (), s.ty)), INDEX),
                         rhs, lo, hi))
        else:
            out[name] = sorted(defs, key=lambda d: d[0])
    return out


def _replace_reads(e, sub: dict):
    from ..ir.visitor import ExprMap

    def fn(x):
        if isinstance(x, Read) and not x.idx and x.name in sub:
            return sub[x.name]
        return x

    return ExprMap(fn).visit(e)


def collect(p, mapping_only: bool = False) -> Effects:
    """The effects of a proc (``ProcDef`` or ``gpudsl.Proc``).  ``mapping_only``: only
    the structural issues (``eff.issues``) are wanted; no accesses are recorded and no
    barrier positions computed (the scheduling primitives' mapping-rule checks)."""
    if hasattr(p, "ir"):
        p = p.ir
    eff = _Collector(p, mapping_only).run()
    for ki in eff.kernels.values():
        for info in ki.block_registers:
            info.thread_dims = max([l.dim + 1 for l in ki.thread_loops] or [0])
    return eff


def loops_prefix(a: tuple, b: tuple) -> tuple:
    """The common outer loops of two loop contexts (by identity)."""
    out = []
    for x, y in zip(a, b):
        if x.uid != y.uid:
            break
        out.append(x)
    return tuple(out)
