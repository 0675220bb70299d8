"""Running cubins on the GPU through the CUDA driver API (ctypes on ``libcuda.so.1``).

Use only when :func:`gpudsl.runtime.driver.driver_available` is True; every entry point
checks it first, so nothing here can hang on a machine without a driver (cuda.core's
kernel objects can).  Scalars are packed by :mod:`gpudsl.runtime.signature` into their
exact C types, never passed as Python ints/floats to the driver.

All work goes to the legacy default stream (handle 0), in program order: it is ordered
with PyTorch's and CuPy's default streams, and ``cuMemcpy`` to and from the host is
ordered with it too.  The primary context of device 0 is used (shared with PyTorch).

API::

    mod = DeviceModule(cubin, [KernelSig("saxpy", ["int", "float", "const float*", "float*"])])
    x = DeviceBuffer.from_numpy(x_host)               # or a torch/cupy array, zero-copy
    mod.launch("saxpy", grid, block, [np.int32(n), np.float32(2), x, y])
    synchronize(); y.copy_to(y_host)
"""
from __future__ import annotations

import ctypes
import math
import threading
from typing import Any, Iterable

import numpy as np

from gpudsl.errors import LaunchError
from gpudsl.targets import target
from gpudsl.runtime.driver import driver_available, libcuda
from gpudsl.runtime.interop import DeviceArray, as_device_array
from gpudsl.runtime.signature import KernelSig, Param, check_array, pack_args

_P = ctypes.POINTER
_c_int, _c_uint, _vp, _u64, _sz = (ctypes.c_int, ctypes.c_uint, ctypes.c_void_p,
                                   ctypes.c_uint64, ctypes.c_size_t)
_SIGNATURES = {
    "cuInit": [_c_uint],
    "cuDeviceGet": [_P(_c_int), _c_int],
    "cuDeviceGetAttribute": [_P(_c_int), _c_int, _c_int],
    "cuDevicePrimaryCtxRetain": [_P(_vp), _c_int],
    "cuCtxGetCurrent": [_P(_vp)],
    "cuCtxSetCurrent": [_vp],
    "cuCtxSynchronize": [],
    "cuModuleLoadData": [_P(_vp), ctypes.c_char_p],
    "cuModuleUnload": [_vp],
    "cuModuleGetFunction": [_P(_vp), _vp, ctypes.c_char_p],
    "cuFuncSetAttribute": [_vp, _c_int, _c_int],
    "cuFuncGetAttribute": [_P(_c_int), _c_int, _vp],
    "cuLaunchKernel": [_vp, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _c_uint, _vp,
                       _P(_vp), _P(_vp)],
    "cuMemAlloc_v2": [_P(_u64), _sz],
    "cuMemFree_v2": [_u64],
    "cuMemcpyHtoD_v2": [_u64, _vp, _sz],
    "cuMemcpyDtoH_v2": [_vp, _u64, _sz],
    "cuMemcpyDtoD_v2": [_u64, _u64, _sz],
    "cuMemsetD8_v2": [_u64, ctypes.c_ubyte, _sz],
    "cuGetErrorName": [_c_int, _P(ctypes.c_char_p)],
    "cuGetErrorString": [_c_int, _P(ctypes.c_char_p)],
}
CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
CU_DEVICE_ATTRIBUTE_MAX_SHARED_MEMORY_PER_BLOCK_OPTIN = 97

_lock = threading.Lock()
_api: ctypes.CDLL | None = None
_ctx = ctypes.c_void_p(0)


def _cu() -> ctypes.CDLL:
    """libcuda with argument types set, after making the primary context current."""
    global _api
    if _api is None:
        with _lock:
            if _api is None:
                if not driver_available():
                    raise LaunchError("no CUDA driver or GPU is available",
                                      hint="compile for the 'emulator' backend instead")
                lib = libcuda()
                for name, argtypes in _SIGNATURES.items():
                    fn = getattr(lib, name)
                    fn.argtypes = argtypes
                    fn.restype = ctypes.c_int
                check(lib.cuInit(0), "cuInit")
                dev = ctypes.c_int(0)
                check(lib.cuDeviceGet(ctypes.byref(dev), 0), "cuDeviceGet")
                check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(_ctx), dev),
                      "cuDevicePrimaryCtxRetain")
                _api = lib
    cur = ctypes.c_void_p(0)
    _api.cuCtxGetCurrent(ctypes.byref(cur))
    if cur.value != _ctx.value:  # contexts are per OS thread
        check(_api.cuCtxSetCurrent(_ctx), "cuCtxSetCurrent")
    return _api


