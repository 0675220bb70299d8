"""The big-tile matmul of any shape in ONE kernel (:func:`schedule_matmul_guarded_tiles`),
the edges guarded inside it; :func:`gpudsl.stdlib.matmul.matmul_kernel` picks it where
the cut variant would launch more than one kernel."""
from __future__ import annotations

from functools import lru_cache

from ..ir.types import BLOCKS, REGISTER, THREADS  # noqa: F401
from ..proc import Proc
from ..schedule import (cut_loop, divide_loop, fission, insert_sync, lift_alloc,  # noqa: F401
                        parallelize_loop, rename, reorder_loops, set_blocks_per_sm,
                        set_unroll, simplify, stage_mem)
from .matmul_parts import (_copy_all_threads, _has_loop, _transposed_a_copy,  # noqa: F401
                           _vectorize_copy, expand_acc, matmul_algorithm, split_k, stage_tiles)

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
    batched = _has_loop(p, "z")
    ty, tx = bm // tm, bn // tn
    assert bm % tm == 0 and bn % tn == 0 and tn % vec == 0
    zi = "z, " if batched else ""
    strided = tn > vec
    ncol = tn // vec if strided else 1
    wcol = vec if strided else tn
    cj = ["rjg", "rj"] if strided else ["rj"]

    # 0. the reduction: [0, bk * (n // bk)) tiled, the rest after it (same kernel)
    p = cut_loop(p, "p", f"{bk} * (n // {bk})")

    # 1. block tiles (guarded), thread tiles; loops bi bj ti tj ri [rjg] rj, the
    #    row guard inside ri and the column guard inside rj
    p = divide_loop(p, "i", bm, ["bi", "ii"], tail="guard")
    p = divide_loop(p, "ii", tm, ["ti", "ri"], tail="perfect")
    p = divide_loop(p, "j", bn, ["bj", "jj"], tail="guard")
    if strided:
        p = divide_loop(p, "jj", bn // ncol, ["rjg", "jr"], tail="perfect")
        p = divide_loop(p, "jr", wcol, ["tj", "rj"], tail="perfect")
        p = reorder_loops(p, "ri")
        p = reorder_loops(p, "rjg")
        p = reorder_loops(p, "ri")
    else:
        p = divide_loop(p, "jj", tn, ["tj", "rj"], tail="perfect")
        p = reorder_loops(p, "ri")
        p = reorder_loops(p, "ri")
    p = reorder_loops(p, "ti")
    if batched:
        p = parallelize_loop(p, "z", BLOCKS)
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "ti", THREADS)
    p = parallelize_loop(p, "tj", THREADS)

    # 2. the accumulator, staged inside both guards (in the array: no guarded copy,
    #    and no copy-in: the body starts with c = 0)
    row = f"{bm} * bi + {tm} * ti + ri"
    col = (f"{bn} * bj + {bn // ncol} * rjg + {wcol} * tj + rj" if strided
           else f"{bn} * bj + {tn} * tj + rj")
    p = stage_mem(p, p.find("c[_] = 0.0").parent().body(), f"c[{zi}{row}, {col}]", "acc",
                  REGISTER)
    p = expand_acc(p, wcol, ncol if strided else 1, tm, tx, ty)
    nl = 4 + strided  # register and thread loops
    p = lift_alloc(p, "acc", n_lifts=nl + 2)  # and the two guards

    # 3. the k loop in bk steps, split from the initialisation and the rest, moved
    #    outside the thread loops; the k step outside the register tile
    p = split_k(p, bk, nl + 2, cj)

    # 4. A (transposed, padded) and B tiles in SHARED, guarded scalar copies spread
    #    over every thread of the block; barriers at block level
    p, compute = stage_tiles(p, bm, bn, bk, zi)
    p, a_vec = _transposed_a_copy(p, bm, bk, ty, tx, 1, tm, zi)
    a_vec = vec if a_vec == 1 and vec > 1 and tm % vec == 0 and _pitch_ok(p, vec) else a_vec
    p = _copy_all_threads(p, "i0_1", "i1_1", bk, bn, ty, tx, 1)
    p = insert_sync(p, p.find_loop("po").body().before())
    p = insert_sync(p, p.forward(compute).before())

    # 5. the A column and the B row of each k step in registers (float4 reads of
    #    the shared tiles)
    awin = f"As[pi, {tm} * ti:{tm} * ti + {tm}]"
    if strided:
        p = reorder_loops(p, "ri #1")
        p = stage_mem(p, p.find_loop("rjg #1"), awin, "ra", REGISTER)
        p = stage_mem(p, p.find_loop("ri #1"),
                      f"Bs[pi, {bn // ncol} * rjg + {wcol} * tj:"
                      f"{bn // ncol} * rjg + {wcol} * tj + {wcol}]", "rb", REGISTER)
    else:
        inner = p.find_loop("ri #1")
        p = stage_mem(p, inner, awin, "ra", REGISTER)
        p = stage_mem(p, p.forward(inner), f"Bs[pi, {tn} * tj:{tn} * tj + {tn}]", "rb",
                      REGISTER)
    if vec > 1:
        if a_vec > 1:
            p = _vectorize_copy(p, "ra", a_vec)
        p = _vectorize_copy(p, "rb", vec)

    # 6. the reduction's tail outside the register loops (their constant trip counts
    #    keep the accumulator in registers)
    if _has_loop(p, "p"):
        p = fission(p, p.find_loop("p").after(), n_lifts=nl)
        for _ in range(nl - 2):
            q = p.find_loop("p").parent()
            if q.node().__class__.__name__ == "If":
                q = q.parent()
            p = reorder_loops(p, q)

    p = set_unroll(p, "pi")
    if blocks_per_sm:
        p = set_blocks_per_sm(p, "z" if batched else "bi", blocks_per_sm)
    return simplify(p)


def _pitch_ok(p, vec) -> bool:
    from ..schedule.simplify import const_value

    a = p.find("As: _").node()
    return const_value(a.shape[-1]) is not None and const_value(a.shape[-1]) % vec == 0


@lru_cache(maxsize=None)
def guarded_tiles_kernel(batched: bool, bm=128, bn=128, bk=8, tm=8, tn=8, vec=4) -> Proc:
    p = schedule_matmul_guarded_tiles(matmul_algorithm(batched), bm=bm, bn=bn, bk=bk,
                                      tm=tm, tn=tn, vec=vec)
    return rename(p, f"{'b' if batched else ''}matmul_tiles")
