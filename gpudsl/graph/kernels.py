"""One kernel per fusion group (``gpudsl.graph.fusion``): its proc and running it.

The proc is derived by the standard library (``gpudsl.stdlib.fused``: the nodes'
readable algorithms composed, inlined and fused, then scheduled as the stdlib schedules
the head node) from the group's steps and its operands' shapes; the matmul head takes
the tuning database's options for its shapes, as ``gpudsl.ops.matmul`` does.

``build`` proves the proc (``check()``) like every kernel; an unproved proc is never
run (its group runs node by node).  The proc is compiled into the model's one unit with
the other kernels and runs as one step of its launch list, writing straight into its
node's place in the arena.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ..compiler.compiled_kernel import prove
from ..errors import CheckError
from ..stdlib.fused import (CHAIN_LEAF, inline_and_fuse, matmul_group_proc,  # noqa: F401
                            matmul_proc, matmul_variant, merge_axes, pointwise_group_proc,
                            pointwise_proc)
from .fusion import Group

# ------------------------------------------------------------------ running


def _flags(shape, of) -> tuple:
    return tuple(d == D for d, D in zip(shape, of))


@dataclass
class FusedKernel:
    """A group's proc (proved) and how its arguments come from the graph's values:
    ``shapes[parameter] = (node index, shape the kernel sees)``.  It runs as one step
    of the model's launch list (``gpudsl.graph.launches``), from the model's unit."""

    group: Group
    proc: object
    shapes: dict
    #: parameters that are not graph values (attention): ``("scale", constant name or
    #: None)``, ``("temp", array)`` (an array of the launch list), ``("err",)``
    values: dict = field(default_factory=dict)

    @property
    def name(self) -> str:
        return self.proc.name


def build(group: Group, nodes, backend: str) -> FusedKernel:
    """The fused kernel of ``group``, proved now (``check()``; refused with
    ``gpudsl.CheckError`` when not proved); ``backend`` picks the matmul options."""
    out = nodes[group.last]
    ext = [nodes[j] for j in group.externals]
    if group.head == "attention":
        from .attention_fusion import fused_kernel

        return FusedKernel(group, *fused_kernel(group, nodes))
    if group.head == "matmul":
        from ..stdlib.node_table import matmul_options

        a, b = tuple(ext[0].shape), tuple(ext[1].shape)
        flags = tuple(_flags(e.shape, out.shape) for e in ext)
        p = matmul_group_proc(a, b, matmul_options(a, b, {}, backend), group.steps, flags)
        names = ["a", "b"] + [f"e{j}" for j in range(2, len(ext))]
        shapes = {nm: (j, e.shape) for nm, j, e in zip(names, group.externals, ext)}
        shapes["c"] = (group.last, out.shape)
    else:
        p, dims, flags = pointwise_group_proc(out.shape, [e.shape for e in ext],
                                              group.steps)
        shapes = {f"x{j}": (i, tuple(d if f else 1 for d, f in zip(dims, fl)))
                  for j, (i, fl) in enumerate(zip(group.externals, flags))}
        shapes["out"] = (group.last, dims)
    report = prove(p.ir, {})  # cached: the model's unit finds the verdict
    if not report.ok:
        raise CheckError(report, hint=f"{p.name} is not proved safe; the group runs "
                         "node by node")
    return FusedKernel(group, p, shapes)


@dataclass(frozen=True)
class KernelEntry:
    """One entry of ``model.kernels``: a kernel and the nodes it computes (indices into
    the graph's nodes; ``$N`` in the script is index ``N - 1``)."""

    name: str
    nodes: tuple[int, ...]
    ops: tuple[str, ...]
    fused: bool

    @property
    def refs(self) -> tuple[str, ...]:
        return tuple(f"${i + 1}" for i in self.nodes)

    def __str__(self):
        how = "fused" if self.fused else "stdlib kernel"
        return f"{self.name}: {' '.join(self.refs)} ({', '.join(self.ops)}; {how})"


__all__ = ["FusedKernel", "KernelEntry", "build", "pointwise_proc", "matmul_proc",
           "matmul_variant", "merge_axes", "inline_and_fuse"]
