"""Graph nodes: HamKaas's Python API; every node's shape rule is its declaration's in the
node table (``gpudsl.stdlib.node_table``).

A ``Node`` is immutable once built; building one checks its operands' dtypes and
shapes (``infer``) and raises ``gpudsl.GraphError`` when they do not fit.
The script parser builds the same nodes, with the script position attached.
"""
from __future__ import annotations


import numpy as np

from ..errors import GraphError
from ..runtime.torch_tensors import host_view, is_torch
import ml_dtypes  # noqa: F401  (registers numpy's "bfloat16")

from ..stdlib.node_shapes import FLOATS, tensor_shape
from ..stdlib.node_table import ShapeError, all_nodes, by_graph

DTYPES = ("float32", "int64", "float16", "bfloat16")
#: nodes whose value shares its (first) operand's memory (the node table's ``aliases``,
#: when this module was imported; ``is_view`` reads the table now)
VIEWS = tuple(n.graph for n in all_nodes() if n.aliases and n.graph)


def is_view(op: str) -> bool:
    """Whether graph node ``op``'s value shares its first operand's memory (its
    declaration's ``aliases``)."""
    decl = by_graph(op)
    return decl is not None and decl.aliases
LEAVES = ("InputTensor", "ConstantTensor", "BufferTensor")
#: nodes the script names but this version does not run (none left: kept for importers)
LATER: tuple[str, ...] = ()


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


def infer(op: str, ops: tuple, attrs: dict) -> tuple[str, tuple[int, ...]]:
    """(dtype, shape) of node ``op`` on operands ``ops`` with attributes ``attrs``;
    raises ``ShapeError`` naming the operand at fault.  Leaves here, every other node
    by its shape rule in the node table (``gpudsl.stdlib.node_table``)."""
    if op in LEAVES:
        if op == "BufferTensor" and attrs["dtype"] not in FLOATS:
            raise ShapeError("a BufferTensor holds float32, float16 or bfloat16", 0)
        return attrs["dtype"], tensor_shape(attrs["shape"], arg=0)
    decl = by_graph(op)
    if decl is None:
        raise ShapeError(f"unknown node {op}")
    return decl.shape(ops, attrs)


def _wrap(x, like=None):
    """An operand: a node, or an array / torch tensor / Python number made a constant
    (a Python number in the dtype of ``like``, the node it combines with, when float,
    shaped ``[1, ..., 1]`` to its rank so that it broadcasts)."""
    if isinstance(x, Node):
        return x
    if like is not None and like.dtype in FLOATS and isinstance(x, (int, float)) and \
            not isinstance(x, bool):
        return ConstantTensor(np.full((1,) * len(like.shape), x, like.dtype))
    if isinstance(x, (int, float)) and not isinstance(x, bool):  # no dtype was asked
        return ConstantTensor(np.array([x], np.int64 if isinstance(x, int) else np.float32))
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
        return _make("SumNode", self, _wrap(other, self))

    def __mul__(self, other):
        return _make("HadamardProductNode", self, _wrap(other, self))

    def __matmul__(self, other):
        return _make("MatMulNode", self, _wrap(other))

    def __getitem__(self, key):
        if not isinstance(key, slice) or key.step not in (None, 1):
            raise GraphError(f"a node is sliced with [begin:end] along its first axis, not "
                             f"[{key!r}]")
        b = 0 if key.start is None else key.start
        e = self.shape[0] if key.stop is None else key.stop
        return _make("SliceNode", self, b, e)

    def reshape(self, *shape):
        if len(shape) == 1 and not isinstance(shape[0], (int, np.integer)):
            shape = tuple(shape[0])
        return _make("ReshapeNode", self, shape)

    def permute(self, *perm):
        if len(perm) == 1 and not isinstance(perm[0], (int, np.integer)):
            perm = tuple(perm[0])
        return _make("PermuteNode", self, perm)

    def relu(self):
        return _make("ReLUNode", self)

    def silu(self):
        return _make("SiLUNode", self)

    def replace(self, r, begin, end):
        return _make("ReplaceSliceNode", self, _wrap(r), begin, end)

    def rms_norm(self, weights):
        return _make("RMSNormNode", self, _wrap(weights))

    def complex_hadamard_product(self, other):
        return _make("ComplexHadamardProductNode", self, _wrap(other))

    def sliced_softmax(self, prefix_size):
        return _make("SlicedSoftmaxNode", self, prefix_size)

    def get_shape(self):
        return list(self.shape)

    def get_type(self):
        return self.dtype


