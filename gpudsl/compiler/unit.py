"""One translation unit for several procs: ``compile_unit(procs, backend) -> Unit``.

A model runs many kernels; compiling each proc into its own CUDA source means one NVRTC
(or g++) run and one module per proc.  A ``Unit`` puts the kernels of all its procs
into ONE source, compiled once (one cubin, one emulator shared object) and cached on
disk by a key over the whole source (``gpudsl.runtime.artifact_cache``), and in memory by the
same key, so a second ``compile_unit`` of the same procs builds nothing.

    unit = compile_unit([add_proc, (matmul_proc, dict(n=784)), relu_proc], "emulator")
    unit.launch("relu_v4", x=x, out=y)          # by the proc's name (``unit.name_of(p)``)

Each proc is proved by ``check()`` first, for the unit's target (as
``gpudsl.compile_proc`` does: the backend's architecture unless ``target=`` names one;
a proc that is not proved is refused with its report unless ``check=False``), then
generated with its bindings for that target.  Each proc's code goes inside a namespace of its own, so its bound
sizes (``constexpr``) and helpers cannot clash with another proc's; kernels keep C
linkage and are renamed where two procs would give the same name.  Arguments are bound
and checked exactly as a ``Kernel`` call checks them.

Limits: sizes a proc needs bound to generate code (``NeedsBinding``) must be given in
the unit's bindings; a unit's code uses the index width chosen at compile time, and a
call whose sizes need 64-bit indices where the unit was generated with 32 is refused
(compile the proc on its own, or with the sizes bound).
"""
from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from ..codegen import NeedsBinding, generate, index_bits_for
from ..codegen.generate import check_bindings
from ..display import status
from ..errors import CompileError, LaunchError
from ..ir.binding import Bound
from ..ir.inline import inline_calls, written_names
from ..ir.nodes import ProcDef
from ..ir.procdef import as_procdef
from ..runtime.backends import BACKENDS
from ..runtime.launch import Launch
from ..runtime.signature import KernelSig
from .arguments import bind_arguments
from .. import targets
from .compiled_kernel import (_print, backend_and_target, plan_launches, proof_or_refusal,
                     temporary_shapes)

_INCLUDE_BLOCK = re.compile(r"#ifndef GPUDSL_EMULATOR\n(?:#include <[^>]+>\n)+#endif\n?")


@dataclass
class _Entry:
    """One proc of a unit: its IR, bindings, generated module and kernel renaming."""

    name: str
    ir: ProcDef
    bindings: dict
    module: Any  # codegen.CudaModule
    rename: dict  # kernel name in the module -> name in the unit
    written: Any
    report: Any = None


#: whole-unit key -> backend (the compiled cubin / shared object, loaded)
_BACKENDS: dict[str, Any] = {}
_LOCK = threading.Lock()
#: how many backends compile_unit built (not found in memory): for tests and figures
stats = {"built": 0, "memory_hits": 0}


def _split(item) -> tuple[Any, dict]:
    if isinstance(item, tuple) and len(item) == 2 and isinstance(item[1], dict):
        return item[0], dict(item[1])
    return item, {}


def _assemble(entries: list[_Entry]) -> str:
    """The unit's CUDA source: one include block, then each proc's code in a namespace,
    its kernels brought to the global scope (the emulator's launchers name them)."""
    includes, parts = set(), []
    for i, e in enumerate(entries):
        src = e.module.source
        for m in _INCLUDE_BLOCK.finditer(src):
            includes.add(m.group(0).rstrip("\n"))
        src = _INCLUDE_BLOCK.sub("", src)
        for old, new in e.rename.items():
            if old != new:
                src = re.sub(rf"\b{re.escape(old)}\b", new, src)
        using = "".join(f"using gpudsl_unit_{i}::{n};\n" for n in e.rename.values())
        parts.append(f"// ---- proc {e.name}\nnamespace gpudsl_unit_{i} {{\n{src}\n}}  "
                     f"// namespace gpudsl_unit_{i}\n#line 1 "
                     f"\"<gpudsl unit>\"\n{using}")
    head = f"// One translation unit of {len(entries)} procs: " + \
        ", ".join(e.name for e in entries) + "\n"
    return head + "".join(sorted(includes)) + ("\n" if includes else "") + "\n".join(parts)


