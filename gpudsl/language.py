"""Names used inside procs.  They are recognised by the parser, never run:
calling one from Python raises with a hint."""
from __future__ import annotations

from .ir.types import (BLOCKS, CONST, GLOBAL, REGISTER, SHARED, THREADS, bf16, bool_, f16, f32,
                       f64, i32, i64, index, size)
from .ir.types import BARRIER, CLUSTERS


class constexpr:
    """A Python value procs may use by name, as Triton's ``tl.constexpr``: a number, a
    bool or a dtype, declared where it is defined::

        BLOCK = constexpr(256)        # or  BLOCK: constexpr = 256
        NEG = constexpr(-3e38)

    A proc that names ``BLOCK`` gets the value it has when ``@proc`` runs, as if written
    in place (``256``).  Variables of an enclosing function (a proc built by a factory:
    ``def make(T, BLOCK): @proc def k(x: T[n]): ...``) need no declaration; a plain module
    global does, so that a typo or a name used before its definition in a proc never
    picks up an unrelated notebook value silently.  ``int()``, ``float()`` and indexing
    see the value, so host code may use the same name."""

    __slots__ = ("value",)

    def __init__(self, value):
        if isinstance(value, constexpr):
            value = value.value
        self.value = value

    def __repr__(self) -> str:
        return f"constexpr({self.value!r})"

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        return self.value.__index__()

    def __float__(self) -> float:
        return float(self.value)

    def __bool__(self) -> bool:
        return bool(self.value)

    def __eq__(self, other) -> bool:
        return self.value == (other.value if isinstance(other, constexpr) else other)

    def __hash__(self) -> int:
        return hash(self.value)


def _arith(op: str):
    def f(self, *other):
        args = [o.value if isinstance(o, constexpr) else o for o in other]
        return constexpr(getattr(self.value, op)(*args))

    f.__name__ = op
    return f


for _op in ("__neg__", "__pos__", "__abs__", "__add__", "__radd__", "__sub__", "__rsub__",
            "__mul__", "__rmul__", "__truediv__", "__rtruediv__", "__floordiv__",
            "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__lt__", "__le__", "__gt__",
            "__ge__"):
    setattr(constexpr, _op, _arith(_op))


inf = constexpr(float("inf"))   # procs print infinities and NaNs with these names
nan = constexpr(float("nan"))


def _only_in_procs(name):
    def f(*args, **kwargs):
        raise RuntimeError(f"{name}() means something only inside a @proc")

    f.__name__ = name
    return f


par = _only_in_procs("par")
seq = _only_in_procs("seq")
sync = _only_in_procs("sync")
arrive = _only_in_procs("arrive")
wait = _only_in_procs("wait")
sync_cluster = _only_in_procs("sync_cluster")  # docs/hopper.md (clusters)
async_copy = _only_in_procs("async_copy")  # docs/async_copies.md
async_commit = _only_in_procs("async_commit")
async_wait = _only_in_procs("async_wait")
setmaxnreg = _only_in_procs("setmaxnreg")  # docs/hopper.md
wgmma = _only_in_procs("wgmma")  # docs/hopper.md (warpgroup MMA)
wgmma_commit = _only_in_procs("wgmma_commit")
wgmma_wait = _only_in_procs("wgmma_wait")
tma_load = _only_in_procs("tma_load")  # docs/hopper.md (TMA loads)
tma_store = _only_in_procs("tma_store")
tma_commit = _only_in_procs("tma_commit")
tma_wait = _only_in_procs("tma_wait")
barrier = BARRIER  # ``bar: barrier @ SHARED`` (docs/language.md (synchronization))
atomic_add = _only_in_procs("atomic_add")
atomic_min = _only_in_procs("atomic_min")
atomic_max = _only_in_procs("atomic_max")
atomic_sub = _only_in_procs("atomic_sub")
atomic_exch = _only_in_procs("atomic_exch")
atomic_cas = _only_in_procs("atomic_cas")
atomic_and = _only_in_procs("atomic_and")
atomic_or = _only_in_procs("atomic_or")
atomic_xor = _only_in_procs("atomic_xor")
atomic_inc = _only_in_procs("atomic_inc")
select = _only_in_procs("select")
exp = _only_in_procs("exp")
log = _only_in_procs("log")
sqrt = _only_in_procs("sqrt")
tanh = _only_in_procs("tanh")
sin = _only_in_procs("sin")
cos = _only_in_procs("cos")
erf = _only_in_procs("erf")
rsqrt = _only_in_procs("rsqrt")
tf32 = _only_in_procs("tf32")   # f32 read as tf32: the low 13 mantissa bits cleared
# pow(x, y) and x ** y: Python's own pow keeps its name outside procs
# warp collectives (docs/language.md (synchronization); the table is gpudsl.ir.collective_meaning)
shfl = _only_in_procs("shfl")
shfl_xor = _only_in_procs("shfl_xor")
shfl_down = _only_in_procs("shfl_down")
shfl_up = _only_in_procs("shfl_up")
ballot = _only_in_procs("ballot")
any_lanes = _only_in_procs("any_lanes")
all_lanes = _only_in_procs("all_lanes")
warp_sum = _only_in_procs("warp_sum")
warp_max = _only_in_procs("warp_max")
warp_min = _only_in_procs("warp_min")

__all__ = ["constexpr", "inf", "nan", "BLOCKS", "THREADS", "CLUSTERS", "GLOBAL", "SHARED", "REGISTER", "CONST", "f16", "bf16", "f32", "f64",
           "i32", "i64", "bool_", "size", "index", "par", "seq", "sync", "atomic_add",
           "atomic_min", "atomic_max", "atomic_sub", "atomic_exch", "atomic_cas", "atomic_and",
           "atomic_or", "atomic_xor", "atomic_inc", "select", "exp", "log", "sqrt", "tanh",
           "sin", "cos", "erf", "rsqrt", "tf32",
           "arrive", "wait", "barrier", "async_copy", "async_commit", "async_wait",
           "setmaxnreg", "sync_cluster", "wgmma", "wgmma_commit", "wgmma_wait", "tma_load", "tma_store", "tma_commit", "tma_wait",
           "shfl", "shfl_xor", "shfl_down", "shfl_up", "ballot", "any_lanes", "all_lanes",
           "warp_sum", "warp_max", "warp_min"]
