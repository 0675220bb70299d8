"""Statements and whole procs → the source of one Python function.

The function is ``_run(_ctx, <params>)``: sizes and index parameters as ints,
scalars as values of their type, arrays as tuples ``(buffer, offset, strides)``
(plus the race hook in race mode).  ``_ctx`` is the race detector's
:class:`RaceContext` (None when not watching).  Every generated line remembers
the source location of the statement it comes from, so that a Python fault
inside (a division by zero, say) is reported at the user's line.
"""
from __future__ import annotations

from . import async_copies, clusters, sync_order
from ..ir.async_copy_meaning import uses_async
from ..ir.nodes import (Alloc, Arrive, AsyncCopy, Wait, Assign, Atomic, Call, For, If, Pass,
                        Point, ProcDef, Reduce, Sync, SyncCluster, Var, TmaLoad, TmaStore,
                        Wgmma, WindowArg)
from ..ir.wgmma_meaning import uses_wgmma
from ..ir.tma_meaning import uses_tma
from ..ir.printer import print_expr
from ..ir.types import BARRIER, BLOCKS, INDEX, THREADS
from ..ir.visitor import substitute, walk
from .warp_execution import Site, holds_collective
from .emit_expr import ATOMIC, WRITE, ArrInfo, ExprEmitter
from ..ir.nests import block_shape
from .runtime import fill_value, wrap_expr
from ..errors import InterpError
# the async statements' methods; _async_outside is also a name of the generated code's
# globals (compiler.py imports it from here)
from .emit_async import AsyncStmtEmitter, _async_outside, _stmt_text  # noqa: F401

_TMPVAR = "_gpudsl_c"  # prefix of control temporaries (emitted as v__gpudsl_cN)


