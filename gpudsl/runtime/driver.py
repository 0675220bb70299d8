"""Detecting the CUDA driver without ever hanging.

``driver_available()`` loads ``libcuda.so.1`` with ctypes and calls ``cuInit(0)`` and
``cuDeviceGetCount`` directly (not through cuda.core, whose objects can hang without a
driver).  The answer is cached for the process.  ``GPUDSL_NO_GPU=1`` forces False.
"""
from __future__ import annotations

import ctypes
import os
import threading

_lock = threading.Lock()
_lib: ctypes.CDLL | None = None
_lib_tried = False
_available: bool | None = None
_arch: str | None = None

# CUdevice_attribute values from cuda.h
_ATTR_CC_MAJOR = 75
_ATTR_CC_MINOR = 76


def libcuda() -> ctypes.CDLL | None:
    """The loaded ``libcuda.so.1``, or None when it cannot be loaded."""
    global _lib, _lib_tried
    with _lock:
        if not _lib_tried:
            _lib_tried = True
            for name in ("libcuda.so.1", "libcuda.so"):
                try:
                    _lib = ctypes.CDLL(name)
                    break
                except OSError:
                    continue
        return _lib


def _probe() -> bool:
    if os.environ.get("GPUDSL_NO_GPU", "") not in ("", "0"):
        return False
    lib = libcuda()
    if lib is None:
        return False
    try:
        lib.cuInit.argtypes = [ctypes.c_uint]
        lib.cuInit.restype = ctypes.c_int
        if lib.cuInit(0) != 0:
            return False
        count = ctypes.c_int(0)
        lib.cuDeviceGetCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
        lib.cuDeviceGetCount.restype = ctypes.c_int
        if lib.cuDeviceGetCount(ctypes.byref(count)) != 0:
            return False
        return count.value > 0
    except Exception:  # a broken or stub libcuda: no usable driver
        return False


def driver_available() -> bool:
    """True when a CUDA driver and at least one device are usable.  Never raises."""
    global _available
    if _available is None:
        try:
            _available = _probe()
        except Exception:
            _available = False
    return _available


def device_arch(device: int = 0) -> str:
    """The architecture code for the device is built for, from its compute capability
    (``gpudsl.targets.device_target_name``: ``"sm_90a"`` on an H100/H200, ``"sm_XY"``
    elsewhere); the default target (``gpudsl.targets.DEFAULT_TARGET``) without a device."""
    global _arch
    if _arch is not None:
        return _arch
    from .. import targets

    arch = targets.DEFAULT_TARGET
    if driver_available():
        lib = libcuda()
        try:
            dev = ctypes.c_int(0)
            major, minor = ctypes.c_int(0), ctypes.c_int(0)
            lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
            lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                                 ctypes.c_int]
            if (lib.cuDeviceGet(ctypes.byref(dev), device) == 0
                    and lib.cuDeviceGetAttribute(ctypes.byref(major), _ATTR_CC_MAJOR, dev) == 0
                    and lib.cuDeviceGetAttribute(ctypes.byref(minor), _ATTR_CC_MINOR, dev) == 0
                    and major.value > 0):
                arch = targets.device_target_name(major.value, minor.value)
        except Exception:
            pass
    _arch = arch
    return arch


def device_attribute(attr: int, device: int = 0) -> int | None:
    """``cuDeviceGetAttribute`` of device ``device``, or None without a driver."""
    if not driver_available():
        return None
    lib = libcuda()
    try:
        lib.cuDeviceGet.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int]
        lib.cuDeviceGetAttribute.argtypes = [ctypes.POINTER(ctypes.c_int), ctypes.c_int,
                                             ctypes.c_int]
        dev, v = ctypes.c_int(0), ctypes.c_int(0)
        if lib.cuDeviceGet(ctypes.byref(dev), device) != 0:
            return None
        if lib.cuDeviceGetAttribute(ctypes.byref(v), attr, dev) != 0:
            return None
        return v.value
    except Exception:
        return None
