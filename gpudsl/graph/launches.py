"""A model's evaluation as ONE launch list, built at compile time (issue 17).

``launch_list`` walks the graph once, with its fusion groups
(``gpudsl.graph.fusion``) and memory plan, and gives the ``Step`` s that write
each value straight into its planned place (no copies):

- a fusion group: one step, its fused proc (``gpudsl.graph.kernels``), at the
  group's last node; the group's other nodes launch nothing;
- every other computing node: one step, the kernel its declaration in the node table
  chooses for its shapes (``gpudsl.stdlib.node_table.plan``: the tuning database's
  winner, else the default; the kernel ``gpudsl.ops`` runs for the same shapes), its
  arguments reshaped as the declaration says; a launch with ``before`` launches (a
  TF32 matmul on sm_90a: B transposed first) is a step each, their scratch arrays
  temporaries of the list;
- ``InputTensor``: a copy into the arena before the steps (``LaunchList.inputs``);
- constants, buffers and views (``ReshapeNode``, ``SliceNode``): nothing.

Arguments are ``Ref`` s (where the bytes live: ``"arena"`` at an offset, a
``"constant"`` by name, a ``"buffer"`` by index, or a ``"temp"`` of the list: the
fault flags of ``replace_slice`` / ``sliced_softmax`` and literal prefixes) or values.
All the list's procs are compiled into one translation unit (``model.unit``) and both
executors (``gpudsl.graph.executors``: host memory, or device memory and a CUDA
graph) run this list; ``model.kernels`` lists its steps.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError
from ..stdlib.node_table import by_graph
from ..stdlib.node_table import plan as plan_launch

_NP = {"float32": np.float32, "int64": np.int64, "int32": np.int32, "float16": np.float16}
try:  # bfloat16 host arrays: ml_dtypes' numpy type (as gpudsl.ir.types)
    import ml_dtypes

    _NP["bfloat16"] = ml_dtypes.bfloat16
except ImportError:  # pragma: no cover
    pass


_DT = {"float32": "f32", "float16": "f16", "bfloat16": "bf16"}


def at(node, message: str, hint: str | None = None) -> GraphError:
    """A ``GraphError`` at ``node``'s place in its script (when it has one)."""
    if node.where is None:
        return GraphError(message, hint=hint)
    line, col, src, _ = node.where
    return GraphError(message, line, col, src, hint=hint)


@dataclass(frozen=True)
class Ref:
    """Bytes of the model's memory viewed as an array: ``kind`` is ``"arena"`` (``key``
    unused), ``"constant"`` (its name), ``"buffer"`` (its index) or ``"temp"`` (one of
    the list's own arrays, by name)."""

    kind: str
    key: object
    offset: int
    shape: tuple
    dtype: str = "float32"

    def reshape(self, *shape) -> "Ref":
        shape = tuple(shape[0]) if len(shape) == 1 and not isinstance(shape[0], int) else shape
        assert math.prod(shape) == math.prod(self.shape), (shape, self.shape)
        return Ref(self.kind, self.key, self.offset, tuple(shape), self.dtype)

    @property
    def nbytes(self) -> int:
        return math.prod(self.shape) * np.dtype(_NP[self.dtype]).itemsize


@dataclass
class Step:
    """One launch: ``proc`` on ``args`` (parameter name -> Ref or value), computing the
    graph's nodes ``nodes`` (indices; a fused step computes its whole group)."""

    proc: object
    args: dict
    nodes: tuple = ()
    fused: bool = False

    @property
    def node(self) -> int:
        """The node whose value the step writes (its last)."""
        return self.nodes[-1]

    @property
    def name(self) -> str:
        return self.proc.ir.name if hasattr(self.proc, "ir") else str(self.proc)


@dataclass
class LaunchList:
    steps: list[Step]
    #: input name -> where it is copied before the steps run
    inputs: dict[str, Ref] = field(default_factory=dict)
    result: Ref | None = None
    #: the list's own arrays (name -> initial contents): fault flags, literal prefixes
    temps: dict[str, np.ndarray] = field(default_factory=dict)
    #: (byte offset in temp ``"err"``, node index): a step's fault flag
    errors: list[tuple[int, int]] = field(default_factory=list)

    @property
    def procs(self) -> list:
        return list(dict.fromkeys(s.proc for s in self.steps))

    def __len__(self) -> int:
        """The number of steps (one kernel each; ``len(model.kernels)`` is the same)."""
        return len(self.steps)

    def __iter__(self):
        return iter(self.steps)


