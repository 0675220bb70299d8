"""Graph nodes: HamKaas's Python API and the shape rules of every node (SPEC sections 5, 9).

A ``Node`` is immutable once built; building one checks its operands' dtypes and
shapes (``infer``) and raises ``gpudsl.GraphError`` when they do not fit.
The script parser builds the same nodes, with the script position attached.
"""
from __future__ import annotations

import math

import numpy as np

from ..errors import GraphError
from ..ir import types as _types  # noqa: F401  (registers numpy's "bfloat16": ml_dtypes)

DTYPES = ("float32", "int64", "float16", "bfloat16")
#: the floating dtypes (bfloat16: ml_dtypes' numpy type); a node's float operands share one
FLOATS = ("float32", "float16", "bfloat16")
#: nodes whose value shares its (first) operand's memory: no kernel writes a new tensor
VIEWS = ("ReshapeNode", "SliceNode", "ReplaceSliceNode")
LEAVES = ("InputTensor", "ConstantTensor", "BufferTensor")
#: named in SPEC section 9, not in this version (none left: kept for importers)
LATER: tuple[str, ...] = ()


class ShapeError(Exception):
    """A node's operands do not fit; ``arg`` is the index of the operand at fault."""

    def __init__(self, message: str, arg: int | None = None, hint: str | None = None):
        super().__init__(message)
        self.message, self.arg, self.hint = message, arg, hint


_OWN = {"f32": "float32", "i64": "int64", "f16": "float16",
        "bf16": "bfloat16"}  # gpudsl's own spellings
_TORCH = {"float": "float32", "long": "int64", "double": "float64", "half": "float16",
          "int": "int32"}  # torch's aliases (torch.float is float32, not numpy's float)


def dtype_name(t) -> str:
    """``"float32"`` / ``"int64"`` from every spelling numpy and torch users write: a
    string (``"float32"``, ``"f4"``, ``"torch.float32"``, ``"f32"``), a numpy scalar
    type (``np.float32``) or dtype, a torch dtype (``torch.float32``, ``torch.long``),
    gpudsl's ``f32`` / ``i64``, or Python's ``int``; likewise ``"float16"`` and
    ``"bfloat16"`` (``torch.half``, ``ml_dtypes.bfloat16``, ``f16``, ``bf16``)."""
    numpy_name = getattr(t, "numpy", None)  # gpudsl's DType
    text = numpy_name if isinstance(numpy_name, str) else t
    if isinstance(text, str) or type(text).__module__.split(".")[0] == "torch":
        text = str(text)
        if text.startswith("torch."):
            text = text[6:]
            text = _TORCH.get(text, text)
        text = _OWN.get(text, text)
    try:
        text = np.dtype(text).name
    except (TypeError, ValueError, AttributeError):
        text = str(text)
    if text not in DTYPES:
        raise GraphError(f"dtype {t!r} is not supported; graphs hold float32, float16, "
                         "bfloat16 or int64 tensors")
    return text


def _shape(shape, what="shape", arg=None) -> tuple[int, ...]:
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


def _tensor_shape(shape, what="shape", arg=None) -> tuple[int, ...]:
    dims = _shape(shape, what, arg)
    if not 1 <= len(dims) <= 3:
        raise ShapeError(f"{what} {list(dims)} has {len(dims)} dimension(s); graph tensors "
                         "have 1 to 3", arg)
    if any(d <= 0 for d in dims):
        raise ShapeError(f"{what} {list(dims)} has a dimension that is not positive", arg)
    return dims


def _broadcast_onto(a, b) -> tuple:
    """The shape of ``a op b`` under section 5's rule (``b`` broadcast onto ``a``: equal
    ranks, each axis of ``b`` equal to ``a``'s or 1); a ``ShapeError`` otherwise."""
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


def _float(ops, *idx) -> str:
    """The one float dtype of operands ``idx`` (float32, float16 or bfloat16)."""
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


