"""The two executors of a model's launch list (``gpudsl.graph.launches``), its
buffers' one state, and the checks of evaluation inputs.

- ``HostExecutor``: the model's arena, constants and buffers in host memory
  (numpy), every step launched from the model's unit: ``Model.evaluate`` on the
  emulator.  (On a GPU it would copy every array in and out around every launch; the
  model never uses it there.)
- ``DeviceExecutor`` (GPU): arena, constants and buffers in device memory, every
  step bound once (the pointers never move; TMA kernels' tensor maps are built then,
  before any capture, and held by the executor), run on a stream of its own: eagerly,
  or captured once as a CUDA graph and replayed.  ``Model.evaluate`` on a GPU model,
  with device arrays (a device result) or numpy arrays (a numpy result).
- ``BufferState``: the model's ``BufferTensor`` s are ONE state, held by the
  host (``model.buffers``) or by a device executor; a path that needs them where they
  are not copies them over first (see the class).
"""
from __future__ import annotations

import collections

import numpy as np

from ..errors import GraphError
from ..runtime.device import DeviceBuffer
from ..runtime.graphs import CapturedGraph
from ..runtime.interop import as_device_array
from ..runtime.launch import bind_tensor_maps, caller_stream
from ..runtime.torch_tensors import check_grad, host_view, is_torch
from .launches import _NP, LaunchList, Ref, at, check_faults


class BufferState:
    """The model's buffers.  ``host()`` gives them as numpy arrays (the same arrays on
    every call), first copying them back from the device executor that holds them, if
    one does; ``to_device(ex)`` hands them to ``ex`` (``ex.upload(arrays)``) unless it
    holds them already.  So an evaluation on either path, or a read or write of
    ``model.buffers``, always sees what the last evaluation on any path wrote."""

    def __init__(self, shapes, dtypes=None):
        self._host = [np.zeros(s, np.dtype(d)) for s, d in
                      zip(shapes, dtypes or ["float32"] * len(shapes))]
        #: the executor holding the buffers, or None: the host does
        self.holder = None

    def host(self) -> list[np.ndarray]:
        if self.holder is not None:
            self.holder.download(self._host)
            self.holder = None
        return self._host

    def to_device(self, ex) -> None:
        if self.holder is ex:
            return
        ex.upload(self.host())
        self.holder = ex


class HostExecutor:
    """Runs a launch list on the model's host memory from its unit."""

    def __init__(self, model, ll: LaunchList, unit):
        self.model, self.ll, self.unit = model, ll, unit
        self.temps = {k: v.copy() for k, v in ll.temps.items()}
        self.names = {id(s.proc): unit.name_of(s.proc) for s in ll.steps}  # unit: None
        # only when the list has no steps (a graph of inputs and views)

    def view(self, r: Ref, buffers) -> np.ndarray:
        m = self.model
        if r.kind == "temp":
            base = self.temps[r.key].reshape(-1).view(np.uint8)
        elif r.kind == "arena":
            base = m._arena
        elif r.kind == "constant":
            base = m.constants[r.key].reshape(-1).view(np.uint8)
        else:
            base = buffers[r.key].reshape(-1).view(np.uint8)
        return base[r.offset:r.offset + r.nbytes].view(_NP[r.dtype]).reshape(r.shape)

    def run(self, values: dict[str, np.ndarray], buffers=None) -> np.ndarray:
        """``values``: input name -> numpy array (checked); ``buffers``: the buffers to
        run on (default: the model's, brought to the host)."""
        buffers = self.model.buffers if buffers is None else buffers
        for name, r in self.ll.inputs.items():
            self.view(r, buffers)[...] = values[name]
        for s in self.ll.steps:
            self.unit.launch(self.names[id(s.proc)], **{
                k: self.view(v, buffers) if isinstance(v, Ref) else v
                for k, v in s.args.items()})
        if self.ll.errors and self.temps["err"].any():
            flags = self.temps["err"].copy()
            self.temps["err"][...] = 0
            check_faults(self.ll, flags, self.model.graph.nodes)
        return np.array(self.view(self.ll.result, buffers), copy=True)


