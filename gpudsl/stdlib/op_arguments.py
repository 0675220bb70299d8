"""The arguments of ``gpudsl.ops``: what is an array (host or device) and what a scalar,
tensors of accepted ranks and dtypes, integers and axes, each refused with a
``gpudsl.Error`` that names the argument (numpy's conventions: negative axes, no
silent coercion of floats, bools or strings to integers)."""
from __future__ import annotations

import operator

import numpy as np

from ..runtime.torch_tensors import check_grad, from_host, host_view, is_torch, torch_module
from .node_registry import ShapeError, get
from .shapes import NodeError, require  # noqa: F401
from .shapes import check_tensor as _check_tensor


def _is_device(x) -> bool:
    if getattr(x, "is_cuda", None) is not None:  # torch: its flag, not the interface
        return bool(x.is_cuda)
    return hasattr(x, "__cuda_array_interface__")



def _is_array(x) -> bool:
    return hasattr(x, "shape") and hasattr(x, "dtype") and len(getattr(x, "shape", ())) > 0


def _is_scalar(x) -> bool:
    if isinstance(x, (bool, np.bool_)):
        return False
    if isinstance(x, (int, float, np.integer, np.floating)):
        return True
    return hasattr(x, "shape") and hasattr(x, "dtype") and len(x.shape) == 0 and \
        not _is_device(x) and _kind(x.dtype) in "iuf"


def _kind(dtype) -> str:
    """numpy's kind letter of a numpy or torch dtype (``"?"`` when numpy has none)."""
    try:
        return np.dtype(str(dtype).replace("torch.", "")).kind
    except TypeError:
        return "?"


_ANY_FLOAT = ("float32", "float16", "bfloat16")  # the nodes that take half precision
RANKS = (1, 2, 3, 4, 5, 6)  # the ops whose kernels merge axes take up to 6 (issue 40)


def check_tensor(name: str, x, ranks=(1, 2, 3), dtypes=("float32",)):
    """``x``'s shape, after checking it is a tensor of an accepted rank and dtype."""
    if not _is_array(x):
        kind = "a scalar" if _is_scalar(x) else f"{type(x).__name__} {x!r:.40}"
        raise NodeError(f"{name} must be an array (numpy, or a PyTorch / CuPy device "
                        f"array), not {kind}", None,
                        "wrap it: np.asarray(..., dtype=np.float32)")
    return _check_tensor(name, x, ranks, dtypes)


def as_int(name: str, v) -> int:
    """An integer argument: Python / numpy ints (and 0-d integer arrays); floats,
    bools and strings are refused rather than truncated."""
    if isinstance(v, (bool, np.bool_)):
        raise NodeError(f"{name} must be an integer, not a bool {v!r}")
    try:
        return operator.index(v)
    except TypeError:
        raise NodeError(f"{name} must be an integer, not {type(v).__name__} {v!r}",
                        None, "numpy refuses it too; convert explicitly with int(...) "
                        "if truncation is what you mean") from None


def axis(name: str, v, rank: int) -> int:
    """An axis in ``-rank .. rank-1`` (numpy's negative axes), as ``0 .. rank-1``."""
    a = as_int(name, v)
    require(-rank <= a < rank, f"{name} {a} is out of range for {rank} axes")
    return a % rank


def torch_call(fn, names: tuple, args: tuple, kwargs: dict):
    """``fn`` with PyTorch tensors in: CPU ones as numpy views (bfloat16 included), the
    result a CPU tensor again (the very tensor an in-place op was given); CUDA ones
    as they are.  A tensor that requires grad is refused under grad mode."""
    tensor = torch_module().Tensor
    if not any(isinstance(v, tensor) for v in args) and \
            not any(isinstance(v, tensor) for v in kwargs.values()):
        return fn(*args, **kwargs)  # no tensor: nothing to convert
    seen: dict = {}

    def convert(name, v):
        if not is_torch(v):
            return v
        check_grad(name, v, NodeError, hint="pass x.detach(), or use the "
                   f"differentiable gpudsl.torch.ops.{fn.__name__}")
        if v.device.type != "cpu":
            return v.detach() if v.requires_grad else v
        a = host_view(name, v, NodeError)
        seen[id(a)] = v
        return a

    args = tuple(convert(names[i] if i < len(names) else f"argument {i + 1}", v)
                 for i, v in enumerate(args))
    kwargs = {k: convert(k, v) for k, v in kwargs.items()}
    out = fn(*args, **kwargs)
    if seen and isinstance(out, tuple):  # topk: (values, indices)
        return tuple(from_host(o) if isinstance(o, np.ndarray) else o for o in out)
    if not seen or not isinstance(out, np.ndarray):
        return out
    same = seen.get(id(out))  # an in-place op returns the tensor it was given
    return same if same is not None else from_host(out)