# ------------------------------------------------------------------ constructors
# HamKaas's names: each builds a Node (functions, so that `isinstance(x, Node)` holds);
# the computing nodes' are derived from the node table (``constructor``)


def _make(graph: str, *args) -> Node:
    return constructor(graph)(*args)


def InputTensor(name: str, dtype, shape, where=None) -> Node:  # noqa: N802
    """A tensor given at each evaluation, by ``name``."""
    _check_name(name)
    return Node("InputTensor", (), dict(name=name, dtype=dtype_name(dtype),
                                        shape=tuple(shape)), where)


def ConstantTensor(value, name: str | None = None) -> Node:  # noqa: N802
    """A tensor fixed at compile time: a numpy array, a torch tensor (moved to the host),
    or a nested list of numbers (floats as float32, integers as int64).  As in
    HamKaas, a 0-d tensor and a dtype graphs do not hold (float64, int32...) are
    refused, not reshaped or converted.  Unnamed constants are named ``constant_0``,
    ``constant_1``... by ``to_script``."""
    if name is not None:
        _check_name(name)
    arr = _strict_array(value)
    node = Node("ConstantTensor", (), dict(name=name, dtype=dtype_name(arr.dtype),
                                           shape=arr.shape))
    node.value = arr
    return node


def BufferTensor(dtype, shape) -> Node:  # noqa: N802
    """A float tensor (float32, float16 or bfloat16) that keeps its contents between
    evaluations (zero at first)."""
    return Node("BufferTensor", (), dict(dtype=dtype_name(dtype), shape=tuple(shape)))


def _operand(v, decl, first):
    """A "ref" argument of a constructor: a node, or a number / array made a constant
    (a number in ``first``'s float dtype when the node is pointwise, broadcasting)."""
    if isinstance(v, np.generic) and not isinstance(v, np.bool_):  # np.int64(3): 3
        v = v.item()
    return _wrap(v, first if decl.pointwise else None)


def _argument(kind: str, name: str, v, decl, first):
    """(operand or None, attribute value) of one constructor argument of ``kind``."""
    if kind == "ref" or (kind == "ref|int" and isinstance(v, Node)):
        return _operand(v, decl, first), None
    if kind in ("int", "ref|int"):
        return None, _int(name, v)
    if kind == "list":
        if isinstance(v, (str, bytes)) or not hasattr(v, "__iter__"):
            raise GraphError(f"{name} must be a list of integers, not {v!r}")
        return None, tuple(v)
    if not isinstance(v, (bool, np.bool_)):
        raise GraphError(f"{name} must be a bool, not {v!r}")
    return None, bool(v)


def _options(graph: str, decl, given: dict) -> dict:
    """The attributes of a constructor's keyword options (``precision="tf32"``): each
    one of the declaration's ``keywords``, its value one of its words; the default
    word (the first) is no attribute, as in a script."""
    words = dict(decl.keywords)
    out = {}
    for name, v in given.items():
        if name not in words:
            raise GraphError(f"{graph} has no option {name!r}" + (
                f" (its options: {', '.join(words)})" if words else ""))
        if not isinstance(v, str) or v not in words[name]:
            raise GraphError(f"{name} of {graph} is one of {', '.join(words[name])}, "
                             f"not {v!r}")
        if v != words[name][0]:
            out[name] = v
    return out


