"""The shape rules of the standard-library nodes (docs/graphs.md): each takes the
operands (anything with ``.dtype``, ``"float32"`` / ``"int64"``, and ``.shape``) and the
node's attributes, and gives the result's ``(dtype, shape)`` or raises ``ShapeError``
naming the operand at fault.  The node table (``gpudsl.stdlib.node_table``) declares
each node with its rule; graphs infer every node's shape with it."""
from __future__ import annotations

import math

import numpy as np

from .node_registry import FLOATS, ShapeError


def dims_of(shape, what="shape", arg=None) -> tuple[int, ...]:
    """``shape`` as a tuple of ints (bools and floats refused)."""
    try:
        dims = tuple(shape)
    except TypeError:
        raise ShapeError(f"{what} must be a list of dimensions, not {shape!r}",
                         arg) from None
    out = []
    for d in dims:
        if isinstance(d, (bool, np.bool_)) or not isinstance(d, (int, np.integer)):
            raise ShapeError(f"{what} {list(dims)}: {d!r} is not an integer", arg)
        out.append(int(d))
    return tuple(out)


def tensor_shape(shape, what="shape", arg=None) -> tuple[int, ...]:
    """A tensor's shape: 1 to 3 positive dimensions."""
    dims = dims_of(shape, what, arg)
    if not 1 <= len(dims) <= 3:
        raise ShapeError(f"{what} {list(dims)} has {len(dims)} dimension(s); graph tensors "
                         "have 1 to 3", arg)
    if any(d <= 0 for d in dims):
        raise ShapeError(f"{what} {list(dims)} has a dimension that is not positive", arg)
    return dims


def broadcast_onto(a, b) -> tuple:
    """The shape of ``a op b`` (``b`` broadcast onto ``a``: equal ranks, each axis of
    ``b`` equal to ``a``'s or 1); a ``ShapeError`` otherwise."""
    if len(a.shape) != len(b.shape):
        raise ShapeError(f"the operands have ranks {len(a.shape)} and {len(b.shape)} "
                         f"({list(a.shape)} and {list(b.shape)}); they must be equal",
                         1, "reshape the second operand to the first's rank with axes "
                            "of size 1")
    for i, (da, db) in enumerate(zip(a.shape, b.shape)):
        if db != da and db != 1:
            raise ShapeError(f"axis {i}: the second operand has {db} where the first "
                             f"has {da} ({list(b.shape)} against {list(a.shape)}); "
                             "each axis of the second must equal the first's or be 1", 1)
    return a.shape


def floats(ops, *idx) -> str:
    """The one float dtype of operands ``idx`` (float32, float16 or bfloat16): every
    one is a float and all are the same (no node converts between precisions)."""
    for i in idx:
        if ops[i].dtype not in FLOATS:
            raise ShapeError(f"operand {i + 1} is {ops[i].dtype}; this node takes float32, "
                             "float16 or bfloat16", i)
        if ops[i].dtype != ops[idx[0]].dtype:
            raise ShapeError(f"operand {i + 1} is {ops[i].dtype} and operand {idx[0] + 1} "
                             f"{ops[idx[0]].dtype}: the operands of one node share a dtype",
                             i, "no node converts between precisions; build the tensors "
                             "in one dtype")
    return ops[idx[0]].dtype


def index_operand(t, i: int, what: str) -> None:
    """Operand ``i`` is an int64 tensor of one element."""
    if t.dtype != "int64" or tuple(t.shape) != (1,):
        raise ShapeError(f"{what} must be an int64 tensor of one element [1], "
                         f"not {t.dtype} {list(t.shape)}", i)


def pointwise(ops, attrs):
    """``a + b``, ``a * b``: ``b`` broadcast onto ``a``."""
    dt = floats(ops, 0, 1)
    return dt, broadcast_onto(*ops)


def unary(ops, attrs):
    dt = floats(ops, 0)
    return dt, tuple(ops[0].shape)


def matmul(ops, attrs):
    a, b = ops
    dt = floats(ops, 0, 1)
    sa, sb = tuple(a.shape), tuple(b.shape)
    if len(sa) == 2 and len(sb) == 2:
        out = (sa[0], sb[1])
    elif len(sa) == 1 and len(sb) == 2:
        out = (sb[1],)
    elif len(sa) == 3 and len(sb) == 3:
        if sa[0] != sb[0]:
            raise ShapeError(f"batch dimensions differ: {list(sa)} @ {list(sb)}", 1)
        out = (sa[0], sa[1], sb[2])
    else:
        raise ShapeError(f"cannot multiply {list(sa)} by {list(sb)}: MatMulNode takes "
                         "[m,n]@[n,k], [n]@[n,k] or [b,m,n]@[b,n,k]", 1)
    if sa[-1] != sb[-2]:
        raise ShapeError(f"inner dimensions differ: {list(sa)} @ {list(sb)}", 1)
    problem = matmul_precision_problem(attrs.get("precision", "fp32"), dt)
    if problem is not None:
        raise ShapeError(problem, 0 if "half" in problem else None)
    return dt, out


