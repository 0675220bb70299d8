"""The arguments of a kernel call, bound by the one binder (:mod:`gpudsl.ir.binding`).

Kernels take numpy arrays (and anything numpy can view without copying: array-likes,
CPU tensors through DLPack) and device arrays (``__cuda_array_interface__`` /
DLPack: PyTorch, CuPy), which the CUDA backend uses in place; the emulator backend
refuses device arrays.  Every failure is a :class:`gpudsl.LaunchError`.
"""
from __future__ import annotations

import numpy as np

from ..errors import LaunchError
from ..ir.binding import Bound, bind, check_array_type, merge_positional
from ..ir.nodes import ProcDef
from ..runtime.interop import as_device_array, is_torch_cuda
from ..runtime.launch import ArrayArg, arrays_overlap
from ..runtime.torch_tensors import check_grad, host_view, is_torch_cpu

DEVICE_HINT = "pass a numpy array or a device array (PyTorch, CuPy)"


def bind_arguments(pdef: ProcDef, args: tuple, kwargs: dict, bindings: dict, backend: str,
                   written: set[str]) -> Bound:
    """The checked arguments of ``kernel(*args, **kwargs)``; arrays as :class:`ArrayArg`."""
    given = merge_positional(pdef, args, kwargs, LaunchError)
    b = bind(pdef, given, error=LaunchError, bindings=bindings, overlap=arrays_overlap,
             array=lambda prm, v: _array(pdef.name, prm, v, backend, prm.name in written),
             array_hint=DEVICE_HINT)
    for prm in pdef.params:  # kernels take scalars as numpy values of the exact C type
        kind = getattr(prm.ty, "kind", None)
        if kind == "index" and isinstance(b.env.get(prm.name), (int, np.integer)):
            v = int(b.env[prm.name])  # sizes and index parameters are 64-bit in C
            if not -2 ** 63 <= v < 2 ** 63:
                raise LaunchError(f"'{prm.name}' of {pdef.name} is {v}, outside the 64-bit "
                                  f"range of index values [-2**63, 2**63)", prm.loc)
        if prm.name in b.scalars and kind in ("int", "bool"):
            v = b.scalars[prm.name]
            if kind == "bool":
                b.scalars[prm.name] = np.bool_(v)
                continue
            info = np.iinfo(np.dtype(prm.ty.numpy))
            if not info.min <= int(v) <= info.max:
                raise LaunchError(f"'{prm.name}' of {pdef.name} is {int(v)}, outside the range "
                                  f"of {prm.ty.name} [{info.min}, {info.max}]", prm.loc)
            b.scalars[prm.name] = np.dtype(prm.ty.numpy).type(v)
    return b


def _array(pname, prm, v, backend, written) -> ArrayArg:
    if is_torch_cuda(v):
        check_grad(f"'{prm.name}' of {pname}", v, LaunchError)
        return _device_array(pname, prm, v.detach() if v.requires_grad else v, backend,
                             written)
    if is_torch_cpu(v):  # viewed as numpy (bfloat16 too), no copy
        return _host_array(pname, prm, host_view(f"'{prm.name}' of {pname}", v,
                                                 LaunchError), v, written)
    if isinstance(v, np.ndarray) or not (hasattr(v, "__cuda_array_interface__")
                                         or hasattr(v, "__dlpack_device__")
                                         or hasattr(v, "__dlpack__")):
        if not isinstance(v, np.ndarray):
            if not hasattr(v, "__array_interface__") and not hasattr(v, "__array__"):
                raise LaunchError(f"'{prm.name}' of {pname} must be an array, got "
                                  f"{type(v).__name__}", prm.loc, DEVICE_HINT)
            v = np.asarray(v)
        return _host_array(pname, prm, v, v, written)
    # a device array, or a CPU tensor of a DLPack library
    if hasattr(v, "__dlpack_device__") and not hasattr(v, "__cuda_array_interface__"):
        try:
            dev_type = int(v.__dlpack_device__()[0])
        except Exception:
            dev_type = -1
        if dev_type == 1:  # kDLCPU: view as numpy without copying
            try:
                host = np.from_dlpack(v)
            except Exception:
                host = np.asarray(v)
            return _host_array(pname, prm, host, v, written)
    return _device_array(pname, prm, v, backend, written)


def _device_array(pname, prm, v, backend, written) -> ArrayArg:
    if backend == "emulator":
        raise LaunchError(f"'{prm.name}' of {pname} is a GPU array, but this kernel runs on the "
                          "emulator (CPU)", prm.loc,
                          "pass numpy arrays (or CPU tensors), or compile for backend 'cuda'")
    d = as_device_array(v)
    bf16 = getattr(d, "bfloat16", False)
    check_array_type(pname, prm, d.dtype, len(d.shape), LaunchError,
                     dtype_ok=_dtype_ok(prm, d.dtype, bf16),
                     shown="bfloat16" if bf16 else d.dtype)
    if not d.c_contiguous:
        raise LaunchError(f"'{prm.name}' of {pname} must be C-contiguous (row-major)", prm.loc,
                          "pass x.contiguous() / cupy.ascontiguousarray(x)")
    if written and getattr(d, "readonly", False):
        raise LaunchError(f"'{prm.name}' of {pname} is written by the proc but the device "
                          "array is read-only", prm.loc)
    return ArrayArg(prm.name, v, None, d, tuple(d.shape), written)


def _dtype_ok(prm, dtype: np.dtype, bf16_flag: bool = False) -> bool:
    if prm.ty.name == "bf16":
        return bf16_flag or dtype.name == "bfloat16"
    return prm.ty.numpy is not None and dtype == np.dtype(prm.ty.numpy)


def _host_array(pname, prm, a: np.ndarray, orig, written) -> ArrayArg:
    check_array_type(pname, prm, a.dtype, a.ndim, LaunchError,
                     dtype_ok=_dtype_ok(prm, a.dtype))
    if written and not a.flags.writeable:
        raise LaunchError(f"'{prm.name}' of {pname} is written by the proc but the array is "
                          "read-only", prm.loc)
    return ArrayArg(prm.name, orig, a, None, tuple(a.shape), written)


__all__ = ["bind_arguments", "Bound"]