def constructor(graph: str):
    """The Python constructor of the node called ``graph`` in the node table: its
    script arguments (``Node.script``) in order, operands as nodes (numbers and arrays
    made constants), the others attributes; its keyword options (``Node.keywords``) as
    keywords (``MatMulNode(x, w, precision="tf32")``).  Derived, never written by hand
    (the one exception: ``AttentionNode``, whose ``prefix`` and ``causal`` have
    defaults)."""
    if graph in _OWN_CONSTRUCTORS:
        return _OWN_CONSTRUCTORS[graph]

    def build(*args, **options):
        decl = by_graph(graph)
        if decl is None:
            raise GraphError(f"{graph} is no longer a node of the node table")
        if len(args) != len(decl.script):
            names = ", ".join(name for _, name in decl.script)
            raise GraphError(f"{graph} takes {len(decl.script)} argument(s) ({names}), "
                             f"not {len(args)}")
        inputs, attrs, first = [], {}, None
        for (kind, name), v in zip(decl.script, args):
            operand, value = _argument(kind, name, v, decl, first)
            if operand is not None:
                inputs.append(operand)
                first = first or operand
            else:
                attrs[name] = value
        return Node(graph, tuple(inputs), dict(attrs, **_options(graph, decl, options)))

    decl = by_graph(graph)
    build.__name__ = build.__qualname__ = graph
    build.__doc__ = (decl.doc if decl is not None and decl.doc else
                     f"The node table's {graph} ({', '.join(n for _, n in decl.script)})."
                     if decl is not None else None)
    return build


def AttentionNode(q, k, v, prefix=None, causal: bool = False, kv_heads=None,  # noqa: N802
                  block_table=None, seq_lens=None, window=None, softcap=None,
                  alibi_slopes=None):
    """``softmax(q k^T / sqrt(D)) v`` per head (``q [H, M, D]``, ``k, v [Hkv, N, D]``,
    ``Hkv`` dividing ``H``: query head ``h`` reads KV head ``h // (H / Hkv)``) over the
    first ``prefix`` keys: an int64 node of one element (an input: it changes
    between evaluations), an int (checked now) or None (all ``N``); ``causal``: row
    ``i`` attends keys ``j <= i + prefix - M``.  ``kv_heads``: checked against the
    keys' heads.  A paged cache (graph tensors have at most 3 axes): ``q [B * H, M,
    D]`` (sequence ``b``'s heads are rows ``H b`` to ``H b + H - 1``), ``k, v [pages, P,
    Hkv * D]`` (``P`` 16..256, a power of two), ``block_table`` (int64 ``[B,
    max_pages]``) and ``seq_lens`` (int64 ``[B]``), both nodes (inputs: they change
    between evaluations); query row ``i`` of sequence ``b`` is its position ``i +
    seq_lens[b] - M``; the result is ``[B * H, M, D]`` (the script's
    ``PagedAttentionNode(q, k, v, block_table, seq_lens, causal)``).  ``window`` (an
    int, with ``causal``), ``softcap`` (a positive number) and ``alibi_slopes`` (numbers,
    one a query head: the attribute ``alibi``, constants of the graph) as
    ``gpudsl.ops.attention`` (the script's optional trailing arguments ``WINDOW,
    SOFTCAP, [SLOPES]``).  One fused kernel
    (:mod:`gpudsl.stdlib.attention`, :mod:`gpudsl.stdlib.attention_paged`)."""
    q, k, v = _wrap(q), _wrap(k), _wrap(v)
    if not isinstance(causal, (bool, np.bool_)):
        raise GraphError(f"causal must be a bool, not {causal!r}")
    attrs = dict(causal=bool(causal), **_attention_options(causal, window, softcap,
                                                           alibi_slopes))
    if kv_heads is not None and len(k.shape) == 3 and len(q.shape) == 3:
        heads = k.shape[2] // q.shape[2] if block_table is not None else k.shape[0]
        if heads != _int("kv_heads", kv_heads):
            raise GraphError(f"kv_heads={kv_heads} but the keys {list(k.shape)} have "
                             f"{heads} heads")
    if block_table is not None or seq_lens is not None:
        if block_table is None or seq_lens is None or prefix is not None:
            raise GraphError("a paged cache takes block_table and seq_lens (both nodes), "
                             "and no prefix")
        return Node("PagedAttentionNode", (q, k, v, _wrap(block_table), _wrap(seq_lens)),
                    attrs)
    if isinstance(prefix, Node):
        return Node("AttentionNode", (q, k, v, prefix), attrs)
    if prefix is None:
        prefix = k.shape[1] if len(k.shape) == 3 else 1
    attrs["prefix"] = _int("prefix", prefix)
    return Node("AttentionNode", (q, k, v), attrs)


