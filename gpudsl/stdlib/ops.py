"""``gpudsl.ops``: the graph nodes on arrays (SPEC section 5).

Each op validates its inputs (raising :class:`gpudsl.Error` with the reason),
picks the standard-library kernel for the shapes, compiles it once (in memory
and in the disk cache), and runs it on the GPU when there is one, else on the
CPU emulator.  numpy arrays in give numpy arrays out; PyTorch / CuPy device
arrays in give arrays of the same kind out, without host copies.
"""
from __future__ import annotations

import math

import numpy as np

from .pointwise import plan_binary, plan_unary
from .shapes import check_tensor, require
from .slices import plan_replace_slice, plan_slice

_compiled: dict = {}


def target() -> str:
    """Where ops run: ``"cuda"`` with a GPU and driver, else ``"emulator"``."""
    from ..runtime.driver import driver_available

    return "cuda" if driver_available() else "emulator"


def _kernel(p):
    key = (p, target())
    k = _compiled.get(key)
    if k is None:
        k = _compiled[key] = p.compile(key[1])
    return k


def _is_device(x) -> bool:
    return hasattr(x, "__cuda_array_interface__") or bool(getattr(x, "is_cuda", False))


def _contig(x):
    if _is_device(x):
        return x.contiguous() if hasattr(x, "contiguous") else x
    return np.ascontiguousarray(x)


def _empty(like, shape, dtype=np.float32):
    if _is_device(like):
        if hasattr(like, "new_empty"):  # torch
            import torch

            tdt = {np.float32: torch.float32, np.int32: torch.int32}[dtype]
            return like.new_empty(tuple(shape), dtype=tdt)
        import cupy  # noqa: F401  (device arrays that are not torch are CuPy's here)

        return cupy.empty(tuple(shape), dtype=dtype)
    return np.empty(tuple(shape), dtype=dtype)


def _zeros(like, shape, dtype):
    out = _empty(like, shape, dtype)
    out[...] = 0
    return out


def _run(p, **args):
    _kernel(p)(**args)


# ------------------------------------------------------------------ elementwise


def _binary(op: str, a, b):
    sa, sb = check_tensor("a", a), check_tensor("b", b)
    p, dims, bdims = plan_binary(op, sa, sb)
    a, b = _contig(a), _contig(b)
    out = _empty(a, sa)
    _run(p, a=a.reshape(dims), b=b.reshape(bdims), out=out.reshape(dims))
    return out


def add(a, b):
    """``a + b``; each axis of ``b`` equals ``a``'s or is 1."""
    return _binary("add", a, b)


def mul(a, b):
    """``a * b``; each axis of ``b`` equals ``a``'s or is 1."""
    return _binary("mul", a, b)


def _unary(op: str, x):
    shape = check_tensor("x", x)
    n = math.prod(shape)
    x = _contig(x)
    out = _empty(x, shape)
    _run(plan_unary(op, n), x=x.reshape(n), out=out.reshape(n))
    return out


def relu(x):
    """``max(0, x)`` elementwise."""
    return _unary("relu", x)


def silu(x):
    """``x / (1 + exp(-x))`` elementwise."""
    return _unary("silu", x)


# ------------------------------------------------------------------ rows


def _rows(shape) -> tuple[int, int]:
    return shape[0], math.prod(shape[1:])


def slice(x, begin: int, end: int):  # noqa: A001  (the node's name)
    """Rows ``begin..end-1`` of the first axis (a copy)."""
    shape = check_tensor("x", x)
    begin, end = int(begin), int(end)
    require(0 <= begin < end <= shape[0],
            f"slice [{begin}, {end}) is not a non-empty range inside the first axis of "
            f"length {shape[0]}")
    n, c = _rows(shape)
    m = end - begin
    x = _contig(x)
    out = _empty(x, (m,) + shape[1:])
    _run(plan_slice(c), begin=begin, x=x.reshape(n, c), out=out.reshape(m, c))
    return out


def replace_slice(x, r, begin, end):
    """In place: ``x[begin:end] = r`` along the first axis.  ``begin`` and
    ``end`` are one-element int64 tensors read by the kernel at run time; a
    range outside ``x`` or a row count that differs from ``r``'s raises
    :class:`gpudsl.Error` and writes nothing.  Returns ``x``."""
    from .shapes import NodeError

    xs, rs = check_tensor("x", x), check_tensor("r", r)
    require(len(xs) == len(rs) and xs[1:] == rs[1:],
            f"r's shape {rs} does not match x's {xs} beyond the first axis")
    for name, t in (("begin", begin), ("end", end)):
        require(tuple(t.shape) == (1,) and "int64" in str(t.dtype),
                f"{name} must be an int64 tensor of one element, got shape "
                f"{tuple(t.shape)} and dtype {t.dtype}")
    require(getattr(x, "flags", None) is None or x.flags.c_contiguous,
            "replace_slice writes in place and needs a contiguous x")
    n, c = _rows(xs)
    m = rs[0]
    err = _zeros(x, (1,), np.int32)
    _run(plan_replace_slice(c), x=x.reshape(n, c), r=_contig(r).reshape(m, c),
         begin=begin, end=end, err=err)
    if int(err[0]) != 0:
        raise NodeError(f"replace_slice: the range [begin, end) read from the device is "
                        f"outside x (first axis {n}) or does not hold r's {m} rows; nothing "
                        "was written")
    return x


def reshape(x, shape):
    """A view of ``x`` with another shape (no kernel, no copy)."""
    shape = tuple(int(s) for s in shape)
    require(math.prod(shape) == math.prod(x.shape),
            f"cannot reshape {tuple(x.shape)} ({math.prod(x.shape)} elements) to {shape}")
    contiguous = x.flags.c_contiguous if hasattr(x, "flags") else \
        (x.is_contiguous() if hasattr(x, "is_contiguous") else True)
    require(contiguous, "reshape is a view and needs a contiguous array")
    return x.reshape(shape)


# ------------------------------------------------------------------ matmul, permute


def matmul(a, b):
    """``[m,n]@[n,k]``, ``[n]@[n,k]`` or ``[b,m,n]@[b,n,k]``."""
    from .matmul import matmul_kernel

    sa, sb = check_tensor("a", a), check_tensor("b", b)
    p, binds = matmul_kernel(sa, sb)
    a, b = _contig(a), _contig(b)
    out = _empty(a, sa[:-1] + (sb[-1],))  # [k] for [n] @ [n, k]
    names = [q.name for q in p.ir.params if q.is_array]
    _run(p, **dict(zip(names, (a, b, out))))
    return out


def permute(x, perm):
    """``numpy.transpose(x, perm)`` (a copy)."""
    from .permute import merged_shapes, permute_kernel
    from .shapes import normalize_perm

    shape = check_tensor("x", x)
    perm = normalize_perm(perm, len(shape))
    p, binds, out_shape = permute_kernel(shape, perm)
    in_merged, out_merged = merged_shapes(shape, perm)  # the kernel's array shapes
    x = _contig(x)
    out = _empty(x, out_shape)
    ins = [q.name for q in p.ir.params if q.is_array]
    _run(p, **{ins[0]: x.reshape(in_merged), ins[1]: out.reshape(out_merged)})
    return out


__all__ = ["add", "mul", "relu", "silu", "slice", "replace_slice", "reshape", "matmul",
           "permute", "target"]
