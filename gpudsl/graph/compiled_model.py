"""``graph.compile`` and ``Model``: a parsed graph with its constants, buffers,
memory plan and ONE launch list, compiled as ONE translation unit.

At compile time: the fusion groups (``gpudsl.graph.fusion``; each group's kernel
derived and proved, ``gpudsl.graph.kernels``), the memory plan (each group one node),
the launch list (``gpudsl.graph.launches``: fused kernels, the standard library's
kernel for every other computing node, views as nothing, inputs as copies) and every
proc of that list compiled into one unit (``gpudsl.compiler.unit.compile_unit``,
cached: a second compile of the same model builds nothing).  ``model.kernels`` lists the
launch list's steps.  Evaluation runs the list (``gpudsl.graph.executors``): numpy
inputs on the host executor (the emulator, or the GPU with copies), device arrays on the
device executor (device memory, one CUDA graph replayed).  The buffers are one state
shared by both paths.
"""
from __future__ import annotations

import threading

import numpy as np

from ..autotune.db import recording_lookups
from ..errors import Error, GraphError
from ..runtime.torch_tensors import from_device, from_host, is_torch, torch_module
from ..stdlib import array_ops as ops
from . import graph_cache
from . import fusion
from . import kernels as fused_kernels
from .executors import (BufferState, HostExecutor, check_device_inputs, check_inputs,
                        on_device)
from .launches import LaunchList, at, launch_list
from .graph_nodes import Node, as_host_array
from .memory_plan import Memory, Plan, plan
from .script import Graph, parse, refile, to_script

_at = at


