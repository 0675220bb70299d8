"""``proc.compile(target, **bindings)`` → a callable :class:`Kernel`.

A call ``kernel(a=2.0, x=x, y=y)`` (or positional, in the proc's parameter order):

1. binds and checks every argument before anything runs: names, missing ones,
   dtypes, number of dimensions, contiguity, sizes inferred from shapes and
   consistent with each other and with compile-time bindings, scalar types and
   ranges, the proc's asserts, and that distinct tensor arguments do not overlap
   in memory; every failure is a :class:`gpudsl.LaunchError` naming the reason;
2. picks the compiled specialization: 32-bit index arithmetic unless an extent
   exceeds it, and, where thread loop bounds or SHARED/REGISTER shapes depend on
   sizes, those sizes bound to the arguments' values (compiled once per value and
   cached in memory and on disk);
3. computes every launch of the host program (grid sizes, host loops) and checks
   the grid limits, still before anything runs;
4. runs: GPU target: numpy arrays are copied to the device and the written ones
   copied back; device arrays (PyTorch, CuPy: ``__cuda_array_interface__`` /
   DLPack) are used in place; GLOBAL temporaries are allocated for the call; the
   kernels launch in program order on one stream.  Emulator target: the same
   kernels run on the CPU (:mod:`gpudsl.runtime.emulator`) on the numpy arrays in
   place.

``kernel.source`` is the CUDA C, ``kernel.resources`` the per-kernel registers,
shared memory and spills reported by ptxas (NVRTC runs without a GPU, so the
emulator target reports them too).
"""
from __future__ import annotations

import threading
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..errors import CompileError, LaunchError
from ..ir.nodes import ProcDef, Var
from ..ir.printer import print_expr
from ..ir.visitor import walk

TARGETS = ("cuda", "emulator")
GRID_LIMITS = (2 ** 31 - 1, 65535, 65535)


# ----------------------------------------------------------------- arguments


@dataclass
class _Array:
    name: str
    value: Any  # the user's object
    host: np.ndarray | None  # numpy view (host arrays)
    device: Any = None  # interop.DeviceArray (device arrays)
    shape: tuple = ()
    written: bool = False

    @property
    def on_device(self) -> bool:
        return self.device is not None

    def byte_range(self) -> tuple[int, int]:
        if self.device is not None:
            return self.device.ptr, self.device.ptr + self.device.nbytes
        a = self.host
        lo = a.__array_interface__["data"][0]
        return lo, lo + a.nbytes


@dataclass
class Bound:
    """The checked arguments of one call."""

    env: dict[str, int]  # sizes and index parameters
    scalars: dict[str, Any]
    arrays: dict[str, _Array] = field(default_factory=dict)


def _is_int(v) -> bool:
    return isinstance(v, (int, np.integer)) and not isinstance(v, (bool, np.bool_))


def _dtype_ok(prm, dtype: np.dtype, bf16_flag: bool = False) -> bool:
    if prm.ty.name == "bf16":
        return bf16_flag or dtype.name == "bfloat16"
    return prm.ty.numpy is not None and dtype == np.dtype(prm.ty.numpy)


def _solve(d, name: str, actual: int, env: dict):
    """The value of ``name`` making shape expression ``d`` equal ``actual`` (affine)."""
    from ..codegen.plan import NotConstant, evaluate

    try:
        f = [evaluate(d, {**env, name: x}) for x in (0, 1, 2)]
    except (NotConstant, ZeroDivisionError):
        return None
    slope = f[1] - f[0]
    if slope == 0 or f[2] - f[1] != slope or (actual - f[0]) % slope:
        return None
    v = (actual - f[0]) // slope
    try:
        return v if evaluate(d, {**env, name: v}) == actual else None
    except (NotConstant, ZeroDivisionError):
        return None


