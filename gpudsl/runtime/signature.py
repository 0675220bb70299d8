"""Kernel signatures and argument packing, shared by the emulator and the GPU launcher.

Codegen describes each ``extern "C" __global__`` kernel by a :class:`KernelSig`: its name
and the C types of its parameters (``"float*"``, ``"const float* __restrict__"``, ``"int"``,
``"long long"``, ``"float"``, ``"double"``, ...).  :func:`pack_args` checks a launch's
arguments against it and lays them out as 64-bit slots, one per parameter, each holding
the value in its low bytes: exactly what ``cuLaunchKernel`` needs behind its ``void**``
and what the emulator's launcher reads.

Scalars must be numpy scalars of the exact type (``np.int32`` for ``int``, ``np.float32``
for ``float``) or plain Python ``int``/``float``/``bool``, which are converted after a
range check.  A numpy scalar of another type is refused: it usually hides a bug.
"""
from __future__ import annotations

import ctypes
import re
import struct
from dataclasses import dataclass, field
from typing import Any, Callable

import numpy as np

from gpudsl.errors import LaunchError

# base C type → (code as the emulator's C++ side prints it, numpy dtype name or None)
_BASE: dict[str, tuple[str, str | None]] = {}


def _add(names: str, code: str, dtype: str | None) -> None:
    for n in names.split("|"):
        _BASE[n] = (code, dtype)


_add("float", "f", "float32")
_add("double", "d", "float64")
_add("int|signed|signed int|int32_t", "i", "int32")
_add("unsigned|unsigned int|uint32_t", "I", "uint32")
_add("long|long int|long long|long long int|int64_t|ptrdiff_t|ssize_t|signed long long",
     "l", "int64")
_add("unsigned long|unsigned long int|unsigned long long|unsigned long long int|uint64_t|size_t",
     "L", "uint64")
_add("short|short int|int16_t", "s", "int16")
_add("unsigned short|unsigned short int|uint16_t", "S", "uint16")
_add("char|signed char|int8_t", "b", "int8")
_add("unsigned char|uint8_t", "B", "uint8")
_add("bool", "?", "bool")
_add("__half|half", "h", "float16")
_add("__nv_bfloat16|nv_bfloat16", "H", None)
_add("void", "v", None)

_SCALAR_FMT = {"f": "<f", "d": "<d", "i": "<i", "I": "<I", "l": "<q", "L": "<Q", "s": "<h",
               "S": "<H", "b": "<b", "B": "<B", "?": "<?", "h": "<e"}


@dataclass(frozen=True)
class Param:
    """One parsed kernel parameter."""

    ctype: str          # as written by codegen
    base: str           # base type, qualifiers removed
    pointer: bool
    const: bool         # pointee is const (pointers only)
    code: str           # "*f", "i", ... as the emulator's C++ side reports it
    dtype: np.dtype | None  # element dtype for pointers, value dtype for scalars


def parse_ctype(ctype: str) -> Param:
    """Parse a parameter type such as ``"const float* __restrict__"``."""
    t = re.sub(r"\b(__restrict__|__restrict|restrict|volatile)\b", " ", ctype)
    depth = t.count("*")
    if depth > 1:
        raise LaunchError(f"unsupported kernel parameter type {ctype!r} (pointer to pointer)")
    head = t.split("*")[0] if depth else t
    const = bool(re.search(r"\bconst\b", head))
    words = re.sub(r"\bconst\b", " ", t.replace("*", " ")).split()
    base = " ".join(words)
    if base not in _BASE:
        raise LaunchError(f"unsupported kernel parameter type {ctype!r}",
                          hint="use float, double, int, unsigned, long long, short, char, bool, "
                               "__half or __nv_bfloat16, or a pointer to one")
    code, dt = _BASE[base]
    if not depth and base == "void":
        raise LaunchError(f"a kernel parameter cannot have type {ctype!r}")
    return Param(ctype, base, bool(depth), const and bool(depth), ("*" if depth else "") + code,
                 np.dtype(dt) if dt else None)


@dataclass(frozen=True)
class KernelSig:
    """A kernel's name and parameter C types (optionally names, for error messages)."""

    name: str
    param_types: tuple[str, ...]
    param_names: tuple[str, ...] | None = None
    params: tuple[Param, ...] = field(init=False, repr=False, compare=False)

    def __post_init__(self):
        if not re.fullmatch(r"[A-Za-z_]\w*", self.name):
            raise LaunchError(f"bad kernel name {self.name!r}")
        object.__setattr__(self, "param_types", tuple(self.param_types))
        if self.param_names is not None:
            object.__setattr__(self, "param_names", tuple(self.param_names))
            if len(self.param_names) != len(self.param_types):
                raise LaunchError(f"kernel {self.name}: {len(self.param_names)} names for "
                                  f"{len(self.param_types)} parameters")
        object.__setattr__(self, "params", tuple(parse_ctype(t) for t in self.param_types))

    def codes(self) -> str:
        """Type codes as ``gpudsl_sig_<name>()`` returns them, e.g. ``"*f,*f,i,"``."""
        return "".join(p.code + "," for p in self.params)

    def pname(self, i: int) -> str:
        if self.param_names:
            return f"parameter {i} ({self.param_names[i]}: {self.param_types[i]})"
        return f"parameter {i} ({self.param_types[i]})"


