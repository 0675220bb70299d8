"""A backend that records launches instead of running them.

It measures and tests the host path of a call (argument checks, the launch plan, the
cache of both) on any machine: ``register_backend("record", RecordingBackend)``, then
``proc.compile("record")``.  It compiles nothing and touches no array: each launch is
appended to :attr:`RecordingBackend.log` as a :class:`Recorded` (kernel, grid, block,
dynamic shared bytes, and the arguments: the call's arrays and temporaries by object,
scalars and sizes as the exact C-typed values the CUDA backend would pack).  What it
leaves out is the CUDA backend's own share of a call: reading the device pointers,
packing them and ``cuLaunchKernel``.
"""
from __future__ import annotations

from collections import deque
from typing import Any, NamedTuple

from .launch import ArrayArg, ArrayRef, Launch
from .signature import KernelSig


class Recorded(NamedTuple):
    kernel: str
    grid: tuple
    block: tuple
    dynamic_shared_bytes: int
    args: tuple  # arrays (numpy arrays, device arrays; temporaries described), values


class RecordingBackend:
    """The ``Backend`` shape of ``runtime/backends.py``; nothing runs."""

    resources = None
    log: deque = deque(maxlen=4096)   # the latest launches of every recording backend
    sources: list[str] = []           # the translation units "compiled", in order

    @staticmethod
    def arch() -> None:
        return None

    def __init__(self, source: str, sigs: list[KernelSig], capture_output: bool = False,
                 arch: str | None = None):
        self.sigs = {s.name: s for s in sigs}
        RecordingBackend.sources.append(source)

    def run(self, arrays: dict[str, ArrayArg], temporaries, launches: list[Launch]) -> str:
        work: dict[str, Any] = {name: a.host if a.host is not None else a.value
                                for name, a in arrays.items()}
        self.launcher(launches, temporaries, arrays)(work)
        return ""

    def launcher(self, launches: list[Launch], temporaries=(), arrays=None):
        """``launch(work)``: record ``launches`` with the arrays and scalars of ``work``
        (by name); temporaries are recorded as ``("temporary", name, shape, dtype)``."""
        append, new = self.log.append, tuple.__new__
        temps = [(name, ("temporary", name, shape, dt)) for name, shape, dt in temporaries]
        steps = [(ln.kernel, ln.grid, ln.block, ln.dynamic_shared_bytes,
                  tuple((i, a.name) for i, a in enumerate(ln.args) if isinstance(a, ArrayRef)),
                  list(ln.args)) for ln in launches]

        def launch(work: dict) -> None:
            for name, t in temps:
                work[name] = t
            for kernel, grid, block, smem, refs, args in steps:
                args = args.copy()
                for i, name in refs:
                    args[i] = work[name]
                append(new(Recorded, (kernel, grid, block, smem, tuple(args))))
        return launch


__all__ = ["RecordingBackend", "Recorded"]