def bind_arguments(pdef: ProcDef, args: tuple, kwargs: dict, bindings: dict, target: str,
                   written: set[str]) -> Bound:
    from ..codegen.plan import NotConstant, evaluate

    pname = pdef.name
    names = [p.name for p in pdef.params]
    if len(args) > len(names):
        raise LaunchError(f"{pname} takes {len(names)} argument(s) ({', '.join(names)}), got "
                          f"{len(args)} positional ones")
    given = dict(zip(names, args))
    for k, v in kwargs.items():
        if k in given:
            raise LaunchError(f"argument '{k}' of {pname} is given twice")
        given[k] = v
    unknown = sorted(set(given) - set(names))
    if unknown:
        raise LaunchError(f"{pname} has no parameter {', '.join(repr(u) for u in unknown)}",
                          pdef.loc, f"its parameters are: {', '.join(names)}")
    env: dict[str, int] = {}
    origin: dict[str, str] = {}
    b = Bound(env, {})
    for prm in pdef.params:
        v = given.get(prm.name)
        if prm.kind in ("size", "index"):
            if v is None:
                continue
            if not _is_int(v):
                raise LaunchError(f"{prm.kind} parameter '{prm.name}' of {pname} must be an "
                                  f"integer, got {v!r}", prm.loc)
            env[prm.name] = int(v)
            origin[prm.name] = "the argument"
        elif prm.kind == "scalar":
            if v is None:
                raise LaunchError(f"missing argument '{prm.name}' ({prm.ty.name}) of {pname}",
                                  prm.loc)
            b.scalars[prm.name] = _scalar(pname, prm, v)
        else:
            if v is None:
                raise LaunchError(f"missing array argument '{prm.name}' of {pname}", prm.loc,
                                  "pass a numpy array or a device array (PyTorch, CuPy)")
            b.arrays[prm.name] = _array(pname, prm, v, target, prm.name in written)
    # sizes from shapes
    for k, v in bindings.items():
        if k in env and env[k] != v:
            raise LaunchError(f"'{k}' of {pname} was bound to {v} at compile time, but the "
                              f"argument is {env[k]}")
        env.setdefault(k, v)
        origin.setdefault(k, "the compile-time binding")
    dims = [(prm, i, d, b.arrays[prm.name].shape[i]) for prm in pdef.params
            if prm.name in b.arrays for i, d in enumerate(prm.shape)]
    progress = True
    while progress:
        progress = False
        for prm, i, d, actual in dims:
            free = sorted({n.name for n in walk(d) if isinstance(n, Var)} - set(env))
            if len(free) != 1:
                continue
            v = _solve(d, free[0], actual, env)
            if v is not None:
                env[free[0]] = v
                origin[free[0]] = f"{prm.name}.shape[{i}]"
                progress = True
    for prm in pdef.params:
        if prm.kind in ("size", "index") and prm.name not in env:
            raise LaunchError(f"{prm.kind} '{prm.name}' of {pname} is not given" +
                              (" and cannot be inferred from the arrays' shapes"
                               if prm.kind == "size" else ""), prm.loc,
                              f"pass {prm.name}=...")
        if prm.kind == "size" and env[prm.name] <= 0:
            raise LaunchError(f"size '{prm.name}' of {pname} must be positive, got "
                              f"{env[prm.name]} (from {origin.get(prm.name, '?')})", prm.loc)
    for prm in pdef.params:
        if prm.name not in b.arrays:
            continue
        try:
            want = tuple(evaluate(d, env) for d in prm.shape)
        except (NotConstant, ZeroDivisionError):
            want = None
        got = b.arrays[prm.name].shape
        if want != got:
            used = sorted({n.name for d in prm.shape for n in walk(d) if isinstance(n, Var)})
            detail = ", ".join(f"{n}={env[n]} (from {origin.get(n, '?')})" for n in used
                               if n in env)
            raise LaunchError(f"'{prm.name}' of {pname} must have shape "
                              f"[{', '.join(print_expr(d) for d in prm.shape)}] = {want}"
                              f"{' with ' + detail if detail else ''}, but its shape is {got}",
                              prm.loc, "the sizes must agree across all arguments")
    for pred in pdef.preds:
        try:
            ok = evaluate(pred, env)
        except ZeroDivisionError:
            ok = False
        if not ok:
            used = sorted({n.name for n in walk(pred) if isinstance(n, Var)})
            vals = ", ".join(f"{n}={env[n]}" for n in used)
            raise LaunchError(f"precondition of {pname} fails: `assert {print_expr(pred)}`"
                              f"{' with ' + vals if vals else ''}", pred.loc,
                              "pass arguments (shapes, sizes, index parameters) that satisfy it")
    _check_aliasing(pname, b.arrays)
    return b


