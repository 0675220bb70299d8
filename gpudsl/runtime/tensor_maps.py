"""Tensor maps for bulk tensor copies (TMA): what a kernel's ``"tensormap"`` parameter points
to, built at launch from the argument it describes.

A :class:`TensorMapRef` in a launch's arguments names a GLOBAL argument (or temporary),
its dimensions (outermost first), the box the kernel copies and the element type.  The
backend resolves it once it knows where the array lives:

- **emulator**: a host record of :data:`MAP_WORDS` 64-bit words that the emulated
  ``gpudsl_tma_load`` reads (address, rank, dimensions, byte strides and box, innermost
  first, the element size and the swizzle width);
- **cuda**: the 128-byte ``CUtensorMap`` that ``cuTensorMapEncodeTiled`` writes (tiled,
  no interleave, zeros outside the array, the swizzle mode of the shared tile:
  ``CU_TENSOR_MAP_SWIZZLE_32B/64B/128B`` or none), copied to device memory (the kernel
  reads it from global memory).

Both refuse what the hardware refuses, so a launch behaves the same on either: an
address not 16-byte aligned, a row pitch not a multiple of 16 bytes (check() proves
this one), a dimension of 2^31 or more, an array that is not contiguous.
"""
from __future__ import annotations

import ctypes
from dataclasses import dataclass

import numpy as np

from ..errors import LaunchError

MAP_WORDS = 19
L2_PROMOTION_128B = 2   # CU_TENSOR_MAP_L2_PROMOTION_L2_128B
SWIZZLE_MODES = {0: 0, 32: 1, 64: 2, 128: 3}   # CU_TENSOR_MAP_SWIZZLE_NONE/32B/64B/128B
_CU_DTYPE = {"uint8": 0, "int8": 0, "uint16": 1, "uint32": 2, "int32": 3, "uint64": 4,
             "int64": 5, "float16": 6, "float32": 7, "float64": 8, "bfloat16": 9}


@dataclass(frozen=True)
class TensorMapRef:
    """A launch argument: the tensor map of array ``name`` (``dims`` outermost first)
    read in boxes of ``box`` elements of ``itemsize`` bytes (``dtype``: its name), into
    or out of SHARED tiles swizzled with ``swizzle`` bytes (0: none)."""

    name: str
    dims: tuple
    box: tuple
    itemsize: int
    dtype: str
    swizzle: int = 0


def _check(ref: TensorMapRef, ptr: int, contiguous: bool) -> list:
    """Byte strides (outermost first) of the contiguous array at ``ptr``; LaunchError for
    what a tensor map cannot describe."""
    if not contiguous:
        raise LaunchError(f"the array '{ref.name}' read by tma_load is not contiguous",
                          hint="pass a contiguous array (e.g. .contiguous() / np.ascontiguousarray)")
    if ptr % 16:
        raise LaunchError(f"the array '{ref.name}' read by tma_load starts at an address "
                          "that is not a multiple of 16 bytes", hint="pass an aligned array")
    if any(d >= 2 ** 31 for d in ref.dims):
        raise LaunchError(f"the array '{ref.name}' has a dimension of 2^31 or more elements, "
                          "more than a tensor map's coordinates reach")
    strides, acc = [], ref.itemsize
    for d in reversed(ref.dims):
        strides.append(acc)
        acc *= max(d, 1)
    strides.reverse()
    if any(s % 16 for s in strides[:-1]):
        raise LaunchError(f"the rows of '{ref.name}' are not a multiple of 16 bytes apart",
                          hint="check() proves this from the proc's asserts")
    return strides


def emulator_map(ref: TensorMapRef, host: np.ndarray) -> np.ndarray:
    """The emulator's record for ``host`` (the array the kernel runs on)."""
    ptr = host.__array_interface__["data"][0]
    strides = _check(ref, ptr, host.flags.c_contiguous)
    rank = len(ref.dims)
    out = np.zeros(MAP_WORDS, np.uint64)
    out[0], out[1], out[17], out[18] = ptr, rank, ref.itemsize, ref.swizzle
    for k in range(rank):   # innermost first
        out[2 + k] = ref.dims[rank - 1 - k]
        out[7 + k] = strides[rank - 1 - k]
        out[12 + k] = ref.box[rank - 1 - k]
    return np.array(out)


