"""The CUDA backend's prepared launcher: one launch list, for one call signature, made
ready once so that a call is a short straight line.

The kernel fast path (``compiler/fast_call.py``) asks the backend for a launcher after
the first call of a signature passed every check.  For the CUDA backend,
:func:`prepare` then does once what ``DeviceModule.launch`` does per launch: look the
kernel up, check the block against the target's limit, opt in to the dynamic shared
memory, check and pack every argument whose value is fixed (sizes, constants, null
pointers), and build the ``void*[n]`` array of slot addresses ``cuLaunchKernel`` takes.
The driver function is bound once.  A call writes only what changes: each array's
device address (``data_ptr()`` of a torch tensor, ``.ptr`` of a gpudsl device array),
each scalar's C-typed value into its slot, then calls ``cuLaunchKernel`` on the
caller's stream (PyTorch's current stream for torch tensors, read per call).  The
driver copies the parameters at the launch, so the slots are reused by the next call;
a lock per launcher keeps two threads from writing them at once.

A tensor-map argument (TMA) is resolved per call from its array's address, by the same
rules as the full path's (``tensor_maps.map_address``: the map cache, pinned or refused
while the stream captures); the signature fixed the array's shape and contiguity.

Only launches of device arrays are prepared (host arrays need copies, the full path's
work); a call whose output is captured, or temporaries without PyTorch's
stream-ordered allocator take the full path (``prepare`` returns None).
"""
from __future__ import annotations

import ctypes
import operator
import sys
import threading

import numpy as np

from .signature import _scalar_bytes
from .tensor_maps import TensorMapRef, map_address

CUDA_ERROR_INVALID_CONTEXT = 201


def pointer_getter(value):
    """``get(v)`` -> the device address of an array of ``value``'s kind, or None (a kind
    the prepared path does not read)."""
    from .device import DeviceBuffer
    from .interop import DeviceArray

    torch = sys.modules.get("torch")
    if torch is not None and type(value) is torch.Tensor and value.is_cuda:
        return torch.Tensor.data_ptr
    if type(value) in (DeviceBuffer, DeviceArray):
        return operator.attrgetter("ptr")
    return None


def stream_getter(values):
    """``stream()`` -> the ``CUstream`` handle the caller's library enqueues on now (None:
    the legacy default stream): PyTorch's current stream of the first torch tensor's
    device, read at each call (the cheapest way torch offers)."""
    torch = sys.modules.get("torch")
    for v in values:
        if torch is not None and type(v) is torch.Tensor:
            index = v.device.index or 0
            raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
            if raw is not None:
                return lambda: raw(index) or None
            dev = v.device
            return lambda: int(torch.cuda.current_stream(dev).cuda_stream) or None
    return lambda: None