def matmul_precision_problem(precision, dt: str) -> str | None:
    """Why ``precision`` does not go with operands of dtype ``dt`` (``float32`` or
    ``f32``...), else None: the one rule of ``MatMulNode`` and ``ops.matmul``.  ``tf32``
    on float16/bfloat16 data is refused, not ignored: their kernels use the tensor cores
    and sum in float32 already, so the request is most likely a mistake
    (docs/decisions.md)."""
    if precision not in ("fp32", "tf32"):
        return f"precision is fp32 or tf32, not {precision!r}"
    if precision == "tf32" and dt not in ("float32", "f32"):
        return (f"precision=tf32 reads float32 operands as tf32; these are {dt} (the half "
                "kernels use the tensor cores and sum in float32 already: drop precision=)")
    return None


def slice_rows(ops, attrs):
    dt = floats(ops, 0)
    n = ops[0].shape[0]
    b, e = attrs["begin"], attrs["end"]
    if not 0 <= b < e <= n:
        raise ShapeError(f"slice [{b}, {e}) is not a non-empty range inside the first "
                         f"axis of length {n}", 1)
    return dt, (e - b,) + tuple(ops[0].shape[1:])


def reshape(ops, attrs):
    dt = floats(ops, 0)
    new = tensor_shape(attrs["shape"], "the new shape", 1)
    if math.prod(new) != math.prod(ops[0].shape):
        raise ShapeError(f"cannot reshape {list(ops[0].shape)} "
                         f"({math.prod(ops[0].shape)} elements) to {list(new)} "
                         f"({math.prod(new)} elements)", 1)
    return dt, new


def permute(ops, attrs):
    dt = floats(ops, 0)
    perm = dims_of(attrs["perm"], "the permutation", 1)
    rank = len(ops[0].shape)
    if sorted(perm) != list(range(rank)):
        raise ShapeError(f"{list(perm)} is not a permutation of the {rank} axes of "
                         f"{list(ops[0].shape)}", 1)
    return dt, tuple(ops[0].shape[p] for p in perm)


def replace_slice(ops, attrs):
    a, r, b, e = ops
    dt = floats(ops, 0, 1)
    if len(a.shape) != len(r.shape) or a.shape[1:] != r.shape[1:]:
        raise ShapeError(f"the replacement {list(r.shape)} does not match "
                         f"{list(a.shape)} beyond the first axis", 1)
    if r.shape[0] > a.shape[0]:
        raise ShapeError(f"the replacement has {r.shape[0]} rows, more than the "
                         f"{a.shape[0]} of the tensor", 1)
    for i, t in ((2, b), (3, e)):
        index_operand(t, i, f"operand {i + 1}")
    return dt, tuple(a.shape)


def rms_norm(ops, attrs):
    x, w = ops
    dt = floats(ops, 0, 1)
    if len(w.shape) != 1 or w.shape[0] != x.shape[-1]:
        raise ShapeError(f"the weights {list(w.shape)} must be a vector as long as the "
                         f"last axis of {list(x.shape)} ({x.shape[-1]})", 1)
    return dt, tuple(x.shape)


def complex_product(ops, attrs):
    a, b = ops
    dt = floats(ops, 0, 1)
    for i, t in ((0, a), (1, b)):
        if t.shape[-1] != 2:
            raise ShapeError(f"operand {i + 1} {list(t.shape)}: the last axis must have "
                             "size 2 (real, imaginary)", i)
    return dt, broadcast_onto(a, b)


def sliced_softmax(ops, attrs):
    dt = floats(ops, 0)
    n = ops[0].shape[-1]
    if len(ops) == 2:
        index_operand(ops[1], 1, "the prefix")
    elif not 0 <= attrs["prefix"] <= n:
        raise ShapeError(f"the prefix {attrs['prefix']} is outside [0, {n}], the last "
                         f"axis of {list(ops[0].shape)}", 1)
    return dt, tuple(ops[0].shape)


