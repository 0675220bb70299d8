"""The arguments and kernels of ``gpudsl.ops``'s row operations that have no graph node:
``softmax`` (a temperature, an additive mask, causal), ``argmax`` and ``topk`` over
the last axis.  Each ``*_call`` checks its arguments (a ``gpudsl.Error`` naming the
one at fault) and gives ``(proc, keyword arguments, result)``; ``gpudsl.ops`` runs the
proc.  Rows are the leading axes merged (``x`` viewed as ``[r, n]``), up to 6 axes."""
from __future__ import annotations

import math

import numpy as np

from .halves import NUMPY, common_dtype, dtype_of
from .op_arguments import _ANY_FLOAT, RANKS, _is_array, _is_scalar, as_int, check_tensor
from .op_arguments import contig, empty
from .shapes import require


def _rows(x, shape):
    r, n = math.prod(shape[:-1]), shape[-1]
    return contig(x).reshape(r, n), r, n


def _mask_rows(mask, xs) -> int:
    """The rows of an additive mask whose shape is a suffix of ``x``'s (leading axes of
    size 1 allowed, numpy's broadcast of the leading axes): row ``i`` of ``x`` adds row
    ``i % mr``."""
    core = tuple(int(d) for d in mask.shape)
    while len(core) > 1 and core[0] == 1:
        core = core[1:]
    require(len(core) <= len(xs) and tuple(xs[len(xs) - len(core):]) == core,
            f"the mask {tuple(mask.shape)} must broadcast over the leading axes of x "
            f"{tuple(xs)}: its axes the last ones of x (leading axes of size 1 allowed)",
            "give the mask the shape of x's last axes, e.g. [m, n] for scores [h, m, n]")
    return math.prod(core[:-1])


def softmax_call(x, temperature, mask, causal):
    xs = check_tensor("x", x, ranks=RANKS, dtypes=_ANY_FLOAT)
    dt = common_dtype("softmax", x=x)
    require(_is_scalar(temperature) and not _is_array(temperature)
            and math.isfinite(float(temperature)) and float(temperature) > 0,
            f"temperature must be a finite number > 0, not {temperature!r:.40}")
    require(isinstance(causal, (bool, np.bool_)), f"causal must be a bool, not {causal!r}")
    from .softmax import plan_softmax

    x2, r, n = _rows(x, xs)
    args = {"x": x2, "temperature": np.float32(temperature)}
    mdt = None
    if mask is not None:
        check_tensor("mask", mask, ranks=RANKS, dtypes=_ANY_FLOAT)
        mdt = dtype_of(mask)
        mr = _mask_rows(mask, xs)
        args.update(mask=contig(mask).reshape(mr, n), mr=mr)
    if causal:
        require(len(xs) >= 2 and xs[-2] <= n, f"causal needs scores [..., m, n] with "
                f"m <= n (row q keeps the keys j <= q + n - m); x is {tuple(xs)}")
        args["m"] = xs[-2]
    out = empty(x, xs, NUMPY[dt])
    args["out"] = out.reshape(r, n)
    return plan_softmax(n, dt, bool(causal), mdt), args, out


def argmax_call(x):
    xs = check_tensor("x", x, ranks=RANKS, dtypes=_ANY_FLOAT)
    dt = common_dtype("argmax", x=x)
    from .select import plan_argmax

    x2, r, n = _rows(x, xs)
    out = empty(x, xs[:-1], np.int64)
    return plan_argmax(n, dt), {"x": x2, "out": out.reshape(r)}, out


def topk_call(x, k):
    xs = check_tensor("x", x, ranks=RANKS, dtypes=_ANY_FLOAT)
    dt = common_dtype("topk", x=x)
    k = as_int("k", k)
    require(1 <= k <= xs[-1], f"k {k} is outside [1, {xs[-1]}], the last axis")
    from .select import plan_topk

    x2, r, n = _rows(x, xs)
    vals = empty(x, xs[:-1] + (k,), NUMPY[dt])
    idx = empty(x, xs[:-1] + (k,), np.int64)
    args = {"x": x2, "vals": vals.reshape(r, k), "idx": idx.reshape(r, k)}
    return plan_topk(n, dt), args, (vals, idx)


__all__ = ["softmax_call", "argmax_call", "topk_call"]
