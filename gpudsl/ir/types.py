"""Scalar types, memories and loop mappings of gpudsl.

These are plain immutable values.  The same objects are what a user imports
(``from gpudsl import f32, SHARED, BLOCKS``) and what the IR stores.
"""
from __future__ import annotations

from dataclasses import dataclass, fields

try:  # registers numpy's "bfloat16" dtype (the JAX/TensorFlow one), a dependency
    import ml_dtypes as _ml_dtypes  # noqa: F401
    _BF16_NUMPY: str | None = "bfloat16"
except ImportError:  # pragma: no cover - an install without it has no bf16 host arrays
    _BF16_NUMPY = None


@dataclass(frozen=True)
class DType:
    """A scalar type (pickled as the module's own object: :func:`interned`).

    ``kind`` is ``"float"``, ``"int"``, ``"bool"`` or ``"index"``.  ``index`` is the
    type of control integers: sizes, index parameters, loop variables and integer
    literals; it has no fixed width (code generation picks 32 or 64 bits).
    """

    name: str
    kind: str
    bits: int
    numpy: str | None  # numpy dtype name, None for index
    ctype: str  # CUDA C spelling

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return _reduce(self)

    # ``f32[n, m]`` in an annotation is only ever parsed, never evaluated; this
    # keeps the expression harmless if Python evaluates it anyway.
    def __getitem__(self, item):
        return self

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_integer(self) -> bool:
        return self.kind in ("int", "index")

    @property
    def is_numeric(self) -> bool:
        return self.kind in ("float", "int", "index")


f16 = DType("f16", "float", 16, "float16", "__half")
bf16 = DType("bf16", "float", 16, _BF16_NUMPY, "__nv_bfloat16")
f32 = DType("f32", "float", 32, "float32", "float")
f64 = DType("f64", "float", 64, "float64", "double")
i32 = DType("i32", "int", 32, "int32", "int")
i64 = DType("i64", "int", 64, "int64", "long long")
bool_ = DType("bool", "bool", 8, "bool", "bool")
INDEX = DType("index", "index", 64, None, "long long")

# the type of a split barrier (``bar: barrier @ SHARED``, docs/language.md (synchronization)): an mbarrier
# object, never a value; not in DTYPES (no parameter, cast or arithmetic has it)
BARRIER = DType("barrier", "barrier", 64, None, "unsigned long long")

HALF_TYPES = (f16, bf16)


def numpy_dtype(ty: DType):
    """The numpy dtype of ``ty`` (bf16: ``ml_dtypes.bfloat16``, whose arithmetic
    rounds each result to bfloat16, as numpy's float16 does to binary16)."""
    import numpy as np

    if ty.numpy is None:
        raise TypeError(f"{ty.name} has no numpy dtype")
    return np.dtype(ty.numpy)


DTYPES: dict[str, DType] = {t.name: t for t in (f16, bf16, f32, f64, i32, i64, bool_)}


@dataclass(frozen=True)
class Memory:
    """Where an array lives, with every fact the layers need about it, in one place.

    - ``scope``: who sees one copy: ``"grid"`` (every thread of every block: GLOBAL,
      CONST), ``"block"`` (the threads of one block: SHARED), ``"thread"`` (REGISTER).
      The race rules follow it: grid memory can race between blocks and threads,
      block memory between the threads of a block, thread memory never.
    - ``writable``: False for CONST (read-only global memory: parameters only).
    - ``allocated_at``: the levels where an allocation may stand (``"serial"`` host
      level, ``"block"`` inside ``@ BLOCKS`` outside ``@ THREADS``, ``"thread"``); empty
      when only parameters live there.  A block-level REGISTER array holds one row per
      thread of the block.
    - ``parameter``: whether an array parameter may be declared in it.
    - ``c_qualifier``: what the generated CUDA C writes before an allocation.
    - ``async_source`` / ``async_destination``: the two ends of ``async_copy``.
    - ``holds_barriers``: where a split barrier (``bar: barrier @ SHARED``) lives.
    - ``swizzles``: whether an allocation may have a swizzled layout
      (``@ SHARED(swizzle=128)``, :mod:`gpudsl.ir.swizzle_meaning`).
    - ``warp_access``: how the performance model (:mod:`gpudsl.perf`) counts one warp's
      access: ``"sectors"`` (32-byte sectors of DRAM traffic), ``"banks"`` (bank
      conflicts), ``""`` not counted (registers; CONST, read through the read-only path).
    - ``parameter_default``: the memory of a parameter that names none.

    Layers ask these facts (``mem.per_thread``, ``mem.async_destination``...), never
    which memory it is (tests/test_memory_facts.py).
    """

    name: str
    scope: str = "grid"
    writable: bool = True
    allocated_at: frozenset = frozenset()
    parameter: bool = False
    c_qualifier: str = ""
    async_source: bool = False
    async_destination: bool = False
    holds_barriers: bool = False
    swizzles: bool = False
    warp_access: str = ""
    parameter_default: bool = False

    @property
    def per_thread(self) -> bool:
        """One copy per thread (REGISTER): no race, no address to share."""
        return self.scope == "thread"

    @property
    def per_block(self) -> bool:
        """One copy per block, seen by its threads (SHARED)."""
        return self.scope == "block"

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return _reduce(self)

    def __rmatmul__(self, other):  # ``f32[4] @ SHARED`` if ever evaluated
        return other

    def __call__(self, **layout):  # ``SHARED(swizzle=128)`` if ever evaluated
        return self


