"""The backend protocol: what the compile layer needs of a way to run generated CUDA C,
and the registry of backends by name (``proc.compile("cuda")``, ``"emulator"``).

Words: a *backend* is how code runs (``"cuda"``, ``"emulator"``, a recording one); a
*target* is an architecture (``"sm_80"``, ``"sm_90a"``: ``gpudsl.targets``).  The
``target=`` keyword that once named a backend still does, with a ``DeprecationWarning``
(:func:`backend_of`).

A backend is built from one translation unit (the CUDA C text and the plain signatures
of its ``__global__`` functions) and runs a launch list on bound arrays.  The two
backends gpudsl has live in ``launch.py``: ``CudaBackend`` (NVRTC cubin for the device's
architecture, launched through the driver) and ``EmulatorBackend`` (the same source built
with g++ against gpudsl's emulation headers, run on the CPU).  The backend decides the
architecture it compiles for; what an architecture allows is its ``gpudsl.targets``
description.  A new backend is a class with this shape and one ``register_backend``.
"""
from __future__ import annotations

import os
import sys
import warnings
from typing import Protocol, runtime_checkable

from .launch import ArrayArg, CudaBackend, EmulatorBackend, Launch
from .signature import KernelSig


@runtime_checkable
class Backend(Protocol):
    """One compiled translation unit, ready to run launch lists."""

    # ptxas' figures per kernel ({name: {"registers": .., "spill_stores_bytes": ..}}), or
    # None where the backend has none (the emulator; NVRTC gives them on demand)
    resources: dict | None

    def __init__(self, source: str, sigs: list[KernelSig],
                 capture_output: bool = False, arch: str | None = None) -> None:
        """Compile ``source``, whose kernels have the signatures ``sigs``; with
        ``capture_output`` the kernels' ``printf`` text is collected for ``run``.
        ``arch`` (passed only when a compile names its target) is the architecture to
        build for instead of ``arch()``'s."""

    @staticmethod
    def arch() -> str | None:
        """The architecture this backend's code runs on (``"sm_90"``), whose
        ``gpudsl.targets`` description compile() proves the proc for; None: the default
        target (the emulator says ``targets.EMULATED_TARGET``: it runs every feature
        gpudsl describes)."""

    def run(self, arrays: dict[str, ArrayArg], temporaries: list, launches: list[Launch]):
        """Run ``launches`` in order on ``arrays`` (numpy or device arrays, by parameter
        name) and zero-filled ``temporaries`` (name, shape, dtype); return the printed
        text when output is captured."""


BACKENDS: dict[str, type] = {}


def register_backend(name: str, cls: type) -> type:
    """Make ``cls`` (a class with the ``Backend`` shape) the backend called ``name``."""
    for attr in ("run",):
        if not callable(getattr(cls, attr, None)):
            raise TypeError(f"backend {name!r}: {cls.__name__} has no method {attr}()")
    BACKENDS[name] = cls
    return cls


register_backend("cuda", CudaBackend)
register_backend("emulator", EmulatorBackend)


def _caller_level() -> int:
    """The ``stacklevel`` of the first frame outside gpudsl, seen from the function that
    calls this one (a warning names the user's line, and Python shows it there)."""
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep
    f, level = sys._getframe(1), 1
    while f is not None and f.f_code.co_filename.startswith(root):
        f, level = f.f_back, level + 1
    return level


def backend_of(backend: str | None, target, where: str,
               default: str = "cuda") -> tuple[str, object]:
    """``(backend, target)`` from a call's ``backend=`` and ``target=``: a ``target`` that
    names a backend (``"emulator"``: what the keyword once meant) is that backend, with a
    ``DeprecationWarning``; a target left is an architecture.  ``backend`` None: the
    ``default``."""
    if isinstance(target, str) and target in BACKENDS:
        warnings.warn(f"{where}(target={target!r}): target= names an architecture ('sm_90', "
                      f"'sm_80', ...); the way code runs is the backend: write "
                      f"backend={target!r}", DeprecationWarning, stacklevel=_caller_level())
        if backend is not None and backend != target:
            raise ValueError(f"{where}: backend={backend!r} and target={target!r} (a backend) "
                             "disagree; name the backend once")
        backend, target = target, None
    return (default if backend is None else backend), target


__all__ = ["Backend", "BACKENDS", "register_backend", "backend_of"]
