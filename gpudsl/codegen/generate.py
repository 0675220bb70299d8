"""A proc → one CUDA C translation unit (:class:`CudaModule`).

Steps: inline sub-proc calls (:mod:`gpudsl.ir.inline`), cut the host level into kernels
and a launch program (:mod:`.plan`), emit each kernel (:mod:`.kernel`), then put
the header, bound-size constants and the helpers that were used in front.

Index arithmetic is 32-bit (``int``) when every extent fits (see
:func:`index_bits_for`), else 64-bit (``long long``); docs/codegen.md.
"""
from __future__ import annotations

import dataclasses
import numbers

from .. import targets
from ..errors import CompileError
from ..ir.inline import inline_calls, written_names
from ..ir.nodes import (Assign, AsyncCopy, Atomic, ProcDef, Read, Reduce, Var, WindowArg)
from ..ir.printer import print_expr
from ..ir.types import INDEX, f16, bf16
from ..ir.visitor import bound_names, walk
from .cexpr import cname
from .tma_cuda import tensor_map_params
from .helpers import features_of, helper_source
from .hoist import Hoister
from .kernel_cuda import ArrayInfo, KernelWriter
from .host_plan import (CudaModule, HostIf, HostLoop, HostSplitter, KernelInfo, KernelParam, NotConstant,
                   evaluate, walk_program)
from .writer import Writer

INT32_MAX = 2 ** 31 - 1


def _proc_ir(p) -> ProcDef:
    return p.ir if hasattr(p, "ir") else p


def check_bindings(p: ProcDef, bindings: dict) -> dict[str, int]:
    out = {}
    for k, v in bindings.items():
        prm = p.param(k)
        if prm is None:
            raise CompileError(f"{p.name} has no parameter '{k}' to bind",
                               hint="bind sizes and index parameters: " +
                               ", ".join(q.name for q in p.params
                                         if q.is_control))
        if prm.kind not in ("size", "index"):
            raise CompileError(f"'{k}' of {p.name} is a {prm.kind} parameter; only sizes and "
                               "index parameters can be bound at compile time")
        if isinstance(v, bool) or not isinstance(v, (int,)) and not hasattr(v, "__index__"):
            raise CompileError(f"the binding {k}={v!r} is not an integer")
        v = int(v)
        if prm.kind == "size" and v <= 0:
            raise CompileError(f"the size {k} must be positive, got {v}")
        out[k] = v
    return out


def _host_lo(program, out: dict) -> dict:
    for st in program:
        if isinstance(st, HostLoop):
            out[st.iter] = st.lo
            _host_lo(st.body, out)
        elif hasattr(st, "orelse"):
            _host_lo(st.body, out)
            _host_lo(st.orelse, out)
    return out


def index_bits_for(module_or_proc, env: dict, array_sizes=()) -> int:
    """32 when every array's element count, every grid and every size value fits in
    a signed 32-bit int, else 64.  ``env`` holds the sizes and index parameters;
    ``array_sizes`` extra element counts (e.g. of the actual arguments)."""
    vals = [abs(int(v)) for v in env.values()] + [int(n) for n in array_sizes]
    m = module_or_proc
    if isinstance(m, CudaModule):
        for t in m.temporaries:
            n = 1
            for d in t.shape:
                n *= evaluate(d, env)
            vals.append(n)
        try:
            for kname, kenv in walk_program(m.program, env):
                k = m.kernels[kname]
                g = [evaluate(e, kenv) for e in k.grid]
                vals.append(abs(g[0] * g[1] * g[2] * k.threads_per_block))
                vals.extend(abs(v) for v in kenv.values())
        except NotConstant:
            pass
    if max(vals, default=0) > INT32_MAX:
        return 64
    if isinstance(m, CudaModule) and m.index_body and not _terms_fit(m, env):
        return 64
    return 32


def _terms_fit(m: CudaModule, env: dict) -> bool:
    """Every index term of ``m`` stays within 32 bits for ``env`` (memoised per
    module and sizes: a launch asks once per new set of sizes)."""
    from .ranges import index_terms_fit

    memo = m.__dict__.setdefault("_fit_memo", {})
    key = tuple(sorted((k, int(v)) for k, v in env.items()))
    r = memo.get(key)
    if r is None:
        if len(memo) > 256:
            memo.clear()
        r = memo[key] = index_terms_fit(m.index_body, env)
    return r


