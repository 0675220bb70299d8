"""The backend protocol: what the compile layer needs of a way to run generated CUDA C,
and the registry of backends by name (``proc.compile("cuda")``, ``"emulator"``).

A backend is built from one translation unit (the CUDA C text and the plain signatures
of its ``__global__`` functions) and runs a launch list on bound arrays.  The two
backends gpudsl has live in ``launch.py``: ``CudaBackend`` (NVRTC cubin for the device's
architecture, launched through the driver) and ``EmulatorBackend`` (the same source built
with g++ against gpudsl's emulation headers, run on the CPU).  The backend decides the
architecture it compiles for; what an architecture allows is its ``gpudsl.targets``
description.  A new backend is a class with this shape and one ``register_backend``.
"""
from __future__ import annotations

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
                 capture_output: bool = False) -> None:
        """Compile ``source``, whose kernels have the signatures ``sigs``; with
        ``capture_output`` the kernels' ``printf`` text is collected for ``run``."""

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

__all__ = ["Backend", "BACKENDS", "register_backend"]