GLOBAL = Memory("GLOBAL", "grid", allocated_at=frozenset({"serial"}), parameter=True,
                async_source=True, warp_access="sectors", parameter_default=True)
SHARED = Memory("SHARED", "block", allocated_at=frozenset({"block"}),
                c_qualifier="__shared__ ", async_destination=True, holds_barriers=True,
                swizzles=True, warp_access="banks")
REGISTER = Memory("REGISTER", "thread", allocated_at=frozenset({"block", "thread"}))
CONST = Memory("CONST", "grid", writable=False, parameter=True)
MEMORIES: dict[str, Memory] = {m.name: m for m in (GLOBAL, SHARED, REGISTER, CONST)}


def param_memory(mem: Memory | None) -> Memory:
    """The memory of a parameter declared with ``mem`` (None: the default one)."""
    return mem if mem is not None else next(m for m in MEMORIES.values()
                                            if m.parameter_default)


def memory_with(**facts) -> Memory:
    """The first memory with these facts (``memory_with(scope="thread")``): for a
    message naming the memory a rule asks for."""
    return next(m for m in MEMORIES.values()
                if all(getattr(m, k) == v for k, v in facts.items()))


@dataclass(frozen=True)
class Mapping:
    """How a ``par`` loop maps onto the GPU: ``BLOCKS`` or ``THREADS``."""

    name: str

    def __repr__(self) -> str:
        return self.name

    def __reduce__(self):
        return _reduce(self)


BLOCKS = Mapping("BLOCKS")
THREADS = Mapping("THREADS")
MAPPINGS: dict[str, Mapping] = {m.name: m for m in (BLOCKS, THREADS)}
# ``par(0, c) @ CLUSTERS`` (docs/hopper.md (clusters)): the IR keeps it as a BLOCKS loop
# with ``For.cluster`` set, so only the language names it
CLUSTERS = Mapping("CLUSTERS")
MAX_CLUSTER = 8   # the portable cluster size (CUDA C Programming Guide, "Thread Block Clusters")


def _reduce(obj):
    return interned, (type(obj), tuple(getattr(obj, f.name) for f in fields(obj)))


def interned(cls, values: tuple):
    """A ``DType``, ``Memory`` or ``Mapping`` read back from a pickle (the disk caches
    of derived kernels and graphs): the module's own object where one is equal, since
    code may compare them by identity (``mapping is BLOCKS``); else a new one."""
    obj = cls(*values)
    known = {DType: (*DTYPES.values(), INDEX, BARRIER), Memory: tuple(MEMORIES.values()),
             Mapping: (BLOCKS, THREADS, CLUSTERS)}.get(cls, ())
    return next((k for k in known if k == obj), obj)


class _ParamMarker:
    """``size`` and ``index``: the annotations of integer parameters."""

    def __init__(self, name: str):
        self.name = name

    def __repr__(self) -> str:
        return self.name


size = _ParamMarker("size")
index = _ParamMarker("index")


def join_numeric(a: DType, b: DType) -> DType | None:
    """The type of ``a op b`` for arithmetic, or None when they do not mix.

    index with an integer type gives index; two float types must agree.
    """
    if a == b:
        return a
    if a.is_float and b.is_float:
        return None
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.kind == "index" or b.kind == "index":
        return INDEX
    return a if a.bits >= b.bits else b
