"""The immutable IR of gpudsl procs.

Every node is a frozen dataclass.  Equality and hashing are structural and
ignore source locations (``loc``), so a proc printed and parsed again equals the
original.  Statement bodies are tuples.  Names are plain strings: the frontend
forbids shadowing, so a name means one thing in a proc.

Expressions carry their type in ``ty``.  Control integers (sizes, index
parameters, loop variables) are :class:`Var`; everything that lives in memory
(tensor elements, scalar parameters, local scalars) is read with :class:`Read`.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union

from ..errors import SrcLoc
from .types import INDEX, DType, Mapping, Memory, bool_

_LOC = dict(default=None, compare=False, repr=False)


class Node:
    """Base class of every IR node."""

    __slots__ = ()

    def with_(self, **changes):
        """A copy of this node with some fields replaced."""
        from dataclasses import replace

        return replace(self, **changes)


# ----------------------------------------------------------------- expressions


class Expr(Node):
    __slots__ = ()
    ty: DType


@dataclass(frozen=True)
class Const(Expr):
    val: Union[int, float, bool]
    ty: DType = INDEX
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Var(Expr):
    """A control integer: a size, an index parameter or a loop variable."""

    name: str
    ty: DType = INDEX
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Read(Expr):
    """``x[i, j]``; a scalar (parameter or local) has ``idx == ()``."""

    name: str
    idx: tuple[Expr, ...]
    ty: DType
    loc: Optional[SrcLoc] = field(**_LOC)


BIN_OPS = ("+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>",
           "==", "!=", "<", "<=", ">", ">=", "and", "or")
CMP_OPS = ("==", "!=", "<", "<=", ">", ">=")


@dataclass(frozen=True)
class BinOp(Expr):
    op: str
    lhs: Expr
    rhs: Expr
    ty: DType
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class UnOp(Expr):
    """``-e`` or ``not e``."""

    op: str
    arg: Expr
    ty: DType
    loc: Optional[SrcLoc] = field(**_LOC)


BUILTINS = ("min", "max", "abs", "exp", "log", "sqrt", "tanh", "sin", "cos", "erf", "rsqrt",
            "pow", "select", "tf32")


@dataclass(frozen=True)
class Builtin(Expr):
    """A builtin function call: one of :data:`BUILTINS`, or a cast named by a
    scalar type (``f32(e)``)."""

    name: str
    args: tuple[Expr, ...]
    ty: DType
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Collective(Expr):
    """A warp collective (docs/language.md (synchronization)): ``shfl(v, lane)``, ``ballot(c)``, ``warp_sum(v)``...
    ``name`` is a key of :data:`gpudsl.ir.collective_meaning.COLLECTIVES` (the one table);
    ``args`` the operand, then the lane argument where the collective has one."""

    name: str
    args: tuple[Expr, ...]
    ty: DType
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Point(Node):
    """One fixed index of a window: ``x[i, 0:4]`` has ``Point(i)`` first."""

    pt: Expr
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Interval(Node):
    """A range ``lo:hi`` of a window."""

    lo: Expr
    hi: Expr
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class WindowArg(Expr):
    """An array or a window into one, passed to a proc or instr call.

    A whole array passed by name has ``idx == ()``.
    """

    name: str
    idx: tuple[Union[Point, Interval], ...]
    ty: DType
    loc: Optional[SrcLoc] = field(**_LOC)


# ----------------------------------------------------------------- statements


class Stmt(Node):
    __slots__ = ()


@dataclass(frozen=True)
class Assign(Stmt):
    name: str
    idx: tuple[Expr, ...]
    rhs: Expr
    loc: Optional[SrcLoc] = field(**_LOC)


REDUCE_OPS = ("+", "-", "*")


@dataclass(frozen=True)
class Reduce(Stmt):
    """``x[i] += e`` (also ``-=`` and ``*=``)."""

    name: str
    idx: tuple[Expr, ...]
    op: str
    rhs: Expr
    loc: Optional[SrcLoc] = field(**_LOC)


ATOMIC_OPS = ("add", "sub", "min", "max", "exch", "cas", "and", "or", "xor", "inc")
# the element types each atomic accepts (CUDA's atomicAdd ... atomicInc, through
# casts or compare-and-swap loops where CUDA lacks an overload; see codegen)
ATOMIC_TYPES = {
    "add": ("f32", "f64", "i32", "i64"), "sub": ("f32", "f64", "i32", "i64"),
    "min": ("f32", "f64", "i32", "i64"), "max": ("f32", "f64", "i32", "i64"),
    "exch": ("f32", "f64", "i32", "i64"), "cas": ("i32", "i64"),
    "and": ("i32", "i64"), "or": ("i32", "i64"), "xor": ("i32", "i64"),
    "inc": ("i32", "i64"),
}


@dataclass(frozen=True)
class Atomic(Stmt):
    """``atomic_add(x[i], e)``: one indivisible read-modify-write of ``x[i]``.

    ``op`` is one of :data:`ATOMIC_OPS`; the new value is ``old + e`` (add),
    ``old - e`` (sub), ``min``/``max``, ``e`` (exch), ``e if old == cmp else old``
    (cas: ``atomic_cas(x[i], cmp, e)``), ``old & e`` / ``|`` / ``^``, or
    ``0 if old >= e else old + 1`` (inc, CUDA's atomicInc with signed comparison).
    ``result`` names a local scalar that receives the old value
    (``old = atomic_add(x[i], e)``), None when the old value is dropped.  Such a
    statement writes two places: ``name[idx]`` (atomically) and ``result``.
    """

    op: str
    name: str
    idx: tuple[Expr, ...]
    rhs: Expr
    loc: Optional[SrcLoc] = field(**_LOC)
    result: Optional[str] = None
    cmp: Optional[Expr] = None


@dataclass(frozen=True)
class Alloc(Stmt):
    """``s: f32[4, 4] @ SHARED``; a scalar has ``shape == ()``.  ``swizzle`` (32, 64 or
    128; 0: none) is the byte width of a SHARED tile's swizzled layout
    (``@ SHARED(swizzle=128)``, :mod:`gpudsl.ir.swizzle_meaning`): addresses only, never meaning."""

    name: str
    ty: DType
    shape: tuple[Expr, ...]
    mem: Memory
    loc: Optional[SrcLoc] = field(**_LOC)
    swizzle: int = 0


@dataclass(frozen=True)
class For(Stmt):
    """A loop.  ``kind`` is ``"seq"`` or ``"par"``; ``mapping`` is None, BLOCKS
    or THREADS (only for ``par``); ``unroll`` asks code generation for
    ``#pragma unroll``; ``blocks_per_sm`` (outermost BLOCKS loop of a kernel
    only, 0 = no hint) asks for that many resident blocks per multiprocessor
    (``__launch_bounds__(threads, blocks_per_sm)``: ptxas limits registers);
    ``group`` (a BLOCKS loop whose only statement is a BLOCKS loop, 0 = no hint) asks
    for the grouped block order of the two (``set_block_order``): one linear block
    index, ``group`` consecutive iterations of this loop walked along the inner one.
    Hints never change the meaning.  ``cluster`` (a ``par(0, c) @ CLUSTERS`` loop, SPEC 2.9,
    docs/hopper.md (clusters)): a BLOCKS loop, the innermost of its nest, whose ``c``
    iterations are the blocks of one thread block cluster (``sync_cluster()`` meets them);
    everything that knows BLOCKS loops treats it as one (its mapping is BLOCKS)."""

    iter: str
    lo: Expr
    hi: Expr
    body: tuple[Stmt, ...]
    kind: str = "seq"
    mapping: Optional[Mapping] = None
    unroll: bool = False
    loc: Optional[SrcLoc] = field(**_LOC)
    blocks_per_sm: int = 0
    group: int = 0
    cluster: bool = False


@dataclass(frozen=True)
class If(Stmt):
    cond: Expr
    body: tuple[Stmt, ...]
    orelse: tuple[Stmt, ...] = ()
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Sync(Stmt):
    """``sync()``: the block barrier; ``sync(lo, hi)`` (docs/language.md (synchronization)): a barrier of the
    threads whose flat index lies in ``[lo, hi)`` (``lo``/``hi`` constants; both None
    for the whole block).  The others pass it without waiting."""

    loc: Optional[SrcLoc] = field(**_LOC)
    lo: Optional[Expr] = None
    hi: Optional[Expr] = None

    @property
    def ranged(self) -> bool:
        return self.lo is not None


@dataclass(frozen=True)
class SyncCluster(Sync):
    """``sync_cluster()`` at block level inside a ``@ CLUSTERS`` loop (docs/hopper.md
    (clusters)): a barrier of every thread of every block of the cluster, ordering their
    memory accesses (GLOBAL included) across it.  A subclass of :class:`Sync`: to every
    rule about one block it is the block barrier ``sync()`` (which it implies)."""


@dataclass(frozen=True)
class Arrive(Stmt):
    """``arrive(bar, lo, hi)`` at block level: the threads of ``[lo, hi)`` signal the
    split barrier ``bar`` (a ``barrier @ SHARED`` allocation) and go on.  ``index``: the
    element of a barrier ring (``bar: barrier[k] @ SHARED``, ``arrive(bar[e], lo, hi)``),
    None for a single barrier.  ``count``: the arrivals each thread of the range contributes
    (``arrive(bar, lo, hi, count=c)``, a positive constant; 1 when not written).
    ``cluster``: ``arrive(bar, lo, hi, cluster=True)`` inside a ``@ CLUSTERS`` loop: each
    thread of the range arrives on ``bar`` (the same element) of every block of its
    cluster, its own included (docs/hopper.md (remote arrives)); a phase of each block's
    barrier then takes the arrivals of all ``c`` blocks."""

    name: str
    lo: Expr
    hi: Expr
    loc: Optional[SrcLoc] = field(**_LOC)
    index: Optional[Expr] = None
    count: int = 1
    cluster: bool = False


@dataclass(frozen=True)
class Wait(Stmt):
    """``wait(bar, lo, hi)`` at block level: the threads of ``[lo, hi)`` block until
    the phase of ``bar`` they wait for (their k-th wait: phase k) has completed.
    ``index``: the element of a barrier ring, as for :class:`Arrive`."""

    name: str
    lo: Expr
    hi: Expr
    loc: Optional[SrcLoc] = field(**_LOC)
    index: Optional[Expr] = None


@dataclass(frozen=True)
class AsyncCopy(Stmt):
    """``async_copy(dst[..., j:j + n], src[..., k:k + n])`` inside a ``@ THREADS`` loop
    (docs/async_copies.md): the thread starts a copy of ``n`` contiguous elements (4, 8 or 16
    bytes) from the GLOBAL array ``src`` to the SHARED array ``dst`` without waiting.
    ``dst_idx`` / ``src_idx`` index the first element; the last index runs over
    ``n`` elements (``n == 1`` prints as a plain element ``dst[i]``).  The copy lands
    when the ``async_wait`` that completes its group runs (:mod:`gpudsl.ir.async_copy_meaning`); with
    ``bar`` (``async_copy(dst, src, bar=b)``, element ``index`` of a ring) it joins no group
    and lands with the phase of ``bar`` that the thread's next arrive on it completes, as a
    ``tma_load`` does (:mod:`gpudsl.ir.tma_meaning`)."""

    dst: str
    dst_idx: tuple[Expr, ...]
    src: str
    src_idx: tuple[Expr, ...]
    n: int = 1
    loc: Optional[SrcLoc] = field(**_LOC)
    bar: Optional[str] = None
    index: Optional[Expr] = None


@dataclass(frozen=True)
class AsyncCommit(Stmt):
    """``async_commit()``: closes the current group of the thread's async copies."""

    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class AsyncWait(Stmt):
    """``async_wait(n)``: the thread waits until at most ``n`` (a constant) of its
    committed groups are pending; the copies of the completed groups have landed."""

    depth: int
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class SetMaxNReg(Stmt):
    """``setmaxnreg(regs, lo, hi)`` at block level (docs/hopper.md): the warpgroups of the
    threads ``[lo, hi)`` (``lo``/``hi`` constants, multiples of 128) own ``regs``
    registers per thread from here on.  It places registers, never changes meaning."""

    regs: int
    lo: Expr
    hi: Expr
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Wgmma(Stmt):
    """``wgmma(acc, a, b)`` inside a ``@ THREADS`` loop (docs/hopper.md): the warpgroup of
    the thread starts ``acc += a @ b`` (m64nNk16, f16/bf16 products summed in f32) without
    waiting.  ``acc`` is the thread's part of the accumulator (a window of ``N / 2`` f32
    elements of a REGISTER array, the PTX ISA's fragment), ``a`` a SHARED window
    ``[2, 64, 8]`` (``a[h, m, j]`` is A[m, 8 h + j]) and ``b`` one ``[2, N, 8]``
    (``b[h, n, j]`` is B[8 h + j, n]).  With ``b_major="mn"`` (``wgmma(acc, a, b,
    b_major="mn")``) B is stored K x N instead (N contiguous: ``b[kk, n]`` or
    ``b[c, kk, j]`` = B[kk, E c + j]).  It lands at the ``wgmma_wait`` that completes its
    group (:mod:`gpudsl.ir.wgmma_meaning`)."""

    acc: WindowArg
    a: WindowArg
    b: WindowArg
    n: int
    loc: Optional[SrcLoc] = field(**_LOC)
    b_major: str = "k"