def infer(op: str, ops: tuple, attrs: dict) -> tuple[str, tuple[int, ...]]:
    """(dtype, shape) of node ``op`` on operands ``ops`` with attributes ``attrs``;
    raises ``ShapeError`` naming the operand at fault."""
    if op in ("InputTensor", "ConstantTensor", "BufferTensor"):
        if op == "BufferTensor" and attrs["dtype"] not in FLOATS:
            raise ShapeError("a BufferTensor holds float32, float16 or bfloat16", 0)
        return attrs["dtype"], _tensor_shape(attrs["shape"], arg=0)
    if op in ("SumNode", "HadamardProductNode"):
        a, b = ops
        dt = _float(ops, 0, 1)
        return dt, _broadcast_onto(a, b)
    if op == "MatMulNode":
        a, b = ops
        dt = _float(ops, 0, 1)
        sa, sb = a.shape, b.shape
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
        return dt, out
    if op in ("ReLUNode", "SiLUNode"):
        dt = _float(ops, 0)
        return dt, ops[0].shape
    if op == "SliceNode":
        dt = _float(ops, 0)
        n = ops[0].shape[0]
        b, e = attrs["begin"], attrs["end"]
        if not 0 <= b < e <= n:
            raise ShapeError(f"slice [{b}, {e}) is not a non-empty range inside the first "
                             f"axis of length {n}", 1)
        return dt, (e - b,) + ops[0].shape[1:]
    if op == "ReshapeNode":
        dt = _float(ops, 0)
        new = _tensor_shape(attrs["shape"], "the new shape", 1)
        if math.prod(new) != math.prod(ops[0].shape):
            raise ShapeError(f"cannot reshape {list(ops[0].shape)} "
                             f"({math.prod(ops[0].shape)} elements) to {list(new)} "
                             f"({math.prod(new)} elements)", 1)
        return dt, new
    if op == "PermuteNode":
        dt = _float(ops, 0)
        perm = _shape(attrs["perm"], "the permutation", 1)
        rank = len(ops[0].shape)
        if sorted(perm) != list(range(rank)):
            raise ShapeError(f"{list(perm)} is not a permutation of the {rank} axes of "
                             f"{list(ops[0].shape)}", 1)
        return dt, tuple(ops[0].shape[p] for p in perm)
    if op == "ReplaceSliceNode":
        a, r, b, e = ops
        dt = _float(ops, 0, 1)
        if len(a.shape) != len(r.shape) or a.shape[1:] != r.shape[1:]:
            raise ShapeError(f"the replacement {list(r.shape)} does not match "
                             f"{list(a.shape)} beyond the first axis", 1)
        if r.shape[0] > a.shape[0]:
            raise ShapeError(f"the replacement has {r.shape[0]} rows, more than the "
                             f"{a.shape[0]} of the tensor", 1)
        for i, t in ((2, b), (3, e)):
            if t.dtype != "int64" or t.shape != (1,):
                raise ShapeError(f"operand {i + 1} must be an int64 tensor of one element "
                                 f"[1], not {t.dtype} {list(t.shape)}", i)
        return dt, a.shape
    if op == "RMSNormNode":
        x, w = ops
        dt = _float(ops, 0, 1)
        if len(w.shape) != 1 or w.shape[0] != x.shape[-1]:
            raise ShapeError(f"the weights {list(w.shape)} must be a vector as long as the "
                             f"last axis of {list(x.shape)} ({x.shape[-1]})", 1)
        return dt, x.shape
    if op == "ComplexHadamardProductNode":
        a, b = ops
        dt = _float(ops, 0, 1)
        for i, t in ((0, a), (1, b)):
            if t.shape[-1] != 2:
                raise ShapeError(f"operand {i + 1} {list(t.shape)}: the last axis must have "
                                 "size 2 (real, imaginary)", i)
        return dt, _broadcast_onto(a, b)
    if op == "SlicedSoftmaxNode":
        dt = _float(ops, 0)
        n = ops[0].shape[-1]
        if len(ops) == 2:
            p = ops[1]
            if p.dtype != "int64" or p.shape != (1,):
                raise ShapeError(f"the prefix must be an int64 tensor of one element [1], "
                                 f"not {p.dtype} {list(p.shape)}", 1)
        elif not 0 <= attrs["prefix"] <= n:
            raise ShapeError(f"the prefix {attrs['prefix']} is outside [0, {n}], the last "
                             f"axis of {list(ops[0].shape)}", 1)
        return dt, ops[0].shape
    if op == "AttentionNode":
        return _infer_attention(ops, attrs)
    if op in LATER:
        raise ShapeError(f"{op} is not implemented yet in gpudsl.graph (issue 17's later "
                         "work)")
    raise ShapeError(f"unknown node {op}")


