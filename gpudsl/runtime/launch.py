"""Running a compiled translation unit: the emulator and the CUDA backend.

Both take CUDA C source and plain kernel signatures (:class:`KernelSig`), and run a
list of launches on the call's arrays.  Nothing here knows about the IR: the
compile layer (:mod:`gpudsl.compiler`) computes the launches and hands over

- ``arrays``: argument name → :class:`ArrayArg` (a numpy array on the host, or a
  device array used in place);
- ``temporaries``: ``(name, shape, numpy dtype)`` of GLOBAL buffers owned by the call;
- ``launches``: :class:`Launch` records whose ``args`` hold either a value or
  :class:`ArrayRef` (an argument or temporary, by name).
"""
from __future__ import annotations

import functools
import math
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..errors import LaunchError
from .signature import KernelSig
from .tensor_maps import TensorMapRef, emulator_map, resolve_cuda


@dataclass
class ArrayArg:
    """One tensor argument of a call: a host (numpy) array or a device array."""

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


def arrays_overlap(a: ArrayArg, b: ArrayArg) -> bool:
    """Whether two arguments share memory (host with host, device with device)."""
    if a.on_device != b.on_device:
        return False
    if a.on_device:
        (l1, h1), (l2, h2) = a.byte_range(), b.byte_range()
        return l1 < h2 and l2 < h1 and h1 > l1 and h2 > l2
    try:
        return bool(np.shares_memory(a.host, b.host, max_work=100_000))
    except Exception:  # numpy.exceptions.TooHardError
        return bool(np.may_share_memory(a.host, b.host))


@dataclass(frozen=True)
class ArrayRef:
    """A launch argument that is the buffer of an argument or temporary."""

    name: str


@dataclass(frozen=True)
class Launch:
    kernel: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    args: tuple  # values, or ArrayRef
    dynamic_shared_bytes: int = 0


def resolve(args, work: dict, tmap) -> list:
    """A launch's arguments: buffers by name (:class:`ArrayRef`), tensor maps made by
    ``tmap(ref, buffer)`` (:class:`~gpudsl.runtime.tensor_maps.TensorMapRef`), values."""
    return [work[a.name] if isinstance(a, ArrayRef) else
            tmap(a, work[a.name]) if isinstance(a, TensorMapRef) else a for a in args]


def bind_tensor_maps(launches, work: dict, stream=None) -> list:
    """``launches`` with every tensor-map argument replaced by its device buffer, built
    now (:func:`~gpudsl.runtime.tensor_maps.resolve_cuda` for ``stream``): launches
    that hold their maps, so that enqueuing them allocates nothing (a CUDA graph may
    capture them) and no eviction from the maps' cache can free a map they use while
    they are held."""
    from dataclasses import replace

    return [replace(ln, args=tuple(resolve_cuda(a, work[a.name], stream)
                                   if isinstance(a, TensorMapRef) else a for a in ln.args))
            if any(isinstance(a, TensorMapRef) for a in ln.args) else ln
            for ln in launches]


def _launch_all(launch, launches, work: dict, tmap=emulator_map) -> None:
    for ln in launches:
        launch(ln.kernel, ln.grid, ln.block, resolve(ln.args, work, tmap),
               ln.dynamic_shared_bytes)


class EmulatorBackend:
    """The kernels run on the CPU, on the numpy arrays in place (contiguous work copies
    of non-contiguous arrays, copied back when written).  ``run`` returns what the
    kernels printed (``printf``; the emulator buffers it rather than writing the C
    stdout)."""

    @staticmethod
    def arch() -> str:
        from ..targets import EMULATED_TARGET

        return EMULATED_TARGET   # every feature gpudsl describes is emulated

    def __init__(self, source: str, sigs: list[KernelSig], capture_output: bool = False,
                 arch: str | None = None):   # every architecture's code runs the same
        from .emulator import build_emulator_module

        self.mod = build_emulator_module(source, sigs)
        self.resources = None  # ptxas' numbers come from NVRTC on demand

    def run(self, arrays: dict[str, ArrayArg], temporaries, launches) -> None:
        work: dict[str, np.ndarray] = {}
        copy_back = []
        for name, a in arrays.items():
            h = a.host
            if not h.flags.c_contiguous:
                c = np.ascontiguousarray(h)
                if a.written:
                    copy_back.append((h, c))
                h = c
            work[name] = h
        for name, shape, dt in temporaries:
            work[name] = host_temporary(name, shape, dt)
        printed: list[str] = []

        def launch(*a):
            try:
                self.mod.launch(*a)
            finally:
                printed.append(self.mod.output)

        try:
            _launch_all(launch, launches, work)
        finally:
            for h, c in copy_back:
                h[...] = c
            self.output = "".join(printed)
        return self.output

    def launcher(self, launches, temporaries, arrays: dict[str, ArrayArg]):
        """The fast path's launcher (``compiler/fast_call.py``): ``launch(work)`` runs
        ``launches`` on the numpy arrays and scalars of ``work`` (by name) and returns
        what they printed; None (the full path) when an array is not contiguous."""
        if any(a.host is None or not a.host.flags.c_contiguous for a in arrays.values()):
            return None
        temporaries = list(temporaries)

        def launch(work: dict) -> str:
            for name, shape, dt in temporaries:
                work[name] = host_temporary(name, shape, dt)
            printed: list[str] = []

            def one(*a):
                try:
                    self.mod.launch(*a)
                finally:
                    printed.append(self.mod.output)
            try:
                _launch_all(one, launches, work)
            finally:
                self.output = "".join(printed)
            return self.output
        return launch