class DeviceExecutor:
    """Runs a launch list on the GPU (see the module's text).  A call copies the inputs
    in (host → device, or device → device for device arrays: no host round trip), then
    launches every kernel on the executor's stream, or, with ``cuda_graph=True``,
    replays the CUDA graph captured at the first call."""

    def __init__(self, model, ll: LaunchList, unit, cuda_graph: bool = True):
        from ..runtime.device import DeviceBuffer
        from ..runtime.graphs import Stream

        self.model, self.ll, self.unit, self.cuda_graph = model, ll, unit, cuda_graph
        self.arena = DeviceBuffer.zeros(max(model.plan.arena_bytes, 1), np.uint8)
        self.constants = {k: DeviceBuffer.from_numpy(v.reshape(-1).view(np.uint8))
                          for k, v in model.constants.items()}
        # zeros until the model's buffer state hands the buffers over (upload)
        self.buffers = [DeviceBuffer.zeros(b.nbytes, np.uint8) for b in model._state._host]
        self.temps = {k: DeviceBuffer.from_numpy(v.reshape(-1).view(np.uint8))
                      for k, v in ll.temps.items()}
        self.stream = Stream()
        self.graph = None
        #: where each input is copied to, and the result's view: fixed
        self.destinations = [(name, self.view(r).ptr, r.nbytes)
                             for name, r in ll.inputs.items()]
        self.result = self.view(ll.result)
        if unit is not None and hasattr(unit.backend, "load"):
            unit.backend.load()   # the module loaded now, not while a capture runs
        # every step bound once: (work buffers by name, launches), the launches' tensor
        # maps built now (never while a capture runs: that would allocate) and held by
        # them as long as this executor and its captured graph live
        self.prepared = []
        for s in ll.steps:
            b, temporaries, launches = self.unit.prepare(
                self.unit.name_of(s.proc),
                **{k: self.view(v) if isinstance(v, Ref) else v for k, v in s.args.items()})
            work = {name: a.device for name, a in b.arrays.items()}
            for name, shape, dt in temporaries:  # a proc's GLOBAL temporaries, kept
                work[name] = DeviceBuffer.zeros(shape, dt)
            self.prepared.append((work, bind_tensor_maps(launches, work, self.stream)))

    def view(self, r: Ref):
        """A device view (no copy) of the bytes ``r`` names."""
        from ..runtime.interop import DeviceArray

        base = {"arena": lambda: self.arena, "constant": lambda: self.constants[r.key],
                "buffer": lambda: self.buffers[r.key],
                "temp": lambda: self.temps[r.key]}[r.kind]()
        return DeviceArray(base.ptr + r.offset, tuple(r.shape), np.dtype(_NP[r.dtype]),
                           owner=base)

    def update_constant(self, name: str, value: np.ndarray) -> None:
        """Overwrite constant ``name``'s device copy in place (the captured graph and
        the prepared launches read it where it is)."""
        self.stream.copy_to_device(self.constants[name].ptr,
                                   np.ascontiguousarray(value).reshape(-1).view(np.uint8))
        self.stream.synchronize()

    # the buffer state's protocol: the buffers' bytes in and out, in place
    def upload(self, host: list[np.ndarray]) -> None:
        for d, h in zip(self.buffers, host):
            self.stream.copy_to_device(d.ptr, np.ascontiguousarray(h))
        self.stream.synchronize()

    def download(self, host: list[np.ndarray]) -> None:
        for d, h in zip(self.buffers, host):
            self.stream.copy_to_host(h, d.ptr)  # h: a C-contiguous array of its own
        self.stream.synchronize()

    def _enqueue(self, stream) -> None:
        for work, launches in self.prepared:
            self.unit.backend.enqueue(work, launches, stream)

    def run(self, values: dict, device_out: bool):
        """``values``: input name -> numpy array or device array (checked by the
        model).  Returns the result: a new device buffer, or a numpy array."""
        keep = []  # the buffers are here: Model._run_on handed them over
        devices = [v for v in values.values() if not isinstance(v, np.ndarray)]
        if devices:   # device inputs: read after the caller's stream wrote them
            self.stream.wait_for(caller_stream(devices))
        for name, ptr, nbytes in self.destinations:
            v = values[name]
            if isinstance(v, np.ndarray):
                v = np.ascontiguousarray(v)
                keep.append(v)
                self.stream.copy_to_device(ptr, v)
            else:
                self.stream.copy_device(ptr, as_device_array(v).ptr, nbytes)
        if self.cuda_graph:
            if self.graph is None:
                self.graph = CapturedGraph(self.stream, self._enqueue)
            self.graph.replay()
        else:
            self._enqueue(self.stream)
        res = self.result
        if device_out:
            out = DeviceBuffer(res.shape, res.dtype)
            self.stream.copy_device(out.ptr, res.ptr, res.nbytes)
        else:
            out = np.empty(res.shape, res.dtype)
            self.stream.copy_to_host(out, res.ptr)
        if self.ll.errors:  # the fault flags: one small read back
            flags = np.empty(len(self.ll.errors), np.int32)
            self.stream.copy_to_host(flags, self.temps["err"].ptr)
        self.stream.synchronize()
        del keep
        if self.ll.errors and flags.any():
            self.stream.copy_to_device(self.temps["err"].ptr, np.zeros_like(flags))
            self.stream.synchronize()
            check_faults(self.ll, flags, self.model.graph.nodes)
        return out