def cuda_map(ref: TensorMapRef, ptr: int, encode, contiguous: bool = True) -> np.ndarray:
    """The 128-byte ``CUtensorMap`` of the device array at ``ptr`` (``encode``: the
    driver's ``cuTensorMapEncodeTiled``)."""
    strides = _check(ref, ptr, contiguous)
    rank = len(ref.dims)
    u64, u32 = ctypes.c_uint64, ctypes.c_uint32
    dims = (u64 * rank)(*reversed(ref.dims))
    gstrides = (u64 * max(rank - 1, 1))(*reversed(strides[:-1])) if rank > 1 else (u64 * 1)(0)
    box = (u32 * rank)(*reversed(ref.box))
    ones = (u32 * rank)(*([1] * rank))
    raw = np.zeros(24, np.uint64)             # a CUtensorMap is 64-byte aligned
    skip = (-raw.ctypes.data % 64) // 8
    out = raw[skip:skip + 16]
    r = encode(out.ctypes.data_as(ctypes.c_void_p), _CU_DTYPE[ref.dtype], rank,
               ctypes.c_void_p(ptr), dims, gstrides, box, ones, 0, SWIZZLE_MODES[ref.swizzle],
               L2_PROMOTION_128B, 0)
    if r != 0:
        raise LaunchError(f"cuTensorMapEncodeTiled refused the tensor map of '{ref.name}' "
                          f"(CUresult {r}): dims {list(ref.dims)}, box {list(ref.box)}, swizzle "
                          f"{ref.swizzle or 'none'}")
    return np.array(out)




#: key -> DeviceBuffer: the maps built so far; bounded (see resolve_cuda)
_CACHE: dict = {}
_CACHE_MAX = 1024
#: key -> DeviceBuffer: maps a stream capture used; kept for the life of the process
_PINNED: dict = {}


def resolve_cuda(ref: TensorMapRef, dev, stream=None):
    """A device buffer holding the map of the device array ``dev`` (a DeviceBuffer or
    DeviceArray) for a launch on ``stream`` (a ``CUstream`` handle or a ``Stream``;
    None: the legacy default stream).  A map depends only on its key (address,
    dimensions, box, type, swizzle), so one buffer serves every launch with that key.

    The cache is bounded: when full, a device synchronization (a queued kernel may
    still read a map), then the buffers are freed.  A launch captured into a CUDA graph
    keeps its map's address for as long as the graph lives, which gpudsl cannot know
    (a user's ``torch.cuda.graph`` too), so while ``stream`` is capturing:

    - a map already built is *pinned*: kept for the life of the process, never
      evicted (docs/decisions.md, 2026-11-29);
    - a map not built yet is refused (``LaunchError``): building it allocates device
      memory, which a capture forbids.  The remedy is the usual warm-up: run the call
      once before capturing, on the same arrays.
    """
    return map_buffer(ref, int(dev.ptr), getattr(dev, "c_contiguous", True), stream)


def map_address(ref: TensorMapRef, ptr: int, stream) -> int:
    """The device address of the map of the contiguous array at ``ptr`` for a launch on
    ``stream``: :func:`resolve_cuda`'s rules, for the prepared launcher (whose call
    signature fixed the array's shape and contiguity; only its address changes)."""
    return map_buffer(ref, ptr, True, stream).ptr


def map_buffer(ref: TensorMapRef, ptr: int, contiguous: bool, stream):
    """:func:`resolve_cuda` of the array at ``ptr``."""
    from .device import DeviceBuffer, _cu, synchronize
    from .graphs import is_capturing

    key = (ptr, ref.dims, ref.box, ref.dtype, ref.swizzle)
    if contiguous:
        buf = _PINNED.get(key)
        if buf is not None:
            return buf
    _cu()
    capturing = is_capturing(stream)
    buf = _CACHE.get(key) if contiguous else None
    if buf is not None:
        if capturing:
            _PINNED[key] = _CACHE.pop(key)
        return buf
    host = cuda_map(ref, ptr, _encoder(), contiguous)   # refuses a bad array first
    if capturing:
        raise LaunchError(
            f"the tensor map of '{ref.name}' (dims {list(ref.dims)}, box {list(ref.box)}) "
            "is needed by a launch on a stream that is being captured into a CUDA graph, "
            "and it was not built before the capture: building it allocates device "
            "memory, which a capture forbids",
            hint="run the call once before capturing (as one warms up any CUDA graph), "
                 "on the same arrays at the same addresses; a tma_load kernel cannot "
                 "yet read an array first allocated inside the capture")
    if len(_CACHE) >= _CACHE_MAX:   # not capturing here: synchronizing is allowed
        synchronize()
        _CACHE.clear()
    buf = _CACHE[key] = DeviceBuffer.from_numpy(host)
    return buf


def _encoder():
    from .driver import libcuda
    lib = libcuda()
    try:
        fn = lib.cuTensorMapEncodeTiled
    except AttributeError:
        raise LaunchError("this CUDA driver has no cuTensorMapEncodeTiled (tma_load needs a "
                          "CUDA 12 driver and an sm_90 GPU)") from None
    P = ctypes.POINTER
    fn.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_uint32, ctypes.c_void_p,
                   P(ctypes.c_uint64), P(ctypes.c_uint64), P(ctypes.c_uint32),
                   P(ctypes.c_uint32), ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_int]
    fn.restype = ctypes.c_int
    return fn


__all__ = ["MAP_WORDS", "TensorMapRef", "emulator_map", "cuda_map", "resolve_cuda",
           "map_address"]