@dataclass(frozen=True)
class WgmmaCommit(Stmt):
    """``wgmma_commit()``: closes the warpgroup's current group of wgmma operations."""

    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class WgmmaWait(Stmt):
    """``wgmma_wait(n)``: waits until at most ``n`` (a constant) committed wgmma groups
    are pending; the operations of the completed groups have landed."""

    depth: int
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class TmaLoad(Stmt):
    """``tma_load(dst, src, bar=b)`` inside a ``@ THREADS`` loop (docs/hopper.md): the thread
    starts a bulk tensor copy (TMA) of the box ``src`` (a window of a GLOBAL array, up to
    5 ranges of constant extents) into the SHARED window ``dst`` (contiguous, the same
    extents), completing on the split barrier ``name`` (element ``index`` of a ring):
    the copy lands when the phase that the thread's next arrive on it completes, has
    completed.  Elements of the box outside ``src`` land as zeros.  ``shape``: the
    dimensions of ``src`` (the box is clipped to them).  Meaning: :mod:`gpudsl.ir.tma_meaning`."""

    dst: WindowArg
    src: WindowArg
    name: str
    shape: tuple[Expr, ...] = field(compare=False)   # derived: the array's declared shape
    loc: Optional[SrcLoc] = field(**_LOC)
    index: Optional[Expr] = None