class Unit:
    """Several procs' kernels compiled into one source (see the module's text).

    ``unit.launch(name, *args, **kwargs)`` runs proc ``name`` on its arguments;
    ``unit.backend_name`` is the backend's name (``unit.backend`` the loaded backend),
    ``unit.target`` the architecture's ``Target`` the procs were proved and generated for;
    ``unit.names`` lists the procs, ``unit.name_of(proc)`` a proc's name in the unit,
    ``unit.source`` the CUDA C, ``unit.key`` the cache key of the whole unit,
    ``unit.kernels`` the ``__global__`` functions.  ``unit.prepare(name, ...)`` binds
    and computes the launches without running them (for a caller that enqueues them
    itself, e.g. into a CUDA graph)."""

    def __init__(self, procs, backend: str | None = None, check: bool = True, target=None):
        self.backend_name, self.target, named = backend_and_target(backend, target,
                                                                   "compile_unit")
        self._arch = self.target.code_arch if named else None
        self.entries: dict[str, _Entry] = {}
        self._by_ir: dict = {}
        seen_kernels: set[str] = set()
        items = [_split(p) for p in procs]
        if not items:
            raise CompileError("compile_unit needs at least one proc")
        with status(f"gpudsl: proving and compiling a unit of {len(items)} procs for "
                    f"{self.backend_name} ({self.target})"):
            for proc, binds in items:
                ir = as_procdef(proc) or proc
                if not isinstance(ir, ProcDef):
                    raise CompileError(f"compile_unit takes procs, not {type(proc).__name__}")
                bindings = check_bindings(ir, binds)
                key = (ir, tuple(sorted(bindings.items())))
                if key in self._by_ir:  # the same proc twice: one entry
                    continue
                report = proof_or_refusal(ir, bindings, check, "the unit", self.target)
                try:
                    module = generate(ir, bindings, target=self.target)
                except NeedsBinding as e:
                    raise CompileError(f"{ir.name}: the code depends on the sizes "
                                       f"{', '.join(e.names)}; bind them in the unit: "
                                       f"({ir.name}, dict({e.names[0]}=...))") from None
                name = ir.name
                n = 1
                while name in self.entries:
                    name, n = f"{ir.name}_{n}", n + 1
                rename = {}
                for k in module.kernels:
                    new, j = k, 1
                    while new in seen_kernels:
                        new, j = f"{k}_u{j}", j + 1
                    seen_kernels.add(new)
                    rename[k] = new
                self.entries[name] = _Entry(name, ir, bindings, module, rename,
                                            written_names(inline_calls(ir).body), report)
                self._by_ir[key] = name
            self.source = _assemble(list(self.entries.values()))
            self.signatures = [KernelSig(e.rename[k.name], [p.ctype for p in k.params],
                                         [p.name for p in k.params])
                               for e in self.entries.values()
                               for k in e.module.kernels.values()]
            # a named target's architecture is part of what was built
            built = self.backend_name + (f"\0{self._arch}" if self._arch else "")
            self.key = hashlib.sha256(f"{built}\0{self.source}".encode()).hexdigest()
            self._load_backend()

    def _load_backend(self) -> None:
        with _LOCK:
            backend = _BACKENDS.get(self.key)
            if backend is not None:
                stats["memory_hits"] += 1
        if backend is None:
            kw = {}
            if self._arch is not None:
                features = set().union(*(e.module.features for e in self.entries.values()))
                kw["arch"] = targets.arch_with(self._arch, features)
            backend = BACKENDS[self.backend_name](self.source, self.signatures, **kw)
            with _LOCK:
                backend = _BACKENDS.setdefault(self.key, backend)
                stats["built"] += 1
        self.backend = backend

    def __getstate__(self):
        # the compiled code stays behind (a loaded module): an unpickled unit loads it
        # again by its key, from memory or the disk cache (gpudsl.graph.graph_cache)
        state = dict(self.__dict__)
        state.pop("backend", None)
        return state

    def __setstate__(self, state):
        if "backend_name" not in state:   # pickled before backends and targets were two words
            state["backend_name"] = state.pop("target")
            state["target"] = backend_and_target(state["backend_name"], None, "unpickle")[1]
            state["_arch"] = None
        self.__dict__.update(state)
        self._load_backend()

    # ------------------------------------------------------------ introspection

    @property
    def names(self) -> list[str]:
        return list(self.entries)

    @property
    def kernels(self) -> list[str]:
        return [s.name for s in self.signatures]

    @property
    def proved(self) -> bool:
        return all(e.report is not None for e in self.entries.values())

    def name_of(self, proc, **bindings) -> str:
        """The name under which ``proc`` (with ``bindings``) was compiled into the unit."""
        ir = as_procdef(proc) or proc
        key = (ir, tuple(sorted(check_bindings(ir, bindings).items())))
        try:
            return self._by_ir[key]
        except (KeyError, TypeError):
            raise LaunchError(f"{getattr(ir, 'name', proc)!r} is not in this unit",
                              hint="the unit's procs: " + ", ".join(self.entries)) from None

    def __contains__(self, proc) -> bool:
        try:
            self.name_of(proc)
            return True
        except LaunchError:
            return False

    def __repr__(self):
        return (f"<gpudsl Unit of {len(self.entries)} procs, {len(self.signatures)} kernels, "
                f"backend={self.backend_name}, target={self.target}>")

    # ------------------------------------------------------------ calling

    def _entry(self, name) -> _Entry:
        if not isinstance(name, str):
            name = self.name_of(name)
        e = self.entries.get(name)
        if e is None:
            raise LaunchError(f"no proc named {name!r} in this unit",
                              hint="the unit's procs: " + ", ".join(self.entries))
        return e

    def prepare(self, name, *args, **kwargs) -> tuple[Bound, list, list[Launch]]:
        """Bind and check the arguments of proc ``name`` and compute its launches (kernel
        names as in the unit's source): ``(bound, temporaries, launches)``; nothing
        runs."""
        e = self._entry(name)
        b = bind_arguments(e.ir, args, kwargs, e.bindings, self.backend_name, e.written)
        numels = [int(np.prod(a.shape, dtype=np.int64)) for a in b.arrays.values()]
        if index_bits_for(e.module, b.env, numels) > e.module.index_bits:
            raise LaunchError(f"{e.name}: these sizes need 64-bit index arithmetic; the unit "
                              f"was generated with {e.module.index_bits}-bit",
                              hint="compile the proc on its own (proc.compile), which picks "
                                   "the width per call")
        launches = [replace(ln, kernel=e.rename[ln.kernel])
                    for ln in plan_launches(e.module, b, e.name,
                                            limits=self.target.max_grid_dims)]
        return b, list(temporary_shapes(e.module, b.env)), launches

    def launch(self, name, *args, **kwargs) -> None:
        """Run proc ``name`` (or the proc itself) on its arguments, like a
        ``Kernel`` call."""
        b, temporaries, launches = self.prepare(name, *args, **kwargs)
        printed = self.backend.run(b.arrays, temporaries, launches)
        if printed:
            _print(printed)

    def kernel(self, name):
        """A callable running proc ``name`` from the unit: ``unit.kernel(p)(x=..., out=...)``."""
        e = self._entry(name)
        return lambda *a, **k: self.launch(e.name, *a, **k)


def compile_unit(procs, backend: str | None = None, check: bool = True,
                 target=None) -> Unit:
    """Compile several procs (each a proc, or ``(proc, {size: value})``) into ONE
    translation unit for the ``backend`` (``"cuda"``, the default: one NVRTC cubin;
    ``"emulator"``: one g++ shared object), proved and generated for ``target`` (an
    architecture; None: the backend's).  Compiled once: the unit is cached on disk and
    in memory by a key over its whole source."""
    return Unit(procs, backend, check, target)


def clear_memory_cache() -> None:
    """Forget the units loaded in this process (the disk cache stays)."""
    with _LOCK:
        _BACKENDS.clear()


__all__ = ["Unit", "compile_unit", "clear_memory_cache", "stats"]
