"""The fast path of a kernel call: what the first call of a signature worked out, kept.

A call's *signature* is everything about its arguments that the checks and the launch
plan depend on: per argument its Python type, and for an array its shape, strides,
dtype and writability (numpy), shape, strides, dtype, device, layout and whether it
needs a gradient (PyTorch), or shape, strides, dtype and writability (gpudsl's
``DeviceBuffer`` / ``DeviceArray``); the values of size and index parameters; which parameters
were given and how (positionally, by name).  The first call of a signature takes the
full path (``bind_arguments``: every check; the launch plan) and, when it succeeds,
leaves an *entry*: the launch plan with the sizes and launch geometry filled in and the
backend's prepared launcher.  A later call with the same signature computes the key
(a few attribute reads per argument), finds the entry, and runs a straight line:
what depends on the values alone (aliasing between arrays the proc writes, scalar
ranges and their C types) is checked again, then the launcher runs.  Anything the entry
cannot handle raises :class:`Miss`, and the full path runs (and raises its own error).

Arguments of other types (a CuPy array, a list, a tensor subclass) always take the full
path: their key is unhashable.
"""
from __future__ import annotations

import math
import operator
import sys

import numpy as np

from ..runtime.device import DeviceBuffer
from ..runtime.interop import DeviceArray
from ..runtime.launch import ArrayRef, Launch

_ND = np.ndarray
try:  # the C functions, without numpy's dispatch wrappers (numpy 2; numpy 1 below)
    from numpy._core._multiarray_umath import may_share_memory as _may_share
    from numpy._core._multiarray_umath import shares_memory as _shares
except ImportError:  # pragma: no cover
    _may_share, _shares = np.may_share_memory, np.shares_memory
_UNCACHEABLE = []   # unhashable: a key holding it is never looked up nor stored
MAX_ENTRIES = 256


class Miss(Exception):
    """The entry cannot take this call: run the full path."""


def _scalar_types():
    kinds = (np.float16, np.float32, np.float64, np.int8, np.int16, np.int32, np.int64,
             np.uint8, np.uint16, np.uint32, np.uint64, np.bool_)
    return frozenset((int, float, bool, type(None), *kinds))


_SCALARS = _scalar_types()


def describe(v):
    """The part of argument ``v``'s signature that is not a size's value."""
    t = type(v)
    if t is _ND:
        return (t, v.shape, v.strides, v.dtype, v.flags.writeable)
    if t in _SCALARS:
        return t
    torch = sys.modules.get("torch")
    if torch is not None and t is torch.Tensor:
        grad = v.requires_grad and torch.is_grad_enabled()
        return (t, v.shape, v.stride(), v.dtype, v.device, v.layout, grad)
    if t is DeviceBuffer:   # gpudsl's own device memory: C-contiguous, writable
        return (t, v.shape, v.dtype)
    if t is DeviceArray:
        return (t, v.shape, v.strides, v.dtype, v.readonly, v.bfloat16)
    return _UNCACHEABLE


class CallKey:
    """``key(args, kwargs)``: the signature key of a call of one proc's kernel and the
    values in parameter order, or ``(None, None)`` for a call whose form the full path
    must judge (mixed or unknown names, too many arguments).  Generated per proc as
    straight-line code: one line per parameter."""

    def __new__(cls, pdef):
        names = [p.name for p in pdef.params]
        n = len(names)
        lines = ["def key(args, kwargs):",
                 "    if kwargs:",
                 "        if args or not kwargs.keys() <= nameset:",
                 "            return None, None",
                 "        get = kwargs.get",
                 f"        vals = ({''.join(f'get({x!r}), ' for x in names)})",
                 "        form = 1",
                 "    else:",
                 "        pad = pads.get(len(args))",
                 "        if pad is None:",
                 "            return None, None",
                 "        vals = args + pad",
                 "        form = 0"]
        for i, p in enumerate(pdef.params):
            lines.append(f"    v = vals[{i}]; t = type(v)")
            if p.is_control:  # its value shapes the plan
                lines.append(f"    d{i} = (t, v) if t is int else t if v is None else "
                             "describe_value(v)")
            else:
                lines.append(f"    d{i} = (v.shape, v.strides, v.dtype, v.flags.writeable) "
                             f"if t is ND else t if t in SCALARS else describe(v)")
        lines.append(f"    return (form, {''.join(f'd{i}, ' for i in range(n))}), vals")
        scope = {"nameset": frozenset(names), "ND": _ND, "SCALARS": _SCALARS,
                 "describe": describe, "describe_value": _describe_value,
                 "pads": {k: (None,) * (n - k) for k in range(n + 1)}}
        exec("\n".join(lines), scope)  # noqa: S102  (code made of parameter indices)
        return scope["key"]


def _describe_value(v):
    """``describe`` for an argument whose value is part of its signature (sizes and
    index parameters given as numpy integers), else ``describe``."""
    if isinstance(v, np.integer):
        return (type(v), int(v))
    return describe(v)


