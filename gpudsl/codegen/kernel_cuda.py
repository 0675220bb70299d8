"""One kernel: a ``@ BLOCKS`` nest or a run of serial host code → a ``__global__`` function.

Mapping (docs/language.md (meaning)):

- up to 3 directly nested BLOCKS loops → ``blockIdx.z/y/x`` (innermost ``x``);
  the loop variable is ``lo + blockIdx.x``; for ``y`` and ``z``, which CUDA limits
  to 65535 blocks, a grid-stride loop from ``lo + blockIdx.*`` by ``gridDim.*``
  (the launch asks for at most 65535; a barrier ends each iteration of a kernel
  with SHARED arrays); a grouped pair (``group=G``, :mod:`.block_order_cuda`) shares
  ``blockIdx.x``, a third loop then takes ``y``;
- up to 3 directly nested THREADS loops → ``threadIdx.z/y/x``; the block size in
  each dimension is the largest ``hi`` among the kernel's thread loops; the loop
  variable *is* ``threadIdx.*``, and a loop narrower than the block is predicated
  ``if (lo <= threadIdx.x && threadIdx.x < hi)``; a nest that leaves a block
  dimension unused runs only on ``threadIdx.<that> == 0``;
- ``SHARED`` allocations → ``__shared__`` arrays; ``REGISTER`` allocations →
  local variables; a block-level ``REGISTER`` array indexed by thread variables in
  its leading dimensions loses those dimensions (each thread holds its row);
- ``GLOBAL`` arrays are flat row-major pointers; shared and register arrays are
  C arrays with their (constant) shape.

Statements that break these rules are refused with a :class:`CompileError` at the
statement's source location.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import CompileError, SrcLoc
from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Call, Const, Expr, For, If,
                        Pass, Point, Read, Reduce, Stmt, Sync, SyncCluster, Var, WindowArg, Arrive, Wait,
                        AsyncCommit, AsyncCopy, AsyncWait, SetMaxNReg, TmaLoad, TmaStore, Wgmma, WgmmaCommit,
                        WgmmaWait)
from ..ir.nests import DIMS, direct_nest, nest_dims
from ..ir.types import BARRIER
from .async_copy_cuda import emit_async
from ..ir.tma_meaning import TMA_STMTS
from .wgmma_cuda import emit_wgmma, loop_fence, scan_kernel, writer_fence
from .role_split import conjunction, emit_roles, role_ranges
from .warp_roles import NAME as WARP_NAME, declare_roles, lower, scan_roles, upper
from .tma_cuda import emit_tma, scan_stores, store_writer_fence, tma_dsts
from .call_cuda import CallWriter
from .hoist import read_key
from ..ir.inline import written_names
from .sync_cuda import SyncWriter
from .setmaxnreg_cuda import emit_setmaxnreg, launch_blocks
from .block_order_cuda import block_units, emit_grouped, grid_extent
from .swizzle_cuda import swizzled_access
from ..ir.swizzle_meaning import repeat_bytes
from ..ir.printer import print_expr
from ..ir.types import BLOCKS, INDEX, THREADS, DType, bool_, f16, bf16
from .cluster_cuda import cluster_attribute, cluster_size, emit_sync_cluster
from ..ir.visitor import walk
from .cexpr import UNARY, ExprEmitter, cname
from .host_plan import NeedsBinding, NotConstant, evaluate
from .trace import trace_text
from .writer import Writer


@dataclass
class ArrayInfo:
    name: str
    cname: str
    dtype: DType
    shape: tuple  # IR expressions (GLOBAL) or ints (local arrays, after dropping)
    mem: object
    pointer: bool  # a GLOBAL pointer (flat indexing) vs a C local / __shared__ array
    drop: int = 0  # leading thread dimensions dropped (block-level REGISTER arrays)
    swizzle: int = 0  # a swizzled SHARED tile's width in bytes (:mod:`.swizzle`)


def _err(msg, loc, hint=None):
    return CompileError(msg, loc, hint)


def _nest(f: For, mapping: str, unit: str, index: str) -> list[For]:
    chain = direct_nest(f)
    if len(chain) > 3:
        raise _err(f"more than 3 directly nested @ {mapping} loops", chain[3].loc,
                   f"a {unit} has 3 dimensions ({index}.z/y/x)")
    return chain


def thread_chain(f: For) -> list[For]:
    """The directly nested THREADS loops starting at ``f`` (outer first)."""
    return _nest(f, "THREADS", "block", "threadIdx")


def blocks_chain(f: For) -> list[For]:
    """The directly nested BLOCKS loops starting at ``f`` (outer first)."""
    return _nest(f, "BLOCKS", "grid", "blockIdx")


def _expr_nodes(s: Stmt):
    """The expressions a statement itself holds (not those of nested statements)."""
    if isinstance(s, (Assign, Reduce, Atomic)):
        yield Read(s.name, s.idx, bool_, s.loc)  # the target, as an access
        yield s.rhs
        if isinstance(s, Atomic):
            if s.cmp is not None:
                yield s.cmp
            if s.result is not None:
                yield Read(s.result, (), bool_, s.loc)  # the old value's local
    elif isinstance(s, Call):
        yield from s.args
    elif isinstance(s, AsyncCopy):
        yield Read(s.dst, s.dst_idx, bool_, s.loc)
        yield Read(s.src, s.src_idx, bool_, s.loc)
    elif isinstance(s, Wgmma):
        yield from (s.acc, s.a, s.b)
    elif isinstance(s, (TmaLoad, TmaStore)):
        yield from (s.dst, s.src)
    elif isinstance(s, For):
        yield s.lo
        yield s.hi
    elif isinstance(s, If):
        yield s.cond
    elif isinstance(s, Alloc):
        yield from s.shape


class KernelWriter(CallWriter, ExprEmitter):
    """Emits one kernel into a :class:`Writer`.  ``module`` is the
    :class:`gpudsl.codegen.generate.ModuleWriter` holding the proc-wide context."""

    def __init__(self, module, name: str, serial: bool, host_vars: dict):
        self.m = module
        self.name = name
        self.serial = serial
        self.index_ctype = module.index_ctype
        self.w: Writer = module.w
        self.scopes: list[dict] = [dict(module.global_arrays)]
        self.var_nonneg: dict[str, bool] = dict(module.control_nonneg)
        self.var_nonneg.update(host_vars)
        self.nest: list[tuple[str, str]] | None = None  # thread nest: (iter, dim)
        self.block_dim = [1, 1, 1]
        self.drops: dict[int, tuple] = {}  # id(Alloc) -> dims dropped
        self.dyn_offsets: dict[int, int] = {}  # id(Alloc) -> byte offset (dynamic shared)
        self.dynamic_shared_bytes = 0
        self.hoisted: dict[tuple, str] = {}  # read_key -> local loaded before its loop
        self.written: set[str] = set()  # what the kernel writes (see .hoist)

    # ------------------------------------------------------------ context hooks

    def use_helper(self, name):
        self.m.helpers.add(name)

    def nonneg_var(self, name):
        return self.var_nonneg.get(name, False)

    def lookup(self, name, loc) -> ArrayInfo:
        for sc in reversed(self.scopes):
            if name in sc:
                return sc[name]
        raise _err(f"'{name}' is not an array or scalar in memory here", loc)

    def index_text(self, info: ArrayInfo, idx: tuple, loc) -> str:
        if info.pointer:
            if not idx:
                return f"{info.cname}[0]"
            off: Expr = idx[0]
            for d in range(1, len(idx)):
                off = BinOp("+", BinOp("*", off, info.shape[d], INDEX), idx[d], INDEX)
            return f"{info.cname}[{self.expr(off)}]"
        idx = self._drop(info, idx, loc)
        if info.swizzle:
            return swizzled_access(self, info, idx)
        return info.cname + "".join(f"[{self.expr(i)}]" for i in idx)

    def _drop(self, info: ArrayInfo, idx: tuple, loc) -> tuple:
        if not info.drop:
            return idx
        nest = dict(self.nest or ())
        for i in idx[:info.drop]:
            if not (isinstance(i, Var) and i.name in nest):
                raise _err(f"the block-level REGISTER array '{info.name}' is indexed by "
                           "thread variables in its leading dimensions elsewhere, but not here",
                           loc, "each thread holds its own row: index it by the thread loop "
                           "variables, inside the thread loops")
        return idx[info.drop:]

    def access(self, name, idx, loc):
        return self.index_text(self.lookup(name, loc), tuple(idx), loc)

    def read_text(self, e: Read) -> str:
        """A read in an expression: the local of a hoisted read (:mod:`.hoist`),
        else the element."""
        if self.hoisted:
            local = self.hoisted.get(read_key(e))
            if local is not None:
                return local
        return self.access(e.name, e.idx, e.loc)

    # ------------------------------------------------------------ constants

    def const_int(self, e: Expr, what: str, loc) -> int:
        try:
            v = evaluate(e, self.m.bindings)
        except NotConstant as exc:
            params = exc.names & self.m.control_params
            if params and params == exc.names:
                raise NeedsBinding(params, f"{what} must be a constant once sizes are fixed; "
                                   f"it uses {', '.join(sorted(params))}", loc) from None
            raise _err(f"{what} must be a constant once sizes are fixed, not "
                       f"'{print_expr(e)}'", loc) from None
        return int(v)

    # ------------------------------------------------------------ prepass

    def prepass(self, body: tuple) -> None:
        """Block dimensions and the dimensions dropped from block-level REGISTER arrays."""
        records: dict[int, set] = {}
        allocs: dict[int, Alloc] = {}

        def scan(stmts, nest, scope):
            scope = dict(scope)
            for s in stmts:
                if isinstance(s, Alloc) and s.mem.per_thread and s.shape and nest is None:
                    scope[s.name] = id(s)
                    records[id(s)] = set()
                    allocs[id(s)] = s
                    continue
                if isinstance(s, Alloc):
                    scope.pop(s.name, None)
                for e in _expr_nodes(s):
                    for n in walk(e):
                        if isinstance(n, (Read, WindowArg)) and n.name in scope:
                            records[scope[n.name]].add(self._leading(n, nest))
                if isinstance(s, For) and s.mapping == THREADS and nest is None:
                    chain = thread_chain(s)
                    dims = nest_dims(len(chain))
                    for f, d in zip(chain, dims):
                        hi = self.const_int(f.hi, f"the bound of the @ THREADS loop "
                                            f"'{f.iter}'", f.loc)
                        k = DIMS.index(d)
                        self.block_dim[k] = max(self.block_dim[k], hi)
                    scan(chain[-1].body, [(f.iter, d) for f, d in zip(chain, dims)], scope)
                elif isinstance(s, For):
                    scan(s.body, nest, scope)
                elif isinstance(s, If):
                    scan(s.body, nest, scope)
                    scan(s.orelse, nest, scope)

        scan(body, None, {})
        self._plan_shared(body)
        for key, seen in records.items():
            if len(seen) > 1:
                a = allocs[key]
                raise _err(f"the block-level REGISTER array '{a.name}' is indexed by different "
                           "thread variables (or threadIdx dimensions) in different places",
                           a.loc, "index its leading dimensions by the thread loop variables "
                           "of the same threadIdx dimensions everywhere")
            self.drops[key] = next(iter(seen)) if seen else ()
        total = self.block_dim[0] * self.block_dim[1] * self.block_dim[2]
        if total > 1024:
            raise _err(f"the kernel {self.name} needs {total} threads per block (block "
                       f"{tuple(self.block_dim)}); CUDA allows 1024", body[0].loc if body
                       else None, "use smaller @ THREADS loops")

    def _plan_shared(self, body, force: bool = False) -> None:
        """SHARED arrays are static ``__shared__`` arrays up to the target's static limit
        (``Target.static_shared_bytes``: 48 KiB on every architecture NVIDIA makes, so one
        source serves them all); above it they are carved out of dynamic shared memory
        (the launch opts in)."""
        allocs = [n for n in walk(body) if isinstance(n, Alloc) and n.mem.per_block]
        self.tma_dsts = tma_dsts(body)
        total, offsets = 0, {}
        for a in allocs:
            n = a.ty.bits // 8
            for d in a.shape:
                n *= self.const_int(d, f"the shape of '{a.name}'", a.loc)
            align = self.shared_align(a)
            total = (total + align - 1) // align * align
            offsets[id(a)] = total
            total += n
        if allocs and (force or total > self.m.target.static_shared_bytes):
            self.dyn_offsets = offsets
            self.dynamic_shared_bytes = (total + 15) // 16 * 16
            self.smem_align = max([self.shared_align(a) for a in allocs] + [16])

    def shared_align(self, a) -> int:
        """A SHARED array's alignment: 16 bytes, a swizzled tile's period, 128 for the
        destination of a bulk tensor copy."""
        out = repeat_bytes(a.swizzle)
        return max(out, 128) if a.name in getattr(self, "tma_dsts", ()) else out

    @staticmethod
    def _leading(n, nest) -> tuple:
        if not nest:
            return ()
        where = dict(nest)
        dims = []
        parts = n.idx
        for p in parts:
            e = p.pt if isinstance(p, Point) else p
            if isinstance(e, Var) and e.name in where and where[e.name] not in dims:
                dims.append(where[e.name])
            else:
                break
        return tuple(dims)

    # ------------------------------------------------------------ kernels

    def emit_blocks_kernel(self, f: For, params_text: str) -> tuple:
        chain = blocks_chain(f)
        body = chain[-1].body
        self.prepass(body)
        self.written = written_names(body)
        self.syncs = SyncWriter(self, body)
        scan_kernel(self, body)
        scan_roles(self, body)
        scan_stores(self, body)
        nthreads = self.block_dim[0] * self.block_dim[1] * self.block_dim[2]
        w = self.w
        roles = role_ranges(self, body)   # one branch per setmaxnreg range (role_split)
        if roles and not self.dyn_offsets:
            self._plan_shared(body, force=True)
        self.blocks_per_sm = launch_blocks(body, chain[0].blocks_per_sm)
        per_sm = f", {self.blocks_per_sm}" if self.blocks_per_sm else ""
        self.cluster = cluster_size(chain)
        w.line(f'extern "C" __global__ void __launch_bounds__({nthreads}{per_sm})'
               + cluster_attribute(chain))
        w.line(f"{self.name}({params_text})")
        w.line("{")
        w.indent += 1
        if self.dyn_offsets:
            w.line(f"// {self.dynamic_shared_bytes} bytes of SHARED arrays: dynamic shared memory")
            w.line(f"extern __shared__ __align__({self.smem_align}) unsigned char gpudsl_smem[];")
        declare_roles(self)
        if roles:
            grid = emit_roles(self, roles, lambda: self._blocks_nest(chain, body), WARP_NAME)
        else:
            grid = self._blocks_nest(chain, body)
        w.indent -= 1
        w.line("}")
        return tuple(grid), tuple(self.block_dim)

    def _blocks_nest(self, chain, body) -> list:
        """The BLOCKS loops (``blockIdx``, grid-stride loops) around the block's code;
        returns the grid."""
        w = self.w
        grid = [Const(1, INDEX)] * 3
        strided = 0  # grid-stride loops opened for blockIdx.y / .z
        for b in chain:
            for e in (b.lo, b.hi):
                if any(isinstance(n, Read) for n in walk(e)):
                    raise _err(f"the bounds of the @ BLOCKS loop '{b.iter}' read memory",
                               b.loc, "grid sizes use sizes and index parameters only")
        units = block_units(chain)
        for u, d in zip(units, nest_dims(len(units))):
            grid[DIMS.index(d)] = grid_extent(u)
            if len(u) == 2:      # a grouped pair (set_block_order): always x
                emit_grouped(self, *u)
                continue
            b = u[0]
            ix = f"blockIdx.{d}" if self.index_ctype == "int" else \
                f"(long long)blockIdx.{d}"
            val = ix if (isinstance(b.lo, Const) and b.lo.val == 0) else \
                f"{self.expr(b.lo, 12)} + {ix}"
            v = cname(b.iter)
            if d == "x":
                w.line(f"const {self.index_ctype} {v} = {val};", b.loc)
            else:  # at most 65535 blocks: each block walks its share of the rest
                w.line(f"for ({self.index_ctype} {v} = {val}; {v} < {self.expr(b.hi, 9)}; "
                       f"{v} += gridDim.{d}) {{", b.loc)
                w.indent += 1
                strided += 1
            self.var_nonneg[b.iter] = self.nonneg(b.lo)
        self.block(body, level="block")
        if self.syncs.cluster_bars:
            # other blocks arrive on this block's barriers: none leaves (or initialises
            # them again) before every block of the cluster is done with them
            self.use_helper("gpudsl_sync_cluster")
            w.line("gpudsl_sync_cluster();  // no block leaves while others may arrive on its "
                   "barriers")
        if strided and any(isinstance(n, Alloc) and n.mem.per_block for n in walk(body)):
            # the next iteration's writes of SHARED arrays wait for this one's reads
            w.line("__syncthreads();")
        for _ in range(strided):
            w.indent -= 1
            w.line("}")
        return grid

    def emit_serial_kernel(self, stmts: tuple, params_text: str, loc) -> None:
        w = self.w
        w.line('extern "C" __global__ void __launch_bounds__(1)')
        w.line(f"{self.name}({params_text})")
        w.line("{")
        w.indent += 1
        self.written = written_names(stmts)
        self.block(stmts, level="serial")
        w.indent -= 1
        w.line("}")

    # ------------------------------------------------------------ statements

    def block(self, stmts: tuple, level: str) -> None:
        self.scopes.append({})
        self.prev = None  # the statement emitted before, in this list (wgmma runs)
        try:
            for s in stmts:
                self.stmt(s, level)
                self.prev = s
        finally:
            self.scopes.pop()

    def braced(self, head: str, loc, stmts, level, tail_ok=True):
        self.w.line(head + " {", loc)
        self.w.indent += 1
        self.block(stmts, level)
        self.w.indent -= 1
        self.w.line("}")

    def stmt(self, s: Stmt, level: str) -> None:
        w = self.w
        if isinstance(s, Pass):
            return
        if isinstance(s, Alloc):
            self.alloc(s, level)
            if s.ty == BARRIER:
                self.syncs.barrier_init(s)
            return
        if isinstance(s, For):
            return self.loop(s, level)
        if isinstance(s, If):
            cond = self.expr(s.cond)
            w.line(f"if ({cond}) {{", s.loc)
            w.indent += 1
            self.block(s.body, level)
            w.indent -= 1
            if s.orelse:
                w.line("} else {")
                w.indent += 1
                self.block(s.orelse, level)
                w.indent -= 1
            w.line("}")
            return
        if isinstance(s, SyncCluster):
            return emit_sync_cluster(self, s, level)
        if isinstance(s, Sync):
            if level != "block":
                where = "inside a @ THREADS loop" if level == "thread" else \
                    "outside any @ BLOCKS loop"
                raise _err(f"sync() stands {where}", s.loc,
                           "sync() belongs at block level: inside a BLOCKS loop, outside the "
                           "THREADS loops")
            if s.ranged:
                return self.sync_stmt(s)
            w.line("__syncthreads();", s.loc)
            return
        if isinstance(s, (Arrive, Wait)):
            return self.sync_stmt(s)
        if isinstance(s, TMA_STMTS):
            return emit_tma(self, s, level)
        if isinstance(s, SetMaxNReg):
            return emit_setmaxnreg(self, s, level, getattr(self, "blocks_per_sm", 0))
        if isinstance(s, (AsyncCommit, AsyncWait)) or (isinstance(s, AsyncCopy) and
                                                       level != "block"):
            return emit_async(self, s, level)
        if isinstance(s, (WgmmaCommit, WgmmaWait)) or (isinstance(s, Wgmma) and
                                                       level != "block"):
            return emit_wgmma(self, s, level)
        if level == "block":
            raise _err("this statement stands at block level (inside a @ BLOCKS loop but "
                       "outside any @ THREADS loop)", s.loc,
                       "put it inside a THREADS loop: at block level only allocations, sync(), "
                       "seq loops, ifs and THREADS loops may stand")
        if isinstance(s, Assign):
            ty = self._elem_type(s.name, s.loc)
            w.line(f"{self.access(s.name, s.idx, s.loc)} = {self.cast_to(s.rhs, ty)};"
                   + self.trace_text(s), s.loc)
            return
        if isinstance(s, Reduce):
            ty = self._elem_type(s.name, s.loc)
            if ty.kind == "int" and s.op in ("+", "-", "*"):  # wraps, as in the interpreter
                self.use_helper("gpudsl_wrap")
                lv = self.access(s.name, s.idx, s.loc)
                fn = {"+": "add", "-": "sub", "*": "mul"}[s.op]
                w.line(f"{lv} = gpudsl_{fn}_i{ty.bits}({lv}, {self.cast_to(s.rhs, ty)});"
                       + self.trace_text(s), s.loc)
                return
            w.line(f"{self.access(s.name, s.idx, s.loc)} {s.op}= {self.cast_to(s.rhs, ty)};"
                   + self.trace_text(s), s.loc)
            return
        if isinstance(s, Atomic):
            return self.atomic(s)
        if isinstance(s, Call):
            return self.instr(s)
        raise _err(f"cannot generate CUDA for {type(s).__name__}", getattr(s, "loc", None))

    def sync_stmt(self, s) -> None:
        """``sync(lo, hi)``, ``arrive``, ``wait`` (:mod:`.syncs`)."""
        if isinstance(s, Sync):
            return self.syncs.ranged(s)
        return self.syncs.split(s)

    def _elem_type(self, name, loc) -> DType:
        return self.lookup(name, loc).dtype

    def alloc(self, s: Alloc, level: str) -> None:
        if s.mem.scope == "grid" and level not in s.mem.allocated_at:
            raise _err(f"the GLOBAL array '{s.name}' is allocated inside a kernel", s.loc,
                       "allocate GLOBAL temporaries at host level (outside the BLOCKS loops)")
        if s.mem.scope == "block" and level not in s.mem.allocated_at:
            raise _err(f"the SHARED array '{s.name}' is allocated "
                       + ("inside a @ THREADS loop" if level == "thread"
                          else "outside any @ BLOCKS loop"), s.loc,
                       "allocate SHARED arrays at block level: one copy per block")
        drop = len(self.drops.get(id(s), ())) if (level == "block" and s.mem.per_thread) else 0
        shape = [self.const_int(d, f"the shape of '{s.name}'", s.loc) for d in s.shape]
        if drop > len(shape):
            drop = len(shape)
        shape = shape[drop:]
        info = ArrayInfo(s.name, cname(s.name), s.ty, tuple(shape), s.mem, False, drop,
                         s.swizzle)
        self.scopes[-1][s.name] = info
        if s.ty in (f16, bf16):
            self.m.uses_half = True
        dims = "".join(f"[{n}]" for n in shape)
        if id(s) in self.dyn_offsets:
            off = self.dyn_offsets[id(s)]
            t = s.ty.ctype
            ref = f"(&{info.cname}){dims}" if dims else f"&{info.cname}"
            ptr = f"{t} (*){dims}" if dims else f"{t}*"
            self.w.line(f"{t} {ref} = *reinterpret_cast<{ptr}>(gpudsl_smem + {off});", s.loc)
            return
        qual = s.mem.c_qualifier
        if dims:
            # vectorize's float2/float4 accesses need 16-byte aligned arrays; a swizzled
            # tile is aligned to its pattern's period (TMA and wgmma read it so)
            qual += f"__align__({self.shared_align(s)}) "
        note = ""
        if drop:
            note = "  // one row per thread (leading thread dimension" + \
                   ("s" if drop > 1 else "") + " dropped)"
        self.w.line(f"{qual}{s.ty.ctype} {info.cname}{dims};{note}", s.loc)

    def loop(self, s: For, level: str) -> None:
        w = self.w
        if s.mapping == BLOCKS:
            raise _err(f"the @ BLOCKS loop '{s.iter}' is not an outermost BLOCKS nest at host "
                       "level", s.loc, "BLOCKS loops nest directly (up to 3) at host level")
        if s.kind == "par" and s.mapping is None:
            raise _err(f"the par loop '{s.iter}' is not mapped to BLOCKS or THREADS", s.loc,
                       "map it first: parallelize_loop(p, loop, BLOCKS | THREADS), or make "
                       "it a seq loop")
        if s.mapping == THREADS:
            if level != "block":
                where = "inside another @ THREADS loop" if level == "thread" else \
                    "outside any @ BLOCKS loop"
                raise _err(f"the @ THREADS loop '{s.iter}' stands {where}", s.loc,
                           "THREADS loops nest directly (up to 3) at block level")
            return self.thread_nest(s)
        t = self.index_ctype
        if "long long" in (self.cint(s.lo), self.cint(s.hi)):
            t = "long long"
        hoisted = self.hoist_reads(s) if level in ("thread", "serial") else ()
        fenced = loop_fence(self, s)   # a loop of wgmmas: fenced once, before it (and
        if s.unroll:                   # before the directive, which names the next line)
            w.line("#pragma unroll", SrcLoc(s.loc.file, s.loc.line - 1) if s.loc else None)
        v = cname(s.iter)
        self.var_nonneg[s.iter] = self.nonneg(s.lo)
        w.line(f"for ({t} {v} = {self.expr(s.lo)}; {v} < {self.expr(s.hi, 10)}; {v}++) {{",
               s.loc)
        w.indent += 1
        self.wg_fenced = getattr(self, "wg_fenced", False) or fenced
        self.block(s.body, level)
        self.wg_fenced = self.wg_fenced and not fenced
        w.indent -= 1
        w.line("}")
        for key in hoisted:
            del self.hoisted[key]

    def hoist_reads(self, s: For) -> list:
        """Loads the loop's invariant reads of read-only arrays into locals before it
        (:mod:`.hoist`); their keys."""
        hoister = getattr(self.m, "hoister", None)
        if hoister is None:
            return []

        def info(name):
            for sc in reversed(self.scopes):
                if name in sc:
                    return sc[name]
            return None

        keys = []
        for r in hoister.plan(s, self.written, info, self.hoisted):
            key = read_key(r)
            local = f"gpudsl_h{self.m.hoist_count}"
            self.m.hoist_count += 1
            a = info(r.name)
            self.w.line(f"const {a.dtype.ctype} {local} = {self.access(r.name, r.idx, r.loc)};"
                        "  // loop-invariant", r.loc)
            self.hoisted[key] = local
            keys.append(key)
        return keys

    def thread_nest(self, f: For) -> None:
        chain = thread_chain(f)
        dims = nest_dims(len(chain))
        conds = []
        for g, d in zip(chain, dims):
            lo = self.const_int(g.lo, f"the start of the @ THREADS loop '{g.iter}'", g.loc)
            hi = self.const_int(g.hi, f"the bound of the @ THREADS loop '{g.iter}'", g.loc)
            full = self.block_dim[DIMS.index(d)]
            if lo > 0:
                conds.append(lower(self, lo, f"threadIdx.{d}"))
            if hi < full or hi <= lo:
                conds.append(upper(self, hi, f"threadIdx.{d}"))
        for k, d in enumerate(DIMS):
            if d not in dims and self.block_dim[k] > 1:
                conds.append(f"threadIdx.{d} == 0")
        conds = conjunction(conds)
        head = f"if ({conds})" if conds else ""
        self.w.line(f"{head} {{" if head else "{", f.loc)
        self.w.indent += 1
        saved = self.nest
        self.nest = [(g.iter, d) for g, d in zip(chain, dims)]
        for g, d in zip(chain, dims):
            self.var_nonneg[g.iter] = True
            self.w.line(f"const {self.index_ctype} {cname(g.iter)} = threadIdx.{d};",
                        None if g is f else g.loc)
        self.block(chain[-1].body, "thread")
        writer_fence(self, chain[-1].body)
        store_writer_fence(self, chain[-1].body)
        self.nest = saved
        self.w.indent -= 1
        self.w.line("}")

    # ------------------------------------------------------------ trace= (docs/running.md)

    def trace_text(self, s) -> str:
        """The ``printf`` of ``compile(..., trace=...)`` after ``s`` (see
        :mod:`.trace`); without a trace, nothing."""
        return trace_text(self, s) if self.m.trace is not None else ""


__all__ = ["KernelWriter", "ArrayInfo", "thread_chain", "blocks_chain", "UNARY"]