def _static_index_bits(p: ProcDef, bindings: dict) -> int:
    """The index width when nothing is known beyond the bindings."""
    env = dict(bindings)
    vals = [abs(v) for v in env.values()]
    for prm in p.params:
        if prm.is_array:
            n = 1
            try:
                for d in prm.shape:
                    n *= evaluate(d, env)
            except NotConstant:
                continue
            vals.append(n)
    return 64 if max(vals, default=0) > INT32_MAX else 32


class ModuleWriter:
    def __init__(self, proc: ProcDef, bindings: dict, index_bits: int, trace=None,
                 target=None):
        self.proc = proc
        self.target = targets.target(target)   # its limits: static shared, warp, barriers
        self.trace = trace  # ((bx, by, bz), (tx, ty, tz)) or None: see KernelWriter.trace_text
        self.bindings = bindings
        self.index_bits = index_bits
        self.index_ctype = "int" if index_bits == 32 else "long long"
        self.w = Writer()
        self.helpers: set[str] = set()
        self.uses_half = False
        self.control_params = {q.name for q in proc.params if q.is_control}
        self.control_nonneg = {q.name: q.kind == "size" for q in proc.params
                               if q.is_control}
        for k, v in bindings.items():
            self.control_nonneg[k] = v >= 0
        self.global_arrays: dict[str, ArrayInfo] = {}

    def run(self) -> CudaModule:
        p = self.proc
        for q in p.params:
            if q.kind == "window":
                raise CompileError(f"{p.name} has the window parameter '{q.name}': only procs "
                                   "whose arrays are tensors can be launched", q.loc,
                                   "call it from a proc that owns the arrays")
            if q.ty in (f16, bf16):
                self.uses_half = True
        body = inline_calls(p).body
        self.hoister = Hoister(dataclasses.replace(p, body=body), self.bindings)
        self.hoist_count = 0
        splitter = HostSplitter(p.name)
        program = splitter.block(body)
        self.program = program
        host_lo = _host_lo(program, {})
        for q in p.params:
            if q.is_array:
                self.global_arrays[q.name] = ArrayInfo(q.name, cname(q.name), q.ty, q.shape,
                                                       q.mem, True)
            elif q.kind == "scalar":  # by value: read as a plain C variable
                self.global_arrays[q.name] = ArrayInfo(q.name, cname(q.name), q.ty, (),
                                                       None, False)
        for t in splitter.temporaries:
            self.global_arrays[t.name] = ArrayInfo(t.name, cname(t.name), t.dtype, t.shape,
                                                   None, True)
            if t.dtype in (f16, bf16):
                self.uses_half = True
        kernels: dict[str, KernelInfo] = {}
        for hk in splitter.kernels:
            host_vars = {}
            for v in hk.host_vars:
                kw = KernelWriter(self, hk.name, hk.serial, {})
                host_vars[v] = kw.nonneg(host_lo[v])
            kw = KernelWriter(self, hk.name, hk.serial, host_vars)
            params = self.kernel_params(hk, splitter.temporaries)
            ptext = ", ".join(f"{prm.ctype} {prm.cname}" for prm in params)
            if len(ptext) > 70:
                ptext = "\n    " + ",\n    ".join(f"{prm.ctype} {prm.cname}" for prm in params)
            self.w.raw("")
            if hk.serial:
                self.w.raw(f"// host-level code of {p.name}: one thread")
                kw.emit_serial_kernel(hk.body, ptext, hk.loc)
                grid, block = (INDEX_ONE,) * 3, (1, 1, 1)
            else:
                grid, block = kw.emit_blocks_kernel(hk.body[0], ptext)
            kernels[hk.name] = KernelInfo(hk.name, tuple(params), grid, block, hk.serial, hk.loc,
                                          kw.dynamic_shared_bytes)
        return CudaModule(p.name, self.assemble(kernels), kernels, program,
                          tuple(splitter.temporaries), dict(self.bindings), self.index_bits,
                          self.uses_half, index_body=body,
                          features=features_of(self.helpers))

    def kernel_params(self, hk, temporaries) -> list[KernelParam]:
        p = self.proc
        stmts = hk.body
        local = bound_names(stmts)
        used: set[str] = set()
        for n in walk(stmts):
            if isinstance(n, Var):
                used.add(n.name)
            elif isinstance(n, (Read, WindowArg, Assign, Reduce, Atomic)):
                used.add(n.name)
                if isinstance(n, Atomic) and n.result is not None:
                    used.add(n.result)
            elif isinstance(n, AsyncCopy):
                used.update((n.dst, n.src))
        used -= local
        written = written_names(stmts)
        temps = {t.name: t for t in temporaries}
        for name in list(used):
            info = self.global_arrays.get(name)
            if info is not None:
                for d in info.shape[1:]:
                    used |= {n.name for n in walk(d) if isinstance(n, Var)}
        idx = self.index_ctype
        out: list[KernelParam] = []
        for q in p.params:
            if q.name not in used or q.name in self.bindings:
                continue
            if q.is_control:
                out.append(KernelParam(q.name, cname(q.name), q.kind, INDEX, f"const {idx}"))
            elif q.kind == "scalar":
                out.append(KernelParam(q.name, cname(q.name), "scalar", q.ty,
                                       f"const {q.ty.ctype}"))
            else:
                w = q.name in written
                if w and not q.mem.writable:
                    raise CompileError(f"'{q.name}' is in CONST memory (read-only) but the "
                                       "kernel writes it", q.loc,
                                       f"declare '{q.name}' in GLOBAL memory")
                ct = f"{q.ty.ctype}* __restrict__" if w else \
                    f"const {q.ty.ctype}* __restrict__"
                out.append(KernelParam(q.name, cname(q.name), "array", q.ty, ct, w))
        for t in temporaries:
            if t.name in used:
                w = t.name in written
                ct = f"{t.dtype.ctype}* __restrict__" if w else \
                    f"const {t.dtype.ctype}* __restrict__"
                out.append(KernelParam(t.name, cname(t.name), "array", t.dtype, ct, w, True))
        for v in hk.host_vars:
            if v in used:
                out.append(KernelParam(v, cname(v), "hostvar", INDEX, f"const {idx}"))
        return out + tensor_map_params(stmts, p)

    def assemble(self, kernels: dict) -> str:
        from ..version import __version__

        p = self.proc
        head = Writer()
        where = f" ({p.loc.file.rsplit('/', 1)[-1]}:{p.loc.line})" if p.loc else ""
        head.raw(f"// CUDA C generated by gpudsl {__version__} from proc {p.name}{where}.")
        head.raw("// Launches, in this order on one stream:")

        def describe(program, depth):
            pad = "//   " + "  " * depth
            for st in program:
                if isinstance(st, HostLoop):
                    head.raw(f"{pad}for {st.iter} in seq({print_expr(st.lo)}, "
                             f"{print_expr(st.hi)}):  (on the host)")
                    describe(st.body, depth + 1)
                elif isinstance(st, HostIf):
                    head.raw(f"{pad}if {print_expr(st.cond)}:  (on the host)")
                    describe(st.body, depth + 1)
                    if st.orelse:
                        head.raw(f"{pad}else:")
                        describe(st.orelse, depth + 1)
                else:
                    k = kernels[st.kernel]
                    g = ", ".join(print_expr(e) for e in k.grid)
                    b = ", ".join(str(x) for x in k.block)
                    kind = "  (host-level code)" if k.serial else ""
                    head.raw(f"{pad}{k.name}: grid ({g}), block ({b}){kind}")

        describe(self.program, 0)
        head.raw(f"// Index arithmetic: {self.index_bits}-bit.")
        if self.trace is not None:
            b, t = self.trace
            head.raw(f"// Traced: every assignment of block ({', '.join(map(str, b))}), thread "
                     f"({', '.join(map(str, t))}) is printed (printf).")
        if self.uses_half:
            head.raw("#ifndef GPUDSL_EMULATOR\n#include <cuda_fp16.h>\n#include <cuda_bf16.h>"
                     "\n#endif")
        if self.bindings:
            head.raw("")
            for q in p.params:
                if q.name in self.bindings:
                    head.raw(f"constexpr {self.index_ctype} {cname(q.name)} = "
                             f"{self.bindings[q.name]};  // bound {q.kind}")
        helpers = helper_source(self.helpers)
        if helpers:
            head.raw("")
            head.raw(helpers.rstrip("\n"))
        text = head.text() + self.w.text()
        if not text.isascii():  # comments and #line file names: NVRTC takes ASCII
            text = "\n".join(ln if ln.isascii() else _ascii_line(ln)
                             for ln in text.split("\n"))
        return text