def check(res: int, what: str) -> None:
    """Raise LaunchError naming the CUDA error when ``res`` is not CUDA_SUCCESS."""
    if res == 0:
        return
    name, text = ctypes.c_char_p(), ctypes.c_char_p()
    lib = libcuda()
    try:
        lib.cuGetErrorName(res, ctypes.byref(name))
        lib.cuGetErrorString(res, ctypes.byref(text))
    except Exception:
        pass
    n = name.value.decode() if name.value else f"CUDA error {res}"
    t = text.value.decode() if text.value else ""
    raise LaunchError(f"{what} failed: {n}" + (f" ({t})" if t else ""))


def synchronize() -> None:
    """Wait for all launched work; raises LaunchError on a kernel fault."""
    check(_cu().cuCtxSynchronize(), "kernel execution (cuCtxSynchronize)")
    _inflight.clear()


_inflight: list[Any] = []  # objects kept alive until the next synchronize()


class DeviceBuffer:
    """Device memory owned by gpudsl, typed like a numpy array (freed when collected)."""

    def __init__(self, shape: Iterable[int] | int, dtype: Any = np.float32):
        self.shape = (shape,) if isinstance(shape, int) else tuple(int(s) for s in shape)
        self.dtype = np.dtype(dtype)
        self.nbytes = math.prod(self.shape) * self.dtype.itemsize   # exact: never wraps
        if min(self.shape, default=0) < 0 or self.nbytes >= 2 ** 64:
            raise LaunchError(f"cannot allocate {self.nbytes:,} bytes of device memory "
                              f"(shape {list(self.shape)})")
        self.ptr = 0
        p = ctypes.c_uint64(0)
        check(_cu().cuMemAlloc_v2(ctypes.byref(p), max(self.nbytes, 1)), "cuMemAlloc")
        self.ptr = p.value

    @classmethod
    def from_numpy(cls, arr: np.ndarray) -> "DeviceBuffer":
        """A new buffer holding a copy of ``arr``."""
        arr = np.ascontiguousarray(arr)
        buf = cls(arr.shape, arr.dtype)
        buf.copy_from(arr)
        return buf

    @classmethod
    def zeros(cls, shape, dtype: Any = np.float32) -> "DeviceBuffer":
        buf = cls(shape, dtype)
        check(_cu().cuMemsetD8_v2(buf.ptr, 0, buf.nbytes), "cuMemsetD8")
        return buf

    def _check_host(self, arr: np.ndarray) -> None:
        if arr.dtype != self.dtype or arr.nbytes != self.nbytes or not arr.flags.c_contiguous:
            raise LaunchError(f"host array {arr.dtype}{list(arr.shape)} does not match device "
                              f"buffer {self.dtype}{list(self.shape)} (or is not contiguous)")

    def copy_from(self, arr: np.ndarray) -> None:
        """Host → device (ordered after earlier launches)."""
        self._check_host(arr)
        if self.nbytes:
            check(_cu().cuMemcpyHtoD_v2(self.ptr, arr.ctypes.data, self.nbytes), "cuMemcpyHtoD")

    def copy_to(self, arr: np.ndarray) -> None:
        """Device → host; waits for earlier launches."""
        self._check_host(arr)
        if not arr.flags.writeable:
            raise LaunchError("cannot copy into a read-only array")
        if self.nbytes:
            check(_cu().cuMemcpyDtoH_v2(arr.ctypes.data, self.ptr, self.nbytes), "cuMemcpyDtoH")

    def to_numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self.copy_to(out)
        return out

    def free(self) -> None:
        if self.ptr and _api is not None:
            _api.cuMemFree_v2(self.ptr)  # implicitly synchronises
        self.ptr = 0

    def __del__(self):
        try:
            self.free()
        except Exception:
            pass

    @property
    def __cuda_array_interface__(self) -> dict:
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr, False),
                "strides": None, "version": 3, "stream": 1}


