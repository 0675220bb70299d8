"""The big-tile matmul of any shape in ONE kernel (:func:`schedule_matmul_guarded_tiles`),
the edges guarded inside it; :func:`gpudsl.stdlib.matmul.matmul_kernel` picks it where
the cut variant would launch more than one kernel."""
from __future__ import annotations

from ..proc import Proc
from ..schedule import cut_loop, rename, simplify
from .matmul_parts import (Tiles, _thread_loops, _transposed_a_copy, cache_k_step,
                           matmul_algorithm, parallelize_tiles, shared_tiles, stage_acc,
                           tail_outside, tile_shape, unroll_k_step)
from .derivation_cache import derivation

# ---------------------------------------------------------------- any shape: one kernel
# The big-tile matmul of any shape in ONE kernel (issue 17: the MNIST MLP as two
# launches): :func:`schedule_matmul_guarded_tiles`.
#
# The design of :func:`gpudsl.stdlib.matmul.schedule_matmul` (a ``bm x bn`` block tile of
# C per thread block, ``bk``-deep tiles of A (transposed, padded: no bank conflict) and B
# in SHARED memory copied by every thread, a ``tm x tn`` register tile per thread, the A
# column and B row of each k step in registers with float4 shared reads), with the edge
# handled inside the same kernel instead of by ``cut_loop``'s extra kernels:
#
# * rows and columns are divided with ``tail="guard"``: ``ceil(m / bm) x ceil(k / bn)``
#   blocks, and the guards ``row < m`` / ``col < k`` move inwards with the loops
#   (``reorder_loops`` and ``fission`` through a guard) down to the register tile, inside
#   every thread loop — the barriers stay at block level, under no guard;
# * the shared tiles are staged with windows that may leave the arrays: ``stage_mem``
#   guards those copies element by element (what lies outside is never read: every
#   staged read is under the row/column guard, which ``stage_mem`` proves);
# * the reduction's ``n % bk`` tail runs after the tiled k loop in the same kernel,
#   reading global memory (as in the cut variant).
#
# The guarded global copies are scalar (a float4 copy would need the guard of its first
# element to stand for all four), still coalesced: a warp reads whole 32-byte rows of the
# A tile and 128 contiguous bytes of the B tile, the minimum sectors; the stores of C are
# scalar too (a warp's request spans 4 float4 groups: 16 sectors against 4). The report
# (``proc.perf``) shows it; ``tests/stdlib/test_matmul_one_kernel.py`` asserts it.


def schedule_matmul_guarded_tiles(p: Proc, *, bm: int = 128, bn: int = 128, bk: int = 8,
                                  tm: int = 8, tn: int = 8, vec: int = 4,
                                  blocks_per_sm: int = 2) -> Proc:
    """Any shape, one kernel, from ``matmul_algorithm(batched)`` (no preconditions).
    Threads per block: ``(bm // tm) x (bn // tn)``; ``vec``: the width of the shared →
    register reads (the global copies are scalar, guarded)."""
    t = tile_shape(p, bm, bn, bk, tm, tn, vec)

    # 0. the reduction: [0, bk * (n // bk)) tiled, the rest after it (same kernel)
    p = cut_loop(p, "p", f"{bk} * (n // {bk})")

    # 1. block tiles (guarded), thread tiles; loops bi bj ti tj ri [rjg] rj, the
    #    row guard inside ri and the column guard inside rj
    p = _thread_loops(p, bm, bn, tm, tn, t.ncol, t.wcol, t.strided, tail="guard")
    p = parallelize_tiles(p, t.batched)

    # 2. the accumulator, staged inside both guards (in the array: no guarded copy,
    #    and no copy-in: the body starts with c = 0), allocated outside the register
    #    and thread loops and the two guards; 3. the k loop in bk steps, split from the
    #    initialisation and the rest, moved outside the thread loops; the k step
    #    outside the register tile
    p = stage_acc(p, t, p.find("c[_] = 0.0").parent().body(), t.c_window(), guards=2)

    # 4. A (transposed, padded) and B tiles in SHARED, guarded scalar copies spread
    #    over every thread of the block; barriers at block level
    p, a_vec = shared_tiles(p, t, _a_tile_copy(t), 1)

    # 5. the A column and the B row of each k step in registers (float4 reads of
    #    the shared tiles)
    p = cache_k_step(p, t, f"As[pi, {t.arow}:{t.arow} + {tm}]", vec, a_vec)

    # 6. the reduction's tail outside the register loops (their constant trip counts
    #    keep the accumulator in registers)
    p = tail_outside(p, t.nl, t.nl - 2)
    return simplify(unroll_k_step(p, t.batched, blocks_per_sm))


def _a_tile_copy(t: Tiles):
    """The A tile's copy (``shared_tiles``' ``copy_a``): transposed and padded, scalar
    and guarded; the register cache reads it ``vec`` wide where the pitch allows."""
    def copy_a(p):
        p, a_vec = _transposed_a_copy(p, t.bm, t.bk, t.ty, t.tx, 1, t.tm, t.zi,
                                      read_vec=t.vec)
        vec = t.vec
        wide = a_vec == 1 and vec > 1 and t.tm % vec == 0 and _pitch_ok(p, vec)
        return p, (vec if wide else a_vec)
    return copy_a


def _pitch_ok(p, vec) -> bool:
    from ..schedule.simplify import const_value

    a = p.find("As: _").node()
    return const_value(a.shape[-1]) is not None and const_value(a.shape[-1]) % vec == 0


@derivation
def guarded_tiles_kernel(batched: bool, bm=128, bn=128, bk=8, tm=8, tn=8, vec=4) -> Proc:
    p = schedule_matmul_guarded_tiles(matmul_algorithm(batched), bm=bm, bn=bn, bk=bk,
                                      tm=tm, tn=tn, vec=vec)
    return rename(p, f"{'b' if batched else ''}matmul_tiles")
