"""``proc.compile(backend, target=None, **bindings)`` → a callable ``Kernel``.

The *backend* is how the code runs (``"cuda"``, ``"emulator"``, a registered one); the
*target* is the architecture it is proved and generated for (``"sm_80"``, a ``Target``):
by default the backend's (the GPU's own, ``sm_90`` without one; the emulator's
``targets.EMULATED_TARGET``).  The old ``target="emulator"`` (a backend) still works
with a ``DeprecationWarning``.

A call ``kernel(a=2.0, x=x, y=y)`` (or positional, in the proc's parameter order):

1. binds and checks every argument before anything runs: names, missing ones,
   dtypes, number of dimensions, contiguity, sizes inferred from shapes and
   consistent with each other and with compile-time bindings, scalar types and
   ranges, the proc's asserts, and that distinct tensor arguments do not overlap
   in memory; every failure is a ``gpudsl.LaunchError`` naming the reason;
2. picks the compiled specialization: 32-bit index arithmetic unless an extent
   exceeds it, and, where thread loop bounds or SHARED/REGISTER shapes depend on
   sizes, those sizes bound to the arguments' values (compiled once per value and
   cached in memory and on disk);
3. computes every launch of the host program (grid sizes, host loops) and checks
   the grid limits, still before anything runs;
4. runs: CUDA backend: numpy arrays are copied to the device and the written ones
   copied back; device arrays (PyTorch, CuPy: ``__cuda_array_interface__`` /
   DLPack) are used in place; GLOBAL temporaries are allocated for the call; the
   kernels launch in program order on one stream.  Emulator backend: the same
   kernels run on the CPU (``gpudsl.runtime.emulator``) on the numpy arrays in
   place.

This module is the compile-and-launch layer: it sits above code generation
(``gpudsl.codegen``) and the runtime (``gpudsl.runtime``, which launches by
plain kernel signatures and knows nothing of the IR).

``kernel.source`` is the CUDA C, ``kernel.resources`` the per-kernel registers,
shared memory and spills reported by ptxas (NVRTC runs without a GPU, so the
emulator backend reports them too).
"""
from __future__ import annotations

import math
import threading
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..codegen import NeedsBinding, generate, index_bits_for, walk_program
from ..codegen.generate import check_bindings, normalize_trace
from ..ir.inline import inline_calls, written_names
from ..display import status
from ..errors import CheckError, CompileError, LaunchError
from ..ir.binding import Bound
from ..ir.control import NotConstant, evaluate
from ..ir.nodes import ProcDef
from ..ir.procdef import as_procdef
from .. import targets
from ..runtime.backends import BACKENDS, backend_of
from ..runtime.launch import ArrayRef, Launch
from ..runtime.tensor_maps import TensorMapRef
from ..runtime.signature import KernelSig
from .arguments import bind_arguments
from .fast_call import MAX_ENTRIES, CallKey, Miss, build_entry, by_name


# ----------------------------------------------------------------- compiled code


@dataclass
class _Spec:
    module: Any  # codegen.CudaModule
    backend: Any
    resources: dict | None = None


def signatures(module) -> list[KernelSig]:
    """The plain signatures of a generated module's kernels (what runtime/ launches by)."""
    return [KernelSig(k.name, [p.ctype for p in k.params], [p.name for p in k.params])
            for k in module.kernels.values()]


# ----------------------------------------------------------------- the proof first

def prove(ir: ProcDef, bindings: dict, arch=None):
    """``check(ir, **bindings)`` for the architecture ``arch`` (a name or ``Target``;
    None: the default target):
    check() keeps the one cache of proofs (per proc, its locations, bindings, budget and
    target), so a proc compiled again, or proved by the graph before its unit compiles,
    is not proved twice."""
    from ..analysis import check

    return check(ir, **bindings, _target=arch)


def backend_arch(backend: str) -> str | None:
    """The architecture the backend ``backend`` runs code on (the proof's target)."""
    arch = getattr(BACKENDS[backend], "arch", None)
    return arch() if callable(arch) else None


def proof_or_refusal(ir: ProcDef, bindings: dict, check: bool, what: str, arch=None):
    """The compile paths' one proof step (a ``Kernel`` and each proc of a ``Unit``):
    ``check()``'s report for ``arch``, or ``CheckError`` when it is not proved (``what``:
    what is then not compiled); None with ``check=False``."""
    if not check:
        return None
    report = prove(ir, bindings, arch)
    if not report.ok:
        raise CheckError(report, hint=f"{ir.name} is not proved safe, so {what} is not "
                         "compiled; fix the problems above, or compile with check=False "
                         "to run it unproved")
    return report