def _scalar(pname, prm, v):
    ty = prm.ty
    if isinstance(v, np.ndarray) and v.ndim == 0:
        v = v[()]
    ok = (isinstance(v, (bool, np.bool_)) if ty.kind == "bool" else
          _is_int(v) if ty.kind == "int" else
          isinstance(v, (int, float, np.integer, np.floating))
          and not isinstance(v, (bool, np.bool_)))
    if not ok:
        raise LaunchError(f"scalar '{prm.name}' of {pname} is {ty.name}, got "
                          f"{type(v).__name__} {v!r}", prm.loc)
    if ty.kind == "int":
        lo, hi = -(1 << (ty.bits - 1)), 1 << (ty.bits - 1)
        if not lo <= int(v) < hi:
            raise LaunchError(f"scalar '{prm.name}' = {v} does not fit in {ty.name}", prm.loc)
    if ty.kind == "bool":
        return np.bool_(v)
    if ty.numpy is None:
        raise LaunchError(f"scalar parameters of type {ty.name} cannot be passed from Python",
                          prm.loc, "pass the value in a one-element array")
    return np.dtype(ty.numpy).type(v)


def _array(pname, prm, v, target, written) -> _Array:
    want = prm.ty.name
    if isinstance(v, np.ndarray) or not (hasattr(v, "__cuda_array_interface__")
                                         or hasattr(v, "__dlpack_device__")
                                         or hasattr(v, "__dlpack__")):
        if not isinstance(v, np.ndarray):
            if not hasattr(v, "__array_interface__") and not hasattr(v, "__array__"):
                raise LaunchError(f"'{prm.name}' of {pname} must be an array, got "
                                  f"{type(v).__name__}", prm.loc,
                                  "pass a numpy array or a device array (PyTorch, CuPy)")
            v = np.asarray(v)
        return _host_array(pname, prm, v, v, written)
    # a device array, or a CPU tensor of a DLPack library
    if hasattr(v, "__dlpack_device__") and not hasattr(v, "__cuda_array_interface__"):
        try:
            dev_type = int(v.__dlpack_device__()[0])
        except Exception:
            dev_type = -1
        if dev_type == 1:  # kDLCPU: view as numpy without copying
            try:
                host = np.from_dlpack(v)
            except Exception:
                host = np.asarray(v)
            return _host_array(pname, prm, host, v, written)
    if target == "emulator":
        raise LaunchError(f"'{prm.name}' of {pname} is a GPU array, but this kernel runs on the "
                          "emulator (CPU)", prm.loc,
                          "pass numpy arrays (or CPU tensors), or compile for target 'cuda'")
    from .interop import as_device_array

    d = as_device_array(v)
    if not _dtype_ok(prm, d.dtype, getattr(d, "bfloat16", False)):
        raise LaunchError(f"'{prm.name}' of {pname} holds {want}, but the array's dtype is "
                          f"{'bfloat16' if getattr(d, 'bfloat16', False) else d.dtype}",
                          prm.loc)
    if len(d.shape) != len(prm.shape):
        raise LaunchError(f"'{prm.name}' of {pname} has {len(prm.shape)} dimension(s), the "
                          f"array has {len(d.shape)}", prm.loc)
    if not d.c_contiguous:
        raise LaunchError(f"'{prm.name}' of {pname} must be C-contiguous (row-major)", prm.loc,
                          "pass x.contiguous() / cupy.ascontiguousarray(x)")
    if written and getattr(d, "readonly", False):
        raise LaunchError(f"'{prm.name}' of {pname} is written by the proc but the device "
                          "array is read-only", prm.loc)
    return _Array(prm.name, v, None, d, tuple(d.shape), written)


def _host_array(pname, prm, a: np.ndarray, orig, written) -> _Array:
    if not _dtype_ok(prm, a.dtype):
        hint = f"convert it: x.astype(np.{prm.ty.numpy})" if prm.ty.numpy else None
        raise LaunchError(f"'{prm.name}' of {pname} holds {prm.ty.name}, but the array's dtype "
                          f"is {a.dtype}", prm.loc, hint)
    if a.ndim != len(prm.shape):
        raise LaunchError(f"'{prm.name}' of {pname} has {len(prm.shape)} dimension(s), the "
                          f"array has {a.ndim}", prm.loc)
    if written and not a.flags.writeable:
        raise LaunchError(f"'{prm.name}' of {pname} is written by the proc but the array is "
                          "read-only", prm.loc)
    return _Array(prm.name, orig, a, None, tuple(a.shape), written)