def attention(ops, attrs):
    """``q [H, M, D], k [Hkv, N, D], v [Hkv, N, D]`` (``Hkv`` dividing ``H``: grouped
    query heads; and the prefix operand or attribute, ``causal``)."""
    from .attention import HEAD_DIMS
    from .attention_paged import HEAD_DIMS as GQA_DIMS

    dt = floats(ops, 0, 1, 2)
    q, k, v = ops[:3]
    _three_axes(ops, "heads, rows, head dimension")
    if q.shape[0] % k.shape[0] or q.shape[2] != k.shape[2]:
        raise ShapeError(f"the queries {list(q.shape)} and keys {list(k.shape)} must agree "
                         "on the head dimension (axis 2), and the query heads be a multiple "
                         "of the key/value heads (axis 0)", 1)
    dims = HEAD_DIMS if q.shape[0] == k.shape[0] else GQA_DIMS
    _head_dim(q.shape[2], dims)
    _causal(attrs, 4)
    _options(attrs, 5, q.shape[0])
    m, n = q.shape[1], k.shape[1]
    if len(ops) == 4:
        index_operand(ops[3], 3, "the prefix")
    else:
        low = m if attrs["causal"] else 1
        if not low <= attrs["prefix"] <= n:
            raise ShapeError(f"the prefix {attrs['prefix']} is outside [{low}, {n}] (the "
                             "keys" + (", at least the query rows when causal" if
                                       attrs["causal"] else "") + ")", 3)
    return dt, tuple(q.shape)


def _options(attrs, arg, heads):
    """``window`` (0: none; else at least 1, with causal), ``softcap`` (positive) and
    ``alibi`` (``heads`` finite slopes, one a query head), script arguments ``arg``,
    ``arg + 1`` and ``arg + 2``."""
    window, cap = attrs.get("window") or 0, attrs.get("softcap")
    alibi = attrs.get("alibi")
    if alibi is not None and (len(alibi) != heads or not np.isfinite(alibi).all()):
        raise ShapeError(f"alibi must be {heads} finite slopes (one a query head), not "
                         f"{list(alibi)}", arg + 2)
    if window < 0 or (window and not attrs.get("causal")):
        raise ShapeError(f"window={window}: a sliding window is a positive integer and "
                         "needs causal", arg)
    if cap is not None and not (math.isfinite(cap) and cap > 0):
        raise ShapeError(f"softcap={cap} must be a positive number", arg + 1)


def _three_axes(ops, what):
    if ops[1].shape != ops[2].shape:
        raise ShapeError(f"the keys {list(ops[1].shape)} and values {list(ops[2].shape)} "
                         "differ", 2)
    for i, t in enumerate(ops[:3]):
        if len(t.shape) != 3:
            raise ShapeError(f"operand {i + 1} {list(t.shape)} must have 3 axes: {what}", i)


def _head_dim(d, dims):
    if d not in dims:
        raise ShapeError(f"head dimension {d} is not supported; the kernel takes "
                         f"{', '.join(map(str, dims))}", 0)


def _causal(attrs, arg, default=None):
    if attrs.get("causal", default) not in (False, True):
        raise ShapeError(f"causal must be 0 or 1, not {attrs.get('causal')!r}", arg)


def paged_attention(ops, attrs):
    """``q [B * H, M, D]``, ``k, v [pages, P, Hkv * D]`` (graph tensors have at most 3
    axes), the block table int64 ``[B, max_pages]`` and the lengths int64 ``[B]``,
    ``causal``; ``Hkv`` divides ``H``."""
    from .attention_paged import HEAD_DIMS, PAGE_SIZES

    dt = floats(ops, 0, 1, 2)
    q, k, _, table, lens = ops
    _three_axes(ops, "[B * H, M, D], then the caches [pages, P, Hkv * D]")
    if table.dtype != "int64" or len(table.shape) != 2:
        raise ShapeError(f"the block table must be int64 [B, max_pages], not {table.dtype} "
                         f"{list(table.shape)}", 3)
    b, d = table.shape[0], q.shape[2]
    if lens.dtype != "int64" or tuple(lens.shape) != (b,):
        raise ShapeError(f"the sequence lengths must be int64 [{b}], not {lens.dtype} "
                         f"{list(lens.shape)}", 4)
    _head_dim(d, HEAD_DIMS)
    hk = k.shape[2] // d
    if q.shape[0] % b or k.shape[2] % d or hk == 0 or (q.shape[0] // b) % hk:
        raise ShapeError(f"the queries {list(q.shape)} must be [B * H, M, D] with B = {b} "
                         f"sequences and the cache {list(k.shape)} [pages, P, Hkv * D] with "
                         "Hkv dividing H", 1)
    if k.shape[1] not in PAGE_SIZES:
        raise ShapeError(f"the page size {k.shape[1]} (axis 1 of the cache) is not one of "
                         f"{PAGE_SIZES}", 1)
    _causal(attrs, 5, False)  # (gpudsl.ops.paged_attention: causal=False by default)
    _options(attrs, 6, q.shape[0] // b)
    return dt, tuple(q.shape)


__all__ = ["dims_of", "tensor_shape", "broadcast_onto", "floats", "FLOATS", "index_operand",
           "pointwise", "unary", "matmul", "slice_rows", "reshape", "permute",
           "replace_slice", "rms_norm", "complex_product", "sliced_softmax", "attention",
           "paged_attention"]
