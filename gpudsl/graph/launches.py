"""A model's evaluation as ONE launch list, built at compile time (issue 17).

``launch_list`` walks the graph once, with its fusion groups
(``gpudsl.graph.fusion``) and memory plan, and gives the ``Step`` s that write
each value straight into its planned place (no copies):

- a fusion group: one step, its fused proc (``gpudsl.graph.kernels``), at the
  group's last node; the group's other nodes launch nothing;
- every other computing node: one step, the standard-library kernel ``gpudsl.ops``
  would pick for the same shapes (``plan_binary``, ``matmul_kernel`` with the tuning
  database's options, ...), its arguments reshaped as the op reshapes them;
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


def launch_list(model) -> LaunchList:
    """The launch list of ``model`` (its graph, plan, fused kernels and device; see the
    module's text)."""
    from ..stdlib.complex import plan_complex_mul
    from ..stdlib.matmul import matmul_kernel, tuned_options
    from ..stdlib.permute import merged_shapes, permute_kernel
    from ..stdlib.pointwise import plan_binary, plan_unary
    from ..stdlib.rms_norm import plan_rms_norm
    from ..stdlib.shapes import normalize_perm
    from ..stdlib.slices import plan_replace_slice
    from ..stdlib.softmax import plan_sliced_softmax

    nodes, plan, fused = model.graph.nodes, model.plan, model._fused
    pos = {id(n): i for i, n in enumerate(nodes)}
    covered = {k for fk in fused.values() for k in fk.group.members[:-1]}

    def ref(i: int) -> Ref:
        kind, key, off = plan.storage[i]
        return Ref(kind, key, off, tuple(nodes[i].shape), nodes[i].dtype)

    out = LaunchList([])

    def err(i: int) -> Ref:
        off = 4 * len(out.errors)
        out.errors.append((off, i))
        return Ref("temp", "err", off, (1,), "int32")

    def array_names(p):
        return [q.name for q in p.ir.params if q.is_array]

    for i, node in enumerate(nodes):
        op = node.op
        if i in covered or op in ("ConstantTensor", "BufferTensor", "ReshapeNode",
                                  "SliceNode"):
            continue
        me = ref(i)
        if op == "InputTensor":
            out.inputs[node.attrs["name"]] = me
            continue
        if i in fused:
            fk = fused[i]
            args = {nm: ref(j).reshape(s) for nm, (j, s) in fk.shapes.items()}
            for nm, spec in fk.values.items():
                if spec[0] == "err":
                    args[nm] = err(i)
                elif spec[0] == "temp":
                    out.temps[f"{nm}{i}"] = spec[1]
                    args[nm] = Ref("temp", f"{nm}{i}", 0, spec[1].shape, spec[1].dtype.name)
                else:  # a constant of one element, fixed at compile time
                    c = model.constants[spec[1]] if spec[1] is not None else np.ones(1)
                    args[nm] = np.float32(c.reshape(-1)[0])
            out.steps.append(Step(fk.proc, args, tuple(fk.group.members), True))
            continue
        ins = [ref(pos[id(m)]) for m in node.inputs]
        shapes = [m.shape for m in node.inputs]
        dt = _DT.get(node.dtype, "f32")  # the stdlib's name of the node's precision
        if dt != "f32" and op in ("MatMulNode", "PermuteNode"):
            from ..stdlib.matmul_f16 import half_node_refusal

            why = half_node_refusal(op, *shapes)
            if why:
                raise at(node, f"{op}: {why}", "run this part of the graph in float32")
        if op in ("SumNode", "HadamardProductNode"):
            p, dims, bdims = plan_binary("add" if op == "SumNode" else "mul", *shapes, dt)
            args = dict(a=ins[0].reshape(dims), b=ins[1].reshape(bdims), out=me.reshape(dims))
        elif op in ("ReLUNode", "SiLUNode"):
            n = math.prod(node.shape)
            p = plan_unary("relu" if op == "ReLUNode" else "silu", n, dt)
            args = dict(x=ins[0].reshape(n), out=me.reshape(n))
        elif op == "MatMulNode" and dt != "f32":  # [m, n] or [n] @ [n, k]
            from ..stdlib.matmul_f16 import plan_matmul_half

            a2 = (1,) + shapes[0] if len(shapes[0]) == 1 else shapes[0]
            p, binds = plan_matmul_half(a2, shapes[1], dt)
            args = dict(a=ins[0].reshape(a2), b=ins[1], c=me.reshape(a2[0], shapes[1][1]),
                        **binds)
        elif op == "MatMulNode":
            p, _ = matmul_kernel(*shapes, **tuned_options(*shapes, model.device))
            args = dict(zip(array_names(p), (ins[0], ins[1], me)))
        elif op == "PermuteNode":
            perm = normalize_perm(tuple(node.attrs["perm"]), len(shapes[0]))
            p, _, _ = permute_kernel(shapes[0], perm)
            a, b = merged_shapes(shapes[0], perm)
            names = array_names(p)
            args = {names[0]: ins[0].reshape(a), names[1]: me.reshape(b)}
        elif op == "ReplaceSliceNode":
            x, r, b, e = ins
            c = math.prod(x.shape[1:])
            p = plan_replace_slice(c, dt)
            args = dict(x=x.reshape(x.shape[0], c), r=r.reshape(r.shape[0], c), begin=b,
                        end=e, err=err(i))
        elif op == "RMSNormNode":
            n = node.shape[-1]
            r = math.prod(node.shape[:-1])
            p = plan_rms_norm(n, dt)
            args = dict(x=ins[0].reshape(r, n), w=ins[1], out=me.reshape(r, n))
        elif op == "ComplexHadamardProductNode":
            p, ca, cb = plan_complex_mul(*shapes, dt)
            args = dict(a=ins[0].reshape(ca), b=ins[1].reshape(cb), out=me.reshape(ca))
        elif op == "SlicedSoftmaxNode":
            n = node.shape[-1]
            r = math.prod(node.shape[:-1])
            if len(ins) == 2:
                prefix = ins[1]
            else:  # an integer attribute: a literal of the list
                out.temps[f"prefix{i}"] = np.array([node.attrs["prefix"]], np.int64)
                prefix = Ref("temp", f"prefix{i}", 0, (1,), "int64")
            p = plan_sliced_softmax(n, dt)
            args = dict(x=ins[0].reshape(r, n), prefix=prefix, out=me.reshape(r, n),
                        err=err(i))
        elif op == "AttentionNode":
            from ..stdlib.attention import plan_attention

            h, m, d = node.shape
            if len(ins) == 4:
                prefix = ins[3]
            else:  # an integer attribute: a literal of the list
                out.temps[f"prefix{i}"] = np.array([node.attrs["prefix"]], np.int64)
                prefix = Ref("temp", f"prefix{i}", 0, (1,), "int64")
            p = plan_attention(m, d, node.attrs["causal"], h, node.inputs[1].shape[1],
                               dt=dt)
            args = dict(q=ins[0], k=ins[1], v=ins[2], prefix=prefix,
                        scale=np.float32(1 / math.sqrt(d)), out=me, err=err(i))
        else:  # pragma: no cover  (the parser refuses other nodes)
            raise at(node, f"{op} cannot run")
        out.steps.append(Step(p, args, (i,), False))
    if out.errors:
        out.temps["err"] = np.zeros(len(out.errors), np.int32)
    out.result = ref(pos[id(model.graph.result)])
    return out


def check_faults(ll: LaunchList, flags: np.ndarray, nodes) -> None:
    """Raise at the first step whose fault flag is set (``flags``: the ``"err"`` temp
    as read back; the caller zeroes it)."""
    for off, i in ll.errors:
        if flags[off // 4]:
            what = ("the range [begin, end) read from the device is outside the tensor "
                    "or does not hold the replacement's rows" if
                    nodes[i].op == "ReplaceSliceNode" else
                    "the prefix read from the device is outside [1, keys] (causal: "
                    "below the query rows)" if nodes[i].op == "AttentionNode" else
                    "the prefix read from the device is outside the last axis")
            raise at(nodes[i], f"{nodes[i].op}: {what}")


__all__ = ["Ref", "Step", "LaunchList", "launch_list", "check_faults", "at"]