def _check_aliasing(pname, arrays: dict[str, _Array]):
    items = list(arrays.values())
    for i, a in enumerate(items):
        for b in items[i + 1:]:
            if a.on_device != b.on_device:
                continue
            if a.on_device:
                (l1, h1), (l2, h2) = a.byte_range(), b.byte_range()
                overlap = l1 < h2 and l2 < h1 and h1 > l1 and h2 > l2
            else:
                try:
                    overlap = np.shares_memory(a.host, b.host, max_work=100_000)
                except Exception:
                    overlap = np.may_share_memory(a.host, b.host)
            if overlap:
                raise LaunchError(f"the arrays passed as '{a.name}' and '{b.name}' of {pname} "
                                  "overlap in memory",
                                  hint="tensor arguments must be distinct buffers; pass a copy")


# ----------------------------------------------------------------- compiled code


@dataclass
class _Spec:
    module: Any  # codegen.CudaModule
    backend: Any
    resources: dict | None = None


def _signatures(module):
    from .signature import KernelSig

    return [KernelSig(k.name, [p.ctype for p in k.params], [p.name for p in k.params])
            for k in module.kernels.values()]


class Kernel:
    """A compiled proc: call it with the proc's arguments."""

    def __init__(self, proc, target: str = "cuda", bindings: dict | None = None):
        from ..codegen import NeedsBinding
        from ..codegen.generate import check_bindings
        from ..codegen.inline import inline_calls, written_names

        if target not in TARGETS:
            raise CompileError(f"unknown target {target!r}", hint="targets: 'cuda', 'emulator'")
        self.proc = proc
        self.ir: ProcDef = proc.ir if hasattr(proc, "ir") else proc
        self.target = target
        self.bindings = check_bindings(self.ir, dict(bindings or {}))
        self._written = written_names(inline_calls(self.ir).body)
        self._specs: dict[tuple, _Spec] = {}
        self._lock = threading.Lock()
        self._late: tuple[str, ...] = ()  # sizes bound from the arguments
        self._last: _Spec | None = None
        try:
            self._last = self._spec({}, None)
        except NeedsBinding as e:
            self._late = e.names

    # ------------------------------------------------------------ compiling

    def _spec(self, env: dict, index_bits: int | None) -> _Spec:
        from ..codegen import NeedsBinding, generate

        late = {n: env[n] for n in self._late if n in env}
        key = (tuple(sorted(late.items())), index_bits)
        with self._lock:
            spec = self._specs.get(key)
            if spec is not None:
                return spec
            while True:
                try:
                    module = generate(self.ir, {**self.bindings, **late}, index_bits)
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
        if self.target == "emulator":
            return _EmulatorBackend(module)
        return _CudaBackend(module)

    # ------------------------------------------------------------ introspection

    @property
    def module(self):
        if self._last is None:
            raise CompileError(f"{self.ir.name}: the code depends on the sizes "
                               f"{', '.join(self._late)}; call the kernel once or compile with "
                               f"them bound: {self.ir.name}.compile(target, " +
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
                from .driver import device_arch
                from .nvrtc import compile_cubin

                res = compile_cubin(spec.module.source, device_arch()).resources
            spec.resources = dict(res)
        return spec.resources

    def __repr__(self):
        return f"<gpudsl Kernel {self.ir.name} target={self.target}>"

    # ------------------------------------------------------------ calling

    def bind(self, *args, **kwargs) -> Bound:
        """Check the arguments as a call would, without running anything."""
        return bind_arguments(self.ir, args, kwargs, self.bindings, self.target, self._written)

    def __call__(self, *args, **kwargs) -> None:
        from ..codegen import index_bits_for, walk_program
        from ..codegen.plan import NotConstant, evaluate

        b = self.bind(*args, **kwargs)
        numels = [int(np.prod(a.shape, dtype=np.int64)) for a in b.arrays.values()]
        base = self._spec(b.env, None) if self._late else self._last
        bits = index_bits_for(base.module, b.env, numels)
        spec = base if bits == base.module.index_bits else self._spec(b.env, bits)
        self._last = spec
        module = spec.module
        # every launch, checked before the first one runs
        plan = []
        try:
            for name, kenv in walk_program(module.program, b.env):
                k = module.kernels[name]
                grid = tuple(int(evaluate(e, kenv)) for e in k.grid)
                if min(grid) <= 0:
                    continue
                # blockIdx.y and .z drive grid-stride loops: launch at most the limit
                grid = (grid[0], *(min(g, lim) for g, lim in zip(grid[1:], GRID_LIMITS[1:])))
                for g, lim, d in zip(grid, GRID_LIMITS, "xyz"):
                    if g > lim:
                        raise LaunchError(f"kernel {name} of {self.ir.name} needs {g} blocks in "
                                          f"gridDim.{d}; CUDA allows {lim}", k.loc,
                                          "map the largest BLOCKS loop innermost (to x), or "
                                          "divide it")
                plan.append((k, grid, dict(kenv)))
        except (NotConstant, ZeroDivisionError) as e:
            raise LaunchError(f"cannot compute the launches of {self.ir.name}: {e}") from None
        spec.backend.run(module, b, plan)


def _temporary_shapes(module, env):
    from ..codegen.plan import evaluate

    for t in module.temporaries:
        shape = tuple(int(evaluate(d, env)) for d in t.shape) or (1,)
        dt = np.dtype(t.dtype.numpy) if t.dtype.numpy else np.dtype("uint16")
        yield t.name, shape, dt


def _launch_all(launch, module, b: Bound, plan, work: dict) -> None:
    itype = np.int32 if module.index_bits == 32 else np.int64
    for k, grid, kenv in plan:
        args = []
        for p in k.params:
            if p.kind == "array":
                args.append(work[p.name])
            elif p.kind == "scalar":
                args.append(b.scalars[p.name])
            else:
                args.append(itype(kenv[p.name]))
        launch(k.name, grid, k.block, args, k.dynamic_shared_bytes)


class _EmulatorBackend:
    """The kernels run on the CPU, on the numpy arrays in place (contiguous work copies
    of non-contiguous arrays, copied back when written)."""

    def __init__(self, module):
        from .emulator import build_emulator_module

        self.mod = build_emulator_module(module.source, _signatures(module))
        self.resources = None  # ptxas' numbers come from NVRTC on demand

    def run(self, module, b: Bound, plan) -> None:
        work: dict[str, np.ndarray] = {}
        copy_back = []
        for name, a in b.arrays.items():
            h = a.host
            if not h.flags.c_contiguous:
                c = np.ascontiguousarray(h)
                if a.written:
                    copy_back.append((h, c))
                h = c
            work[name] = h
        for name, shape, dt in _temporary_shapes(module, b.env):
            work[name] = np.zeros(shape, dt)
        try:
            _launch_all(self.mod.launch, module, b, plan, work)
        finally:
            for h, c in copy_back:
                h[...] = c


class _CudaBackend:
    """NVRTC cubin (compiled at once, also without a GPU); launching needs the driver."""

    def __init__(self, module):
        from .driver import device_arch
        from .nvrtc import compile_cubin

        self.sigs = _signatures(module)
        r = compile_cubin(module.source, device_arch())
        self.cubin, self.resources, self.arch = r.cubin, r.resources, r.arch
        self._dev = None

    def run(self, module, b: Bound, plan) -> None:
        from .driver import driver_available

        if not driver_available():
            raise LaunchError("no CUDA driver or GPU is available to run this kernel",
                              hint="compile for the 'emulator' target: "
                                   "proc.compile('emulator')")
        from .device import DeviceBuffer, DeviceModule, synchronize

        if self._dev is None:
            self._dev = DeviceModule(self.cubin, self.sigs)
        work: dict[str, Any] = {}
        copies = []
        for name, a in b.arrays.items():
            if a.on_device:
                work[name] = a.device
            else:
                buf = DeviceBuffer.from_numpy(a.host)
                work[name] = buf
                if a.written:
                    copies.append((a.host, buf))
        for name, shape, dt in _temporary_shapes(module, b.env):
            work[name] = DeviceBuffer.zeros(shape, dt)
        _launch_all(self._dev.launch, module, b, plan, work)
        synchronize()
        for host, buf in copies:
            if host.flags.c_contiguous:
                buf.copy_to(host)
            else:
                host[...] = buf.to_numpy()


def compile_proc(proc, target: str = "cuda", **bindings) -> Kernel:
    """``proc.compile(target, **bindings)``: generate CUDA C and compile it for ``target``
    (``"cuda"``: NVRTC cubin for the device's architecture, ``sm_90`` without one;
    ``"emulator"``: g++ with gpudsl's emulation header)."""
    return Kernel(proc, target, bindings)


__all__ = ["Kernel", "compile_proc", "bind_arguments", "Bound", "TARGETS"]