class ArgSlots:
    """64-bit slots holding packed arguments, plus the objects that must stay alive."""

    def __init__(self, n: int):
        self.buf = (ctypes.c_uint64 * max(n, 1))()
        self.keep: list[Any] = []

    @property
    def address(self) -> int:
        return ctypes.addressof(self.buf)

    def pointer_array(self) -> ctypes.Array:
        """A ``void*[n]`` whose entries point at the slots (``cuLaunchKernel``'s params)."""
        n = len(self.buf)
        base = self.address
        arr = (ctypes.c_void_p * n)(*[base + 8 * i for i in range(n)])
        self.keep.append(arr)
        return arr


def _scalar_bytes(sig: KernelSig, i: int, p: Param, v: Any) -> bytes:
    fmt = _SCALAR_FMT.get(p.code)
    if fmt is None:
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} cannot be passed from Python")
    if isinstance(v, np.generic):
        if v.dtype != p.dtype:
            raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} needs a {p.dtype} value, "
                              f"got numpy {v.dtype}",
                              hint=f"wrap the value as np.{p.dtype}(...)")
        return v.tobytes()
    if isinstance(v, bool) or p.code == "?":
        if not isinstance(v, bool) or p.code != "?":
            raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} got {type(v).__name__} {v!r}")
        return struct.pack(fmt, v)
    if isinstance(v, int):
        if p.dtype.kind in "iu":
            info = np.iinfo(p.dtype)
            if not info.min <= v <= info.max:
                raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} value {v} is out of range "
                                  f"for {p.dtype}")
            return struct.pack(fmt, v)
        return struct.pack(fmt, float(v))
    if isinstance(v, float):
        if p.dtype.kind != "f":
            raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} needs an integer, got float {v!r}")
        return struct.pack(fmt, v)
    raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} needs a scalar, got {type(v).__name__}")


def pack_args(sig: KernelSig, args: list | tuple,
              pointer_of: Callable[[KernelSig, int, Param, Any], int],
              slots: ArgSlots | None = None) -> ArgSlots:
    """Check ``args`` against ``sig`` and pack them; ``pointer_of`` turns an array argument
    into an address (it validates dtype/memory space and raises LaunchError)."""
    if len(args) != len(sig.params):
        raise LaunchError(f"kernel {sig.name} takes {len(sig.params)} arguments, got {len(args)}")
    slots = slots or ArgSlots(len(args))
    raw = bytearray(8 * max(len(args), 1))
    for i, (p, v) in enumerate(zip(sig.params, args)):
        if p.pointer:
            addr = 0 if v is None else pointer_of(sig, i, p, v)
            struct.pack_into("<Q", raw, 8 * i, addr)
            slots.keep.append(v)
        else:
            b = _scalar_bytes(sig, i, p, v)
            raw[8 * i:8 * i + len(b)] = b
    ctypes.memmove(slots.address, bytes(raw), len(raw))
    return slots


def host_pointer(sig: KernelSig, i: int, p: Param, v: Any) -> int:
    """Address of a numpy array argument (emulator), after dtype/layout/writability checks."""
    if not isinstance(v, np.ndarray):
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} needs a numpy array, "
                          f"got {type(v).__name__}")
    check_array(sig, i, p, v.dtype, v.flags.c_contiguous, v.flags.writeable)
    return v.ctypes.data


def check_array(sig: KernelSig, i: int, p: Param, dtype: np.dtype, contiguous: bool,
                writeable: bool = True) -> None:
    """The checks every array argument passes, on host or device."""
    if p.dtype is not None and dtype != p.dtype:
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} needs {p.dtype} elements, got {dtype}")
    if p.dtype is None and p.base == "__nv_bfloat16" and dtype.itemsize != 2:
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} needs 2-byte elements, got {dtype}")
    if not contiguous:
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} must be a C-contiguous array",
                          hint="pass np.ascontiguousarray(x)")
    if not writeable and not p.const:
        raise LaunchError(f"kernel {sig.name}: {sig.pname(i)} is written by the kernel but the "
                          f"array is read-only")
