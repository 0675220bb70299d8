"""What gpudsl knows about a GPU architecture, in one place: the ``Target`` description.

A target is a compute capability (``"sm_80"``, ``"sm_90"``, ...) with the limits a kernel
must respect there (threads and shared memory per block, registers, resident blocks and
threads per SM, grid extents) and the features its code may use (``cp.async``, split
barriers on mbarriers, tensor-core shapes).  Everything that depends on the architecture
reads it from here: check()'s resource rules (``check(p, target="sm_80")``), code
generation's opt-in to more than the static shared memory, the launcher, the performance
report's occupancy and the autotuner's pruning.

A new architecture, or a made-up one for an experiment, is one description::

    from gpudsl.targets import Target, register_target, target

    small = register_target(Target("sm_toy", (9, 0), max_shared_bytes=16 * 1024,
                                   shared_per_sm=32 * 1024))
    assert target("sm_toy").max_shared_bytes == 16384

The figures are NVIDIA's (CUDA C Programming Guide, "Features and Technical
Specifications" by compute capability).  Nothing here imports the rest of gpudsl.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

KIB = 1024

# what a kernel's generated code may use, by name
CP_ASYNC = "cp.async"            # asynchronous global -> shared copies (sm_80+)
MBARRIER = "mbarrier"            # split arrive/wait barriers in shared memory (sm_80+)
TRY_WAIT = "mbarrier.try_wait"   # a wait that may suspend the thread (sm_90)
NAMED_BARRIERS = "bar.sync"      # barriers over a range of warps (16 per block)
REDUX = "redux.sync"             # one-instruction integer warp reductions (sm_80+)
LDMATRIX = "ldmatrix"            # warp-wide fragment loads from shared memory (sm_75+)
MMA_F16 = "mma.m16n8k16.f16"     # half-precision tensor-core mma (sm_80+)
MMA_BF16 = "mma.m16n8k16.bf16"
MMA_TF32 = "mma.m16n8k8.tf32"
WGMMA = "wgmma"                  # warpgroup MMA from shared memory (sm_90a only)


@dataclass(frozen=True)
class Target:
    """One GPU architecture: its name, compute capability, limits and features."""

    name: str
    compute_capability: tuple[int, int]
    max_threads_per_block: int = 1024
    max_block_dims: tuple[int, int, int] = (1024, 1024, 64)
    max_grid_dims: tuple[int, int, int] = (2 ** 31 - 1, 65535, 65535)
    static_shared_bytes: int = 48 * KIB   # a kernel's static ``__shared__`` at most
    max_shared_bytes: int = 227 * KIB     # per block, with the launch's opt-in
    shared_per_sm: int = 228 * KIB
    shared_reserved_per_block: int = 1 * KIB
    registers_per_sm: int = 65536
    max_registers_per_thread: int = 255
    register_alloc_unit: int = 256        # registers, per warp
    max_threads_per_sm: int = 2048
    max_blocks_per_sm: int = 32
    warp_size: int = 32
    named_barriers: int = 16
    features: frozenset = field(default_factory=frozenset)

    def has(self, feature: str) -> bool:
        """Whether code for this target may use ``feature`` (one of this module's names)."""
        return feature in self.features

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def __str__(self) -> str:
        return self.name


_AMPERE = frozenset({CP_ASYNC, MBARRIER, NAMED_BARRIERS, REDUX, LDMATRIX, MMA_F16, MMA_BF16,
                     MMA_TF32})

TARGETS: dict[str, Target] = {}


def register_target(t: Target) -> Target:
    """Add (or replace) a target description; returns it."""
    TARGETS[t.name] = t
    return t


for _t in (
    Target("sm_70", (7, 0), max_shared_bytes=96 * KIB, shared_per_sm=96 * KIB,
           features=frozenset({NAMED_BARRIERS})),
    Target("sm_75", (7, 5), max_shared_bytes=64 * KIB, shared_per_sm=64 * KIB,
           max_threads_per_sm=1024, max_blocks_per_sm=16,
           features=frozenset({NAMED_BARRIERS, LDMATRIX})),
    Target("sm_80", (8, 0), max_shared_bytes=163 * KIB, shared_per_sm=164 * KIB,
           features=_AMPERE),
    Target("sm_86", (8, 6), max_shared_bytes=99 * KIB, shared_per_sm=100 * KIB,
           max_threads_per_sm=1536, max_blocks_per_sm=16, features=_AMPERE),
    Target("sm_89", (8, 9), max_shared_bytes=99 * KIB, shared_per_sm=100 * KIB,
           max_threads_per_sm=1536, max_blocks_per_sm=24, features=_AMPERE),
    Target("sm_90", (9, 0), features=_AMPERE | {TRY_WAIT}),
    # the architecture-specific features of H100/H200 ("a": such cubins run there only)
    Target("sm_90a", (9, 0), features=_AMPERE | {TRY_WAIT, WGMMA}),
):
    register_target(_t)

DEFAULT_TARGET = "sm_90"


def target(name: "str | Target | None" = None) -> Target:
    """The description of ``name`` (``"sm_80"``, ``"sm_90"``, ...; a ``Target`` is returned
    as is; ``None`` is the default, sm_90).  An architecture gpudsl has no description of
    but whose family it knows (``"sm_100"``, ``"sm_87"``) gets its family's nearest lower
    description under its own name."""
    if isinstance(name, Target):
        return name
    name = DEFAULT_TARGET if name is None else str(name)
    if name in TARGETS:
        return TARGETS[name]
    digits = name[3:].rstrip("abcdefghijklmnopqrstuvwxyz") if name.startswith("sm_") else ""
    if not digits.isdigit() or len(digits) < 2:
        raise ValueError(f"unknown target {name!r}; known: {', '.join(TARGETS)}")
    cc = (int(digits[:-1]), int(digits[-1]))
    lower = [t for t in TARGETS.values() if t.compute_capability <= cc]
    if not lower:
        raise ValueError(f"target {name!r} is older than every description gpudsl has "
                         f"({', '.join(TARGETS)})")
    best = max(lower, key=lambda t: t.compute_capability)
    return replace(best, name=name, compute_capability=cc)


__all__ = ["Target", "TARGETS", "DEFAULT_TARGET", "register_target", "target", "CP_ASYNC",
           "MBARRIER", "TRY_WAIT", "NAMED_BARRIERS", "REDUX", "LDMATRIX", "MMA_F16",
           "MMA_BF16", "MMA_TF32", "WGMMA"]
