"""What gpudsl knows about a GPU architecture, in one place: the ``Target`` description.

A target is a compute capability (``"sm_80"``, ``"sm_90"``, ``"sm_90a"``...) with the limits a kernel
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

import re
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
# Hopper's architecture-specific features (sm_90a: NVRTC compiles them for sm_90a only;
# gpudsl's sm_90 description keeps none of them, docs/hopper.md)
WGMMA = "wgmma"                  # warpgroup MMA (wgmma.mma_async)
TMA = "tma"                      # bulk tensor copies (cp.async.bulk.tensor)
SETMAXNREG = "setmaxnreg"        # a warpgroup's registers moved at run time
CLUSTERS = "clusters"            # thread block clusters


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
    register_partitions: int = 4          # SM sub-partitions, each with its share of registers
    features: frozenset = field(default_factory=frozenset)

    def has(self, feature: str) -> bool:
        """Whether code for this target may use ``feature`` (one of this module's names)."""
        return feature in self.features

    @property
    def code_arch(self) -> str:
        """The architecture NVRTC builds this target's code for: its name where that is
        one (``"sm_80"``, ``"sm_90a"``), else ``sm_XY`` of its compute capability (a
        made-up target such as ``"sm_toy"``)."""
        if re.fullmatch(r"sm_\d+[a-z]?", self.name):
            return self.name
        return "sm_%d%d" % self.compute_capability

    @property
    def max_warps_per_sm(self) -> int:
        return self.max_threads_per_sm // self.warp_size

    def launch_registers(self, threads: int, blocks_per_sm: int = 1) -> int:
        """The registers per thread ptxas gives a kernel compiled with
        ``__launch_bounds__(threads, blocks_per_sm)``: the most that lets that many
        blocks reside, each warp on one sub-partition's share of the register file, a
        multiple of 8, at most ``max_registers_per_thread`` (a kernel using setmaxnreg
        starts with exactly this many; measured with NVRTC 13 for sm_90a: 168 for 384
        threads, 128 for 512, 80 for 768)."""
        warps = -(-threads // self.warp_size) * max(1, blocks_per_sm)
        per_partition = -(-warps // self.register_partitions)
        share = self.registers_per_sm // self.register_partitions
        regs = share // (per_partition * self.warp_size) // 8 * 8
        return min(regs, self.max_registers_per_thread)

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
    Target("sm_90a", (9, 0), features=_AMPERE | {TRY_WAIT, WGMMA, TMA, SETMAXNREG, CLUSTERS}),
):
    register_target(_t)

DEFAULT_TARGET = "sm_90"
# what compile("emulator") proves for: the target with every feature the emulator runs
EMULATED_TARGET = "sm_90a"


def device_target_name(major: int, minor: int) -> str:
    """The name of the architecture code for a device of compute capability
    ``major.minor`` is built for: the described target of that capability with the most
    features (``"sm_90a"`` for an H100/H200: its code runs on 9.0 devices only, and
    sm_90a is a superset of sm_90), else ``"sm_XY"``."""
    same = [t for t in TARGETS.values() if t.compute_capability == (major, minor)]
    if not same:
        return f"sm_{major}{minor}"
    return max(same, key=lambda t: (len(t.features), t.name)).name


def arch_with(arch: str, features=()) -> str:
    """``arch``, or where its description lacks one of ``features`` (what generated code
    needs: ``CudaModule.features``), the described target of the same compute capability
    that has them all (``"sm_90"`` with setmaxnreg: ``"sm_90a"``); ``arch`` when none has."""
    t = target(arch)
    if all(t.has(f) for f in features):
        return arch
    fits = [u for u in TARGETS.values() if u.compute_capability == t.compute_capability
            and all(u.has(f) for f in features)]
    return min(fits, key=lambda u: len(u.features)).name if fits else arch


def target(name: "str | Target | None" = None) -> Target:
    """The description of ``name`` (``"sm_80"``, ``"sm_90"``, ...; a ``Target`` is returned
    as is; ``None`` is the default, sm_90).  An architecture gpudsl has no description of
    but whose family it knows (``"sm_87"``, ``"sm_100a"``) gets its family's nearest lower
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
           "MMA_BF16", "MMA_TF32", "WGMMA", "TMA", "SETMAXNREG", "CLUSTERS",
           "device_target_name", "arch_with", "EMULATED_TARGET"]
