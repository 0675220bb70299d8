"""A derived kernel's first run on a GPU, checked against numpy before it serves a user.

The stdlib's kernels are proved by check() and equal to numpy on the emulator; what no
proof covers is the hardware reading the code generator's output as the language means
it (a matrix descriptor's bit, a tensor map's field).  Kernels that a session has not yet
seen pass on a GPU of their kind are therefore run once, per process and device, on a
small case whose result is exact (small integers), before an ``ops`` call uses them; a
kernel that fails (a wrong value or an error) is not used again in the process, a
warning says which, and the caller falls back to its other kernels.  A kernel that hangs
is not caught: the GPU tests (``pytest -m gpu``) run every such kernel first.
"""
from __future__ import annotations

import warnings

import numpy as np

_RESULTS: dict = {}   # (id(proc), device) -> (proc, passed)


def checked_on_device(p, make_case) -> bool:
    """Whether ``p`` equals the reference on the current CUDA device: ``make_case()``
    gives ``(arguments, {name: expected array})``; run once per process and device."""
    from ..runtime.driver import device_arch

    key = (id(p), device_arch())
    hit = _RESULTS.get(key)
    if hit is not None and hit[0] is p:
        return hit[1]
    args, want = make_case()
    try:
        p.compile("cuda")(**args)
        bad = [name for name, w in want.items() if not np.array_equal(args[name], w)]
        why = f"{', '.join(bad)} differ from numpy" if bad else ""
    except Exception as e:  # noqa: BLE001 - any failure keeps the kernel out
        why = f"{type(e).__name__}: {e}"
    if why:
        warnings.warn(f"gpudsl: the kernel {p.name} failed its first run on this "
                      f"{key[1]} GPU ({why}); gpudsl uses its other kernels instead. "
                      "Please report it.", RuntimeWarning, stacklevel=3)
    _RESULTS[key] = (p, not why)
    return not why


__all__ = ["checked_on_device"]