def _attention_options(causal, window, softcap, alibi=None) -> dict:
    """AttentionNode's ``window``, ``softcap`` and ``alibi`` attributes (none when not
    given; the slopes' count is the shape rule's)."""
    out = {}
    if alibi is not None:
        try:
            slopes = tuple(float(x) for x in np.asarray(alibi, np.float64).reshape(-1))
        except (TypeError, ValueError):
            raise GraphError(f"alibi_slopes must be numbers, not {alibi!r:.60}") from None
        if not np.isfinite(slopes).all():
            raise GraphError(f"alibi_slopes must be finite, not {list(slopes)}")
        out["alibi"] = slopes
    if window is not None and _int("window", window):
        if window < 0 or not causal:
            raise GraphError(f"window={window}: a sliding window is a positive int and "
                             "needs causal=True")
        out["window"] = int(window)
    if softcap is not None:
        ok = isinstance(softcap, (int, float, np.integer, np.floating)) and \
            not isinstance(softcap, (bool, np.bool_))
        if not ok or not np.isfinite(float(softcap)) or float(softcap) <= 0:
            raise GraphError(f"softcap must be a positive number, not {softcap!r}")
        out["softcap"] = float(softcap)
    return out


def _int(what, v) -> int:
    if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
        raise GraphError(f"{what} must be an integer, not {v!r}")
    return int(v)


def _check_name(name):
    if not isinstance(name, str) or not name.isidentifier():
        raise GraphError(f"tensor name {name!r} is not an identifier (letters, digits, _)")


def _strict_array(value) -> np.ndarray:
    """``value`` as a contiguous host array, refusing what HamKaas refuses: a 0-d
    tensor, and an array or tensor whose dtype graphs do not hold (a list of numbers
    has no dtype of its own: floats are float32, integers int64)."""
    typed = hasattr(value, "dtype")
    if is_torch(value):
        value = host_view("the constant", value.detach().cpu(), GraphError, allow_grad=True)
    arr = np.asarray(value)
    if arr.ndim == 0:
        raise GraphError(f"ConstantTensor: a 0-d tensor ({arr!r}) is not a graph tensor",
                         hint="give it one axis: np.atleast_1d(x), or x.reshape(1)")
    if not typed:
        arr = arr.astype(np.float32 if arr.dtype.kind == "f" else arr.dtype)
        if arr.dtype.kind in "iu":
            arr = arr.astype(np.int64)
    if arr.dtype.name not in DTYPES:
        to = "np.int64" if arr.dtype.kind in "iub" else "np.float32"
        raise GraphError(f"ConstantTensor: a {arr.dtype.name} tensor; graphs hold "
                         f"{', '.join(DTYPES)}, and a constant is not converted silently",
                         hint=f"convert it: x.astype({to}) (torch: x.to(torch."
                              f"{to[3:]}))")
    return np.ascontiguousarray(arr)


def as_host_array(value) -> np.ndarray:
    """A contiguous numpy array from numpy / torch / a Python number, float64 made
    float32 (torch's default float is float32 already; numpy's is not)."""
    if is_torch(value):  # moved to the host, bfloat16 kept; a constant has no gradient
        value = host_view("the constant", value.detach().cpu(), GraphError,
                          allow_grad=True)
    arr = np.asarray(value)
    if arr.ndim == 0:
        arr = arr.reshape(1)
    if arr.dtype == np.float64:
        arr = arr.astype(np.float32)
    elif arr.dtype.kind in "iu" and arr.dtype != np.int64:
        arr = arr.astype(np.int64)
    return np.ascontiguousarray(arr)


_OWN_CONSTRUCTORS = {"AttentionNode": AttentionNode}

#: every computing node's constructor, by graph name (the node table's nodes when this
#: module was imported; ``constructor(name)`` for a node registered since)
CONSTRUCTORS = {n.graph: constructor(n.graph) for n in all_nodes() if n.graph}
globals().update({k: v for k, v in CONSTRUCTORS.items() if k not in globals()})


def __getattr__(name: str):
    """The constructor of a node registered after this module was imported
    (``gpudsl.graph.graph_nodes.SquareNode``)."""
    if by_graph(name) is not None:
        return constructor(name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