def backend_and_target(backend, target, where: str) -> tuple[str, targets.Target, bool]:
    """A compile's backend name, the target (architecture) it proves and generates for,
    and whether the call named that target: ``target`` (a name or ``Target``) when
    given, else the backend's own (``backend_arch``).  ``target`` naming a backend is
    the old spelling of ``backend`` (``DeprecationWarning``)."""
    try:
        backend, target = backend_of(backend, target, where)
    except ValueError as e:
        raise CompileError(str(e)) from None
    if backend not in BACKENDS:
        raise CompileError(f"unknown backend {backend!r}",
                           hint="backends: " + ", ".join(map(repr, BACKENDS)))
    try:
        tgt = targets.target(target if target is not None else backend_arch(backend))
    except ValueError as e:
        raise CompileError(str(e), hint="name an architecture gpudsl describes "
                           "(gpudsl.targets.TARGETS) or register one with "
                           "gpudsl.targets.register_target; the backend is backend=") from None
    return backend, tgt, target is not None


class Kernel:
    """A compiled proc: call it with the proc's arguments.

    ``kernel.proved`` says whether ``check()`` proved the proc before it was compiled
    (``compile(..., check=False)`` skips the proof), ``kernel.report`` is that proof.

    Compiled with ``trace=dict(block=(bx, by, bz), thread=(tx, ty, tz))`` (CUDA's
    ``blockIdx``/``threadIdx``, x first; shorter tuples are padded with 0), the kernel
    prints, from that one thread only, every assignment, reduction and atomic it executes:
    ``file:line: name[indices] = value``.  The lines go to Python's ``sys.stdout`` (a
    notebook shows them) on the emulator and on the GPU alike, and ``kernel.trace_output``
    holds the text of the last call.

    ``kernel.backend`` is the backend's name (``"cuda"``, ``"emulator"``),
    ``kernel.target`` the ``gpudsl.targets.Target`` it was proved and generated for.
    """

    def __init__(self, proc, backend: str | None = None, bindings: dict | None = None,
                 check: bool = True, trace: dict | None = None, target=None):
        self.backend, self.target, named = backend_and_target(backend, target, "compile")
        # a named target is built for (NVRTC's architecture; the backend's own otherwise)
        self._arch = self.target.code_arch if named else None
        self.proc = proc
        self.ir: ProcDef = as_procdef(proc) or proc
        self.bindings = check_bindings(self.ir, dict(bindings or {}))
        # ((bx, by, bz), (tx, ty, tz)) or None; a traced kernel's source differs, so its
        # compiled code is a cache entry of its own
        self.trace = normalize_trace(trace)
        self.trace_output = ""  # what the traced thread printed in the last call
        with status(f"gpudsl: proving and compiling {self.ir.name} for {self.backend} "
                    f"({self.target})"):
            self._build(check)

    def _build(self, check: bool) -> None:
        self.report = proof_or_refusal(self.ir, self.bindings, check, "it", self.target)
        self.proved = self.report is not None
        self._written = written_names(inline_calls(self.ir).body)
        self._specs: dict[tuple, _Spec] = {}
        self._plans: dict[tuple, tuple] = {}  # (sizes, shapes) -> (spec, launches, scalars?)
        self._lock = threading.Lock()
        self._late: tuple[str, ...] = ()  # sizes bound from the arguments
        self._last: _Spec | None = None
        self._key = CallKey(self.ir)  # the fast path: signature -> entry (fast_call.py)
        self._fast: dict = {}
        try:
            self._last = self._spec({}, None)
        except NeedsBinding as e:
            self._late = e.names

    # ------------------------------------------------------------ compiling

    def _spec(self, env: dict, index_bits: int | None) -> _Spec:
        late = {n: env[n] for n in self._late if n in env}
        key = (tuple(sorted(late.items())), index_bits)
        with self._lock:
            spec = self._specs.get(key)
            if spec is not None:
                return spec
            while True:
                try:
                    module = generate(self.ir, {**self.bindings, **late}, index_bits,
                                      trace=self.trace and dict(zip(("block", "thread"),
                                                                    self.trace)),
                                      target=self.target)
                    break
                except NeedsBinding as e:
                    missing = [n for n in e.names if n not in late]
                    if not env or any(n not in env for n in missing) or not missing:
                        raise
                    self._late = tuple(sorted(set(self._late) | set(missing)))
                    late.update({n: env[n] for n in missing})
                    key = (tuple(sorted(late.items())), index_bits)
            spec = self._specs.get(key)
            if spec is None:
                spec = _Spec(module, self._backend(module))
                self._specs[key] = spec
            return spec

    def _backend(self, module):
        kw = {}
        if self._arch is not None:
            kw["arch"] = targets.arch_with(self._arch, module.features)
        if self.trace is not None:
            _check_trace_reaches(self.trace, module, self.ir.name)
            kw["capture_output"] = True
        return BACKENDS[self.backend](module.source, signatures(module), **kw)

    # ------------------------------------------------------------ introspection

    @property
    def module(self):
        if self._last is None:
            raise CompileError(f"{self.ir.name}: the code depends on the sizes "
                               f"{', '.join(self._late)}; call the kernel once or compile with "
                               f"them bound: {self.ir.name}.compile(backend, " +
                               ", ".join(f"{n}=..." for n in self._late) + ")")
        return self._last.module

    @property
    def source(self) -> str:
        """The CUDA C translation unit (of the most recently used specialization)."""
        return self.module.source

    @property
    def kernels(self) -> dict:
        return self.module.kernels

    @property
    def resources(self) -> dict:
        """``{kernel name: Resources(registers, shared_bytes, spill_*_bytes, ...)}``."""
        spec = self._last
        if spec is None:
            self.module  # raises with the explanation
        if spec.resources is None:
            res = getattr(spec.backend, "resources", None)
            if res is None:
                from ..runtime.driver import device_arch
                from ..runtime.nvrtc import compile_cubin

                res = compile_cubin(spec.module.source, targets.arch_with(
                    self._arch or device_arch(), spec.module.features)).resources
            spec.resources = dict(res)
        return spec.resources

    def sass(self, arch: str | None = None, device: str | None = None, **sizes):
        """The machine-code report of the kernel that runs (``perf.sass_report``): the
        CUDA C of this kernel (sizes as parameters where it takes them so; ``sizes``
        pick the specialization of a kernel compiled per size) built for ``arch`` (None:
        the target the kernel was compiled for, else the default target) with
        NVRTC and disassembled (needs ``pip install 'gpudsl[sass]'``): per kernel and
        per loop, instruction counts by class, global loads in flight and the distance
        to their first use, registers, spills and occupancy on ``device``."""
        from ..perf.sass_report import sass_report

        spec = self._spec(sizes, None) if self._late and sizes else None
        module = spec.module if spec is not None else self.module
        return sass_report(module, arch or self._arch, device, self.ir.name)

    def __repr__(self):
        return f"<gpudsl Kernel {self.ir.name} backend={self.backend} target={self.target}>"

    def _display_parts(self):
        from ..ir.printer import print_expr

        geometry, note = [], ""
        if self._last is None:
            note = (f"the code depends on the sizes {', '.join(self._late)}: the geometry "
                    "is known after the first call")
        else:
            for k in self._last.module.kernels.values():
                grid = "(" + ", ".join(print_expr(e) for e in k.grid) + ")"
                geometry.append([k.name, grid, k.block, k.threads_per_block,
                                 k.dynamic_shared_bytes])
        spec = self._last
        resources = spec.resources if spec is not None and spec.resources is not None else \
            (getattr(spec.backend, "resources", None) if spec is not None else None)
        return (self.ir.name, self.backend, self.proved, geometry, resources, note,
                self.target.name)

    def __str__(self):
        from ..display import kernel_text

        return kernel_text(*self._display_parts())

    def _repr_pretty_(self, printer, cycle) -> None:
        printer.text(str(self))

    def _repr_html_(self) -> str:
        """A notebook's display: launch geometry, resources (when ptxas' numbers are
        known; ``kernel.resources`` computes them), backend and target, proved or not."""
        from ..display import kernel_html

        return kernel_html(*self._display_parts())

    # ------------------------------------------------------------ calling

    def bind(self, *args, **kwargs) -> Bound:
        """Check the arguments as a call would, without running anything."""
        return bind_arguments(self.ir, args, kwargs, self.bindings, self.backend,
                              self._written)

    def __call__(self, *args, **kwargs) -> None:
        if self.trace is None:
            key, vals = self._key(args, kwargs)
            if key is not None:
                try:
                    hit = self._fast.get(key)
                except TypeError:  # an argument of a type the fast path does not take
                    key = hit = None
                if hit is not None:
                    entry, self._last = hit
                    try:
                        printed = entry(vals)
                    except Miss:
                        pass
                    else:
                        if printed:
                            _print(printed)
                        return
        b = self.bind(*args, **kwargs)
        spec, plan, raw = _planned(self, b)
        module = spec.module
        temporaries = list(temporary_shapes(module, b.env))
        if self.trace is None:
            printed = spec.backend.run(b.arrays, temporaries, plan)
            if key is not None:
                self._remember(key, b, spec, raw, temporaries)
            if printed:  # an @instr's printf, on the emulator
                _print(printed)
            return
        self.trace_output = ""
        try:
            spec.backend.run(b.arrays, temporaries, plan)
        finally:  # what was printed before a fault is shown too
            self.trace_output = getattr(spec.backend, "output", "") or ""
            _print(self.trace_output)

    def _remember(self, key, b: Bound, spec: _Spec, raw, temporaries) -> None:
        """Keep the fast path's entry for the signature ``key`` of the call ``b``, which
        passed every check (``fast_call``)."""
        entry = build_entry(self.ir, b, by_name(raw, _ScalarRef), temporaries,
                            spec.backend, self._written)
        if entry is not None:
            if len(self._fast) >= MAX_ENTRIES:
                self._fast.clear()
            self._fast[key] = (entry, spec)