def host_temporary(name: str, shape: tuple, dt) -> np.ndarray:
    """A zeroed host array for the GLOBAL temporary ``name``; one this machine cannot
    hold is a LaunchError naming it and its size."""
    try:
        return np.zeros(shape, dt)
    except (MemoryError, ValueError) as e:
        n = math.prod(shape) * np.dtype(dt).itemsize
        raise LaunchError(f"cannot allocate the GLOBAL array '{name}' of shape {list(shape)} "
                          f"({n:,} bytes) on this machine: {e}") from None


class CudaBackend:
    """NVRTC cubin (compiled at once, also without a GPU); launching needs the driver.

    With ``capture_output=True`` the process's file descriptor 1, where the driver writes
    what kernels ``printf``, is redirected to a temporary file while the launches run and
    synchronize; ``run`` returns that text (and otherwise "")."""

    @staticmethod
    def arch() -> str:
        """The device's architecture (``sm_90`` without a device)."""
        from .driver import device_arch

        return device_arch()

    def __init__(self, source: str, sigs: list[KernelSig], capture_output: bool = False,
                 arch: str | None = None):
        from .driver import device_arch
        from .nvrtc import compile_cubin

        self.capture_output = capture_output
        self.output = ""
        self.sigs = sigs
        r = compile_cubin(source, arch or device_arch())
        self.cubin, self.resources, self.arch = r.cubin, r.resources, r.arch
        self._dev = None

    def run(self, arrays: dict[str, ArrayArg], temporaries, launches) -> None:
        from .driver import driver_available

        if not driver_available():
            raise LaunchError("no CUDA driver or GPU is available to run this kernel",
                              hint="compile for the 'emulator' backend: "
                                   "proc.compile('emulator')")
        from .device import DeviceBuffer, DeviceModule, synchronize

        if self._dev is None:
            self._dev = DeviceModule(self.cubin, self.sigs, self.arch)
        if not self.capture_output and all(a.on_device for a in arrays.values()):
            alloc = stream_ordered_zeros(a.value for a in arrays.values())
            if alloc is not None or not temporaries:
                return self._run_async(arrays, temporaries, launches, alloc)
        work: dict[str, Any] = {}
        copies = []
        for name, a in arrays.items():
            if a.on_device:
                work[name] = a.device
            else:
                buf = DeviceBuffer.from_numpy(a.host)
                work[name] = buf
                if a.written:
                    copies.append((a.host, buf))
        for name, shape, dt in temporaries:
            work[name] = DeviceBuffer.zeros(shape, dt)
        legacy = functools.partial(resolve_cuda, stream=None)   # the launches' stream
        if self.capture_output:
            with _captured_fd1() as got:
                try:
                    _launch_all(self._dev.launch, launches, work, legacy)
                finally:
                    synchronize()  # the driver writes the printf FIFO out here
            self.output = got[0]
        else:
            _launch_all(self._dev.launch, launches, work, legacy)
            synchronize()
        for host, buf in copies:
            if host.flags.c_contiguous:
                buf.copy_to(host)
            else:
                host[...] = buf.to_numpy()
        return self.output

    def _run_async(self, arrays: dict[str, ArrayArg], temporaries, launches,
                   alloc=None) -> str:
        """Every argument already on the device: enqueue on the caller's stream and
        return, as PyTorch's and CuPy's own operations do (no copy, no synchronization).
        The arrays are the caller's, and the call's GLOBAL temporaries come from the
        caller's allocator (``alloc``, PyTorch's caching allocator); both allocators
        reuse memory in that stream's order.  A fault
        surfaces at the next synchronization, or at once with ``CUDA_LAUNCH_BLOCKING=1``."""
        from . import device

        stream = caller_stream(a.value for a in arrays.values())
        mark = len(device._inflight)
        try:
            work = {name: a.device for name, a in arrays.items()}
            for name, shape, dt in temporaries:
                work[name] = alloc(shape, dt)
            tmap = functools.partial(resolve_cuda, stream=stream)
            for ln in launches:
                args = resolve(ln.args, work, tmap)
                self._dev.launch(ln.kernel, ln.grid, ln.block, args, ln.dynamic_shared_bytes,
                                 stream=stream)
        finally:
            del device._inflight[mark:]  # the driver copied the arguments at each launch
        if launch_blocking():
            device.synchronize()
        return ""

    def launcher(self, launches, temporaries, arrays: dict[str, ArrayArg]):
        """The fast path's launcher (``compiler/fast_call.py``): the launch list prepared
        once for this signature (``runtime/prepared.py``), or None (the full path)."""
        if self._dev is None or self.capture_output:
            return None
        from .prepared import prepare

        alloc = stream_ordered_zeros(a.value for a in arrays.values()) if temporaries \
            else None
        return prepare(self._dev, launches, temporaries, arrays, ref=ArrayRef, alloc=alloc,
                       blocking=launch_blocking())

    def load(self):
        """The cubin loaded into the device's context (once): its ``DeviceModule``."""
        from .device import DeviceModule

        if self._dev is None:
            self._dev = DeviceModule(self.cubin, self.sigs, self.arch)
        return self._dev

    def enqueue(self, work: dict, launches, stream) -> None:
        """Enqueue ``launches`` on ``stream`` (a ``CUstream`` handle or a
        :class:`~gpudsl.runtime.graphs.Stream`) with the device buffers in ``work`` by name:
        no copies, no allocation, no synchronization, so the calls can be captured into a
        CUDA graph.  Tensor maps: bind them first (:func:`bind_tensor_maps`, before the
        capture); one left to resolve here must be built already when ``stream``
        captures (else ``LaunchError``), and is then kept for the life of the process."""
        from .device import DeviceModule

        if self._dev is None:
            self._dev = DeviceModule(self.cubin, self.sigs, self.arch)
        tmap = functools.partial(resolve_cuda, stream=int(stream))
        for ln in launches:
            args = resolve(ln.args, work, tmap)
            self._dev.launch(ln.kernel, ln.grid, ln.block, args, ln.dynamic_shared_bytes,
                             stream=int(stream))