@dataclass(frozen=True)
class TmaStore(Stmt):
    """``tma_store(dst, src)`` inside a ``@ THREADS`` loop (docs/hopper.md): the thread starts a
    bulk tensor copy of the contiguous SHARED window ``src`` to the box ``dst`` of a GLOBAL
    array (elements of the box outside it are not written).  It joins the thread's open
    group of stores; it lands at the ``tma_wait`` that completes its group.  ``shape``: the
    dimensions of ``dst``.  Meaning: :mod:`gpudsl.ir.tma_meaning`."""

    dst: WindowArg
    src: WindowArg
    shape: tuple[Expr, ...] = field(compare=False)   # derived: the array's declared shape
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class TmaCommit(Stmt):
    """``tma_commit()``: closes the thread's open group of bulk tensor stores."""

    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class TmaWait(Stmt):
    """``tma_wait(n)``: waits until at most ``n`` (a constant) committed groups of bulk
    tensor stores are pending; the stores of the completed groups have landed."""

    depth: int
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Pass(Stmt):
    loc: Optional[SrcLoc] = field(**_LOC)


@dataclass(frozen=True)
class Call(Stmt):
    """A call of another proc or instr.  ``args`` match ``proc.params`` in order:
    integer expressions for sizes and index parameters, expressions for scalar
    parameters, :class:`WindowArg` for tensor and window parameters."""

    proc: "ProcDef" = field(metadata={"child": False})
    args: tuple[Expr, ...] = ()
    loc: Optional[SrcLoc] = field(**_LOC)


