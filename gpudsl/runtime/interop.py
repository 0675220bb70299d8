"""Device arrays from other libraries (PyTorch, CuPy, ...) without copies.

:func:`as_device_array` reads ``__cuda_array_interface__`` (v2/v3) or, failing that,
DLPack (``__dlpack__`` / ``__dlpack_device__``) and returns a :class:`DeviceArray`: a raw
device pointer with shape, dtype, strides and the object that keeps the memory alive.
Nothing here calls the driver except to honour a producer's stream (v3 ``stream`` key),
so parsing can be tested without a GPU.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

import numpy as np

from gpudsl.errors import LaunchError

KDL_CUDA, KDL_CUDA_HOST, KDL_CUDA_MANAGED = 2, 3, 13
_DL_CODES = {0: "i", 1: "u", 2: "f", 6: "b"}
KDL_BFLOAT = 4


@dataclass
class DeviceArray:
    """A view of device memory owned by someone else (``owner`` keeps it alive)."""

    ptr: int
    shape: tuple[int, ...]
    dtype: np.dtype
    strides: tuple[int, ...] | None = None   # in bytes; None means C-contiguous
    owner: Any = None
    readonly: bool = False
    bfloat16: bool = False                    # dtype is uint16 standing in for bfloat16

    @property
    def size(self) -> int:
        return int(np.prod(self.shape, dtype=np.int64)) if self.shape else 1

    @property
    def dtype_name(self) -> str:
        """The element type's name: ``"bfloat16"`` where ``dtype`` is the uint16
        standing in for it."""
        return "bfloat16" if self.bfloat16 else self.dtype.name

    @property
    def nbytes(self) -> int:
        return self.size * self.dtype.itemsize

    @property
    def c_contiguous(self) -> bool:
        if self.strides is None or self.size <= 1:
            return True
        expect = self.dtype.itemsize
        for n, s in zip(reversed(self.shape), reversed(self.strides)):
            if n != 1 and s != expect:
                return False
            expect *= n
        return True

    @property
    def __cuda_array_interface__(self) -> dict:
        """So that a view made here (e.g. a slot of a model's arena) is accepted
        wherever a device array is (version 3; stream 1: the legacy default stream)."""
        return {"shape": self.shape, "typestr": self.dtype.str, "data": (self.ptr,
                self.readonly), "strides": self.strides, "version": 3, "stream": 1}


def _from_cai(obj: Any, cai: dict) -> DeviceArray:
    if cai.get("mask") is not None:
        raise LaunchError("masked device arrays are not supported")
    ptr, readonly = cai["data"]
    stream = cai.get("stream")
    if stream is not None and stream not in (0, 1):
        _sync_stream(int(stream))
    return DeviceArray(int(ptr or 0), tuple(int(n) for n in cai["shape"]), np.dtype(cai["typestr"]),
                       tuple(int(s) for s in cai["strides"]) if cai.get("strides") else None,
                       owner=obj, readonly=bool(readonly))


def _sync_stream(stream: int) -> None:
    from gpudsl.runtime.driver import libcuda
    lib = libcuda()
    if lib is None:
        return
    lib.cuStreamSynchronize.argtypes = [ctypes.c_void_p]
    lib.cuStreamSynchronize.restype = ctypes.c_int
    if lib.cuStreamSynchronize(ctypes.c_void_p(stream)) != 0:
        raise LaunchError("could not synchronise with the array's CUDA stream")


class _DLDevice(ctypes.Structure):
    _fields_ = [("device_type", ctypes.c_int32), ("device_id", ctypes.c_int32)]


class _DLDataType(ctypes.Structure):
    _fields_ = [("code", ctypes.c_uint8), ("bits", ctypes.c_uint8), ("lanes", ctypes.c_uint16)]


class _DLTensor(ctypes.Structure):
    _fields_ = [("data", ctypes.c_void_p), ("device", _DLDevice), ("ndim", ctypes.c_int32),
                ("dtype", _DLDataType), ("shape", ctypes.POINTER(ctypes.c_int64)),
                ("strides", ctypes.POINTER(ctypes.c_int64)), ("byte_offset", ctypes.c_uint64)]


class _DLManagedTensor(ctypes.Structure):
    _fields_ = [("dl_tensor", _DLTensor), ("manager_ctx", ctypes.c_void_p),
                ("deleter", ctypes.c_void_p)]


def _capsule_pointer(capsule: Any, name: bytes) -> int:
    get = ctypes.pythonapi.PyCapsule_GetPointer
    get.restype = ctypes.c_void_p
    get.argtypes = [ctypes.py_object, ctypes.c_char_p]
    return get(capsule, name) or 0


def dltensor_to_array(capsule: Any, owner: Any = None,
                      device_types: tuple[int, ...] = (KDL_CUDA, KDL_CUDA_MANAGED)) -> DeviceArray:
    """Parse an unversioned ``"dltensor"`` capsule (not consumed: its destructor frees it)."""
    try:
        addr = _capsule_pointer(capsule, b"dltensor")
    except (ValueError, TypeError):
        addr = 0
    if not addr:
        raise LaunchError("not a DLPack tensor capsule")
    t = _DLManagedTensor.from_address(addr).dl_tensor
    if t.device.device_type not in device_types:
        raise LaunchError(f"DLPack tensor lives on device type {t.device.device_type}, not CUDA",
                          hint="move it to the GPU first, e.g. tensor.cuda()")
    code, bits, lanes = t.dtype.code, t.dtype.bits, t.dtype.lanes
    if lanes != 1:
        raise LaunchError("vector-typed DLPack tensors are not supported")
    bf16 = code == KDL_BFLOAT and bits == 16
    if bf16:
        dtype = np.dtype(np.uint16)
    elif code in _DL_CODES:
        dtype = np.dtype(bool) if code == 6 else np.dtype(f"{_DL_CODES[code]}{bits // 8}")
    else:
        raise LaunchError(f"unsupported DLPack dtype (code {code}, {bits} bits)")
    shape = tuple(t.shape[i] for i in range(t.ndim))
    strides = (tuple(t.strides[i] * dtype.itemsize for i in range(t.ndim))
               if t.strides else None)
    return DeviceArray(int(t.data or 0) + int(t.byte_offset), shape, dtype, strides,
                       owner=(capsule, owner), bfloat16=bf16)


_TORCH_DTYPES = {"torch.float32": "float32", "torch.float16": "float16",
                 "torch.float64": "float64", "torch.int32": "int32", "torch.int64": "int64",
                 "torch.int16": "int16", "torch.int8": "int8", "torch.uint8": "uint8",
                 "torch.bool": "bool", "torch.bfloat16": "uint16"}


def is_torch_cuda(obj: Any) -> bool:
    """A PyTorch CUDA tensor, told by its cheap ``is_cuda`` flag (reading
    ``__cuda_array_interface__`` builds a dict in Python: ~10 us each time)."""
    return getattr(obj, "is_cuda", False) is True and hasattr(obj, "data_ptr")


def _from_torch(t: Any) -> DeviceArray | None:
    """A CUDA tensor's view from its own accessors, or None where the general paths
    must decide (a dtype not listed; a tensor that requires grad, which PyTorch
    refuses to export)."""
    name = _TORCH_DTYPES.get(str(t.dtype))
    if name is None or t.requires_grad:
        return None
    dtype = np.dtype(name)
    strides = None if t.is_contiguous() else tuple(s * dtype.itemsize for s in t.stride())
    return DeviceArray(int(t.data_ptr()), tuple(t.shape), dtype, strides, owner=t,
                       bfloat16=name == "uint16")


def as_device_array(obj: Any) -> DeviceArray:
    """A :class:`DeviceArray` viewing ``obj``'s device memory, without copying."""
    if isinstance(obj, DeviceArray):
        return obj
    if is_torch_cuda(obj):
        d = _from_torch(obj)
        if d is not None:
            return d
    try:
        cai = obj.__cuda_array_interface__
    except AttributeError:
        cai = None
    except Exception:  # e.g. torch refuses for tensors that require grad: try DLPack
        cai = None
    if cai is not None:
        return _from_cai(obj, cai)
    if hasattr(obj, "__dlpack__"):
        if hasattr(obj, "__dlpack_device__"):
            dev_type, _ = obj.__dlpack_device__()
            if int(dev_type) not in (KDL_CUDA, KDL_CUDA_MANAGED):
                raise LaunchError(f"{type(obj).__name__} is not on a CUDA device",
                                  hint="move it to the GPU first, or pass a numpy array")
        try:
            capsule = obj.__dlpack__(stream=1)  # we launch on the legacy default stream
        except TypeError:
            capsule = obj.__dlpack__()
        except Exception as e:
            raise LaunchError(f"cannot export {type(obj).__name__} through DLPack: {e}",
                              hint="for a PyTorch tensor that requires grad, pass t.detach()") from None
        return dltensor_to_array(capsule, obj)
    raise LaunchError(f"{type(obj).__name__} is not a device array (no __cuda_array_interface__ "
                      f"or __dlpack__)")
