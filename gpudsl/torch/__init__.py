"""``gpudsl.torch``: gpudsl kernels as PyTorch operators (docs/pytorch.md).

- ``op(name, proc)``: a proved ``@proc`` or ``Kernel`` as a ``torch.library.custom_op``
  (schema and fake implementation from the proc's parameters and shapes), usable in
  ``torch.compile(fullgraph=True)`` and checked by ``torch.library.opcheck``;
- ``backward(op)``: a decorator registering its gradient (``register_autograd``);
- ``node(name)``: a node of the node table (a user's too) as an operator, its fake
  implementation the node's shape rule;
- ``model(name, compiled)``: a compiled graph (without buffers) as an operator;
- ``gpudsl.torch.ops``: the standard library's nodes as operators ``gpudsl::NAME``
  with their gradients (add, mul, relu, silu, matmul, rms_norm, softmax...).

Importing it imports torch (``pip install 'gpudsl[torch]'``).
"""
from __future__ import annotations

try:
    import torch  # noqa: F401  (absolute: the real torch, not this package)
except ImportError:  # pragma: no cover - depends on the environment
    # an ImportError, as for any missing optional dependency (pytest.importorskip too)
    raise ImportError("gpudsl.torch needs PyTorch: pip install 'gpudsl[torch]'") from None

from .models import model
from .node_operator import node
from .register import backward, op

__all__ = ["op", "backward", "node", "model"]