class ProcEmitter(AsyncStmtEmitter, ExprEmitter):
    def __init__(self, proc: ProcDef, race: bool, toplevel: bool, compile_callee,
                 asy: bool = False):
        super().__init__(race)
        # async copies (:mod:`.async_copies`): the arrays to watch (None: all)
        self.asy = asy or (toplevel and (uses_async(proc) or uses_wgmma(proc) or uses_tma(proc)))
        self.watch = None if not toplevel else {
            n for s in walk(proc.body) if isinstance(s, AsyncCopy) for n in (s.dst, s.src)} | {
            w.name for s in walk(proc.body) if isinstance(s, Wgmma) for w in (s.acc, s.a, s.b)} | {
            w.name for s in walk(proc.body) if isinstance(s, (TmaLoad, TmaStore))
            for w in (s.dst, s.src)}
        self.tma = None  # while a tma_load's meaning is emitted: the list of its elements
        self.wg = None  # while a wgmma's meaning is emitted: (notes, roles, node, text)
        self.tnames: list = []  # the enclosing @ THREADS loop variables
        self.proc = proc
        self.toplevel = toplevel
        self.compile_callee = compile_callee  # (ProcDef) -> function
        self.lines: list[str] = []
        self.locs: list = []
        self.depth = 1
        self.loc = proc.loc
        self.known: set[str] = set()  # control names in scope
        self.in_warp = not toplevel and holds_collective(proc.body)  # a generator
        self.block_bodies: list = []  # bodies of the enclosing @ BLOCKS loops
        self.tdepth = 0  # enclosing @ THREADS loops

    # ------------------------------------------------------------ output

    def line(self, text: str):
        self.lines.append("    " * self.depth + text)
        self.locs.append(self.loc)

    def source(self) -> str:
        return "\n".join(self.lines) + "\n"

    # ------------------------------------------------------------ proc

    def emit_proc(self):
        p = self.proc
        args = ["_ctx"]
        for prm in p.params:
            if prm.is_control:
                args.append(f"v_{prm.name}")
                self.known.add(prm.name)
            elif prm.kind == "scalar":
                args.append(f"sc_{prm.name}")
                self._no_numpy(prm.ty, prm.loc)
                self.scalars[prm.name] = prm.ty
            else:
                args.append(f"A_{prm.name}")
        self.lines.append(f"def _run({', '.join(args)}):")
        self.locs.append(p.loc)
        if self.asy:
            fn = async_copies.begin if self.toplevel else async_copies.current
            self.line(f"_asy = {self.const(fn, '_F')}()")
        for prm in p.params:
            if not prm.is_array:
                continue
            self.loc = prm.loc
            n = prm.name
            nd = len(prm.shape)
            self._no_numpy(prm.ty, prm.loc)
            info = ArrInfo(n, nd, prm.ty, prm.mem, contig=self.toplevel)
            self.arrays[n] = info
            tr = f", tr_{n}" if self.race else ""
            strides = ", ".join(f"s{k}_{n}" for k in range(nd))
            if self.toplevel:
                self.line(f"a_{n} = A_{n}[0]" + (f"; tr_{n} = A_{n}[3]" if self.race else ""))
            else:
                self.line(f"a_{n}, o_{n}, ({strides}{',' if nd == 1 else ''}){tr} = A_{n}")
            for k, d in enumerate(prm.shape):
                self.line(f"d{k}_{n} = {self.ex(d)}")
            if self.toplevel:
                self._contig_strides(info)
        self.loc = p.loc
        self.block(p.body)
        self.line("return None")

    def _contig_strides(self, info: ArrInfo):
        n = info.name
        for k in range(info.ndim - 1):
            self.line(f"s{k}_{n} = " + " * ".join(info.dim(j) for j in range(k + 1, info.ndim)))

    # ------------------------------------------------------------ statements

    def block(self, body):
        if not body:
            self.line("pass")
        for s in body:
            self.loc = s.loc
            getattr(self, "_" + type(s).__name__)(s)

    def _Pass(self, s: Pass):
        self.line("pass")

    def _Sync(self, s: Sync):
        if s.ranged and self.race:
            acc = self.access(s.loc, _stmt_text(s), 'sync', '')
            self.line(f"_ctx.sync_range({self.ex(s.lo)}, {self.ex(s.hi)}, {acc})")
        elif self.race:
            self.line(f"_ctx.sync({self.access(s.loc, 'sync()', 'sync', '')})")
        else:
            self.line("pass  # sync()")

    def _SetMaxNReg(self, s):
        """Registers only (docs/hopper.md): no meaning, no ordering."""
        self.line(f"pass  # setmaxnreg({s.regs}, {s.lo.val}, {s.hi.val})")

    def _Arrive(self, s: Arrive):
        self._split(s, "arrive")

    def _Wait(self, s: Wait):
        self._split(s, "wait")

    def _split(self, s, fn: str):
        """``arrive`` / ``wait`` on a split barrier (:mod:`.sync_order`)."""
        acc = self.access(s.loc, _stmt_text(s), fn, s.name)
        if clusters.emit_cluster_split(self, s, acc, fn):
            return
        f = self.const(getattr(sync_order, fn), "_F")
        bar = f"b_{s.name}"
        if s.index is not None:
            el = self.const(sync_order.ring_element, "_F")
            bar = f"{el}(b_{s.name}, {self.ex(s.index)}, {acc})"
        count = f", {s.count}" if isinstance(s, Arrive) and s.count != 1 else ""
        self.line(f"{f}(_ctx, {bar}, {self.ex(s.lo)}, {self.ex(s.hi)}, {acc}{count})")

    def _If(self, s: If):
        self.line(f"if {self.ex(s.cond)}:")
        self.depth += 1
        self.block(s.body)
        self.depth -= 1
        if s.orelse:
            self.loc = s.loc
            self.line("else:")
            self.depth += 1
            self.block(s.orelse)
            self.depth -= 1

    def _For(self, s: For):
        if s.mapping == THREADS and holds_collective(s.body):
            return self._warp_loop(s)
        if s.cluster and clusters.holds_meeting(s.body):
            return self._cluster_loop(s)
        if s.mapping == BLOCKS:
            self.block_bodies.append(s.body)
        self.tdepth += s.mapping == THREADS
        try:
            self._loop(s)
        finally:
            self.tdepth -= s.mapping == THREADS
            if s.mapping == BLOCKS:
                self.block_bodies.pop()

    def _warp_loop(self, s: For):
        """A thread loop holding a collective: its body becomes a generator of one
        lane, run warp-synchronously by :func:`.warps.warp_loop`."""
        tl = "None"
        if self.race:
            tl = self.fresh("_tl")
            self.line(f"{tl} = _ctx.thread_loop({s.iter!r})")
        fn = self.fresh("_lane")
        outer = set(self.scalars)
        self.line(f"def {fn}(v_{s.iter}):")
        self.depth += 1
        self.nonlocal_scalars(s.body, outer)
        saved, self.in_warp = self.in_warp, True
        self.known.add(s.iter)
        self.tdepth += 1
        self.tnames.append(s.iter)
        self.block(s.body)
        self.tnames.pop()
        self.tdepth -= 1
        self.known.discard(s.iter)
        self.in_warp = saved
        self.line("return")
        self.line("yield")
        self.depth -= 1
        self.loc = s.loc
        self.line(f"_warp_loop(_ctx, {tl}, {self.ex(s.lo)}, {self.ex(s.hi)}, {fn}, "
                  f"{self._block_x()})")
        if self.race:
            self.line(f"_ctx.thread_done({tl})")

    def nonlocal_scalars(self, body, outer: set) -> None:
        """The ``nonlocal`` line of a nested function (a thread's or a block's) that
        assigns scalars of the enclosing code (``outer``) in ``body``."""
        assigned = sorted({n.name for n in walk(body) if isinstance(n, (Assign, Reduce))}
                          | {n.result for n in walk(body) if isinstance(n, Atomic)
                             and n.result is not None})
        shared = [f"sc_{n}" for n in assigned if n in outer and n not in
                  {a.name for a in walk(body) if isinstance(a, Alloc)}]
        if shared:
            self.line(f"nonlocal {', '.join(shared)}")

    def _cluster_loop(self, s: For):
        clusters.emit_cluster_loop(self, s)

    def _SyncCluster(self, s: SyncCluster):
        clusters.emit_sync_cluster(self, s)

    def _block_x(self) -> str:
        """The block's x extent where the warp loop is nested in a thread loop (a
        warp must lie in one row), else None."""
        if not self.tdepth or not self.block_bodies:
            return "None"
        dims, _ = block_shape(self.block_bodies[-1], self.known)
        if not dims[0]:
            return "-1"
        xs = [self.ex(x) for x in dims[0]]
        return xs[0] if len(xs) == 1 else f"max({', '.join(xs)})"

    def _loop(self, s: For):
        v = f"v_{s.iter}"
        tl = None
        if self.race and s.mapping == BLOCKS:
            self.line("_ctx.kernel_enter()")
        elif self.race and s.mapping == THREADS:
            tl = self.fresh("_tl")
            self.line(f"{tl} = _ctx.thread_loop({s.iter!r})")
        self.line(f"for {v} in range({self.ex(s.lo)}, {self.ex(s.hi)}):")
        self.depth += 1
        self.known.add(s.iter)
        enter = exit_ = None
        if self.race and s.mapping == BLOCKS:
            dims, kd = block_shape(s.body, self.known)
            ds = ", ".join(
                "1" if not d else self.ex(d[0]) if len(d) == 1 else
                f"max({', '.join(self.ex(x) for x in d)})" for d in dims)
            enter = f"_ctx.block_enter({s.iter!r}, {v}, ({ds}), {kd})"
            exit_ = "_ctx.block_exit()"
        elif self.race and s.mapping == THREADS:
            enter = f"_ctx.thread_set({tl}, {v})"
        if enter:
            self.line(enter)
        if self.asy and s.mapping == BLOCKS:
            self.line("_asy.block()")
        if s.mapping == THREADS:
            self.tnames.append(s.iter)
        self.block(s.body)
        if s.mapping == THREADS:
            self.tnames.pop()
        if self.asy and s.mapping == BLOCKS:
            self.loc = s.loc
            self.line("_asy.block_end()")
        if exit_:
            self.loc = s.loc
            self.line(exit_)
        self.known.discard(s.iter)
        self.depth -= 1
        if self.race and s.mapping == BLOCKS:
            self.loc = s.loc
            self.line("_ctx.kernel_exit()")
        elif tl is not None:
            self.loc = s.loc
            self.line(f"_ctx.thread_done({tl})")
        if s.mapping == THREADS and self.tdepth == 1 and \
                any(isinstance(n, Wgmma) for n in walk(s.body)):
            self.loc = s.loc
            self.line("_asy.wg_converged()")   # whole warpgroups issued each wgmma

    def _Alloc(self, s: Alloc):
        n = s.name
        if s.ty == BARRIER:
            sb = self.const(sync_order.SplitBarrier, '_F')
            if s.shape:  # a ring: one split barrier per element
                k = s.shape[0].val
                self.line(f"b_{n} = [{sb}({n!r} + '[' + str(j) + ']') for j in range({k})]")
            else:
                self.line(f"b_{n} = {sb}({n!r})")
            clusters.emit_register(self, n)
            return
        self._no_numpy(s.ty, s.loc)
        if not s.shape and not self.race:
            self.scalars[n] = s.ty
            self.arrays.pop(n, None)
            self.line(f"sc_{n} = {self.const(fill_value(s.ty))}")
            return
        self.scalars.pop(n, None)
        info = ArrInfo(n, len(s.shape), s.ty, s.mem, contig=True)
        self.arrays[n] = info
        for k, d in enumerate(s.shape):
            self.line(f"d{k}_{n} = {self.ex(d)}")
        dims = [info.dim(k) for k in range(info.ndim)]
        if dims:
            acc = self.access(s.loc, _stmt_text(s), "allocation", n)
            self.line(f"if {' or '.join(f'{d} < 0' for d in dims)}: "
                      f"_bad_dim({acc}, ({', '.join(dims)},))")
        ty = self.const(s.ty)
        self.line(f"a_{n} = _alloc({' * '.join(dims) or '1'}, {ty})")
        self._contig_strides(info)
        if self.race:
            mem = self.const(s.mem)
            site = self.const(object(), "_S")  # one allocation statement
            self.line(f"tr_{n} = _ctx.tracker({mem}, {n!r}, ({''.join(d + ', ' for d in dims)}), "
                      f"site={site})")

    def flat(self, name: str, idx, acc: str, kind: int) -> str:
        src = super().flat(name, idx, acc, kind)
        if self.wg is not None and name in self.wg[1]:
            notes, roles, node, _ = self.wg
            tr = f"tr_{name}" if self.race else "None"
            return (f"_asy.wg_note({notes}, a_{name}, {tr}, {roles[name]!r}, {src}, {kind}, "
                    f"{acc}, {node})")
        if self.asy and (self.watch is None or name in self.watch):
            return f"_asy.touch(a_{name}, {src}, {kind}, {acc})"
        return src

    def _store(self, name: str, idx, rhs_src: str, acc: str, kind: int):
        self.line(f"a_{name}[{self.flat(name, idx, acc, kind)}] = {rhs_src}")

    def _Assign(self, s: Assign):
        if s.name in self.scalars:
            ty = self.scalars[s.name]
            self.line(f"sc_{s.name} = {self.ex_as(s.rhs, ty)}")
            return
        info = self.arrays[s.name]
        rhs = self.ex_as(s.rhs, info.ty)
        acc = self.access(s.loc, _stmt_text(s), "write", s.name)
        self._const_guard(s.name, acc)
        self._store(s.name, s.idx, rhs, acc, WRITE)

    @staticmethod
    def _no_numpy(ty, loc):
        if ty.numpy is None:
            raise InterpError(f"the interpreter cannot compute in {ty.name}: numpy has no "
                              f"{ty.name} type", loc, "use f16 or f32 to interpret this proc")

    def _update(self, s, op: str, kind: int, how: str):
        """``x[i] op= rhs`` (reductions and atomics)."""
        if s.name in self.scalars:
            ty = self.scalars[s.name]
            self.line(f"sc_{s.name} = {self._combine(f'sc_{s.name}', op, s.rhs, ty)}")
            return
        info = self.arrays[s.name]
        acc = self.access(s.loc, _stmt_text(s), how, s.name)
        self._const_guard(s.name, acc)
        t = self.fresh()
        self.line(f"{t} = {self.flat(s.name, s.idx, acc, kind)}")
        cur = f"a_{s.name}[{t}]" if info.ty.is_float else f"a_{s.name}.item({t})"
        self.line(f"a_{s.name}[{t}] = {self._combine(cur, op, s.rhs, info.ty)}")

    def _combine(self, cur: str, op: str, rhs, ty) -> str:
        r = self.ex_as(rhs, ty)
        if op in ("min", "max"):
            out = f"_f{op}({cur}, {r})" if ty.is_float else f"{op}({cur}, {r})"
        else:
            out = f"({cur} {op} {r})"
        if ty.kind == "int":
            return wrap_expr(out, ty.bits)
        if ty.kind == "bool":
            return f"bool({out})"
        return out

    def _Reduce(self, s: Reduce):
        self._update(s, s.op, WRITE, "update")

    def _Atomic(self, s: Atomic):
        """One read-modify-write (the interpreter is sequential, so indivisible);
        the old value goes to ``s.result`` when the statement names one."""
        info = self.arrays[s.name]
        acc = self.access(s.loc, _stmt_text(s), "atomic update", s.name)
        self._const_guard(s.name, acc)
        t, old = self.fresh(), self.fresh()
        self.line(f"{t} = {self.flat(s.name, s.idx, acc, ATOMIC)}")
        self.line(f"{old} = a_{s.name}[{t}]" if info.ty.is_float else
                  f"{old} = a_{s.name}.item({t})")
        op = s.op
        if op in ("add", "sub", "min", "max", "and", "or", "xor"):
            new = self._combine(old, {"add": "+", "sub": "-", "and": "&", "or": "|",
                                      "xor": "^"}.get(op, op), s.rhs, info.ty)
        elif op == "exch":
            new = self.ex_as(s.rhs, info.ty)
        elif op == "cas":
            new = f"({self.ex_as(s.rhs, info.ty)} if {old} == {self.ex_as(s.cmp, info.ty)} " \
                  f"else {old})"
        elif op == "inc":
            new = f"(0 if {old} >= {self.ex_as(s.rhs, info.ty)} else " \
                  f"{wrap_expr(f'({old} + 1)', info.ty.bits)})"
        else:  # pragma: no cover - the frontend knows the ops
            raise TypeError(f"unknown atomic {op}")
        self.line(f"a_{s.name}[{t}] = {new}")
        if s.result is not None:
            if s.result in self.scalars:
                self.line(f"sc_{s.result} = {old}")
            else:
                racc = self.access(s.loc, _stmt_text(s), "write", s.result)
                self._store(s.result, (), old, racc, WRITE)

    def _const_guard(self, name: str, acc: str):
        """A write of a CONST array is refused when it runs."""
        if not self.arrays[name].mem.writable:
            self.line(f"_const_write({acc})")

    # ------------------------------------------------------------ calls

    def _Call(self, s: Call):
        callee = s.proc
        fn = self.const(self.compile_callee(callee), "_F")
        acc = self.access(s.loc, _stmt_text(s), "call", callee.name)
        env = {}
        args = []
        for prm, a in zip(callee.params, s.args):
            if prm.is_control:
                t = self.fresh(_TMPVAR)
                self.line(f"v_{t} = {self.ex(a)}")
                env[prm.name] = Var(t, INDEX)
                args.append(f"v_{t}")
            elif prm.kind == "scalar":
                args.append(self.ex_as(a, prm.ty))
            else:
                args.append(self._window(a, prm, env, acc))
        for pred in callee.preds:
            vals = ", ".join(f"{k!r}: {self.ex(v)}" for k, v in env.items())
            ploc = self.const(pred.loc)
            self.line(f"if not {self.ex(substitute(pred, env))}: "
                      f"_callee_assert({acc}, {ploc}, {print_expr(pred)!r}, {{{vals}}})")
        call = f"{fn}(_ctx, {', '.join(args)})"
        if not holds_collective(callee.body):
            self.line(call)
        elif self.in_warp:
            self.line(f"yield from {call}")
        else:
            site = self.const(Site(s.loc, _stmt_text(s), "call", None), "_W")
            self.line(f"_no_warp({site})")

    def _window(self, w: WindowArg, prm, env, acc: str) -> str:
        info = self.arrays[w.name]
        n = w.name
        tr = f", tr_{n}" if self.race else ""
        if not w.idx:
            extents = [info.dim(k) for k in range(info.ndim)]
            strides = [info.stride(k) for k in range(info.ndim)]
            off = info.off()
        else:
            parts, conds, extents, strides = [], [], [], []
            offs = [] if info.off() == "0" else [info.off()]
            for k, part in enumerate(w.idx):
                d = info.dim(k)
                if isinstance(part, Point):
                    t = self.fresh()
                    self.line(f"{t} = {self.ex(part.pt)}")
                    parts.append(t)
                    conds.append(f"0 <= {t} < {d}")
                    start = t
                else:
                    lo, hi = self.fresh(), self.fresh()
                    self.line(f"{lo} = {self.ex(part.lo)}; {hi} = {self.ex(part.hi)}")
                    parts.append(f"({lo}, {hi})")
                    conds.append(f"0 <= {lo} <= {hi} <= {d}")
                    extents.append(f"{hi} - {lo}")
                    strides.append(info.stride(k))
                    start = lo
                st = info.stride(k)
                offs.append(start if st == "1" else f"{start} * {st}")
            dims = ", ".join(info.dim(k) for k in range(info.ndim))
            self.line(f"if not ({' and '.join(conds)}): "
                      f"_bad_window({acc}, {n!r}, ({', '.join(parts)},), ({dims},))")
            off = " + ".join(offs)
        want = [self.ex(substitute(d, env)) for d in prm.shape]
        if len(want) != len(extents):
            raise TypeError(f"window rank mismatch for {prm.name}")
        if want:
            got_t, want_t = ", ".join(extents) + ",", ", ".join(want) + ","
            self.line(f"if ({got_t}) != ({want_t}): "
                      f"_bad_extent({acc}, {prm.name!r}, ({got_t}), ({want_t}))")
        t = self.fresh()
        st = ", ".join(strides) + ("," if len(strides) == 1 else "")
        self.line(f"{t} = (a_{n}, {off}, ({st}){tr})")
        return t