# ------------------------------------------------------------------ inputs


def check_inputs(model, inputs) -> dict[str, np.ndarray]:
    """numpy inputs (torch CPU tensors converted) by name, checked against the graph's
    InputTensors: names, dtypes and shapes."""
    declared = _declared(model, inputs)
    out = {}
    for name, node in declared.items():
        v = inputs[name]
        if is_torch(v):
            v = host_view(f"input {name!r}", v, GraphError)
        v = np.asarray(v)
        if v.dtype not in _NAMED[node.dtype] and v.dtype.name != node.dtype:
            raise at(node, f"input {name!r} is {v.dtype.name}; the graph declares "
                     f"{node.dtype}", f"convert with .astype(np.{node.dtype})")
        if tuple(v.shape) != node.shape:
            raise at(node, f"input {name!r} has shape {list(v.shape)}; the graph "
                     f"declares {list(node.shape)}")
        _NAMED[node.dtype].add(v.dtype)
        out[name] = v
    return out


#: dtype name -> the numpy dtypes seen to have that name (``dtype.name`` is slow)
_NAMED: dict = collections.defaultdict(set)


def check_device_inputs(model, inputs) -> tuple[dict, dict]:
    """Device arrays (numpy allowed beside them) by name, checked: ``(values, host)``,
    ``host`` the int64 inputs' values read back (8 bytes each) for the range checks."""
    from ..runtime.interop import as_device_array

    values, host = {}, {}
    for name, node in _declared(model, inputs).items():
        v = inputs[name]
        if is_torch(v):
            if v.device.type == "cpu":
                v = host_view(f"input {name!r}", v, GraphError)
            else:
                check_grad(f"input {name!r}", v, GraphError)
                v = v.detach()
        d = np.asarray(v) if not on_device(v) else as_device_array(v)
        dtype = d.dtype_name if on_device(v) else np.dtype(d.dtype).name
        if dtype != node.dtype or tuple(d.shape) != node.shape:
            raise at(node, f"input {name!r} is {dtype} {list(d.shape)}; "
                     f"the graph declares {node.dtype} {list(node.shape)}")
        if on_device(v) and not d.c_contiguous:
            raise at(node, f"input {name!r} is not contiguous", "pass x.contiguous()")
        values[name] = v if on_device(v) else d
        if node.dtype == "int64":
            host[name] = d if not on_device(v) else _read_int64(d)
    return values, host


def _declared(model, inputs) -> dict:
    if not isinstance(inputs, dict):
        raise GraphError(f"evaluate takes a dict of inputs by name, not "
                         f"{type(inputs).__name__}")
    hit = model.__dict__.get("_declared_inputs")
    if hit is None:   # the graph's inputs, found once
        declared = {n.attrs["name"]: n for n in model.graph.nodes if n.op == "InputTensor"}
        # inputs the script declares but the result does not use may be given (ignored)
        known = set(declared) | set(getattr(model.graph, "inputs", None) or ())
        hit = model._declared_inputs = (declared, frozenset(known))
    declared, known = hit
    extra = sorted(set(inputs) - known, key=repr)  # keys of any type: no TypeError
    if extra:
        raise GraphError(f"unknown input(s) {', '.join(map(repr, extra))}",
                         hint="the graph's inputs: " + (", ".join(declared) or "none"))
    for name, node in declared.items():
        if name not in inputs:
            raise at(node, f"input {name!r} was not given")
    return declared


def on_device(v) -> bool:
    """A device array (not numpy, not a CPU tensor)."""
    if isinstance(v, np.ndarray):
        return False
    if is_torch(v):  # its flag: torch's interface raises for a tensor requiring grad
        return v.device.type == "cuda"
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


__all__ = ["BufferState", "HostExecutor", "DeviceExecutor", "check_inputs",
           "check_device_inputs", "on_device"]