class _Step:
    """One launch, prepared: ``run(work, stream)``."""

    def __init__(self, module, ln, getters: dict, ref: type):
        from .emulator import dims
        from .device import CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, _cu, check
        from ..errors import LaunchError

        sig = module.kernels.get(ln.kernel)
        if sig is None:
            raise LaunchError(f"no kernel named {ln.kernel!r} in this module")
        g, b = dims(ln.grid, "grid"), dims(ln.block, "block")
        limit = module.target.max_threads_per_block
        if b[0] * b[1] * b[2] > limit:
            raise LaunchError(f"block {b} has more than {limit} threads ({module.target})")
        if len(ln.args) != len(sig.params):
            raise LaunchError(f"kernel {sig.name} takes {len(sig.params)} arguments, "
                              f"got {len(ln.args)}")
        smem = int(ln.dynamic_shared_bytes)
        f = module._fns[ln.kernel]
        if smem > module.target.static_shared_bytes and module._dyn_smem.get(ln.kernel, 0) < smem:
            check(_cu().cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                           smem),
                  f"allowing {smem} bytes of dynamic shared memory for {ln.kernel}")
            module._dyn_smem[ln.kernel] = smem
        n = max(len(sig.params), 1)
        self.slots = (ctypes.c_uint64 * n)()
        base = ctypes.addressof(self.slots)
        self.params = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.pointers, self.scalars = [], []   # (slot, name, getter), (view, name)
        self.maps = []   # (slot, TensorMapRef, getter of its array's address)
        for i, (p, a) in enumerate(zip(sig.params, ln.args)):
            if isinstance(a, TensorMapRef):
                if not p.pointer or a.name not in getters:
                    raise _NotPrepared
                self.maps.append((i, a, getters[a.name]))
                continue
            if isinstance(a, ref):
                if p.pointer:
                    self.pointers.append((i, a.name, getters[a.name]))
                elif p.dtype is None or p.code not in _SCALAR_CODES:
                    raise _NotPrepared
                else:
                    self.scalars.append((np.frombuffer(self.slots, p.dtype, 1, 8 * i),
                                         a.name))
            elif p.pointer:
                if a is not None:
                    raise _NotPrepared   # a fixed device array: the full path
            else:
                raw = _scalar_bytes(sig, i, p, a)   # the full path's checks, once
                ctypes.memmove(base + 8 * i, raw, len(raw))
        self.head = (f, *g, *b, smem)
        self.what = f"launching {ln.kernel} (grid {g}, block {b}, {smem} bytes dynamic shared)"

    def run(self, launch, work: dict, stream) -> None:
        slots = self.slots
        for i, name, get in self.pointers:
            slots[i] = get(work[name])
        for view, name in self.scalars:
            view[0] = work[name]
        for i, ref, get in self.maps:   # built on first use, pinned while capturing
            slots[i] = map_address(ref, get(work[ref.name]), stream)
        res = launch(*self.head, stream, self.params, None)
        if res:
            _failed(res, launch, self, stream)


_SCALAR_CODES = frozenset("fdiIlLsSbB?h")


class _NotPrepared(Exception):
    pass


def _failed(res: int, launch, step: _Step, stream) -> None:
    """A launch that failed: when this thread had no current context (the first call
    on a new thread), make the primary context current and launch again; else raise."""
    from .device import _cu, check

    if res == CUDA_ERROR_INVALID_CONTEXT:
        _cu()
        res = launch(*step.head, stream, step.params, None)
    check(res, step.what)


def prepare(module, launches, temporaries, arrays, *, ref: type, alloc, blocking: bool):
    """``launch(work)`` running ``launches`` from the loaded ``module`` (a
    ``DeviceModule``), or None when this call's form is not prepared (see the module's
    text).  ``ref``: the type of a launch argument naming a buffer of ``work``;
    ``alloc(shape, dtype)``: the stream-ordered allocator of the temporaries (None:
    none); ``blocking``: synchronize after the launches (``CUDA_LAUNCH_BLOCKING``)."""
    from .device import _cu, synchronize

    if not arrays:
        return None
    getters = {}
    for name, a in arrays.items():
        get = pointer_getter(a.value) if a.on_device else None
        if get is None:
            return None
        getters[name] = get
    temporaries = list(temporaries)
    if temporaries and alloc is None:
        return None
    getters.update((name, operator.attrgetter("ptr")) for name, _, _ in temporaries)
    launch_fn = _cu().cuLaunchKernel   # argument types set once by device._cu
    try:
        steps = [_Step(module, ln, getters, ref) for ln in launches]
    except _NotPrepared:
        return None
    stream_of = stream_getter(a.value for a in arrays.values())
    lock = threading.Lock()

    def launch(work: dict) -> str:
        stream = stream_of()
        for name, shape, dt in temporaries:
            work[name] = alloc(shape, dt)
        with lock:
            for step in steps:
                step.run(launch_fn, work, stream)
        if blocking:
            synchronize()
        return ""
    launch.steps = steps   # for tests: the packed slots
    return launch


__all__ = ["prepare", "pointer_getter", "stream_getter"]
