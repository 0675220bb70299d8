"""``graph.compile`` and :class:`Model`: a parsed graph with its constants, buffers and
memory plan, evaluated node by node through :mod:`gpudsl.ops` (the standard library's
kernels: on the GPU when there is one, else on the CPU emulator).

Chains of pointwise nodes, and pointwise nodes after a matmul, run as one fused kernel
each (:mod:`gpudsl.graph.fusion`, :mod:`gpudsl.graph.kernels`) that writes straight
into its node's place in the arena; ``model.kernels`` lists what runs.  Every other
node runs one kernel through ``gpudsl.ops``, whose output is copied into the node's
place in the arena (``gpudsl.ops`` allocates its outputs); views take no memory and no
kernel.  One translation unit per model and CUDA-graph replay are later work (issue 17).
"""
from __future__ import annotations

import numpy as np

from ..errors import Error, GraphError
from ..stdlib import ops
from . import fusion
from . import kernels as fused_kernels
from .nodes import Node, as_host_array
from .plan import Memory, Plan, plan
from .script import Graph, parse, refile, to_script

_NP = {"float32": np.float32, "int64": np.int64}
#: nodes that launch no kernel: leaves (an input is a copy into the arena) and views
_NO_KERNEL = ("InputTensor", "ConstantTensor", "BufferTensor", "ReshapeNode", "SliceNode")


def _at(node: Node, message: str, hint: str | None = None) -> GraphError:
    if node.where is None:
        return GraphError(message, hint=hint)
    line, col, src, _ = node.where
    return GraphError(message, line, col, src, hint=hint)