def _infer_attention(ops: tuple, attrs: dict) -> tuple[str, tuple[int, ...]]:
    """``AttentionNode(q [H, M, D], k [H, N, D], v [H, N, D], prefix, causal)``."""
    from ..stdlib.attention import HEAD_DIMS

    dt = _float(ops, 0, 1, 2)
    q, k, v = ops[:3]
    for i, t in enumerate((q, k, v)):
        if len(t.shape) != 3:
            raise ShapeError(f"operand {i + 1} {list(t.shape)} must have 3 axes: heads, "
                             "rows, head dimension", i)
    if k.shape != v.shape:
        raise ShapeError(f"the keys {list(k.shape)} and values {list(v.shape)} differ", 2)
    if q.shape[0] != k.shape[0] or q.shape[2] != k.shape[2]:
        raise ShapeError(f"the queries {list(q.shape)} and keys {list(k.shape)} must agree "
                         "on the heads (axis 0) and the head dimension (axis 2)", 1)
    if q.shape[2] not in HEAD_DIMS:
        raise ShapeError(f"head dimension {q.shape[2]} is not supported; the kernel takes "
                         f"{', '.join(map(str, HEAD_DIMS))}", 0)
    if attrs.get("causal") not in (False, True):
        raise ShapeError(f"causal must be 0 or 1, not {attrs.get('causal')!r}", 4)
    m, n = q.shape[1], k.shape[1]
    if len(ops) == 4:
        p = ops[3]
        if p.dtype != "int64" or p.shape != (1,):
            raise ShapeError(f"the prefix must be an int64 tensor of one element [1], "
                             f"not {p.dtype} {list(p.shape)}", 3)
    else:
        low = m if attrs["causal"] else 1
        if not low <= attrs["prefix"] <= n:
            raise ShapeError(f"the prefix {attrs['prefix']} is outside [{low}, {n}] (the "
                             "keys" + (", at least the query rows when causal" if
                                       attrs["causal"] else "") + ")", 3)
    return dt, q.shape


def _wrap(x, like=None):
    """An operand: a node, or an array / torch tensor / Python number made a constant
    (a Python number in the dtype of ``like``, the node it combines with, when float,
    shaped ``[1, ..., 1]`` to its rank so that it broadcasts)."""
    if isinstance(x, Node):
        return x
    if like is not None and like.dtype in FLOATS and isinstance(x, (int, float)) and \
            not isinstance(x, bool):
        return ConstantTensor(np.full((1,) * len(like.shape), x, like.dtype))
    return ConstantTensor(x)


