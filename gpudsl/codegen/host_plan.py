"""What a proc becomes on the host: kernels, temporaries and the launch program.

docs/language.md (meaning): each outermost ``@ BLOCKS`` loop nest at host level is one kernel
launch; host-level code that touches memory outside any ``@ BLOCKS`` loop runs
as a single-thread kernel; ``GLOBAL`` arrays allocated at host level are
temporaries owned by the launch.  A host-level ``seq`` loop or ``if`` around
kernels (bounds and conditions over sizes and index parameters only) stays on
the host: the runtime runs it in Python and launches the kernels inside with
the loop variable as a kernel argument.

:func:`split_host` cuts the (inlined) body into :class:`HostKernel` pieces and a
host program of :class:`LaunchStep` / :class:`HostLoop` / :class:`HostIf` steps.
:func:`gpudsl.ir.control.evaluate` (re-exported here) computes control expressions
(grid sizes, loop bounds) with Python's meaning of ``//`` and ``%``.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..errors import CompileError, SrcLoc
from ..ir.nodes import (Alloc, AsyncCopy, Assign, Atomic, Call, Expr, For, If, Pass, Read,
                        Reduce, Stmt, TmaLoad, TmaStore, Wgmma)
from ..ir.control import NotConstant, control_names, evaluate  # noqa: F401 (re-exported)
from ..ir.types import BLOCKS, GLOBAL, THREADS, DType
from ..ir.sync_meaning import is_sync
from ..ir.visitor import walk

# ----------------------------------------------------------------- results


@dataclass(frozen=True)
class KernelParam:
    """One parameter of a generated ``__global__`` function, in order.

    ``kind``: ``"array"`` (a pointer to a tensor argument or a temporary),
    ``"scalar"`` (a scalar parameter of the proc, by value), ``"size"`` /
    ``"index"`` (control integers of the proc) or ``"hostvar"`` (the variable of a
    host-level loop around the launch) or ``"tensormap"`` (the tensor map of a GLOBAL
    argument read by bulk tensor copies: ``tmap``).  ``ctype`` is the C type of the
    parameter (the pointer type for arrays and tensor maps)."""

    name: str
    cname: str
    kind: str
    dtype: DType
    ctype: str
    written: bool = False
    temporary: bool = False
    tmap: tuple | None = None   # "tensormap": (array, box extents, the array's shape, swizzle)


@dataclass(frozen=True)
class KernelInfo:
    """A ``__global__`` function: its name, parameters and launch geometry.

    ``grid`` holds the extents of blockIdx.x, .y, .z as control expressions over
    sizes, index parameters and host loop variables (evaluate them with
    :func:`evaluate`); ``block`` the constant blockDim.  A kernel whose grid has
    an extent <= 0 is not launched (its loop runs no iteration)."""

    name: str
    params: tuple[KernelParam, ...]
    grid: tuple[Expr, Expr, Expr]
    block: tuple[int, int, int]
    serial: bool = False
    loc: SrcLoc | None = None
    dynamic_shared_bytes: int = 0  # > 0 when SHARED arrays exceed 48 KiB (opt-in launch)

    @property
    def threads_per_block(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


@dataclass(frozen=True)
class Temporary:
    """A GLOBAL array the proc allocates at host level (``shape == ()``: one element)."""

    name: str
    dtype: DType
    shape: tuple[Expr, ...]
    loc: SrcLoc | None = None


@dataclass(frozen=True)
class LaunchStep:
    kernel: str


@dataclass(frozen=True)
class HostLoop:
    iter: str
    lo: Expr
    hi: Expr
    body: tuple


@dataclass(frozen=True)
class HostIf:
    cond: Expr
    body: tuple
    orelse: tuple


@dataclass
class CudaModule:
    """Everything code generation produced for one proc."""

    proc_name: str
    source: str
    kernels: dict[str, KernelInfo]
    program: tuple
    temporaries: tuple[Temporary, ...]
    bindings: dict[str, int]
    index_bits: int
    uses_half: bool = False
    needs_binding: tuple[str, ...] = field(default=())
    # the target features the code needs (gpudsl.targets names: setmaxnreg...): NVRTC
    # builds it for an architecture that has them (targets.arch_with)
    features: frozenset = field(default=frozenset())
    # the inlined body, whose index terms decide the width per launch (codegen/ranges.py)
    index_body: tuple = field(default=(), repr=False, compare=False)


class NeedsBinding(CompileError):
    """Code generation needs the values of some sizes (thread loop bounds, SHARED or
    REGISTER shapes must be constants).  ``names`` lists them."""

    def __init__(self, names, message, loc=None):
        self.names = tuple(sorted(names))
        super().__init__(message, loc,
                         "bind them: proc.cuda_source(" +
                         ", ".join(f"{n}=..." for n in self.names) +
                         ") or proc.compile(backend, ...); Kernel objects bind them from "
                         "the arguments' shapes automatically")


# ----------------------------------------------------------------- evaluation


def reads_memory(e) -> bool:
    return any(isinstance(n, Read) for n in walk(e))


# ----------------------------------------------------------------- host splitting


@dataclass
class HostKernel:
    """A piece of the body that becomes one kernel: a BLOCKS nest or a run of
    serial host statements."""

    name: str
    body: tuple  # (the BLOCKS For,) or the serial statements
    serial: bool
    host_vars: tuple[str, ...]  # enclosing host loop variables, outer first
    loc: SrcLoc | None


def has_memory_effect(s: Stmt) -> bool:
    for n in walk(s):
        if isinstance(n, (Assign, Reduce, Atomic, Call, AsyncCopy, Wgmma, TmaLoad, TmaStore)) or \
                is_sync(n):
            return True
    return False


def contains_blocks(s: Stmt) -> bool:
    return any(isinstance(n, For) and n.mapping == BLOCKS for n in walk(s))


def _err(msg, loc, hint=None):
    return CompileError(msg, loc, hint)


class HostSplitter:
    def __init__(self, proc_name: str):
        self.proc_name = proc_name
        self.kernels: list[HostKernel] = []
        self.temporaries: list[Temporary] = []
        self.temp_names: set[str] = set()

    def _new_kernel(self, body, serial, host_vars, loc) -> LaunchStep:
        from .cexpr import ascii_ident

        name = f"{ascii_ident(self.proc_name)}_k{len(self.kernels)}"
        self.kernels.append(HostKernel(name, tuple(body), serial, tuple(host_vars), loc))
        return LaunchStep(name)

    def block(self, body: tuple, host_vars: tuple = ()) -> tuple:
        steps: list = []
        serial: list[Stmt] = []

        def flush():
            if serial:
                steps.append(self._new_kernel(serial, True, host_vars, serial[0].loc))
                serial.clear()

        for s in body:
            if isinstance(s, Alloc):
                if s.mem.per_block:
                    raise _err(f"SHARED array '{s.name}' is allocated outside any @ BLOCKS "
                               "loop", s.loc, "allocate SHARED memory inside a BLOCKS loop, "
                               "at block level")
                # GLOBAL (and host-level REGISTER) allocations are launch temporaries.
                if s.name not in self.temp_names:
                    self.temp_names.add(s.name)
                    self.temporaries.append(Temporary(s.name, s.ty, s.shape, s.loc))
                continue
            if isinstance(s, For) and s.mapping == BLOCKS:
                flush()
                steps.append(self._new_kernel((s,), False, host_vars, s.loc))
                continue
            if isinstance(s, For) and s.mapping == THREADS:
                raise _err(f"the @ THREADS loop '{s.iter}' is outside any @ BLOCKS loop", s.loc,
                           "THREADS loops stand inside a BLOCKS loop")
            if isinstance(s, For) and contains_blocks(s):
                if s.kind == "par":
                    raise _err(f"the par loop '{s.iter}' around @ BLOCKS loops is not mapped",
                               s.loc, "map it to BLOCKS (parallelize_loop) or make it seq")
                for b in (s.lo, s.hi):
                    if reads_memory(b):
                        raise _err(f"the host-level loop '{s.iter}' around kernel launches has "
                                   "bounds that read memory", s.loc,
                                   "bounds of host loops use sizes and index parameters only")
                flush()
                inner = self.block(s.body, host_vars + (s.iter,))
                steps.append(HostLoop(s.iter, s.lo, s.hi, inner))
                continue
            if isinstance(s, If) and contains_blocks(s):
                if reads_memory(s.cond):
                    raise _err("an 'if' around kernel launches has a condition that reads "
                               "memory", s.loc, "such conditions use sizes and index "
                               "parameters only; move the test inside the kernel")
                flush()
                steps.append(HostIf(s.cond, self.block(s.body, host_vars),
                                    self.block(s.orelse, host_vars)))
                continue
            if isinstance(s, Pass) or not has_memory_effect(s):
                continue
            serial.append(s)
        flush()
        return tuple(steps)


def launches(program) -> list[str]:
    """Kernel names in program order (flattened)."""
    out = []
    for st in program:
        if isinstance(st, LaunchStep):
            out.append(st.kernel)
        elif isinstance(st, HostLoop):
            out += launches(st.body)
        elif isinstance(st, HostIf):
            out += launches(st.body) + launches(st.orelse)
    return out


def walk_program(program, env: dict):
    """Yield ``(kernel name, env)`` for each launch the program makes, in order."""
    for st in program:
        if isinstance(st, LaunchStep):
            yield st.kernel, env
        elif isinstance(st, HostLoop):
            lo, hi = evaluate(st.lo, env), evaluate(st.hi, env)
            for v in range(lo, hi):
                yield from walk_program(st.body, {**env, st.iter: v})
        elif isinstance(st, HostIf):
            yield from walk_program(st.body if evaluate(st.cond, env) else st.orelse, env)


__all__ = ["KernelParam", "KernelInfo", "Temporary", "LaunchStep", "HostLoop", "HostIf",
           "CudaModule", "NeedsBinding", "NotConstant", "evaluate", "HostSplitter",
           "HostKernel", "launches", "walk_program", "GLOBAL"]
