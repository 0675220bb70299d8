"""The standard library: checked, scheduled kernels for the nodes of a small
inference graph (docs/graphs.md), one module per node family: ``pointwise``
(add, mul, relu, silu), ``slices`` (slice, replace_slice), ``matmul`` and
``permute``, and for whole models ``rms_norm``, ``softmax`` (sliced_softmax) and
``complex`` (complex_hadamard_product), the row reductions sharing ``reduce``.  Each holds the node's readable algorithm as procs, the schedules
that derive its fast kernels with ``gpudsl.schedule`` primitives only, and the
kernel choice for given shapes; ``common`` and ``stream_schedule`` hold what they
share, ``shapes`` the argument checks, and ``ops`` (also ``gpudsl.ops``) runs the
nodes on arrays.  Each node is declared once in the node table (``nodes``: the
declaration; ``node_table``: the built-in nodes; ``node_shapes``: their shape rules),
which ``ops``, graphs, ``gpudsl tune`` and ``gpudsl bench`` read; ``fused`` derives
the kernels of the graph's fusion groups.  ``reductions`` holds the one-line block
reductions users call in their own kernels (``block_sum``, ``block_max``,
``block_min``, ``block_argmax``), importable from here."""

from . import node_table  # noqa: F401,E402  (the built-in nodes, declared on first use of stdlib)

_REDUCTIONS = ("block_sum", "block_max", "block_min", "block_argmax", "reduction")


def __getattr__(name: str):
    if name in _REDUCTIONS:  # built on first use, not when gpudsl.ops loads
        from . import reductions

        return getattr(reductions, name)
    raise AttributeError(f"module 'gpudsl.stdlib' has no attribute {name!r}")