class Node:
    """A node of a graph.  ``op`` is its HamKaas name, ``inputs`` its operand nodes,
    ``attrs`` its literal arguments; ``dtype`` and ``shape`` are inferred."""

    op = "Node"

    def __init__(self, op: str, inputs: tuple = (), attrs: dict | None = None,
                 where: tuple | None = None):
        self.op = op
        self.inputs = tuple(inputs)
        self.attrs = dict(attrs or {})
        #: (line, column, source line, argument columns) in a script, when parsed
        self.where = where
        try:
            self.dtype, self.shape = infer(op, self.inputs, self.attrs)
        except ShapeError as e:
            if where is None:
                raise GraphError(f"{op}: {e.message}", hint=e.hint) from None
            line, col, src, args = where
            if e.arg is not None and e.arg < len(args):
                col = args[e.arg]
            raise GraphError(f"{op}: {e.message}", line, col, src, hint=e.hint) from None

    def __repr__(self):
        return f"<{self.op} {self.dtype} {list(self.shape)}>"

    # -- the PyTorch-like operators of HamKaas's frontend
    def __add__(self, other):
        return SumNode(self, _wrap(other, self))

    def __mul__(self, other):
        return HadamardProductNode(self, _wrap(other, self))

    def __matmul__(self, other):
        return MatMulNode(self, _wrap(other))

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise GraphError(f"a node is sliced with [begin:end] along its first axis, not "
                             f"[{key!r}]")
        b = 0 if key.start is None else key.start
        e = self.shape[0] if key.stop is None else key.stop
        return SliceNode(self, b, e)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return ReshapeNode(self, shape)

    def permute(self, *perm):
        if len(perm) == 1 and not isinstance(perm[0], (int, np.integer)):
            perm = tuple(perm[0])
        return PermuteNode(self, perm)

    def relu(self):
        return ReLUNode(self)

    def silu(self):
        return SiLUNode(self)

    def replace(self, r, begin, end):
        return ReplaceSliceNode(self, _wrap(r), begin, end)

    def rms_norm(self, weights):
        return RMSNormNode(self, _wrap(weights))

    def complex_hadamard_product(self, other):
        return ComplexHadamardProductNode(self, _wrap(other))

    def sliced_softmax(self, prefix_size):
        return SlicedSoftmaxNode(self, prefix_size)

    def get_shape(self):
        return list(self.shape)

    def get_type(self):
        return self.dtype


# ------------------------------------------------------------------ constructors
# HamKaas's names: each builds a Node (functions, so that `isinstance(x, Node)` holds)


def InputTensor(name: str, dtype, shape, where=None) -> Node:  # noqa: N802
    """A tensor given at each evaluation, by ``name``."""
    _check_name(name)
    return Node("InputTensor", (), dict(name=name, dtype=dtype_name(dtype),
                                        shape=tuple(shape)), where)


def ConstantTensor(value, name: str | None = None) -> Node:  # noqa: N802
    """A tensor fixed at compile time: a numpy array, a torch tensor (moved to the host),
    or anything ``numpy.asarray`` takes.  Unnamed constants are named ``constant_0``,
    ``constant_1``... by ``to_script``."""
    if name is not None:
        _check_name(name)
    arr = as_host_array(value)
    node = Node("ConstantTensor", (), dict(name=name, dtype=dtype_name(arr.dtype),
                                           shape=arr.shape))
    node.value = arr
    return node


def BufferTensor(dtype, shape) -> Node:  # noqa: N802
    """A float tensor (float32, float16 or bfloat16) that keeps its contents between
    evaluations (zero at first)."""
    return Node("BufferTensor", (), dict(dtype=dtype_name(dtype), shape=tuple(shape)))


def SumNode(a, b):  # noqa: N802
    return Node("SumNode", (a, b))


def HadamardProductNode(a, b):  # noqa: N802
    return Node("HadamardProductNode", (a, b))


def MatMulNode(a, b):  # noqa: N802
    return Node("MatMulNode", (a, b))


def ReLUNode(a):  # noqa: N802
    return Node("ReLUNode", (a,))


def SiLUNode(a):  # noqa: N802
    return Node("SiLUNode", (a,))


def SliceNode(a, begin: int, end: int):  # noqa: N802
    return Node("SliceNode", (a,), dict(begin=_int("begin", begin), end=_int("end", end)))