class Model:
    """A compiled graph.  ``evaluate({name: array})`` returns the result as numpy;
    ``memory`` is the arena's size next to the lower bound."""

    def __init__(self, graph: Graph, constants: dict, device: str):
        try:
            self._init(graph, constants, device)
        except GraphError as e:
            raise refile(e, graph.file) from None

    def _init(self, graph: Graph, constants: dict, device: str):
        self.graph = graph
        self.device = device
        self.script = graph.text
        self.constants: dict[str, np.ndarray] = {}
        for name, node in graph.constants.items():
            if name not in constants:
                raise _at(node, f"constant {name!r} was not given",
                          f"pass constants={{'{name}': array}} to compile")
            arr = as_host_array(constants[name])
            if arr.dtype.name != node.dtype or tuple(arr.shape) != node.shape:
                raise _at(node, f"constant {name!r} is {arr.dtype.name} "
                          f"{list(arr.shape)}; the script declares {node.dtype} "
                          f"{list(node.shape)}")
            self.constants[name] = arr
        for node in graph.nodes:
            if node.op == "ReplaceSliceNode":
                root = node.inputs[0]
                while root.op in ("ReshapeNode", "SliceNode", "ReplaceSliceNode"):
                    root = root.inputs[0]
                if root.op == "ConstantTensor":
                    raise _at(node, "ReplaceSliceNode writes in place and its tensor is a "
                              "ConstantTensor", "write into a BufferTensor")
        self._fuse(graph)
        self.plan: Plan = plan(*fusion.planner_view(graph.nodes, graph.result, self.groups))
        self.buffers = [np.zeros(b.shape, np.float32) for b in self._buffer_nodes()]
        self._arena = np.zeros(max(self.plan.arena_bytes, 1), np.uint8)
        #: the model's kernels as one translation unit (see :meth:`_compile_unit`)
        self.unit = self._compile_unit()

    # ------------------------------------------------------------ one translation unit

    def kernel_procs(self) -> list:
        """The procs an evaluation launches, in order, found by a dry run of the
        evaluation in which the ops pick their kernels but nothing is launched (the ops'
        choices depend on shapes only)."""
        procs: list = []
        zeros = {name: np.zeros(shape, _NP[dt]) for name, (dt, shape) in self.inputs.items()}
        self._dry = True
        try:
            with ops.running_with(lambda p, args: procs.append(p)):
                self._evaluate(zeros)
        finally:
            self._dry = False
        return procs

    def _compile_unit(self, procs: list | None = None):
        """All the model's kernels compiled into ONE translation unit
        (:func:`gpudsl.compiler.unit.compile_unit`: one NVRTC / g++ run, cached on disk
        and in memory by a key over the whole unit).  ``procs``: the procs to compile
        (a hook for a launch list built elsewhere, e.g. with fused kernels); by default
        those the node-by-node evaluation launches."""
        from ..compiler.unit import compile_unit

        procs = self.kernel_procs() if procs is None else procs
        self.unit_misses = 0
        if not procs:
            return None
        return compile_unit(list(dict.fromkeys(procs)), self.device)

    def _launch(self, proc, args: dict) -> None:
        """Run one kernel an op picked, from the model's unit."""
        if self.unit is not None and proc in self.unit:
            self.unit.launch(proc, **args)
        else:  # not expected (the ops pick by shape): the proc's own kernel, counted
            self.unit_misses += 1
            ops._kernel(proc)(**args)

    def _fuse(self, graph: Graph):
        """The fusion groups and their kernels (proved and compiled now); a group whose
        kernel cannot be built runs node by node, its reason in ``unfused``."""
        self.groups: list[fusion.Group] = []
        self.unfused: list[tuple[fusion.Group, str]] = []
        self._fused: dict[int, fused_kernels.FusedKernel] = {}
        for g in fusion.groups(graph.nodes, graph.result):
            try:
                fk = fused_kernels.build(g, graph.nodes, self.device)
            except Error as e:
                self.unfused.append((g, str(e)))
                continue
            self.groups.append(g)
            self._fused[g.last] = fk
        self._covered = {i for g in self.groups for i in g.members[:-1]}

    @property
    def kernels(self) -> list[fused_kernels.KernelEntry]:
        """The kernels one evaluation launches, in order, each with the nodes it computes
        (a fused kernel covers its whole group)."""
        out = []
        for i, node in enumerate(self.graph.nodes):
            if i in self._fused:
                fk = self._fused[i]
                out.append(fused_kernels.KernelEntry(
                    fk.name, fk.group.members,
                    tuple(self.graph.nodes[k].op for k in fk.group.members), True))
            elif i not in self._covered and node.op not in _NO_KERNEL:
                out.append(fused_kernels.KernelEntry(node.op, (i,), (node.op,), False))
        return out

    def _buffer_nodes(self):
        return [n for n in self.graph.nodes if n.op == "BufferTensor"]

    @property
    def memory(self) -> Memory:
        return self.plan.memory

    @property
    def inputs(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Input name -> (dtype, shape)."""
        return {n.attrs["name"]: (n.dtype, n.shape) for n in self.graph.nodes
                if n.op == "InputTensor"}

    # ------------------------------------------------------------ evaluation

    def _view(self, i: int) -> np.ndarray:
        node = self.graph.nodes[i]
        kind, key, off = self.plan.storage[i]
        if kind == "constant":
            base = self.constants[key].reshape(-1).view(np.uint8)
        elif kind == "buffer":
            base = self.buffers[key].reshape(-1).view(np.uint8)
        else:
            base = self._arena
        n = int(np.prod(node.shape)) * np.dtype(_NP[node.dtype]).itemsize
        return base[off:off + n].view(_NP[node.dtype]).reshape(node.shape)

    def _check_inputs(self, inputs) -> dict[str, np.ndarray]:
        if not isinstance(inputs, dict):
            raise GraphError(f"evaluate takes a dict of inputs by name, not "
                             f"{type(inputs).__name__}")
        declared = {n.attrs["name"]: n for n in self.graph.nodes if n.op == "InputTensor"}
        extra = sorted(set(inputs) - set(declared))
        if extra:
            raise GraphError(f"unknown input(s) {', '.join(map(repr, extra))}",
                             hint="the graph's inputs: " + (", ".join(declared) or "none"))
        out = {}
        for name, node in declared.items():
            if name not in inputs:
                raise _at(node, f"input {name!r} was not given")
            v = inputs[name]
            if hasattr(v, "detach") and hasattr(v, "cpu"):
                v = v.detach().cpu().numpy()
            v = np.asarray(v)
            if v.dtype.name != node.dtype:
                raise _at(node, f"input {name!r} is {v.dtype.name}; the graph declares "
                          f"{node.dtype}", f"convert with .astype(np.{node.dtype})")
            if tuple(v.shape) != node.shape:
                raise _at(node, f"input {name!r} has shape {list(v.shape)}; the graph "
                          f"declares {list(node.shape)}")
            out[name] = v
        return out

    def _check_ranges(self, values: dict[str, np.ndarray]):
        """Every ReplaceSliceNode's [begin, end) before any kernel runs, so that a bad
        range changes no buffer (the kernel checks again on the device)."""
        if getattr(self, "_dry", False):
            return
        for node in self.graph.nodes:
            if node.op != "ReplaceSliceNode":
                continue
            a, r, b, e = node.inputs
            rng = []
            for t in (b, e):
                if t.op == "InputTensor":
                    rng.append(int(values[t.attrs["name"]][0]))
                elif t.op == "ConstantTensor":
                    rng.append(int(self.constants[t.attrs["name"]][0]))
                else:  # int64 values are leaves only
                    raise _at(node, "begin and end must be int64 inputs or constants")
            begin, end = rng
            if not (0 <= begin <= end <= a.shape[0] and end - begin == r.shape[0]):
                raise _at(node, f"ReplaceSliceNode: the range [{begin}, {end}) is outside "
                          f"the first axis of length {a.shape[0]} or does not hold the "
                          f"replacement's {r.shape[0]} rows; nothing was written")

    def evaluate(self, inputs: dict) -> np.ndarray:
        """Run the graph on ``inputs`` (name -> numpy array or torch tensor); returns
        the result as a new numpy array.  Buffers keep their contents across calls."""
        try:
            if isinstance(inputs, dict) and any(map(_on_device, inputs.values())):
                return self._evaluate_device(inputs)
            with ops.running_with(self._launch):
                return self._evaluate(inputs)
        except GraphError as e:
            raise refile(e, self.graph.file) from None

    def _evaluate(self, inputs: dict) -> np.ndarray:
        values = self._check_inputs(inputs)
        self._check_ranges(values)
        nodes = self.graph.nodes
        pos = {id(n): i for i, n in enumerate(nodes)}
        for i, node in enumerate(nodes):
            op = node.op
            if op in ("ConstantTensor", "BufferTensor", "ReshapeNode", "SliceNode"):
                continue  # their memory is already in place
            if i in self._covered:
                continue  # computed by its group's fused kernel
            if i in self._fused:
                fk = self._fused[i]
                try:
                    fk.run(self._view)
                except Error as e:
                    raise _at(node, f"fused kernel {fk.name}: {e.raw_message}",
                              e.hint) from None
                continue
            args = [self._view(pos[id(m)]) for m in node.inputs]
            try:
                if op == "InputTensor":
                    self._view(i)[...] = values[node.attrs["name"]]
                    continue
                if op == "ReplaceSliceNode":
                    ops.replace_slice(args[0], args[1], args[2], args[3])
                    continue
                if op == "SumNode":
                    out = ops.add(*args)
                elif op == "HadamardProductNode":
                    out = ops.mul(*args)
                elif op == "MatMulNode":
                    out = ops.matmul(*args)
                elif op == "ReLUNode":
                    out = ops.relu(args[0])
                elif op == "SiLUNode":
                    out = ops.silu(args[0])
                elif op == "PermuteNode":
                    out = ops.permute(args[0], node.attrs["perm"])
                elif op == "RMSNormNode":
                    out = ops.rms_norm(args[0], args[1])
                elif op == "ComplexHadamardProductNode":
                    out = ops.complex_hadamard_product(args[0], args[1])
                elif op == "SlicedSoftmaxNode":
                    out = ops.sliced_softmax(args[0], args[1] if len(args) == 2
                                             else node.attrs["prefix"])
                else:  # pragma: no cover  (the parser refuses other nodes)
                    raise _at(node, f"{op} cannot run")
            except GraphError:
                raise
            except Error as e:
                raise _at(node, f"{op}: {e.raw_message}", e.hint) from None
            self._view(i)[...] = out
        return np.array(self._view(pos[id(self.graph.result)]), copy=True)

    # ------------------------------------------------------------ on the GPU

    def _evaluate_device(self, inputs: dict, cuda_graph: bool = True):
        """Device arrays in (PyTorch / CuPy / gpudsl's; numpy inputs allowed beside
        them), a device array out (a gpudsl DeviceBuffer, ``__cuda_array_interface__``),
        no host round trip: :class:`gpudsl.graph.launches.DeviceExecutor`, its
        evaluation captured as a CUDA graph at the first call and replayed after."""
        from ..runtime.interop import as_device_array

        if self.device != "cuda":
            raise GraphError("device arrays were passed but this model runs on the "
                             "emulator", hint="pass numpy arrays")
        declared = {n.attrs["name"]: n for n in self.graph.nodes if n.op == "InputTensor"}
        extra = sorted(set(inputs) - set(declared))
        if extra:
            raise GraphError(f"unknown input(s) {', '.join(map(repr, extra))}",
                             hint="the graph's inputs: " + ", ".join(declared))
        values, host = {}, {}
        for name, node in declared.items():
            if name not in inputs:
                raise _at(node, f"input {name!r} was not given")
            v = inputs[name]
            d = np.asarray(v) if not _on_device(v) else as_device_array(v)
            if np.dtype(d.dtype).name != node.dtype or tuple(d.shape) != node.shape:
                raise _at(node, f"input {name!r} is {np.dtype(d.dtype).name} "
                          f"{list(d.shape)}; the graph declares {node.dtype} "
                          f"{list(node.shape)}")
            if _on_device(v) and not d.c_contiguous:
                raise _at(node, f"input {name!r} is not contiguous",
                          "pass x.contiguous()")
            values[name] = v if _on_device(v) else d
            if node.dtype == "int64":  # begin / end: 8 bytes read for the range check
                host[name] = d if not _on_device(v) else _read_int64(d)
        self._check_ranges(host)
        if getattr(self, "_device_exec", None) is None:
            from ..compiler.unit import compile_unit
            from .launches import DeviceExecutor, launch_list

            ll = launch_list(self)
            self._device_exec = DeviceExecutor(self, ll, compile_unit(ll.procs, "cuda"),
                                               cuda_graph)
        return self._device_exec.run(values, device_out=True)

    def reset_buffers(self):
        """Zero every BufferTensor."""
        for b in self.buffers:
            b[...] = 0


def _on_device(v) -> bool:
    """A device array (not numpy, not a CPU tensor)."""
    if isinstance(v, np.ndarray):
        return False
    if hasattr(v, "__cuda_array_interface__"):
        return True
    if hasattr(v, "__dlpack_device__"):
        try:
            return int(v.__dlpack_device__()[0]) in (2, 13)
        except Exception:
            return False
    return False


def _read_int64(d) -> np.ndarray:
    """A one-element int64 device array's value, copied to the host."""
    from ..runtime.device import _cu, check, synchronize

    out = np.zeros(1, np.int64)
    synchronize()
    check(_cu().cuMemcpyDtoH_v2(out.ctypes.data, d.ptr, 8), "cuMemcpyDtoH")
    return out


def compile(graph, constants: dict | None = None, device: str | None = None,  # noqa: A001
            file: str = "<script>") -> Model:
    """Compile a graph (a node built with the Python API, or script text) into a
    :class:`Model`.  ``constants`` gives the script's ConstantTensors by name (a node's
    own constants are taken from it).  ``device``: ``"cuda"``, ``"emulator"`` or None
    (the GPU when there is one, else the emulator)."""
    consts = dict(constants or {})
    if isinstance(graph, Node):
        text, own = to_script(graph)
        consts = {**own, **consts}
    elif isinstance(graph, str):
        text = graph
    else:
        raise GraphError(f"compile takes a graph node or script text, not "
                         f"{type(graph).__name__}")
    where = ops.target()
    if device not in (None, "cuda", "emulator"):
        raise GraphError(f"device must be 'cuda' or 'emulator', not {device!r}")
    if device == "cuda" and where != "cuda":
        raise GraphError("device='cuda' but no GPU and driver were found",
                         hint="use device='emulator' (or None: the GPU when there is one)")
    if device == "emulator" and where == "cuda":
        raise GraphError("device='emulator' on a machine with a GPU is not supported in "
                         "this version: gpudsl.ops runs on the GPU there",
                         hint="use device=None or 'cuda'")
    return Model(parse(text, file), consts, where)
