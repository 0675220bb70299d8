"""``gpudsl.torch.node``: a node of the node table (a built-in one, or one a user
declared with ``gpudsl.stdlib.node_registry.register``) as a torch operator, its fake
implementation the node's own shape rule."""
from __future__ import annotations

import torch

from ..errors import Error
from ..stdlib import array_ops as _ops
from ..stdlib.node_registry import ShapeError, get

_DTYPES = {"float32": torch.float32, "float16": torch.float16,
           "bfloat16": torch.bfloat16, "int64": torch.int64, "int32": torch.int32}
_ATTR_TYPES = ("int", "float", "bool", "int[]", "str")


class _Operand:
    """What a shape rule reads of a tensor (real or fake): its dtype name and shape."""

    __slots__ = ("dtype", "shape")

    def __init__(self, t):
        self.dtype = str(t.dtype).replace("torch.", "")
        self.shape = tuple(int(d) for d in t.shape)


def node(name: str, op_name: str | None = None, *, operands=None, attrs=None):
    """Register node ``name`` of the node table as the torch operator ``op_name``
    (default ``"gpudsl::NAME"``) and return it.  Its tensors are the node's operands
    (``operands`` names them where the declaration does not); ``attrs`` declares its
    attributes as keyword arguments, name -> ``"int"``, ``"float"``, ``"bool"``,
    ``"int[]"`` or ``"str"``.  The operator runs ``gpudsl.ops.NAME`` and its fake
    implementation is the node's shape rule (which refuses what the node refuses)."""
    decl = get(name)
    if decl is None or decl.launch is None:
        raise Error(f"the node table has no node {name!r} to run")
    names = tuple(operands or decl.operands)
    if not names:
        raise Error(f"node {name!r} does not name its operands",
                    hint="pass operands=('a', 'b', ...)")
    attrs = dict(attrs or {})
    bad = {k: v for k, v in attrs.items() if v not in _ATTR_TYPES}
    if bad:
        raise Error(f"attribute types {bad} of node {name!r} are not among {_ATTR_TYPES}")
    schema = "(" + ", ".join([f"Tensor {n}" for n in names] +
                             (["*"] + [f"{t} {k}" for k, t in attrs.items()]
                              if attrs else [])) + ") -> Tensor"
    run = getattr(_ops, name)

    def impl(*tensors, **kw):
        out = run(*(t.detach() for t in tensors), **kw)
        return out.clone() if any(out is t for t in tensors) else out

    def fake(*tensors, **kw):
        try:
            dtype, shape = decl.shape(tuple(_Operand(t) for t in tensors), kw)
        except ShapeError as e:
            raise Error(f"{name}: {e.message}", hint=e.hint) from None
        return tensors[0].new_empty(shape, dtype=_DTYPES[dtype])

    custom = torch.library.custom_op(op_name or f"gpudsl::{name}", impl,
                                     mutates_args=(), schema=schema)
    custom.register_fake(fake)
    return custom


__all__ = ["node"]
