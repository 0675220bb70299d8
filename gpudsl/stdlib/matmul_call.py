"""The tensor-core paths of ``gpudsl.ops.matmul`` that bypass the node table's launch
(:mod:`.array_ops` keeps the op, its checks and its documentation): ``a @ w.T`` in
TF32 reading a contiguous ``w`` as it lies (:func:`matmul_tf32_nt`) and the float16 /
bfloat16 products (:func:`half_recipe`).  The kernels run through ``array_ops`` (its
``backend`` and ``_run``, looked up at each call, as :mod:`.ops_fast`'s recipes do)."""
from __future__ import annotations

import sys

import numpy as np

from .halves import NUMPY
from .op_arguments import contig, empty, transpose_if_contiguous
from .shapes import require


def _ops():
    """``gpudsl.stdlib.array_ops`` (the module ``gpudsl.ops`` is), at each call."""
    return sys.modules["gpudsl.stdlib.array_ops"]


def matmul_tf32_nt(a, b, sa, sb):
    """``a @ w.T`` in TF32 (``w`` contiguous ``[k, n]``, ``a`` ``[m, n]`` or ``[n]``) by
    the TN TF32 wgmma kernel with ``bt = w`` as it lies, on an sm_90a GPU where it
    serves the shape and passed its first run there; else None (the node table's
    launch: ``b`` made contiguous, transposed into scratch on sm_90a)."""
    bt = transpose_if_contiguous(b)
    if bt is None or len(sa) not in (1, 2):
        return None
    from .matmul_sm90_tf32 import plan_nt_for

    a2 = (1,) + sa if len(sa) == 1 else sa
    hit = plan_nt_for(a2, tuple(bt.shape), _ops().backend())
    if hit is None:
        return None
    a = contig(a)
    out = empty(a, sa[:-1] + (sb[-1],), np.float32)
    _ops()._run(hit[0], a=a.reshape(a2), bt=bt, c=out.reshape(a2[0], sb[-1]), **hit[1])
    return out


def half_recipe(a, b, sa, sb, dt, plan):
    """``run(a, b)``: ``[m,n]@[n,k]`` or ``[n]@[n,k]`` in half precision for operands of
    ``a``'s and ``b``'s signature (``gpudsl.ops``' recipes, :mod:`.ops_fast`), the
    kernel chosen once: ``a @ w.T`` of
    a contiguous ``w`` by the TN kernel reading ``w`` where one serves the shape, else
    ``plan(a2, sb, dt)``'s kernel on ``b`` made contiguous."""
    from .ops_fast import allocator

    require(len(sb) == 2 and len(sa) in (1, 2),
            f"the {dt} matmul takes [m, n] or [n] @ [n, k]; got {sa} and {sb}")
    a2 = (1,) + sa if len(sa) == 1 else sa
    bt = transpose_if_contiguous(b)   # w.T of a contiguous w: the TN kernel, no copy
    hit = None
    if bt is not None:
        from .matmul_sm80 import plan_matmul_half_nt_for

        hit = plan_matmul_half_nt_for(a2, tuple(bt.shape), dt, _ops().backend())
    if hit is not None:
        (p, binds), name, second = hit, "bt", transpose_if_contiguous
    else:
        (p, binds), name, second = plan(a2, sb, dt), "b", contig
    out_shape, out2 = sa[:-1] + (sb[-1],), (a2[0], sb[-1])
    alloc = allocator(a, NUMPY[dt])

    def run(a, b):
        a = contig(a)
        out = alloc(a, out_shape)
        _ops()._run(p, a=a.reshape(a2), c=out.reshape(out2), **{name: second(b)}, **binds)
        return out
    return run


__all__ = ["matmul_tf32_nt", "half_recipe"]
