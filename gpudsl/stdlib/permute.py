"""Permute schedules, derived from the readable algorithm with ``gpudsl.schedule``
primitives only.

``permute_kernel(shape, perm)`` merges axes (``shapes.merge_permutation``) into a
canonical permutation of rank 1 to 3, then:

* the innermost axis stays innermost (``(0,)``, ``(1, 0, 2)``): a plain copy,
  blocks over the outer axes, ``threads`` consecutive elements per block, float4
  when the inner extent is a multiple of 4 (a variant with that assert);
* the innermost axis moves: 32x32 tiles staged in SHARED memory, padded to
  32x33, a barrier, reads and writes coalesced (threadIdx.x walks the input's
  inner axis on the read and the output's on the write), 32x8 threads each
  copying 4 rows of the tile (4 independent global loads in flight per thread:
  enough bytes in flight per SM to reach copy bandwidth at DRAM latency, where one
  element per thread is not; ``gpudsl perf --sass`` counts them); the third axis of a
  rank-3 permutation is a batch over BLOCKS.  Where both tiled extents are
  multiples of 32 a variant with those asserts is proved by ``check()`` for every
  size of the class; other shapes cut the two loops at the largest multiples of
  32, run the tiled kernel there and two guarded edge kernels on the rest.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir.types import BLOCKS, SHARED, THREADS
from ..proc import Proc
from ..schedule import (divide_loop, insert_sync, pad_dim, parallelize_loop, rename,
                        reorder_loops, set_unroll, simplify, stage_mem, vectorize)
from .common import make_proc as _make
from .common import tiles_and_edges
from .shapes import merge_permutation, normalize_perm, require

TILE = 32
PER_THREAD = 4  # elements each thread of a tiled transpose copies: 32x8 threads


@lru_cache(maxsize=None)
def permute_algorithm(perm: tuple, asserts: tuple = (), dt: str = "f32") -> Proc:
    """``out = transpose(x, perm)`` for a merged permutation: loops over the output in
    order, reading the input where each element comes from; with preconditions
    ``asserts`` (pairs (axis of the input, divisor)).  ``dt``: the tensors' dtype (a
    copy: any float type, no arithmetic)."""
    rank = len(perm)
    d = [f"d{i}" for i in range(rank)]
    out_shape = [d[p] for p in perm]
    tag = "".join(f"_{d[a]}m{m}" for a, m in asserts) + ("" if dt == "f32" else f"_{dt}")
    name = "permute_" + "".join(map(str, perm)) + tag
    sizes = ", ".join(f"{x}: size" for x in d)
    lines = [f"def {name}({sizes}, x: {dt}[{', '.join(d)}], "
             f"out: {dt}[{', '.join(out_shape)}]):"]
    if asserts:
        lines.append("    assert " + " and ".join(f"{d[a]} % {m} == 0" for a, m in asserts))
    for k in range(rank):
        lines.append("    " * (k + 1) + f"for o{k} in seq(0, {out_shape[k]}):")
    src_idx = [""] * rank
    for k, p in enumerate(perm):
        src_idx[p] = f"o{k}"
    oidx = ", ".join(f"o{k}" for k in range(rank))
    lines.append("    " * (rank + 1) + f"out[{oidx}] = x[{', '.join(src_idx)}]")
    return _make(name, "\n".join(lines) + "\n")


def moves_inner(perm) -> bool:
    return perm[-1] != len(perm) - 1


# ---------------------------------------------------------------- copies


def schedule_copy(p: Proc, perm: tuple, *, threads: int = 256, vec: int = 4,
                  vectorized: bool = True) -> Proc:
    """Innermost axis kept: outer loops over BLOCKS, the inner one as ``threads``
    per block (``vec``-wide copies when ``vectorized``; the algorithm must then
    assert that ``vec`` divides the inner extent)."""
    rank = len(perm)
    inner = f"o{rank - 1}"
    if vectorized:
        p = divide_loop(p, inner, vec, ["q", "v"], tail="perfect")
        p = divide_loop(p, "q", threads, ["bq", "tq"], tail="guard")
        p = vectorize(p, "v", vec)
    else:
        p = divide_loop(p, inner, threads, ["bq", "tq"], tail="guard")
    for k in range(rank - 1):
        p = parallelize_loop(p, f"o{k}", BLOCKS)
    p = parallelize_loop(p, "bq", BLOCKS)
    p = parallelize_loop(p, "tq", THREADS)
    return simplify(p)


# ---------------------------------------------------------------- tiled transposes


def _roles(perm):
    """(batch loop or None, R = the loop over the input's inner axis, C = the
    output's inner loop) as loop names ``o<k>``."""
    rank = len(perm)
    r = f"o{perm.index(rank - 1)}"
    c = f"o{rank - 1}"
    rest = [f"o{k}" for k in range(rank) if f"o{k}" not in (r, c)]
    return (rest[0] if rest else None), r, c


def _order_loops(p, perm):
    """Reorder so the batch loop (if any) is outermost: batch, R, C."""
    batch, r, c = _roles(perm)
    if batch is not None and batch != "o0":
        p = reorder_loops(p, "o0")  # o0 (= R) and o1 (= batch) swap
    return p


def _rows_per_thread(p: Proc, loop: str, tile: int, per_thread: int, names) -> Proc:
    """``for t in seq(0, tile)`` becomes ``for ty in seq(0, tile // per_thread)`` around
    the loops nested in it, with a sequential ``for j in seq(0, per_thread)`` innermost:
    ``t = (tile // per_thread) * j + ty``, so each thread handles ``per_thread`` rows,
    ``tile // per_thread`` apart (a warp still walks one row: coalesced)."""
    j, ty = names
    p = divide_loop(p, loop, tile // per_thread, [j, ty], tail="perfect")
    p = reorder_loops(p, j)  # for ty: for j: for x
    p = reorder_loops(p, j)  # for ty: for x: for j
    return set_unroll(p, j)


def schedule_transpose(p: Proc, perm: tuple, *, tile: int = TILE, pad: int = 1,
                       ordered: bool = False, per_thread: int = PER_THREAD) -> Proc:
    """Shared tiles of ``tile`` x ``tile`` (padded by ``pad``), a barrier, coalesced
    both ways, with ``tile`` x ``tile // per_thread`` threads, each copying
    ``per_thread`` elements of a column of the tile in and out (``per_thread``
    independent global loads in flight); the algorithm must assert that ``tile``
    divides the two tiled extents (or the first R and C loops must be cut to multiples
    of it).  ``ordered``: the batch loop is already outermost."""
    if tile % per_thread:
        raise ValueError(f"per_thread={per_thread} must divide tile={tile}")
    batch, r, c = _roles(perm)
    if not ordered:
        p = _order_loops(p, perm)
    p = divide_loop(p, r, tile, ["br", "tr"], tail="perfect")
    p = divide_loop(p, c, tile, ["bc", "tc"], tail="perfect")
    p = reorder_loops(p, "tr")
    if batch is not None:
        p = parallelize_loop(p, batch, BLOCKS)
    p = parallelize_loop(p, "br", BLOCKS)
    p = parallelize_loop(p, "bc", BLOCKS)
    rows = "tr"
    if per_thread > 1:
        p = _rows_per_thread(p, "tr", tile, per_thread, ["jr", "ty"])
        rows = "ty"
    p = parallelize_loop(p, rows, THREADS)
    p = parallelize_loop(p, "tc", THREADS)
    # the tile of x: its inner axis is R (the input's last axis), C is another
    rank = len(perm)
    cin = perm[rank - 1]  # input axis indexed by C
    win = []
    for ax in range(rank):
        if ax == rank - 1:
            win.append(f"{tile} * br:{tile} * br + {tile}")
        elif ax == cin:
            win.append(f"{tile} * bc:{tile} * bc + {tile}")
        else:
            win.append(batch)
    threads = p.find_loop(rows)
    p = stage_mem(p, threads, f"x[{', '.join(win)}]", "tile", SHARED)
    rows_in = "tile_in0"
    if per_thread > 1:
        p = _rows_per_thread(p, "tile_in0", tile, per_thread, ["j0", "t0"])
        rows_in = "t0"
    p = parallelize_loop(p, rows_in, THREADS)
    p = parallelize_loop(p, "tile_in1", THREADS)
    p = insert_sync(p, p.forward(threads).before())
    # threadIdx.x walks tc on the write (consecutive outputs) and tile_in1 on the read
    # (the input's inner axis); the tile is read by columns: pad its rows
    if pad:
        p = pad_dim(p, "tile", 1, tile + pad)
    return simplify(p)


def schedule_transpose_cut(p: Proc, perm: tuple, *, tile: int = TILE, pad: int = 1,
                           threads: int = 256) -> Proc:
    """Any shape: ``cut_loop`` gives the tiled kernel of :func:`schedule_transpose`
    the largest multiples of ``tile`` of R (the loop over the input's inner axis)
    and C (the output's inner loop), and two edge kernels the rest: the last
    ``< tile`` outputs of each row, with threads along R (reads coalesced), and
    the last ``< tile`` values of R, with threads along C (writes coalesced)."""
    batch, r, c = _roles(perm)
    p = _order_loops(p, perm)

    def tiled(p):
        return schedule_transpose(p, perm, tile=tile, pad=pad, ordered=True)

    def edges(p):
        # edge 2 first (its loops are the last named r and c): the last R x all C,
        # blocks over PER_THREAD values of R and 256 values of C, threads along C
        # (writes coalesced), each copying its PER_THREAD values of R (unrolled:
        # independent loads in flight); an empty edge has an empty grid
        e2r = p.find_loop(r, many=True)[-1]
        p = divide_loop(p, e2r, PER_THREAD, ["ro_e1", "ri_e1"], tail="guard")
        p = divide_loop(p, p.find_loop(c, many=True)[-1], threads, ["bc_e1", "tc_e1"],
                        tail="guard")
        p = reorder_loops(p, "ri_e1")  # ri below bc
        p = reorder_loops(p, "ri_e1")  # ri below tc
        p = set_unroll(p, "ri_e1")
        if batch is not None:
            p = parallelize_loop(p, p.find_loop("ro_e1").parent(), BLOCKS)
        p = parallelize_loop(p, "ro_e1", BLOCKS)
        p = parallelize_loop(p, "bc_e1", BLOCKS)
        p = parallelize_loop(p, "tc_e1", THREADS)
        # edge 1: R in [0, R0) x the last C: threads walk R (reads coalesced), each
        # copies its < tile values of C in a sequential loop (ptxas unrolls it by 4:
        # 16 independent loads in flight)
        p = divide_loop(p, r, threads, ["br_e0", "tr_e0"], tail="guard")
        if batch is not None:
            p = parallelize_loop(p, p.find_loop("br_e0").parent(), BLOCKS)
        p = parallelize_loop(p, "br_e0", BLOCKS)
        return parallelize_loop(p, "tr_e0", THREADS)

    return tiles_and_edges(p, r, tile, c, tile, batch is not None, tiled, edges)


# ---------------------------------------------------------------- choosing


@lru_cache(maxsize=None)
def _kernel(perm: tuple, kind: str, dt: str = "f32") -> Proc:
    rank = len(perm)
    if kind == "vcopy":
        return schedule_copy(permute_algorithm(perm, ((rank - 1, 4),), dt), perm)
    if kind == "copy":
        return schedule_copy(permute_algorithm(perm, (), dt), perm, vectorized=False)
    if kind == "tiled":
        cin = perm[rank - 1]
        asserts = tuple(sorted({(rank - 1, TILE), (cin, TILE)}))
        return schedule_transpose(permute_algorithm(perm, asserts, dt), perm)
    p = schedule_transpose_cut(permute_algorithm(perm, (), dt), perm)
    return rename(p, p.name + "_cut")


def permute_kernel(shape, perm, dt: str = "f32"):
    """(proc, bindings, out_shape) for ``numpy.transpose(x, perm)`` on ``dt`` tensors:
    the proc's ``x`` and ``out`` have the *merged* shapes (``bindings`` give them as
    ``d0..``); reshape the operand and the result (``out_shape`` is the
    unmerged result shape)."""
    shape = tuple(int(s) for s in shape)
    require(len(shape) in (1, 2, 3), f"x has {len(shape)} dimension(s); permute takes 1 to 3")
    require(all(s > 0 for s in shape), f"x has an empty dimension: shape {shape}")
    perm = normalize_perm(perm, len(shape))
    out_shape = tuple(shape[p] for p in perm)
    mshape, mperm = merge_permutation(shape, perm)
    rank = len(mperm)
    bind = {f"d{i}": s for i, s in enumerate(mshape)}
    if not moves_inner(mperm):
        kind = "vcopy" if mshape[-1] % 4 == 0 else "copy"
    elif mshape[-1] % TILE == 0 and mshape[mperm[rank - 1]] % TILE == 0:
        kind = "tiled"
    else:
        kind = "cut"
    return _kernel(mperm, kind, dt), bind, out_shape


def merged_shapes(shape, perm):
    """(merged input shape, merged output shape) the kernel's arrays have."""
    mshape, mperm = merge_permutation(tuple(shape), tuple(perm))
    return mshape, tuple(mshape[p] for p in mperm)


__all__ = ["permute_kernel", "permute_algorithm", "schedule_copy", "schedule_transpose",
           "schedule_transpose_cut", "merged_shapes"]