# ----------------------------------------------------------------- procs

PARAM_KINDS = ("size", "index", "scalar", "tensor", "window")


@dataclass(frozen=True)
class Param(Node):
    """A parameter.  ``ty`` is INDEX for sizes and index parameters; ``shape``
    and ``mem`` matter for tensors and windows."""

    name: str
    kind: str
    ty: DType
    shape: tuple[Expr, ...] = ()
    mem: Optional[Memory] = None
    loc: Optional[SrcLoc] = field(**_LOC)

    @property
    def is_array(self) -> bool:
        return self.kind in ("tensor", "window")

    @property
    def is_control(self) -> bool:
        """A ``size`` or ``index`` parameter: an integer that shapes, loop bounds,
        indices and conditions may use (bound by ``check(n=...)``, a specialization,
        or the call's arguments)."""
        return self.kind in ("size", "index")


@dataclass(frozen=True)
class ProcDef(Node):
    """A whole proc: parameters, preconditions (``assert``), body.  ``instr`` is
    the CUDA C template of an ``@instr`` proc, else None."""

    name: str
    params: tuple[Param, ...]
    preds: tuple[Expr, ...]
    body: tuple[Stmt, ...]
    instr: Optional[str] = None
    loc: Optional[SrcLoc] = field(**_LOC)

    def param(self, name: str) -> Param | None:
        for p in self.params:
            if p.name == name:
                return p
        return None


def is_bool(e: Expr) -> bool:
    return e.ty == bool_