MAX_PLANS = 256


def _planned(self: Kernel, b: Bound) -> tuple[_Spec, list[Launch], list[Launch]]:
    """Kernel ``self``'s compiled variant and launches for ``b``: computed once per sizes and
    shapes (the index width, the grids and the host loops depend on nothing else),
    then only the call's scalar values are put in; the launches with those values,
    and as planned (scalars as ``_ScalarRef``)."""
    key = (tuple(sorted(b.env.items())), tuple(a.shape for a in b.arrays.values()))
    hit = self._plans.get(key)
    if hit is None:
        numels = [math.prod(a.shape) for a in b.arrays.values()]
        base = self._spec(b.env, None) if self._late else self._last
        bits = index_bits_for(base.module, b.env, numels)
        spec = base if bits == base.module.index_bits else self._spec(b.env, bits)
        plan = plan_launches(spec.module, b, self.ir.name, scalars_by_name=True,
                             limits=self.target.max_grid_dims)
        if len(self._plans) >= MAX_PLANS:
            self._plans.clear()
        hit = self._plans[key] = (spec, plan, any(isinstance(a, _ScalarRef)
                                                  for ln in plan for a in ln.args))
    spec, raw, has_scalars = hit
    self._last = spec
    plan = raw
    if has_scalars:
        plan = [replace(ln, args=tuple(b.scalars[a.name] if isinstance(a, _ScalarRef) else a
                                       for a in ln.args)) for ln in raw]
    return spec, plan, raw