class Model:
    """A compiled graph.  ``evaluate({name: array})`` returns the result as numpy;
    ``memory`` is the arena's size next to the lower bound.

    Thread safety: a model has one arena and one set of buffers, so evaluations of one
    model from several threads take turns (a lock per model, held for the whole
    evaluation); evaluations of different models run concurrently."""

    def __init__(self, graph: Graph, constants: dict, device: str, cuda_graph: bool = True):
        self._lock = threading.RLock()
        #: on a GPU, the evaluation is captured as one CUDA graph at its first call and
        #: replayed after (False: every kernel launched at every call)
        self.cuda_graph = bool(cuda_graph)
        try:
            self._init(graph, constants, device)
        except GraphError as e:
            raise refile(e, graph.file) from None

    def _init(self, graph: Graph, constants: dict, device: str):
        self.graph = graph
        self.device = device
        self.script = graph.text
        self.constants: dict[str, np.ndarray] = {}
        used = {id(n) for n in graph.nodes}
        for name, node in graph.constants.items():
            if name not in constants and id(node) not in used:
                continue  # declared, unused by the result: optional, as unused inputs
            if name not in constants:
                raise _at(node, f"constant {name!r} was not given",
                          f"pass constants={{'{name}': array}} to compile")
            arr = as_host_array(constants[name])
            if arr.dtype.name != node.dtype or tuple(arr.shape) != node.shape:
                raise _at(node, f"constant {name!r} is {arr.dtype.name} "
                          f"{list(arr.shape)}; the script declares {node.dtype} "
                          f"{list(node.shape)}")
            self.constants[name] = _owned(arr, constants[name])
        for node in graph.nodes:
            if node.op == "ReplaceSliceNode":
                root = node.inputs[0]
                while root.op in ("ReshapeNode", "SliceNode", "ReplaceSliceNode"):
                    root = root.inputs[0]
                if root.op == "ConstantTensor":
                    raise _at(node, "ReplaceSliceNode writes in place and its tensor is a "
                              "ConstantTensor", "write into a BufferTensor")
        key = graph_cache.key(graph.text, graph.file, device, self.constants)
        hit = graph_cache.load(key, self.constants, self._PRODUCTS)  # read back
        if hit is not None:
            for name, value in hit.items():
                setattr(self, name, value)
            self._allocate()
        else:
            self._compile(graph, key)
        self._host = HostExecutor(self, self.launches, self.unit)
        self._device_exec = None

    #: what the disk cache keeps of a compile (gpudsl.graph.graph_cache); ``_baked``: the
    #: constants whose values the compile read (built into the kernels or the plan)
    _PRODUCTS = ("groups", "unfused", "_fused", "plan", "launches", "unit", "_baked")

    def _compile(self, graph: Graph, key: str):
        constants, self.constants = self.constants, graph_cache.Reads(self.constants)
        with recording_lookups() as lookups:
            try:
                self._fuse(graph)
                self.plan: Plan = plan(*fusion.planner_view(graph.nodes, graph.result,
                                                            self.groups))
                self._allocate()
                #: the evaluation: one launch list (fused kernels included) ...
                self.launches: LaunchList = launch_list(self)
                #: ... and all its procs as ONE translation unit (None: nothing to launch)
                self.unit = self._compile_unit()
            finally:
                read, self.constants = self.constants.read, constants
                self._baked = frozenset(read)
        graph_cache.store(key, {k: getattr(self, k) for k in self._PRODUCTS}, lookups,
                          constants, read)

    def _allocate(self):
        try:
            self._state = BufferState([b.shape for b in self._buffer_nodes()],
                                      [b.dtype for b in self._buffer_nodes()])
            self._arena = np.zeros(max(self.plan.arena_bytes, 1), np.uint8)
        except (MemoryError, ValueError) as e:  # numpy: too large for this machine
            raise GraphError(f"the model's tensors need {self.plan.arena_bytes} bytes of "
                             f"memory, more than this machine can give ({e})",
                             hint="use smaller shapes") from None

    def _compile_unit(self):
        from ..compiler.unit import compile_unit

        procs = self.launches.procs
        return compile_unit(procs, self.device) if procs else None

    def _fuse(self, graph: Graph):
        """The fusion groups and their kernels (derived and proved now); a group whose
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

    @property
    def kernels(self) -> list[fused_kernels.KernelEntry]:
        """The kernels one evaluation launches (the launch list's steps), in order, each
        with the nodes it computes (a fused kernel covers its whole group)."""
        nodes = self.graph.nodes
        return [fused_kernels.KernelEntry(s.name, s.nodes,
                                          tuple(nodes[k].op for k in s.nodes), s.fused)
                for s in self.launches.steps]

    def _buffer_nodes(self):
        return [n for n in self.graph.nodes if n.op == "BufferTensor"]

    @property
    def buffers(self) -> list[np.ndarray]:
        """The BufferTensors' contents, as numpy arrays (the same arrays every time;
        after an evaluation on device arrays, reading them copies them back first)."""
        return self._state.host()

    @property
    def memory(self) -> Memory:
        return self.plan.memory

    @property
    def inputs(self) -> dict[str, tuple[str, tuple[int, ...]]]:
        """Input name -> (dtype, shape)."""
        return {n.attrs["name"]: (n.dtype, n.shape) for n in self.graph.nodes
                if n.op == "InputTensor"}

    # ------------------------------------------------------------ evaluation

    def _int64(self, t: Node, values: dict) -> int:
        return int(self._int64s(t, values).reshape(-1)[0])

    def _int64s(self, t: Node, values: dict) -> np.ndarray:
        if t.op == "InputTensor":
            return np.asarray(values[t.attrs["name"]])
        if t.op == "ConstantTensor":
            return np.asarray(self.constants[t.attrs["name"]])
        raise _at(t, "int64 values are inputs or constants")  # pragma: no cover

    def _check_pages(self, node: Node, values: dict):
        """A paged AttentionNode's lengths and the pages they use, on the host."""
        q, k = node.inputs[0], node.inputs[1]
        table = self._int64s(node.inputs[3], values)
        lens = self._int64s(node.inputs[4], values)
        low = q.shape[1] if node.attrs["causal"] else 1
        cap = table.shape[1] * k.shape[1]
        for b, L in enumerate(lens.reshape(-1).tolist()):
            used = table[b, :-(-L // k.shape[1])] if low <= L <= cap else None
            if used is None or ((used < 0) | (used >= k.shape[0])).any():
                raise _at(node, f"PagedAttentionNode: sequence {b}'s length {L} is outside "
                          f"[{low}, {cap}] or its block table names a page outside the "
                          f"{k.shape[0]} pages; nothing was written")

    def _check_ranges(self, values: dict[str, np.ndarray]):
        """Every ReplaceSliceNode's [begin, end) and every SlicedSoftmaxNode's and
        AttentionNode's prefix given as a tensor, before any kernel runs, so that a bad value changes no buffer
        (the kernels check again on the device)."""
        nodes = self.__dict__.get("_range_nodes")
        if nodes is None:   # the graph's nodes with a range to check, found once
            nodes = self._range_nodes = [n for n in self.graph.nodes if n.op in (
                "ReplaceSliceNode", "SlicedSoftmaxNode", "PagedAttentionNode",
                "AttentionNode")]
        memo: dict = {}

        def int64(t):   # each int64 input read once per evaluation
            v = memo.get(id(t))
            if v is None:
                v = memo[id(t)] = self._int64(t, values)
            return v
        for node in nodes:
            if node.op == "ReplaceSliceNode":
                a, r, b, e = node.inputs
                begin, end = int64(b), int64(e)
                if not (0 <= begin <= end <= a.shape[0] and end - begin == r.shape[0]):
                    raise _at(node, f"ReplaceSliceNode: the range [{begin}, {end}) is "
                              f"outside the first axis of length {a.shape[0]} or does not "
                              f"hold the replacement's {r.shape[0]} rows; nothing was "
                              "written")
            elif node.op == "SlicedSoftmaxNode" and len(node.inputs) == 2:
                n = node.inputs[0].shape[-1]
                prefix = int64(node.inputs[1])
                if not 0 <= prefix <= n:
                    raise _at(node, f"SlicedSoftmaxNode: the prefix {prefix} is outside "
                              f"[0, {n}], the last axis; nothing was written")
            elif node.op == "PagedAttentionNode":
                self._check_pages(node, values)
            elif node.op == "AttentionNode" and len(node.inputs) == 4:
                m, n = node.inputs[0].shape[1], node.inputs[1].shape[1]
                low = m if node.attrs["causal"] else 1
                prefix = int64(node.inputs[3])
                if not low <= prefix <= n:
                    raise _at(node, f"AttentionNode: the prefix {prefix} is outside "
                              f"[{low}, {n}] (the keys" + (", at least the query rows "
                              "when causal" if node.attrs["causal"] else "") + "); nothing "
                              "was written")

    def evaluate(self, inputs: dict):
        """Run the graph on ``inputs`` (name -> array).  numpy arrays (or CPU torch
        tensors) in: the result as a new numpy array (a CPU tensor when a torch tensor
        was given; on a GPU model the evaluation still runs on the device, as below:
        only the inputs and the result are copied).  Device arrays in (PyTorch / CuPy
        / gpudsl's; numpy allowed beside them; a GPU model only): a new device array
        out (a CUDA tensor on the device of the first torch input, else a gpudsl
        DeviceBuffer), no host round trip, the evaluation captured as a CUDA graph at
        the first such call and replayed after.  A torch tensor that requires grad is
        refused under grad mode (no gradient is recorded).  Buffers keep their
        contents across calls, on either path.  Calls from several threads take turns
        (one lock per model)."""
        with self._lock:
            return self._evaluate(inputs)

    def _evaluate(self, inputs: dict):
        try:
            tensor = _first_tensor(inputs)  # torch in, torch out (its device)
            if isinstance(inputs, dict) and any(map(on_device, inputs.values())):
                out = self._evaluate_device(inputs)
                if tensor is not None and tensor.device.type == "cuda":
                    return from_device(out, tensor.device)
                return out
            values = check_inputs(self, inputs)
            self._check_ranges(values)
            if self.device == "cuda" and self.unit is not None:
                # host arrays in, host array out, but the model runs where its
                # constants and buffers live: on the device (its executor, its CUDA
                # graph); only the inputs and the result cross the bus
                out = self._run_on(self._device_executor(), values, device_out=False)
            else:
                out = self._host.run(values)
            return out if tensor is None else from_host(out)
        except GraphError as e:
            raise refile(e, self.graph.file) from None

    def _evaluate_device(self, inputs: dict):
        if self.device != "cuda":
            raise GraphError("device arrays were passed but this model runs on the "
                             "emulator", hint="pass numpy arrays")
        values, host = check_device_inputs(self, inputs)
        self._check_ranges(host)
        return self._run_on(self._device_executor(), values)

    def _device_executor(self):
        if self._device_exec is None:
            from .executors import DeviceExecutor

            self._device_exec = DeviceExecutor(self, self.launches, self.unit,
                                               self.cuda_graph)
        self._device_exec.cuda_graph = self.cuda_graph
        return self._device_exec

    def update_constants(self, values: dict) -> None:
        """Give ConstantTensors new values (name -> array of the declared dtype and
        shape), for the next evaluations: the model's copies are replaced, and on a GPU
        the device copies are overwritten in place, so the captured CUDA graph (which
        reads them where they are) stays valid and is replayed as before.  A constant
        whose values the compile read (built into a kernel or the plan) is refused:
        compile a new model.  The model's constants are its own read-only copies, so
        this is the only way they change."""
        with self._lock:
            new = {}
            for name, value in values.items():
                node = self.graph.constants.get(name)
                if node is None or name not in self.constants:
                    raise GraphError(f"update_constants: the model has no constant {name!r}",
                                     hint="its constants: " + ", ".join(self.constants))
                arr = as_host_array(value)
                if arr.dtype.name != node.dtype or tuple(arr.shape) != node.shape:
                    raise _at(node, f"update_constants: {name!r} is {arr.dtype.name} "
                              f"{list(arr.shape)}; the script declares {node.dtype} "
                              f"{list(node.shape)}")
                if name in self._baked:
                    raise _at(node, f"update_constants: the compile read the values of "
                              f"{name!r} (they are built into its kernels or plan)",
                              "compile a new model with the new values")
                new[name] = _owned(arr, value)
            for name, arr in new.items():
                self.constants[name] = arr
                if self._device_exec is not None:
                    self._device_exec.update_constant(name, arr)

    def _run_on(self, ex, values: dict, device_out: bool = True):
        """Run on a device executor ``ex`` (checked ``values``), the buffers handed to
        it first (copied over if the host, or another executor, holds them)."""
        self._state.to_device(ex)
        return ex.run(values, device_out=device_out)

    def reset_buffers(self):
        """Zero every BufferTensor."""
        with self._lock:
            self._state.holder = None  # the device's copy is stale: the host's zeros win
            for b in self._state._host:
                b[...] = 0


def _owned(arr: np.ndarray, given) -> np.ndarray:
    """The model's read-only copy of a constant (``arr``, made from ``given``): a
    change to the caller's array cannot reach the model behind its back (on a GPU the
    constants are uploaded once)."""
    if arr is given or arr.base is not None:   # the caller's memory (numpy, a tensor's)
        arr = arr.copy()
    arr.flags.writeable = False
    return arr


def _first_tensor(inputs):
    """The first PyTorch tensor among the inputs (the result is a tensor), or None."""
    if not isinstance(inputs, dict) or torch_module() is None:
        return None
    return next((v for v in inputs.values() if is_torch(v)), None)


def compile(graph, constants: dict | None = None, device: str | None = None,  # noqa: A001
            file: str = "<script>", cuda_graph: bool = True) -> Model:
    """Compile a graph (a node built with the Python API, or script text) into a
    ``Model``.  ``constants`` gives the script's ConstantTensors by name (a node's
    own constants are taken from it).  ``device``: ``"cuda"``, ``"emulator"`` or None
    (the GPU when there is one, else the emulator).  ``cuda_graph``: on a GPU, capture
    the evaluation as one CUDA graph at the first call and replay it (the default),
    or launch every kernel at every call (``model.cuda_graph`` can be changed later)."""
    consts = dict(constants or {})
    if isinstance(graph, Node):
        text, own = to_script(graph)
        consts = {**own, **consts}
    elif isinstance(graph, str):
        text = graph
    else:
        raise GraphError(f"compile takes a graph node or script text, not "
                         f"{type(graph).__name__}")
    where = ops.backend()
    if device not in (None, "cuda", "emulator"):
        raise GraphError(f"device must be 'cuda' or 'emulator', not {device!r}")
    if device == "cuda" and where != "cuda":
        raise GraphError("device='cuda' but no GPU and driver were found",
                         hint="use device='emulator' (or None: the GPU when there is one)")
    if device == "emulator" and where == "cuda":
        raise GraphError("device='emulator' on a machine with a GPU is not supported in "
                         "this version: gpudsl.ops runs on the GPU there",
                         hint="use device=None or 'cuda'")
    return Model(parse(text, file), consts, where, cuda_graph)