def _ascii_line(ln: str) -> str:
    """A line whose non-ASCII characters are in a comment or a string (identifiers are
    mangled by ``cname``): escaped."""
    from .cexpr import ascii_text

    return ascii_text(ln)


from ..ir.nodes import Const as _Const  # noqa: E402

INDEX_ONE = _Const(1, INDEX)


def normalize_trace(trace) -> tuple | None:
    """``trace=dict(block=(bx, by), thread=(tx,))`` → ``((bx, by, 0), (tx, 0, 0))``: CUDA
    indices, x first, shorter tuples (or a plain int) padded with 0; either key may be left
    out (then 0).  ``None`` stays None.  Anything else is a :class:`CompileError`."""
    if trace is None:
        return None
    hint = "write trace=dict(block=(0, 0), thread=(3, 0)): blockIdx and threadIdx, x first"
    if not isinstance(trace, dict):
        raise CompileError(f"trace= takes a dict with 'block' and 'thread', got "
                           f"{type(trace).__name__} {trace!r:.60}", hint=hint)
    extra = [k for k in trace if k not in ("block", "thread")]
    if extra:
        raise CompileError(f"trace= has the unknown key {extra[0]!r}", hint=hint)
    out = []
    for key, limits in (("block", (2 ** 31 - 1, 65535, 65535)), ("thread", (1024, 1024, 64))):
        v = trace.get(key, (0, 0, 0))
        if isinstance(v, numbers.Integral) and not isinstance(v, bool):
            v = (v,)
        if not isinstance(v, (tuple, list)) or not 1 <= len(v) <= 3 or not all(
                isinstance(x, numbers.Integral) and not isinstance(x, bool) for x in v):
            raise CompileError(f"trace {key}={v!r:.60} is not 1 to 3 integers", hint=hint)
        v = tuple(int(x) for x in v) + (0,) * (3 - len(v))
        for x, lim, d in zip(v, limits, "xyz"):
            if not 0 <= x < lim:
                raise CompileError(f"trace {key} index {d}={x} is out of range "
                                   f"(0 <= {d} < {lim})", hint=hint)
        out.append(v)
    return tuple(out)


def generate(proc, bindings: dict | None = None, index_bits: int | None = None,
             trace=None, target=None) -> CudaModule:
    """Lower ``proc`` (a Proc or ProcDef) with ``bindings`` fixing sizes, for the
    architecture ``target`` (a ``gpudsl.targets`` name or ``Target``; None: the default
    target), whose limits the code respects; ``trace`` (see :func:`normalize_trace`) adds
    a ``printf`` of every assignment the traced thread executes."""
    p = _proc_ir(proc)
    if p.instr is not None:
        raise CompileError(f"{p.name} is an @instr: it is emitted where it is called, not "
                           "launched", p.loc)
    b = check_bindings(p, dict(bindings or {}))
    if index_bits is None:
        index_bits = _static_index_bits(p, b)
    if index_bits not in (32, 64):
        raise CompileError(f"index_bits must be 32 or 64, got {index_bits}")
    return ModuleWriter(p, b, index_bits, normalize_trace(trace), target).run()


def cuda_source(proc, **bindings) -> str:
    """The CUDA C translation unit of ``proc`` (``proc.cuda_source(**bindings)``)."""
    return generate(proc, bindings).source