# ----------------------------------------------------------------- entries


def scalar_converter(ty):
    """The C-typed value a scalar parameter of type ``ty`` gets (the full path's
    conversion, with its range checks raising :class:`Miss`)."""
    if ty.kind == "bool":
        return np.bool_
    conv = np.dtype(ty.numpy).type
    if ty.kind != "int":
        return conv
    info = np.iinfo(np.dtype(ty.numpy))
    lo, hi = int(info.min), int(info.max)

    def int_scalar(v):
        if not lo <= v <= hi:
            raise Miss
        return conv(v)
    return int_scalar


def _host_view(name):
    from ..runtime.torch_tensors import host_view
    from ..errors import LaunchError

    return lambda v: host_view(name, v, LaunchError)


def _overlap(a, b) -> bool:
    """Whether the buffers of two arguments share memory (as ``arrays_overlap``)."""
    if type(a) is _ND:
        if type(b) is not _ND:
            return False
        try:
            return bool(_shares(a, b, 100_000))
        except Exception:  # numpy.exceptions.TooHardError
            return bool(_may_share(a, b))
    if type(b) is _ND:
        return False
    (l1, h1), (l2, h2) = _byte_range(a), _byte_range(b)
    return l1 < h2 and l2 < h1


def _byte_range(v) -> tuple[int, int]:
    t = type(v)
    if t is DeviceBuffer:
        return v.ptr, v.ptr + v.nbytes
    if t is DeviceArray:   # its nbytes property goes through numpy: slower
        return v.ptr, v.ptr + math.prod(v.shape) * v.dtype.itemsize
    if hasattr(v, "data_ptr"):   # torch
        lo = v.data_ptr()
        return lo, lo + v.numel() * v.element_size()
    from ..runtime.interop import as_device_array

    d = as_device_array(v)
    return d.ptr, d.ptr + d.nbytes


def build_entry(pdef, bound, launches: list[Launch], temporaries: list, backend,
                written: set):
    """The entry of the signature of the call ``bound`` (checked by the full path), or
    None when the backend has no prepared launcher for it.  ``launches`` hold scalars
    as references by name."""
    prepare = getattr(backend, "launcher", None)
    if prepare is None:
        return None
    launch = prepare(launches, temporaries, bound.arrays)
    if launch is None:
        return None
    index = {p.name: i for i, p in enumerate(pdef.params)}
    arrays, direct = [], True
    for name, a in bound.arrays.items():
        if a.host is not None and type(a.value) is not _ND:
            arrays.append((index[name], name, _host_view(f"'{name}' of {pdef.name}")))
            direct = False
        else:
            arrays.append((index[name], name, None))
    scalars = [(index[p.name], p.name, scalar_converter(p.ty))
               for p in pdef.params if p.name in bound.scalars]
    names = [n for _, n, _ in arrays]
    pairs = [(names.index(a), names.index(b)) for i, a in enumerate(names)
             for b in names[i + 1:] if a in written or b in written]
    return _entry(tuple(arrays), tuple(scalars), tuple(pairs), launch, direct)


def _entry(arrays, scalars, pairs, launch, direct):
    names = tuple(name for _, name, _ in arrays)
    take = operator.itemgetter(*(i for i, _, _ in arrays)) if arrays else None
    if len(arrays) == 1:  # itemgetter of one index gives the item, not a tuple
        one = take
        take = lambda vals: (one(vals),)  # noqa: E731
    views = tuple((name, view) for _, name, view in arrays if view is not None)

    def call(vals):
        bufs = take(vals) if take is not None else ()
        work = dict(zip(names, bufs))
        if not direct:
            for name, view in views:
                work[name] = view(work[name])
            bufs = [work[name] for name in names]
        for i, j in pairs:
            x, y = bufs[i], bufs[j]
            if type(x) is _ND and type(y) is _ND:  # _overlap, inline for numpy arrays
                try:
                    shared = _shares(x, y, 100_000)
                except Exception:  # numpy.exceptions.TooHardError: the full path judges
                    raise Miss from None
                if shared:
                    raise Miss
            elif _overlap(x, y):
                raise Miss
        for i, name, conv in scalars:
            work[name] = conv(vals[i])
        return launch(work)
    return call


def by_name(launches: list[Launch], scalar_ref) -> list[Launch]:
    """``launches`` with each scalar reference (``scalar_ref`` instances) made an
    ``ArrayRef``: a launcher reads both from the call's work by name."""
    return [Launch(ln.kernel, ln.grid, ln.block,
                   tuple(ArrayRef(a.name) if isinstance(a, scalar_ref) else a
                         for a in ln.args), ln.dynamic_shared_bytes) for ln in launches]


__all__ = ["CallKey", "Miss", "build_entry", "by_name", "describe", "MAX_ENTRIES"]