@dataclass(frozen=True)
class _ScalarRef:
    """In a cached plan: the call's value of scalar parameter ``name``."""

    name: str


def plan_launches(module, b: Bound, name: str, scalars_by_name: bool = False,
                  limits: tuple | None = None) -> list[Launch]:
    """Every launch of a generated module's host program for the bound arguments ``b``
    (grid sizes and host loops computed), checked against the grid limits before the
    first one runs (``limits``: the target's ``max_grid_dims``; None: the default
    target's)."""
    limits = limits or targets.target().max_grid_dims
    plan = []
    try:
        for kname, kenv in walk_program(module.program, b.env):
            k = module.kernels[kname]
            grid = tuple(int(evaluate(e, kenv)) for e in k.grid)
            if min(grid) <= 0:
                continue
            # blockIdx.y and .z drive grid-stride loops: launch at most the limit
            grid = (grid[0], *(min(g, lim) for g, lim in zip(grid[1:], limits[1:])))
            for g, lim, d in zip(grid, limits, "xyz"):
                if g > lim:
                    raise LaunchError(f"kernel {kname} of {name} needs {g} blocks in "
                                      f"gridDim.{d}; CUDA allows {lim}", k.loc,
                                      "map the largest BLOCKS loop innermost (to x), or "
                                      "divide it")
            plan.append(_launch(module, k, grid, kenv, b, scalars_by_name))
    except (NotConstant, ZeroDivisionError) as e:
        raise LaunchError(f"cannot compute the launches of {name}: {e}") from None
    return plan


