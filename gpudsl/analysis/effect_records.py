"""The records of check()'s effect walk (:mod:`gpudsl.analysis.proc_effects`, whose
docstring describes each field): loops, arrays, accesses, barriers, collectives,
kernels, mapping issues, and :class:`Effects`, which holds them all."""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional

from ..errors import SrcLoc
from ..ir.nodes import Expr, For, ProcDef
from ..ir.types import Memory


@dataclass(frozen=True, eq=False)
class Loop:
    iter: str
    lo: Expr
    hi: Expr
    kind: str
    mapping: object
    level: str
    uid: int
    dim: int = -1
    loc: Optional[SrcLoc] = None
    cluster: bool = False   # a ``@ CLUSTERS`` loop (a BLOCKS loop, docs/hopper.md (clusters))

    @property
    def is_par(self) -> bool:
        return self.kind == "par"

    @property
    def is_unmapped_par(self) -> bool:
        return self.kind == "par" and self.mapping is None


@dataclass(eq=False)
class ArrayInfo:
    key: str
    name: str
    mem: Memory
    shape: tuple
    ty: object
    is_param: bool
    level: str = "host"                 # where it is allocated
    loops: tuple = ()                   # loops enclosing the allocation
    kernel: Optional[int] = None
    loc: Optional[SrcLoc] = None
    thread_dims: int = 0                # for block-level REGISTER: thread dims of the kernel
    swizzle: int = 0                    # a SHARED tile's swizzle width (bytes), 0: none


@dataclass(eq=False)
class KernelAccess:
    array: str
    name: str
    mem: Memory
    kind: str
    idx: tuple
    bounds: list
    guards: tuple
    loops: tuple
    kernel: Optional[int]
    level: str
    bcount: Optional[Expr]
    loc: Optional[SrcLoc]
    stmt: object
    reduce: bool = False
    uid: int = 0
    path: Optional[tuple] = None    # block-level (statement list, index) steps, see phases
    shown: Optional[tuple] = None   # the indices as written (``idx`` has index locals
                                    # replaced by their values)
    tpath: Optional[tuple] = None   # the (statement list, index) steps from the kernel's
                                    # body down to the access, thread loops included
    # the guards from ``same_from`` on (and the indices too when ``same_access``) are
    # read with no write or barrier of this thread between them (effects._purity)
    same_from: Optional[int] = None
    same_access: bool = False

    @property
    def is_write(self) -> bool:
        return self.kind in ("write", "atomic")

    def describe(self) -> str:
        from ..ir.printer import print_expr

        what = {"read": "read", "write": "write", "atomic": "atomic update"}[self.kind]
        if self.reduce:
            what = "update"
        wg = getattr(self.stmt, "wgmma", None)
        if wg is not None:   # a step of a wgmma's meaning: name the operand and the wgmma
            return f"{what} of {self.name} by the wgmma"
        ix = ", ".join(print_expr(i) for i in (self.shown or self.idx))
        return f"{what} of {self.name}[{ix}]" if self.idx else f"{what} of {self.name}"


@dataclass(eq=False)
class SyncInfo:
    loc: Optional[SrcLoc]
    loops: tuple
    guards: tuple
    kernel: Optional[int]
    level: str
    inside: list            # enclosing statements (For/If) from the kernel down
    stmt: object = None     # the sync(), sync(lo, hi), arrive or wait
    at: Optional[KernelAccess] = None  # where it stands, placed like an access (path included)


@dataclass(eq=False)
class CollectiveSite:
    """A warp collective (docs/language.md (synchronization)) where it runs: ``node`` (with index locals
    replaced, as in accesses), the loops, guards and enclosing statements."""
    node: object
    loops: tuple
    guards: tuple
    kernel: Optional[int]
    level: str
    inside: tuple
    loc: Optional[SrcLoc]
    stmt: object


@dataclass(eq=False)
class KernelInfo:
    uid: int
    loop: For
    block_loops: tuple = ()
    thread_extents: dict = field(default_factory=dict)   # dim -> list of hi exprs
    thread_loops: list = field(default_factory=list)
    shared: list = field(default_factory=list)           # ArrayInfo
    block_registers: list = field(default_factory=list)  # ArrayInfo
    loc: Optional[SrcLoc] = None
    host_loops: tuple = ()   # the host-level loops around the kernel (Loop), outermost first


@dataclass(eq=False)
class Issue:
    """A structural problem found while collecting (mapping rules, host effects)."""
    kind: str       # "mapping", "warning", "divergence"
    message: str
    locs: list
    hint: str = ""


@dataclass(eq=False)
class Effects:
    proc: ProcDef
    body: tuple
    accesses: list = field(default_factory=list)
    arrays: dict = field(default_factory=dict)
    kernels: dict = field(default_factory=dict)
    syncs: list = field(default_factory=list)
    collectives: list = field(default_factory=list)     # CollectiveSite
    asyncs: list = field(default_factory=list)          # SyncInfo of async commits/waits
    setmaxnregs: list = field(default_factory=list)     # SyncInfo of setmaxnreg statements
    wgmmas: list = field(default_factory=list)          # CollectiveSite of each wgmma
    window_checks: list = field(default_factory=list)   # (KernelAccess-like ctx, WindowArg)
    call_preds: list = field(default_factory=list)      # (ctx KernelAccess, pred Expr)
    issues: list = field(default_factory=list)
    keep: list = field(default_factory=list)

    @property
    def written(self) -> set:
        return {a.array for a in self.accesses if a.is_write}

    def array_of(self, a: KernelAccess) -> ArrayInfo:
        return self.arrays[a.array]


__all__ = ["Loop", "ArrayInfo", "KernelAccess", "SyncInfo", "CollectiveSite",
           "KernelInfo", "Issue", "Effects"]