def launch_blocking() -> bool:
    """``CUDA_LAUNCH_BLOCKING=1`` (CUDA's and PyTorch's switch): wait for every launch."""
    import os

    return os.environ.get("CUDA_LAUNCH_BLOCKING", "") not in ("", "0")


def caller_stream(values) -> int | None:
    """The stream the caller's own library enqueues on now: PyTorch's current stream
    for torch tensors, CuPy's for CuPy arrays; None (the legacy default stream)
    otherwise or when that is the default."""
    import sys

    torch, cupy = sys.modules.get("torch"), sys.modules.get("cupy")
    for v in values:
        if torch is not None and isinstance(v, torch.Tensor):
            return int(torch.cuda.current_stream(v.device).cuda_stream) or None
        if cupy is not None and isinstance(v, cupy.ndarray):
            return int(cupy.cuda.get_current_stream().ptr) or None
    return None


def stream_ordered_zeros(values):
    """``zeros(shape, numpy dtype)`` -> a zeroed device array from PyTorch's caching
    allocator on its current stream, when a CUDA tensor is among ``values``; None
    otherwise (the call then allocates, synchronizes and frees itself)."""
    import sys

    torch = sys.modules.get("torch")
    if torch is None:
        return None
    for v in values:
        if isinstance(v, torch.Tensor) and getattr(v, "is_cuda", False):
            dev = v.device

            def zeros(shape, dt, dev=dev):
                from .interop import DeviceArray

                dt = np.dtype(dt)
                n = int(np.prod(shape, dtype=np.int64)) * dt.itemsize
                t = torch.zeros(max(n, 1), dtype=torch.uint8, device=dev)
                return DeviceArray(int(t.data_ptr()), tuple(shape), dt, owner=t)
            return zeros
    return None


class _captured_fd1:
    """Redirect file descriptor 1 (the C stdout) to a temporary file; on exit restore it
    and put the text written meanwhile in ``got[0]``.  Serialized process-wide: fd 1 is
    one for all threads."""

    _lock = threading.Lock()

    def __enter__(self):
        import os
        import sys
        import tempfile

        self._lock.acquire()
        self.got = [""]
        try:
            sys.stdout.flush()
        except Exception:
            pass
        self.file = tempfile.TemporaryFile()
        self.saved = os.dup(1)
        os.dup2(self.file.fileno(), 1)
        return self.got

    def __exit__(self, *exc):
        import ctypes
        import os

        try:
            try:
                ctypes.CDLL(None).fflush(None)  # the C library's buffered stdout
            except (OSError, AttributeError):
                pass
            os.dup2(self.saved, 1)
            os.close(self.saved)
            self.file.seek(0)
            self.got[0] = self.file.read().decode("utf-8", "replace")
            self.file.close()
        finally:
            self._lock.release()
        return False


__all__ = ["ArrayArg", "ArrayRef", "Launch", "arrays_overlap", "EmulatorBackend",
           "CudaBackend", "bind_tensor_maps"]
