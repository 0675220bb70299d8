"""``gpudsl.torch.model``: a compiled graph (``gpudsl.graph.compile``) as a torch
operator: its inputs the graph's InputTensors, its fake implementation the result's
declared dtype and shape."""
from __future__ import annotations

import torch

from ..errors import Error

_DTYPES = {"float32": torch.float32, "float16": torch.float16,
           "bfloat16": torch.bfloat16, "int64": torch.int64}


def model(name: str, compiled):
    """Register ``compiled`` (a ``gpudsl.graph.Model``) as the torch operator ``name``
    and return it.  Its arguments are the graph's inputs by name, in the order the
    graph declares them; it returns the result, a new tensor, from ``Model.evaluate``
    (CPU tensors in: a CPU tensor; CUDA tensors in, on a GPU model: a CUDA tensor).
    A graph with BufferTensors keeps state between evaluations, which an operator
    may not: it is refused."""
    graph = getattr(compiled, "graph", None)
    if graph is None or not hasattr(compiled, "evaluate"):
        raise Error(f"gpudsl.torch.model takes a compiled graph (gpudsl.graph.compile), "
                    f"not {type(compiled).__name__}")
    if graph.buffers:
        raise Error("the graph has BufferTensors: it keeps state between evaluations, "
                    "and a torch operator may not",
                    hint="call model.evaluate(...) directly, outside torch.compile")
    inputs = [n for n in graph.nodes if n.op == "InputTensor"]
    names = tuple(n.attrs["name"] for n in inputs)
    result = graph.result
    schema = "(" + ", ".join(f"Tensor {n}" for n in names) + ") -> Tensor"

    def impl(*tensors):
        out = compiled.evaluate(dict(zip(names, (t.detach() for t in tensors))))
        return out.clone() if any(out is t for t in tensors) else out

    def fake(*tensors):
        device = tensors[0].device if tensors else torch.device("cpu")
        return torch.empty(result.shape, dtype=_DTYPES[result.dtype], device=device)

    custom = torch.library.custom_op(name, impl, mutates_args=(), schema=schema)
    custom.register_fake(fake)
    return custom


__all__ = ["model"]