def launch_list(model) -> LaunchList:
    """The launch list of ``model`` (its graph, plan, fused kernels and device; see the
    module's text)."""
    nodes, plan, fused = model.graph.nodes, model.plan, model._fused
    pos = {id(n): i for i, n in enumerate(nodes)}
    covered = {k for fk in fused.values() for k in fk.group.members[:-1]}

    def ref(i: int) -> Ref:
        kind, key, off = plan.storage[i]
        return Ref(kind, key, off, tuple(nodes[i].shape), nodes[i].dtype)

    out = LaunchList([])
    for i, node in enumerate(nodes):
        op = node.op
        if i in covered or op in ("ConstantTensor", "BufferTensor"):
            continue
        if op == "InputTensor":
            out.inputs[node.attrs["name"]] = ref(i)
        elif i in fused:
            out.steps.append(_fused_step(model, out, fused[i], ref, i))
        else:
            decl = by_graph(op)
            if decl is None or decl.launch is None or decl.graph_view:
                continue  # a view: no launch
            ins = [ref(pos[id(m)]) for m in node.inputs]
            shapes = tuple(tuple(m.shape) for m in node.inputs)
            attrs = node.attrs
            dt = _DT.get(node.dtype, "f32")  # the stdlib's name of the node's precision
            why = decl.refuses(node.dtype, shapes)
            if why:  # a dtype or (halves) shapes the node's kernels do not take
                raise at(node, f"{op}: {why}", "run this part of the graph in float32")
            if dt != "f32":
                attrs = dict(attrs, dtype=dt)
            launch = plan_launch(decl, shapes, attrs, model.device)
            for name, shape in launch.scratch:   # the node's scratch: arrays of the list
                out.temps[f"{name}{i}"] = np.zeros(shape, _NP[node.dtype])
            for ln in launch.before + (launch,):
                out.steps.append(Step(ln.proc, _args(out, ln, ins, ref(i), node, i),
                                      (i,), False))
    if out.errors:
        out.temps["err"] = np.zeros(len(out.errors), np.int32)
    out.result = ref(pos[id(model.graph.result)])
    return out


def _err(out: LaunchList, i: int) -> Ref:
    """A fault flag of the list for node ``i``."""
    off = 4 * len(out.errors)
    out.errors.append((off, i))
    return Ref("temp", "err", off, (1,), "int32")


def _args(out: LaunchList, launch, ins: list, me: Ref, node, i: int) -> dict:
    """The step's arguments, as the node table's launch says (``gpudsl.stdlib.node_registry``):
    operands and the result reshaped, an integer attribute made an array of the list."""
    args = {}
    for param, spec in launch.args:
        kind = spec[0]
        if kind == "in":
            args[param] = ins[spec[1]] if spec[2] is None else ins[spec[1]].reshape(spec[2])
        elif kind == "out":
            args[param] = me if spec[1] is None else me.reshape(spec[1])
        elif kind == "index":
            if spec[1] < len(ins):
                args[param] = ins[spec[1]]
            else:  # an integer attribute: a literal of the list
                out.temps[f"{spec[2]}{i}"] = np.array([node.attrs[spec[2]]], np.int64)
                args[param] = Ref("temp", f"{spec[2]}{i}", 0, (1,), "int64")
        elif kind == "value":
            args[param] = spec[1]
        elif kind == "array":  # a literal array: a temporary of the list
            out.temps[f"{param}{i}"] = spec[1]
            args[param] = Ref("temp", f"{param}{i}", 0, spec[1].shape, spec[1].dtype.name)
        elif kind == "scratch":  # the node's scratch array (a temporary of the list)
            whole = out.temps[f"{spec[1]}{i}"]
            r = Ref("temp", f"{spec[1]}{i}", 0, whole.shape, node.dtype)
            args[param] = r if spec[2] is None else r.reshape(spec[2])
        else:
            args[param] = _err(out, i)
    return args


def _fused_step(model, out: LaunchList, fk, ref, i: int) -> Step:
    args = {nm: ref(j).reshape(s) for nm, (j, s) in fk.shapes.items()}
    for nm, spec in fk.values.items():
        if spec[0] == "err":
            args[nm] = _err(out, i)
        elif spec[0] == "temp":
            out.temps[f"{nm}{i}"] = spec[1]
            args[nm] = Ref("temp", f"{nm}{i}", 0, spec[1].shape, spec[1].dtype.name)
        else:  # a constant of one element, fixed at compile time
            c = model.constants[spec[1]] if spec[1] is not None else np.ones(1)
            args[nm] = np.float32(c.reshape(-1)[0])
    return Step(fk.proc, args, tuple(fk.group.members), True)


def check_faults(ll: LaunchList, flags: np.ndarray, nodes) -> None:
    """Raise at the first step whose fault flag is set (``flags``: the ``"err"`` temp
    as read back; the caller zeroes it)."""
    for off, i in ll.errors:
        if flags[off // 4]:
            what = ("the range [begin, end) read from the device is outside the tensor "
                    "or does not hold the replacement's rows" if
                    nodes[i].op == "ReplaceSliceNode" else
                    "a sequence length read from the device is outside its bounds or "
                    "the block table names a page outside the cache" if
                    nodes[i].op == "PagedAttentionNode" else
                    "the prefix read from the device is outside [1, keys] (causal: "
                    "below the query rows)" if nodes[i].op == "AttentionNode" else
                    "the prefix read from the device is outside the last axis")
            raise at(nodes[i], f"{nodes[i].op}: {what}")


__all__ = ["Ref", "Step", "LaunchList", "launch_list", "check_faults", "at"]
