"""A model's evaluation as a launch list over its planned memory, and two executors.

:func:`launch_list` gives, for the nodes of this version (one kernel per node, no
fusion), the :class:`Step` s that write each node's value straight into its place in
the arena (no copies): each step a proc and its arguments as :class:`Ref` s (where the
bytes live: ``"arena"`` at an offset, a ``"constant"`` by name, a ``"buffer"`` by index,
or a ``"temp"`` of the step) or values.  The kernels are the ones :mod:`gpudsl.ops`
picks for the same shapes.  A launch list built elsewhere (fused kernels) plugs into
the executors the same way.

- :class:`HostExecutor` resolves the refs to numpy views and launches from the model's
  unit (the emulator, or the GPU with copies); it is how the CPU tests check a list.
- :class:`DeviceExecutor` (GPU) keeps arena, constants and buffers in device memory,
  binds every step once (the pointers never move), and runs the list on a stream of
  its own: eagerly, or captured once as a CUDA graph and replayed on every call.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ..errors import GraphError

_NP = {"float32": np.float32, "int64": np.int64, "int32": np.int32}


@dataclass(frozen=True)
class Ref:
    """Bytes of the model's memory viewed as an array: ``kind`` is ``"arena"`` (``key``
    unused), ``"constant"`` (its name), ``"buffer"`` (its index) or ``"temp"`` (a
    step's own scratch array, zeroed once, by name)."""

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
    proc: object
    args: dict  # parameter name -> Ref or value
    node: int = -1  # the node it computes

    @property
    def name(self) -> str:
        return self.proc.ir.name if hasattr(self.proc, "ir") else str(self.proc)


@dataclass
class LaunchList:
    steps: list[Step]
    #: input name -> where it is copied before the steps run
    inputs: dict[str, Ref] = field(default_factory=dict)
    result: Ref | None = None

    @property
    def procs(self) -> list:
        return list(dict.fromkeys(s.proc for s in self.steps))


def launch_list(model) -> LaunchList:
    """The node-by-node launch list of ``model`` (see the module's text)."""
    from ..stdlib.matmul import matmul_kernel, tuned_options
    from ..stdlib.permute import merged_shapes, permute_kernel
    from ..stdlib.pointwise import plan_binary, plan_unary
    from ..stdlib.shapes import normalize_perm
    from ..stdlib.slices import plan_replace_slice

    nodes, plan = model.graph.nodes, model.plan
    pos = {id(n): i for i, n in enumerate(nodes)}

    def ref(node) -> Ref:
        kind, key, off = plan.storage[pos[id(node)]]
        return Ref(kind, key, off, tuple(node.shape), node.dtype)

    out = LaunchList([])
    for i, node in enumerate(nodes):
        op, ins = node.op, [ref(m) for m in node.inputs]
        me = ref(node)
        if op == "InputTensor":
            out.inputs[node.attrs["name"]] = me
        elif op in ("ConstantTensor", "BufferTensor", "ReshapeNode", "SliceNode"):
            continue
        elif op in ("SumNode", "HadamardProductNode"):
            p, dims, bdims = plan_binary("add" if op == "SumNode" else "mul",
                                         node.inputs[0].shape, node.inputs[1].shape)
            out.steps.append(Step(p, dict(a=ins[0].reshape(dims), b=ins[1].reshape(bdims),
                                          out=me.reshape(dims)), i))
        elif op in ("ReLUNode", "SiLUNode"):
            n = math.prod(node.shape)
            p = plan_unary("relu" if op == "ReLUNode" else "silu", n)
            out.steps.append(Step(p, dict(x=ins[0].reshape(n), out=me.reshape(n)), i))
        elif op == "MatMulNode":
            sa, sb = node.inputs[0].shape, node.inputs[1].shape
            p, _ = matmul_kernel(sa, sb, **tuned_options(sa, sb, model.device))
            names = [q.name for q in p.ir.params if q.is_array]
            out.steps.append(Step(p, dict(zip(names, (ins[0], ins[1], me))), i))
        elif op == "PermuteNode":
            shape = node.inputs[0].shape
            perm = normalize_perm(tuple(node.attrs["perm"]), len(shape))
            p, _, _ = permute_kernel(shape, perm)
            a, b = merged_shapes(shape, perm)
            names = [q.name for q in p.ir.params if q.is_array]
            out.steps.append(Step(p, {names[0]: ins[0].reshape(a), names[1]: me.reshape(b)},
                                  i))
        elif op == "ReplaceSliceNode":
            x, r, b, e = ins
            c = math.prod(x.shape[1:])
            err = Ref("temp", f"err{i}", 0, (1,), "int32")
            out.steps.append(Step(plan_replace_slice(c), dict(
                x=x.reshape(x.shape[0], c), r=r.reshape(r.shape[0], c), begin=b, end=e,
                err=err), i))
        else:
            raise GraphError(f"{op}: no kernel in the node-by-node launch list",
                             hint="this node runs through gpudsl.ops (Model.evaluate)")
    out.result = ref(model.graph.result)
    return out


def _temps(steps) -> dict[str, Ref]:
    return {r.key: r for s in steps for r in s.args.values()
            if isinstance(r, Ref) and r.kind == "temp"}


class HostExecutor:
    """Runs a launch list on the model's host memory (numpy) from its unit."""

    def __init__(self, model, ll: LaunchList, unit):
        self.model, self.ll, self.unit = model, ll, unit
        self.temps = {k: np.zeros(r.shape, _NP[r.dtype]) for k, r in _temps(ll.steps).items()}

    def view(self, r: Ref) -> np.ndarray:
        m = self.model
        if r.kind == "temp":
            return self.temps[r.key]
        base = {"arena": lambda: m._arena,
                "constant": lambda: m.constants[r.key].reshape(-1).view(np.uint8),
                "buffer": lambda: m.buffers[r.key].reshape(-1).view(np.uint8)}[r.kind]()
        return base[r.offset:r.offset + r.nbytes].view(_NP[r.dtype]).reshape(r.shape)

    def run(self, values: dict[str, np.ndarray]) -> np.ndarray:
        for name, r in self.ll.inputs.items():
            self.view(r)[...] = values[name]
        for s in self.ll.steps:
            self.unit.launch(self.unit.name_of(s.proc), **{
                k: self.view(v) if isinstance(v, Ref) else v for k, v in s.args.items()})
        return np.array(self.view(self.ll.result), copy=True)


class DeviceExecutor:
    """Runs a launch list on the GPU: the model's arena, constants and buffers live in
    device memory; each step is bound once against them (``unit.prepare``); a call
    copies the inputs in (host → device, or device → device for device arrays: no host
    round trip), then launches every kernel on the executor's stream, or, with
    ``cuda_graph=True``, replays the CUDA graph captured at the first call."""

    def __init__(self, model, ll: LaunchList, unit, cuda_graph: bool = True):
        from ..runtime.device import DeviceBuffer
        from ..runtime.graphs import Stream

        self.model, self.ll, self.unit, self.cuda_graph = model, ll, unit, cuda_graph
        self.arena = DeviceBuffer.zeros(max(model.plan.arena_bytes, 1), np.uint8)
        self.constants = {k: DeviceBuffer.from_numpy(v.reshape(-1).view(np.uint8))
                          for k, v in model.constants.items()}
        self.buffers = [DeviceBuffer.from_numpy(b.reshape(-1).view(np.uint8))
                        for b in model.buffers]
        self.temps = {k: DeviceBuffer.zeros(r.shape, _NP[r.dtype])
                      for k, r in _temps(ll.steps).items()}
        self.stream = Stream()
        self.graph = None
        # every step bound once: (work buffers by name, launches)
        self.prepared = []
        for s in ll.steps:
            b, temporaries, launches = self.unit.prepare(
                self.unit.name_of(s.proc),
                **{k: self.view(v) if isinstance(v, Ref) else v for k, v in s.args.items()})
            work = {name: a.device for name, a in b.arrays.items()}
            for name, shape, dt in temporaries:  # a proc's GLOBAL temporaries, kept
                work[name] = DeviceBuffer.zeros(shape, dt)
            self.prepared.append((work, launches))

    def view(self, r: Ref):
        """A device view (no copy) of the bytes ``r`` names."""
        from ..runtime.interop import DeviceArray

        if r.kind == "temp":
            base, off = self.temps[r.key], 0
        else:
            base = {"arena": lambda: self.arena, "constant": lambda: self.constants[r.key],
                    "buffer": lambda: self.buffers[r.key]}[r.kind]()
            off = r.offset
        return DeviceArray(base.ptr + off, tuple(r.shape), np.dtype(_NP[r.dtype]),
                           owner=base)

    def _enqueue(self, stream) -> None:
        for work, launches in self.prepared:
            self.unit.backend.enqueue(work, launches, stream)

    def run(self, values: dict, device_out: bool):
        """``values``: input name -> numpy array or device array (checked by the
        model).  Returns the result: a new device buffer, or a numpy array."""
        from ..runtime.device import DeviceBuffer
        from ..runtime.graphs import CapturedGraph
        from ..runtime.interop import as_device_array

        keep = []
        for name, r in self.ll.inputs.items():
            v, dst = values[name], self.view(r)
            if isinstance(v, np.ndarray):
                v = np.ascontiguousarray(v)
                keep.append(v)
                self.stream.copy_to_device(dst.ptr, v)
            else:
                src = as_device_array(v)
                self.stream.copy_device(dst.ptr, src.ptr, r.nbytes)
        if self.cuda_graph:
            if self.graph is None:
                self.graph = CapturedGraph(self.stream, self._enqueue)
            self.graph.replay()
        else:
            self._enqueue(self.stream)
        res = self.view(self.ll.result)
        if device_out:
            out = DeviceBuffer(res.shape, res.dtype)
            self.stream.copy_device(out.ptr, res.ptr, res.nbytes)
            self.stream.synchronize()
            return out
        host = np.empty(res.shape, res.dtype)
        self.stream.copy_to_host(host, res.ptr)
        self.stream.synchronize()
        del keep
        return host

    def buffer_values(self) -> list[np.ndarray]:
        """The buffers' contents, copied to the host (for tests and inspection)."""
        return [b.to_numpy().view(np.float32).reshape(n.shape) for b, n in
                zip(self.buffers, self.model._buffer_nodes())]


__all__ = ["Ref", "Step", "LaunchList", "launch_list", "HostExecutor", "DeviceExecutor"]