def ReshapeNode(a, shape):  # noqa: N802
    return Node("ReshapeNode", (a,), dict(shape=tuple(shape)))


def PermuteNode(a, perm):  # noqa: N802
    return Node("PermuteNode", (a,), dict(perm=tuple(perm)))


def ReplaceSliceNode(a, r, begin, end):  # noqa: N802
    """``a[begin:end] = r`` in place on ``a``'s memory; ``begin`` / ``end`` are int64
    nodes of one element (inputs, so they change between evaluations) or ints (made
    constants)."""
    def index(v):
        if isinstance(v, Node):
            return v
        return ConstantTensor(np.array([_int("begin/end", v)], dtype=np.int64))
    return Node("ReplaceSliceNode", (a, r, index(begin), index(end)))


def RMSNormNode(a, weights):  # noqa: N802
    """``weights * a / sqrt(mean(a^2) + 1e-5)`` over the last axis."""
    return Node("RMSNormNode", (a, weights))


def ComplexHadamardProductNode(a, b):  # noqa: N802
    """The complex product on a trailing axis of size 2, ``b`` broadcast like Hadamard."""
    return Node("ComplexHadamardProductNode", (a, b))


def SlicedSoftmaxNode(a, prefix_size):  # noqa: N802
    """Softmax of the first ``prefix_size`` entries of the last axis, the rest kept;
    ``prefix_size`` is an int64 node of one element (an input: it changes between
    evaluations) or an int (checked against the axis now)."""
    if isinstance(prefix_size, Node):
        return Node("SlicedSoftmaxNode", (a, prefix_size))
    return Node("SlicedSoftmaxNode", (a,), dict(prefix=_int("prefix_size", prefix_size)))


def AttentionNode(q, k, v, prefix=None, causal: bool = False):  # noqa: N802
    """``softmax(q k^T / sqrt(D)) v`` per head (``q [H, M, D]``, ``k, v [H, N, D]``)
    over the first ``prefix`` keys: an int64 node of one element (an input: it changes
    between evaluations), an int (checked now) or None (all ``N``); ``causal``: row
    ``i`` attends keys ``j <= i + prefix - M``.  One fused kernel
    (:mod:`gpudsl.stdlib.attention`)."""
    q, k, v = _wrap(q), _wrap(k), _wrap(v)
    if not isinstance(causal, (bool, np.bool_)):
        raise GraphError(f"causal must be a bool, not {causal!r}")
    attrs = dict(causal=bool(causal))
    if isinstance(prefix, Node):
        return Node("AttentionNode", (q, k, v, prefix), attrs)
    if prefix is None:
        prefix = k.shape[1] if len(k.shape) == 3 else 1
    attrs["prefix"] = _int("prefix", prefix)
    return Node("AttentionNode", (q, k, v), attrs)


def _int(what, v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise GraphError(f"{what} must be an integer, not {v!r}")
    return int(v)


def _check_name(name):
    if not isinstance(name, str) or not name.isidentifier():
        raise GraphError(f"tensor name {name!r} is not an identifier (letters, digits, _)")


def as_host_array(value) -> np.ndarray:
    """A contiguous numpy array from numpy / torch / a Python number, float64 made
    float32 (torch's default float is float32 already; numpy's is not)."""
    if hasattr(value, "detach") and hasattr(value, "cpu"):  # a torch tensor
        value = value.detach().cpu().numpy()
    arr = np.asarray(value)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu" and arr.dtype != np.int64:
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr)


CONSTRUCTORS = {
    "SumNode": SumNode, "HadamardProductNode": HadamardProductNode,
    "MatMulNode": MatMulNode, "ReLUNode": ReLUNode, "SiLUNode": SiLUNode,
    "RMSNormNode": RMSNormNode, "ComplexHadamardProductNode": ComplexHadamardProductNode,
}