def _print(text: str) -> None:
    """Kernel output on Python's ``sys.stdout`` (which a notebook captures)."""
    import sys

    if text:
        sys.stdout.write(text)
        sys.stdout.flush()


def _check_trace_reaches(trace, module, name: str) -> None:
    """Refuse a traced thread that lies outside the block of every kernel."""
    _, thread = trace
    blocks = [k.block for k in module.kernels.values()]
    if blocks and not any(all(t < b for t, b in zip(thread, blk)) for blk in blocks):
        raise CompileError(f"trace thread=({', '.join(map(str, thread))}) is outside the block "
                           f"of every kernel of {name} (block sizes: "
                           + ", ".join("(" + ", ".join(map(str, b)) + ")" for b in blocks) + ")",
                           hint="threadIdx, x first: pick a thread inside the block")


MAX_TEMPORARY_BYTES = 2 ** 62   # beyond any machine's memory, and inside numpy's indexing


def temporary_shapes(module, env):
    """(name, shape, numpy dtype) of each GLOBAL temporary of a launch; one whose size
    no machine can hold is a LaunchError at its allocation (exact integers: a size
    computed in 64 bits could wrap to something small)."""
    for t in module.temporaries:
        shape = tuple(int(evaluate(d, env)) for d in t.shape) or (1,)
        dt = np.dtype(t.dtype.numpy) if t.dtype.numpy else np.dtype("uint16")
        _refuse_impossible(t, shape, dt)
        yield t.name, shape, dt


def _refuse_impossible(t, shape: tuple, dt) -> None:
    if min(shape) < 0:
        raise LaunchError(f"the GLOBAL array '{t.name}' has a negative extent: shape "
                          f"{list(shape)}", t.loc, "check the sizes it is computed from")
    nbytes = math.prod(shape) * dt.itemsize
    if nbytes > MAX_TEMPORARY_BYTES:
        raise LaunchError(f"the GLOBAL array '{t.name}' of shape {list(shape)} needs "
                          f"{nbytes:,} bytes, more than any device or host can allocate",
                          t.loc, "check the sizes it is computed from")


def _launch(module, k, grid, kenv, b: Bound, scalars_by_name: bool = False) -> Launch:
    """One launch of kernel ``k``: its arguments in parameter order (scalars as
    :class:`_ScalarRef` with ``scalars_by_name``)."""
    itype = np.int32 if module.index_bits == 32 else np.int64
    args = []
    for p in k.params:
        if p.kind == "array":
            args.append(ArrayRef(p.name))
        elif p.kind == "scalar":
            args.append(_ScalarRef(p.name) if scalars_by_name else b.scalars[p.name])
        elif p.kind == "tensormap":
            args.append(_tensor_map(p, {**b.env, **kenv}))
        else:
            args.append(itype(kenv[p.name]))
    return Launch(k.name, grid, k.block, tuple(args), k.dynamic_shared_bytes)


def _tensor_map(p, env) -> TensorMapRef:
    """The tensor map argument of a ``"tensormap"`` parameter: the array's dimensions
    for this call, the box its copies read."""
    name, box, shape, swizzle = p.tmap
    dims = tuple(int(evaluate(d, env)) for d in shape)
    dt = p.dtype.numpy or "uint16"
    return TensorMapRef(name, dims, tuple(box), p.dtype.bits // 8,
                        "bfloat16" if p.dtype.name == "bf16" else np.dtype(dt).name, swizzle)


def compile_proc(proc, backend: str | None = None, check: bool = True,
                 trace: dict | None = None, target=None, **bindings) -> Kernel:
    """``proc.compile(backend, target=None, **bindings)``: prove the proc for ``target``
    (``check()``, cached per proc, bindings and target; ``gpudsl.CheckError`` with the
    report when unproved, unless ``check=False``), generate CUDA C for it and build it
    for the ``backend`` (``"cuda"``, the default: NVRTC cubin for the target, by default
    the device's architecture, ``sm_90`` without one; ``"emulator"``: g++ with gpudsl's
    emulation header, proved for ``targets.EMULATED_TARGET`` by default).
    ``trace=dict(block=(0, 0), thread=(3, 0))`` builds a kernel that prints each
    assignment that one thread executes (see ``Kernel``)."""
    return Kernel(proc, backend, bindings, check=check, trace=trace, target=target)


__all__ = ["Kernel", "compile_proc", "prove", "plan_launches", "temporary_shapes", "bind_arguments", "Bound", "BACKENDS",
           "signatures"]
