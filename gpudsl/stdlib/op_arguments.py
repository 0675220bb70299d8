"""The arguments of ``gpudsl.ops``: what is an array (host or device) and what a scalar,
tensors of accepted ranks and dtypes, integers and axes, each refused with a
``gpudsl.Error`` that names the argument (numpy's conventions: negative axes, no
silent coercion of floats, bools or strings to integers)."""
from __future__ import annotations

import operator

import numpy as np

from ..runtime.torch_tensors import check_grad, from_host, host_view, is_torch, torch_module
from .shapes import NodeError, require
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
    if not seen or not isinstance(out, np.ndarray):
        return out
    same = seen.get(id(out))  # an in-place op returns the tensor it was given
    return same if same is not None else from_host(out)


__all__ = ["check_tensor", "as_int", "axis", "torch_call"]