# ------------------------------------------------------------------ arrays


def contig(x):
    """``x`` contiguous (a copy only when it is not)."""
    if _is_device(x):
        return x.contiguous() if hasattr(x, "contiguous") else x
    return np.ascontiguousarray(x)


def transpose_if_contiguous(x):
    """``x``'s transpose as a contiguous view, where ``x`` is a 2-D array that is not
    contiguous but whose transpose is (``w.T`` of a contiguous ``w``); else None."""
    if len(getattr(x, "shape", ())) != 2:
        return None
    if _is_device(x):
        if not hasattr(x, "is_contiguous") or x.is_contiguous():
            return None
        t = x.transpose(0, 1)
        return t if t.is_contiguous() else None
    if not isinstance(x, np.ndarray) or x.flags.c_contiguous:
        return None
    return x.T if x.T.flags.c_contiguous else None


def empty(like, shape, dtype=np.float32):
    """An uninitialised array of ``shape`` where ``like`` lives (numpy, torch, CuPy)."""
    if _is_device(like):
        if hasattr(like, "new_empty"):  # torch
            return like.new_empty(tuple(shape), dtype=torch_dtype(dtype))
        import cupy  # noqa: F401  (device arrays that are not torch are CuPy's here)

        return cupy.empty(tuple(shape), dtype=dtype)
    return np.empty(tuple(shape), dtype=dtype)


def array_like(like, host: np.ndarray):
    """The numpy array ``host`` where ``like`` lives (a copy on a device)."""
    if not _is_device(like):
        return host
    if hasattr(like, "new_empty"):  # torch
        import torch

        return torch.as_tensor(host, device=like.device)
    import cupy

    return cupy.asarray(host)


def torch_dtype(dtype):
    """The torch dtype of the numpy ``dtype`` (one the ops give results in)."""
    import torch

    return {"float32": torch.float32, "int32": torch.int32, "float16": torch.float16,
            "bfloat16": torch.bfloat16, "int64": torch.int64}[np.dtype(dtype).name]


def index_tensor(like, name, v):
    """``v`` as a one-element int64 tensor where ``like`` lives (an int becomes one)."""
    if _is_array(v):
        return v
    if hasattr(v, "shape") and len(v.shape) == 0 and _is_device(v):
        return v.reshape(1)
    value = as_int(name, v)
    if _is_device(like):  # filled on the device: a host-to-device copy would synchronize
        if hasattr(like, "new_empty"):  # torch
            import torch

            return torch.full((1,), value, dtype=torch.int64, device=like.device)
        import cupy

        return cupy.full((1,), value, dtype=np.int64)
    return np.array([value], dtype=np.int64)


I64 = np.dtype(np.int64)


def is_int64(t) -> bool:
    """An int64 array (numpy's dtype by identity, others by name)."""
    return t.dtype is I64 or "int64" in str(t.dtype)


def is_host_int(v) -> bool:
    """An index given as a Python / numpy integer (checked on the host), not a tensor
    the kernel reads at run time."""
    return not _is_array(v) and not (hasattr(v, "shape") and _is_device(v))


# ------------------------------------------------------------------ table nodes


class _Operand:
    """What a shape rule reads of an array: its dtype name and shape."""

    __slots__ = ("dtype", "shape")

    def __init__(self, x):
        self.dtype = np.dtype(str(x.dtype).replace("torch.", "")).name
        self.shape = tuple(int(d) for d in x.shape)


def table_rule(name: str, operands: tuple, attrs: dict | None = None) -> str:
    """Node ``name``'s shape rule in the node table (the one statement of which shapes
    fit, which graphs use too) and its dtypes on these arrays, refused as this op's
    error; the result's dtype."""
    decl, ins = get(name), tuple(_Operand(x) for x in operands)
    try:
        dtype, _ = decl.shape(ins, attrs or {})
    except ShapeError as e:
        raise NodeError(e.message, None, e.hint) from None
    why = decl.refuses(dtype, tuple(x.shape for x in ins))
    require(why is None, why)
    return dtype


_COMPILED: dict = {}


def run_where_ops_run(p, **args) -> None:
    """Run the proc ``p`` on ``args`` where ``gpudsl.ops`` runs (the GPU when a driver is
    there, else the emulator), compiled once per proc and backend."""
    from ..runtime.driver import driver_available

    key = (p, "cuda" if driver_available() else "emulator")   # as gpudsl.ops.backend()
    k = _COMPILED.get(key)
    if k is None:
        k = _COMPILED[key] = p.compile(key[1])
    k(**args)


__all__ = ["check_tensor", "array_like", "as_int", "axis", "torch_call", "RANKS", "contig", "empty",
           "index_tensor", "is_int64", "is_host_int", "table_rule", "run_where_ops_run"]

