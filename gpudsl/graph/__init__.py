"""``gpudsl.graph``: HamKaas scripts and models on the standard library's kernels
(docs/graphs.md, docs/graph_script.md).

```python
from gpudsl import graph
x = graph.InputTensor("input", "float32", [128, 28, 28])
h = (x.reshape([128, 784]) @ graph.ConstantTensor(w1) + graph.ConstantTensor(b1)).relu()
model = graph.compile(h)
y = model.evaluate({"input": images})
```

A HamKaas user's graph-building code runs by changing the import: the nodes keep
HamKaas's names (``InputTensor``, ``ConstantTensor``, ``BufferTensor``, ``SumNode``,
``HadamardProductNode``, ``MatMulNode``, ``ReLUNode``, ``SiLUNode``, ``SliceNode``,
``ReshapeNode``, ``PermuteNode``, ``ReplaceSliceNode``, ``RMSNormNode``,
``ComplexHadamardProductNode``, ``SlicedSoftmaxNode``; and gpudsl's ``AttentionNode``) and operators (``+``, ``*``,
``@``, ``[a:b]``, ``.reshape``, ``.permute``, ``.relu()``, ``.silu()``, ``.replace``,
``.rms_norm``, ``.complex_hadamard_product``, ``.sliced_softmax``).
"""
from __future__ import annotations

from ..errors import GraphError
from .compiled_model import Model, compile  # noqa: A004
from .graph_nodes import (CONSTRUCTORS, BufferTensor, ConstantTensor, InputTensor, Node,
                    constructor)
from .memory_plan import Memory, Plan
from .script import Graph, Script, parse, to_script

from ..stdlib.node_table import by_graph as _by_graph

globals().update(CONSTRUCTORS)  # SumNode, MatMulNode...: one per node of the node table

__all__ = ["GraphError", "Model", "compile", "Node", "InputTensor", "ConstantTensor",
           "BufferTensor", *CONSTRUCTORS, "Memory", "Plan", "Graph", "Script", "parse",
           "to_script"]


def __getattr__(name: str):
    """The constructor of a node registered after ``gpudsl.graph`` was imported (a
    user's or a test's: ``graph.SquareNode(x)``)."""
    if _by_graph(name) is not None:
        return constructor(name)
    raise AttributeError(f"module 'gpudsl.graph' has no attribute {name!r}")