def device_pointer(sig: KernelSig, i: int, p: Param, v: Any) -> int:
    """Device address of an array argument, after dtype/layout checks."""
    if isinstance(v, np.ndarray):
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} is a host numpy array",
                          hint="copy it with DeviceBuffer.from_numpy(x) first")
    if isinstance(v, DeviceBuffer):
        check_array(sig, i, p, v.dtype, True, True)
        return v.ptr
    a = v if isinstance(v, DeviceArray) else as_device_array(v)
    check_array(sig, i, p, a.dtype, a.c_contiguous, not a.readonly)
    _inflight.append(a)
    return a.ptr


class DeviceModule:
    """A cubin loaded into the primary context, with its kernels looked up by name;
    ``arch`` is the architecture it was built for (None: the device's), whose
    ``gpudsl.targets`` description gives the launch limits (threads per block, the
    static shared memory above which a launch opts in)."""

    def __init__(self, cubin: bytes, kernels: Iterable[KernelSig], arch: str | None = None):
        cu = _cu()
        if arch is None:
            from gpudsl.runtime.driver import device_arch

            arch = device_arch()
        self.target = target(arch)
        self._image = bytes(cubin)
        self._mod = ctypes.c_void_p(0)
        check(cu.cuModuleLoadData(ctypes.byref(self._mod), self._image), "cuModuleLoadData")
        self.kernels = {k.name: k for k in kernels}
        self._fns: dict[str, ctypes.c_void_p] = {}
        self._dyn_smem: dict[str, int] = {}
        for name in self.kernels:
            f = ctypes.c_void_p(0)
            check(cu.cuModuleGetFunction(ctypes.byref(f), self._mod, name.encode()),
                  f"looking up kernel {name}")
            self._fns[name] = f

    def attribute(self, name: str, attr: int) -> int:
        """``cuFuncGetAttribute`` of one kernel (e.g. 4 = registers per thread)."""
        v = ctypes.c_int(0)
        check(_cu().cuFuncGetAttribute(ctypes.byref(v), attr, self._fns[name]), "cuFuncGetAttribute")
        return v.value

    def launch(self, name: str, grid, block, args: list | tuple, shared_bytes: int = 0,
               stream: int | None = None) -> None:
        """Enqueue kernel ``name`` on the legacy default stream, or on ``stream`` (a
        ``CUstream`` handle, e.g. one being captured into a CUDA graph); asynchronous."""
        from gpudsl.runtime.emulator import dims
        sig = self.kernels.get(name)
        if sig is None:
            raise LaunchError(f"no kernel named {name!r} in this module")
        g, b = dims(grid, "grid"), dims(block, "block")
        limit = self.target.max_threads_per_block
        if b[0] * b[1] * b[2] > limit:
            raise LaunchError(f"block {b} has more than {limit} threads ({self.target})")
        cu = _cu()
        slots = pack_args(sig, args, device_pointer)
        params = slots.pointer_array()
        f = self._fns[name]
        if shared_bytes > self.target.static_shared_bytes and self._dyn_smem.get(name, 0) < shared_bytes:
            check(cu.cuFuncSetAttribute(f, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                        int(shared_bytes)),
                  f"allowing {shared_bytes} bytes of dynamic shared memory for {name}")
            self._dyn_smem[name] = shared_bytes
        check(cu.cuLaunchKernel(f, g[0], g[1], g[2], b[0], b[1], b[2], int(shared_bytes),
                                ctypes.c_void_p(stream) if stream else None, params, None),
              f"launching {name} (grid {g}, block {b}, {shared_bytes} bytes dynamic shared)")
        _inflight.append(slots)

    def __del__(self):
        try:
            if self._mod.value and _api is not None:
                _api.cuModuleUnload(self._mod)
        except Exception:
            pass
