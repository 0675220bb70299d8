"""Matmul schedules: the readable algorithm turned into fast kernels with
``gpudsl.schedule`` primitives only.

* ``schedule_matmul`` — the big-tile kernel (the siboehm progression up to
  float4): a ``bm x bn`` block tile of C per thread block, ``bk``-deep tiles of A
  and B staged in SHARED memory with float4 copies and barriers, a ``tm x tn``
  register tile of C per thread (the accumulator), the A column and B row of
  each k step cached in registers (B with float4), float4 stores of C.  It serves
  the divisibility class ``m % bm == 0``, ``k % bn == 0``, ``n % bk == 0`` (an
  algorithm variant with those asserts, so ``check()`` proves it symbolically).
* ``schedule_matmul_cut`` — any shape of at least one tile: ``cut_loop`` gives
  the big-tile kernel the largest multiple of the tiles and two guarded edge
  kernels the rest (the ``n % bk`` tail of the reduction stays in the tiled kernel).
* ``schedule_matmul_guarded`` — smaller shapes: one block per row of C, a guarded
  thread per column (tails work, 1-element dimensions work).
* ``schedule_vecmat`` — ``[n] @ [n, k]``: threads over ``k`` (coalesced rows of
  B), a plain loop over ``n``.
* ``schedule_matmul_guarded_tiles`` — any shape of at least
  one tile in ONE kernel: the big-tile design with the edges guarded inside it.
* ``matmul_kernel(a_shape, b_shape)`` picks the variant and schedule
  (``matmul_variant``).

Names in the algorithm: ``c[i, j] += a[i, p] * b[p, j]`` with ``i < m``,
``j < k``, ``p < n``.
"""
from __future__ import annotations

from functools import lru_cache

from ..ir.printer import print_expr
from ..ir.types import BLOCKS, REGISTER, SHARED, THREADS
from ..proc import Proc
from ..schedule import (cut_loop, divide_loop, expand_dim, fission, insert_sync, lift_alloc,
                        merge_loops, pad_dim, parallelize_loop, rearrange_dim, rename,
                        reorder_loops, set_blocks_per_sm, set_unroll, simplify, stage_mem,
                        vectorize)
from .common import make_proc as _make
from .common import tiles_and_edges
from .shapes import NodeError, require

DEFAULTS = dict(bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, wm=0, wn=0)
# wm, wn: the warp tile of the big-tile kernel (0, 0: none; see schedule_matmul's
# warp_tile).  Off by default: the performance report's figures are the same either way
# (docs/decisions.md, issue 15 wave 3)


@lru_cache(maxsize=None)
def matmul_algorithm(batched: bool, divisible: tuple | None = None) -> Proc:
    """``c[m, k] = a[m, n] @ b[n, k]``, optionally over a leading batch axis ``z``,
    with the preconditions ``m % dm == 0 and k % dk == 0 and n % dn == 0`` when
    ``divisible = (dm, dk, dn)``."""
    assert_line = ""
    tag = ""
    if divisible is not None:
        dm, dk, dn = divisible
        assert_line = f"    assert m % {dm} == 0 and k % {dk} == 0 and n % {dn} == 0\n"
        tag = f"_{dm}x{dk}x{dn}"
    if batched:
        name = "bmatmul" + tag
        text = (
            f"def {name}(nb: size, m: size, n: size, k: size, a: f32[nb, m, n], "
            "b: f32[nb, n, k], c: f32[nb, m, k]):\n" + assert_line +
            "    for z in seq(0, nb):\n"
            "        for i in seq(0, m):\n"
            "            for j in seq(0, k):\n"
            "                c[z, i, j] = 0.0\n"
            "                for p in seq(0, n):\n"
            "                    c[z, i, j] += a[z, i, p] * b[z, p, j]\n")
    else:
        name = "matmul" + tag
        text = (
            f"def {name}(m: size, n: size, k: size, a: f32[m, n], b: f32[n, k], "
            "c: f32[m, k]):\n" + assert_line +
            "    for i in seq(0, m):\n"
            "        for j in seq(0, k):\n"
            "            c[i, j] = 0.0\n"
            "            for p in seq(0, n):\n"
            "                c[i, j] += a[i, p] * b[p, j]\n")
    return _make(name, text)


@lru_cache(maxsize=None)
def vecmat_algorithm() -> Proc:
    """``c[j] = sum_p a[p] * b[p, j]`` — the m = 1 case with a 1-D ``a`` and ``c``."""
    text = ("def vecmat(n: size, k: size, a: f32[n], b: f32[n, k], c: f32[k]):\n"
            "    for j in seq(0, k):\n"
            "        c[j] = 0.0\n"
            "        for p in seq(0, n):\n"
            "            c[j] += a[p] * b[p, j]\n")
    return _make("vecmat", text)


# ---------------------------------------------------------------- the big-tile kernel


def schedule_matmul(p: Proc, *, bm: int = 128, bn: int = 128, bk: int = 8, tm: int = 8,
                    tn: int = 8, vec: int = 4, cache_regs: bool = True,
                    vec_registers: bool = True, blocks_per_sm: int = 2,
                    strided_cols: bool = True, a_transposed: bool = True,
                    warp_tile: tuple | None = None) -> Proc:
    """2-D block tiling + thread tiling + float4, from ``matmul_algorithm(batched,
    (bm, bn, bk))``.  Threads per block: ``(bm // tm) x (bn // tn)``.

    ``vec_registers``: also use float4 between registers and shared/global memory
    (the B row into registers, the C tile out), when ``vec > 1``.

    ``strided_cols``: a thread's ``tn`` columns are ``tn // vec`` groups of ``vec``
    adjacent columns, ``bn * vec // tn`` apart (the threads of a warp read adjacent
    float4 of the B row: no bank conflict; a warp stores whole rows of C: minimum
    sectors).  ``a_transposed``: the A tile lives in shared memory transposed,
    ``[bk][bm + pad]`` (each thread's ``tm`` values of a k step are adjacent: float4
    reads, broadcast in a warp; the pad spreads the transposing stores over all
    banks).  Both tile copies spread over every thread of the block, a warp reading
    whole rows of the tiles (minimum sectors).

    ``warp_tile=(wm, wn)``: warp tiling (siboehm's kernel 10): each warp of the block
    owns a ``wm x wn`` tile of C, its 32 threads' ``tm x tn`` register tiles arranged
    ``(wm // tm) x (wn // tn)`` inside it (so ``(wm // tm) * (wn // tn) == 32``).  The
    thread loops become ``ti`` (the warp, ``(bm // wm) x (bn // wn)`` of them) and
    ``tj`` (the lane): a warp's reads of a k step touch ``wm`` values of the A tile
    and ``wn`` of the B tile instead of ``2 tm`` and ``bn``."""
    batched = _has_loop(p, "z")
    ty, tx = bm // tm, bn // tn
    assert bm % tm == 0 and bn % tn == 0 and tn % vec == 0
    zi = "z, " if batched else ""
    strided = strided_cols and tn > vec
    ncol = tn // vec if strided else 1  # column groups of a thread
    wcol = vec if strided else tn  # adjacent columns per group
    cj = ["rjg", "rj"] if strided else ["rj"]

    # 1. block tiles and thread tiles; loops bi bj ti tj ri [rjg] rj
    if warp_tile is not None:
        p, ty, tx, arow, bcol = _warp_loops(p, bm, bn, tm, tn, ncol, wcol, warp_tile)
    else:
        arow = f"{tm} * ti"  # the thread's first row in the block tile
        bcol = f"{wcol} * tj"  # ... and first column (of each column group)
    p = _thread_loops(p, bm, bn, tm, tn, ncol, wcol, strided) if warp_tile is None else p
    if batched:
        p = parallelize_loop(p, "z", BLOCKS)
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "ti", THREADS)
    p = parallelize_loop(p, "tj", THREADS)

    # 2. the accumulator: one register per output, expanded to the thread tile and
    #    the block's threads, allocated at block level
    gstep = (warp_tile[1] if warp_tile is not None else bn) // ncol  # column groups apart
    row = f"{bm} * bi + {arow} + ri"
    col = (f"{bn} * bj + {gstep} * rjg + {bcol} + rj" if strided
           else f"{bn} * bj + {bcol} + rj")
    cwin = f"c[{zi}{row}, {col}]"
    if warp_tile is not None:  # the merged loops' index as written (stage_mem then
        st = p.find("c[_] = 0.0")  # sees the zeroing overwrite the whole window)
        cwin = "c[" + ", ".join(print_expr(e) for e in st.node().idx) + "]"
    p = stage_mem(p, p.find_loop("rj").body(), cwin, "acc", REGISTER)

    p = expand_dim(p, "acc", wcol, "rj")
    if strided:
        p = expand_dim(p, "acc", ncol, "rjg")
    p = expand_dim(p, "acc", tm, "ri")
    p = expand_dim(p, "acc", tx, "tj")
    p = expand_dim(p, "acc", ty, "ti")
    nl = 4 + strided
    p = lift_alloc(p, "acc", n_lifts=nl)

    # 3. the k loop in bk steps, split from the initialisation and the write-back,
    #    moved outside the thread loops; the k step outside the register tile
    p = divide_loop(p, "p", bk, ["po", "pi"], tail="perfect")
    p = fission(p, p.find("acc[_] = 0.0").after(), n_lifts=nl)
    p = fission(p, p.find_loop("po").after(), n_lifts=nl)
    reg_loops = [x + " #1" for x in reversed(["ri"] + cj)]
    for lp in reg_loops + ["tj #1", "ti #1"]:
        p = reorder_loops(p, lp)
    for lp in reg_loops:
        p = reorder_loops(p, lp)

    # 4. A and B tiles in SHARED, copied by all the block's threads (float4 reads)
    compute = p.find_loop("ti #1")
    p = stage_mem(p, compute, f"a[{zi}{bm} * bi:{bm} * bi + {bm}, {bk} * po:{bk} * po + {bk}]",
                  "As", SHARED)
    p = stage_mem(p, p.forward(compute),
                  f"b[{zi}{bk} * po:{bk} * po + {bk}, {bn} * bj:{bn} * bj + {bn}]", "Bs", SHARED)
    a_vec = 1
    if a_transposed:
        p, a_vec = _transposed_a_copy(p, bm, bk, ty, tx, vec, tm, zi)
    else:
        p = _copy_threads(p, "i0", "i1", bm, bk, ty, tx, vec)
    p = _copy_all_threads(p, "i0_1", "i1_1", bk, bn, ty, tx, vec)
    p = insert_sync(p, p.find_loop("po").body().before())
    p = insert_sync(p, p.forward(compute).before())

    # 5. the A column and the B row of each k step in registers
    if cache_regs:
        awin = (f"As[pi, {arow}:{arow} + {tm}]" if a_transposed
                else f"As[{arow}:{arow} + {tm}, pi]")
        if strided:  # pi rjg ri rj: ra for the k step, rb for each column group
            p = reorder_loops(p, "ri #1")
            p = stage_mem(p, p.find_loop("rjg #1"), awin, "ra", REGISTER)
            p = stage_mem(p, p.find_loop("ri #1"),
                          f"Bs[pi, {gstep} * rjg + {bcol}:"
                          f"{gstep} * rjg + {bcol} + {wcol}]", "rb", REGISTER)
        else:
            inner = p.find_loop("ri #1")
            p = stage_mem(p, inner, awin, "ra", REGISTER)
            p = stage_mem(p, p.forward(inner), f"Bs[pi, {bcol}:{bcol} + {tn}]", "rb",
                          REGISTER)
        if vec_registers and vec > 1:
            if a_vec > 1:
                p = _vectorize_copy(p, "ra", a_vec)
            p = _vectorize_copy(p, "rb", vec)

    # a reduction tail that cut_loop left (schedule_matmul_cut), moved outside the
    # register tile loops, whose constant trip counts keep the accumulator in registers
    if _has_loop(p, "p"):
        p = fission(p, p.find_loop("p").after(), n_lifts=nl - 2)
        for _ in range(nl - 2):
            p = reorder_loops(p, p.find_loop("p").parent())

    # the k step unrolled: nvcc overlaps the shared loads of the steps with the FMAs;
    # that needs many registers, so ask for blocks_per_sm resident blocks (2 fit in 128
    # registers without spills)
    p = set_unroll(p, "pi")
    if blocks_per_sm:
        p = set_blocks_per_sm(p, "z" if batched else "bi", blocks_per_sm)

    # 6. float4 stores of the register tile
    if vec_registers and vec > 1:
        p = _vectorize_store(p, vec, zi)
    return simplify(p)


def _thread_loops(p, bm, bn, tm, tn, ncol, wcol, strided):
    """Loops bi bj ti tj ri [rjg] rj: thread (ti, tj) owns rows ``tm * ti + ri`` and
    columns ``(bn // ncol) * rjg + wcol * tj + rj`` of the block tile."""
    p = divide_loop(p, "i", bm, ["bi", "ii"], tail="perfect")
    p = divide_loop(p, "ii", tm, ["ti", "ri"], tail="perfect")
    p = divide_loop(p, "j", bn, ["bj", "jj"], tail="perfect")
    if strided:
        p = divide_loop(p, "jj", bn // ncol, ["rjg", "jr"], tail="perfect")
        p = divide_loop(p, "jr", wcol, ["tj", "rj"], tail="perfect")
        p = reorder_loops(p, "ri")  # bi ti bj ri rjg tj rj
        p = reorder_loops(p, "rjg")  # ... ri tj rjg rj
        p = reorder_loops(p, "ri")  # ... tj ri rjg rj
    else:
        p = divide_loop(p, "jj", tn, ["tj", "rj"], tail="perfect")
        p = reorder_loops(p, "ri")
        p = reorder_loops(p, "ri")
    return reorder_loops(p, "ti")


def _warp_loops(p, bm, bn, tm, tn, ncol, wcol, warp_tile):
    """Loops bi bj ti tj ri [rjg] rj for warp tiling: ``ti`` the warp (``wi``, ``wj``
    merged), ``tj`` the lane (``li``, ``lj`` merged); lane (li, lj) of warp (wi, wj)
    owns rows ``wm * wi + tm * li + ri`` and columns ``wn * wj + (wn // ncol) * rjg +
    wcol * lj + rj``.  Returns (proc, threads y, threads x, the thread's first row
    and first column in the block tile)."""
    wm, wn = warp_tile
    nwi, nwj, nli, nlj = bm // wm, bn // wn, wm // tm, wn // tn
    if (bm % wm or bn % wn or wm % tm or wn % tn or nli * nlj != 32):
        raise ValueError(f"warp_tile {warp_tile}: needs bm % wm == bn % wn == wm % tm == "
                         f"wn % tn == 0 and (wm // tm) * (wn // tn) == 32 (bm={bm}, "
                         f"bn={bn}, tm={tm}, tn={tn})")
    p = divide_loop(p, "i", bm, ["bi", "ii"], tail="perfect")
    p = divide_loop(p, "ii", wm, ["wi", "iw"], tail="perfect")
    p = divide_loop(p, "iw", tm, ["li", "ri"], tail="perfect")
    p = divide_loop(p, "j", bn, ["bj", "jj"], tail="perfect")
    p = divide_loop(p, "jj", wn, ["wj", "jw"], tail="perfect")
    if ncol > 1:
        p = divide_loop(p, "jw", wn // ncol, ["rjg", "jr"], tail="perfect")
        p = divide_loop(p, "jr", wcol, ["lj", "rj"], tail="perfect")
        order = ["bi", "wi", "li", "ri", "bj", "wj", "rjg", "lj", "rj"]
        want = ["bi", "bj", "wi", "wj", "li", "lj", "ri", "rjg", "rj"]
    else:
        p = divide_loop(p, "jw", tn, ["lj", "rj"], tail="perfect")
        order = ["bi", "wi", "li", "ri", "bj", "wj", "lj", "rj"]
        want = ["bi", "bj", "wi", "wj", "li", "lj", "ri", "rj"]
    p = _permute_nest(p, order, want)
    p = merge_loops(p, "wi", "ti")
    p = merge_loops(p, "li", "tj")
    arow = f"{wm} * (ti // {nwj}) + {tm} * (tj // {nlj})"
    bcol = f"{wn} * (ti % {nwj}) + {wcol} * (tj % {nlj})"
    return p, nwi * nwj, 32, arow, bcol


def _permute_nest(p, order, want):
    """Reorder a perfect loop nest from ``order`` to ``want`` by adjacent swaps."""
    order = list(order)
    for k, name in enumerate(want):
        at = order.index(name)
        while at > k:  # swap it outwards with its parent
            p = reorder_loops(p, order[at - 1])
            order[at - 1], order[at] = order[at], order[at - 1]
            at -= 1
    return p


def _transposed_a_copy(p, bm, bk, ty, tx, vec, tm, zi):
    """The A tile ``As[bm, bk]`` stored transposed, ``[bk][bm + pad]``: each thread
    reads ``vec`` adjacent values of a row of A (float4, through registers ``ta``) and
    stores them down a column of ``As``; the pad puts the ``bk // vec`` column groups
    a warp stores on distinct banks.  Returns (proc, the vector width the register
    cache may read ``As`` with)."""
    p = rearrange_dim(p, "As", [1, 0])
    vcols = bk // vec if vec > 1 and bk % vec == 0 else 0
    if vcols:
        p = divide_loop(p, "i1", vec, ["i1o", "i1v"], tail="perfect")
        p = stage_mem(p, p.find_loop("i1v"),
                      f"a[{zi}{bm} * bi + i0, {bk} * po + {vec} * i1o:"
                      f"{bk} * po + {vec} * i1o + {vec}]", "ta", REGISTER)
        p = _vectorize_copy(p, "ta", vec)
        p = _spread(p, "i0", "i1o", bm * vcols, ty, tx, "ia")
    else:
        p = _spread(p, "i0", "i1", bm * bk, ty, tx, "ia")
    # a warp stores rows_w = 32 // groups rows, each as `groups` column groups `vw`
    # apart: pad so that (vw * pitch) % 32 == rows_w (a bank per lane)
    vw, groups = (vec, vcols) if vcols else (1, bk)
    pad = 0
    if groups > 1 and 32 % groups == 0:
        want = 32 // groups
        pad = next((d for d in range(32) if (vw * (bm + d)) % 32 == want), 0)
        if pad:
            p = pad_dim(p, "As", 1, bm + pad)
    pitch = bm + pad
    a_vec = vec if vec > 1 and pitch % vec == 0 and tm % vec == 0 else 1
    return p, a_vec


def _spread(p, r, c_, n, ty, tx, name):
    """Merge the copy loops ``r`` (outer) and ``c_`` into one loop of ``n`` (row-major:
    consecutive threads take consecutive elements) and share it out over the block's
    ``ty x tx`` threads (a guard where they do not divide it)."""
    p = merge_loops(p, r, name)
    T = ty * tx
    inner = name
    if n > T:
        p = divide_loop(p, name, T, [name + "s", name + "t"],
                        tail="perfect" if n % T == 0 else "guard")
        inner = name + "t"
    p = divide_loop(p, inner, tx, [name + "y", name + "x"],
                    tail="perfect" if n % tx == 0 else "guard")
    p = parallelize_loop(p, name + "y", THREADS)
    p = parallelize_loop(p, name + "x", THREADS)
    return p


def _copy_all_threads(p, r, c_, rows, cols, ty, tx, vec):
    """A ``rows x cols`` tile copy (loops r, c_) with ``vec``-wide copies over every
    thread of the block, row-major (a warp reads whole rows)."""
    if vec > 1 and cols % vec == 0:
        p = divide_loop(p, c_, vec, [c_ + "o", c_ + "v"], tail="perfect")
        p = vectorize(p, c_ + "v", vec)
        return _spread(p, r, c_ + "o", rows * cols // vec, ty, tx, "ib")
    return _spread(p, r, c_, rows * cols, ty, tx, "ib")


def _has_loop(p, name) -> bool:
    try:
        p.find_loop(name)
        return True
    except Exception:
        return False


def _copy_threads(p, r, c_, rows, cols, ty, tx, vec):
    """Map a ``rows x cols`` tile copy (loops r, c_) onto ``ty x tx`` threads with
    ``vec``-wide copies: c_ → [c_o, v] (vectorized); the rows and the vector
    columns share out the threads."""
    vcols = cols // vec
    if vec > 1:
        p = divide_loop(p, c_, vec, [c_ + "o", c_ + "v"], tail="perfect")
        p = vectorize(p, c_ + "v", vec)
        co = c_ + "o"
    else:
        co = c_
    if vcols >= tx:  # columns over x (and seq), rows over y (and seq)
        p = divide_loop(p, co, tx, [co + "s", co + "t"], tail="perfect")
        if rows > ty:
            p = divide_loop(p, r, ty, [r + "s", r + "t"], tail="perfect")
            # r_s r_t co_s co_t → r_s co_s r_t co_t
            p = reorder_loops(p, r + "t")
            p = parallelize_loop(p, r + "t", THREADS)
        else:
            p = reorder_loops(p, r)  # co_s r co_t
            p = parallelize_loop(p, r, THREADS)
        p = parallelize_loop(p, co + "t", THREADS)
    else:  # few vector columns: rows split over y and x, columns seq
        f = tx // vcols if tx % vcols == 0 else 1
        # rows = (rows // (ty*f)) x ty x f ... use rows -> [rs, ry, rx]
        per = ty * f
        if rows >= per and rows % per == 0:
            p = divide_loop(p, r, per, [r + "s", r + "yx"], tail="perfect")
            p = divide_loop(p, r + "yx", f, [r + "y", r + "x"], tail="perfect")
            # r_s r_y r_x co v  → r_s r_y (r_x co) : map r_y y, r_x x ... co seq
            p = parallelize_loop(p, r + "y", THREADS)
            p = parallelize_loop(p, r + "x", THREADS)
        else:
            p = parallelize_loop(p, r, THREADS)
    return p


def _vectorize_copy(p, name, vec):
    from ..schedule.cursors import find

    st = find(p, f"{name}[_] = _")
    loop = st.parent()
    it = loop.node().iter
    n = loop.node().hi
    from ..schedule.simplify import const_value

    if const_value(n) is None or const_value(n) % vec:
        return p
    p = divide_loop(p, loop, vec, [it + "o", it + "v"], tail="perfect")
    return vectorize(p, it + "v", vec)


def _vectorize_store(p, vec, zi):
    from ..schedule.cursors import find

    st = find(p, "c[_] = acc[_]")
    if len(st.parent().node().body) > 1:  # an epilogue on acc first (gpudsl.graph fusion)
        p = fission(p, st.before())
        st = find(p, "c[_] = acc[_]")
    loop = st.parent()
    it = loop.node().iter
    p = divide_loop(p, loop, vec, [it + "o", it + "v"], tail="perfect")
    return vectorize(p, it + "v", vec)


# ---------------------------------------------------------------- any shape: cut loops


def schedule_matmul_cut(p: Proc, *, bm: int = 128, bn: int = 128, bk: int = 8, tm: int = 8,
                        tn: int = 8, vec: int = 4, threads: int = 128) -> Proc:
    """Any shape, from ``matmul_algorithm(batched)`` (with ``vec > 1``:
    ``matmul_algorithm(batched, (1, vec, vec))``, whose asserts make the float4
    copies provably aligned).  ``cut_loop`` splits C into three parts, each its own
    kernel:

    * rows ``[0, bm*(m//bm))`` x columns ``[0, bn*(k//bn))``: the big-tile kernel of
      :func:`schedule_matmul` over ``p < bk*(n//bk)``, followed in the same kernel
      by the remaining ``n % bk`` steps read straight from global memory;
    * the same rows x the last ``k % bn`` columns, and the last ``m % bm`` rows x
      all columns: one block per row, ``threads`` columns per block (guarded).

    An empty part launches nothing, so shapes smaller than a tile work too."""
    batched = _has_loop(p, "z")

    def tiled(p):
        # the reduction of the first part: [0, n0) tiled, [n0, n) after it
        p = cut_loop(p, "p", f"{bk} * (n // {bk})")
        return schedule_matmul(p, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vec=vec)

    def edges(p):
        # in program order (the first loop still named i is the next one)
        p = _schedule_edge(p, "_e0", threads, batched)
        return _schedule_edge(p, "_e1", threads, batched)

    return tiles_and_edges(p, "i", bm, "j", bn, batched, tiled, edges)


def _schedule_edge(p: Proc, sfx: str, threads: int, batched: bool) -> Proc:
    """The loop nest of the first loop still named ``j`` (in ``[z,] i``): one block per
    row of C and ``threads`` columns per block with a guarded tail; the output in a
    register while it is summed."""
    bj, tj = "bj" + sfx, "tj" + sfx
    q = divide_loop(p, p.find_loop("j"), threads, [bj, tj], tail="guard")
    if batched:
        q = parallelize_loop(q, q.find_loop(bj).parent().parent(), BLOCKS)
    q = parallelize_loop(q, q.find_loop(bj).parent(), BLOCKS)
    q = parallelize_loop(q, bj, BLOCKS)
    q = parallelize_loop(q, tj, THREADS)
    st = q.find("c[_] = 0.0")
    win = "c[" + ", ".join(print_expr(e) for e in st.node().idx) + "]"
    return stage_mem(q, st.parent().body(), win, "acc" + sfx, REGISTER)


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
    p = expand_dim(p, "acc", wcol, "rj")
    if strided:
        p = expand_dim(p, "acc", ncol, "rjg")
    p = expand_dim(p, "acc", tm, "ri")
    p = expand_dim(p, "acc", tx, "tj")
    p = expand_dim(p, "acc", ty, "ti")
    nl = 4 + strided  # register and thread loops
    p = lift_alloc(p, "acc", n_lifts=nl + 2)  # and the two guards

    # 3. the k loop in bk steps, split from the initialisation and the rest, moved
    #    outside the thread loops; the k step outside the register tile
    p = divide_loop(p, "p", bk, ["po", "pi"], tail="perfect")
    p = fission(p, p.find("acc[_] = 0.0").after(), n_lifts=nl + 2)
    p = fission(p, p.find_loop("po").after(), n_lifts=nl + 2)
    reg_loops = [x + " #1" for x in reversed(["ri"] + cj)]
    for lp in reg_loops + ["tj #1", "ti #1"]:
        p = reorder_loops(p, lp)
    for lp in reg_loops:
        p = reorder_loops(p, lp)

    # 4. A (transposed, padded) and B tiles in SHARED, guarded scalar copies spread
    #    over every thread of the block; barriers at block level
    compute = p.find_loop("ti #1")
    p = stage_mem(p, compute, f"a[{zi}{bm} * bi:{bm} * bi + {bm}, {bk} * po:{bk} * po + {bk}]",
                  "As", SHARED)
    p = stage_mem(p, p.forward(compute),
                  f"b[{zi}{bk} * po:{bk} * po + {bk}, {bn} * bj:{bn} * bj + {bn}]", "Bs", SHARED)
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


# ---------------------------------------------------------------- fallbacks


def schedule_matmul_guarded(p: Proc, *, threads: int = 128) -> Proc:
    """Any shape: one block per row of C and ``threads`` columns (guarded tail),
    one output per thread; reads of ``b`` are coalesced, ``a`` is broadcast.
    (A guard between the row and column loops would block ``reorder_loops``, so
    rows are not tiled.)"""
    batched = _has_loop(p, "z")
    p = divide_loop(p, "j", threads, ["bj", "tj"], tail="guard")
    if batched:
        p = parallelize_loop(p, "z", BLOCKS)
    p = parallelize_loop(p, "i", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "tj", THREADS)
    zi = "z, " if batched else ""
    p = stage_mem(p, p.find("c[_] = 0.0").parent().body(), f"c[{zi}i, {threads} * bj + tj]",
                  "acc", REGISTER)
    return simplify(p)


def schedule_vecmat(p: Proc, *, threads: int = 256) -> Proc:
    """``[n] @ [n, k]``: one output column per thread, coalesced rows of b."""
    p = divide_loop(p, "j", threads, ["bj", "tj"], tail="guard")
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "tj", THREADS)
    p = stage_mem(p, p.find("c[_] = 0.0").parent().body(), f"c[{threads} * bj + tj]",
                  "acc", REGISTER)
    return simplify(p)


# ---------------------------------------------------------------- choosing


def _big_ok(m, n, k, o) -> bool:
    return m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0


@lru_cache(maxsize=None)
def big_kernel(batched: bool, bm=128, bn=128, bk=8, tm=8, tn=8, vec=4, wm=0, wn=0) -> Proc:
    return schedule_matmul(matmul_algorithm(batched, (bm, bn, bk)), bm=bm, bn=bn, bk=bk,
                           tm=tm, tn=tn, vec=vec, warp_tile=(wm, wn) if wm else None)


@lru_cache(maxsize=None)
def cut_kernel(batched: bool, vec: int, bm=128, bn=128, bk=8, tm=8, tn=8) -> Proc:
    alg = matmul_algorithm(batched, (1, vec, vec) if vec > 1 else None)
    p = schedule_matmul_cut(alg, bm=bm, bn=bn, bk=bk, tm=tm, tn=tn, vec=vec)
    return rename(p, f"{'b' if batched else ''}matmul_cut{'_v%d' % vec if vec > 1 else ''}")


@lru_cache(maxsize=None)
def guarded_kernel(batched: bool) -> Proc:
    return schedule_matmul_guarded(matmul_algorithm(batched))


@lru_cache(maxsize=None)
def vecmat_kernel() -> Proc:
    return schedule_vecmat(vecmat_algorithm())


def matmul_kernel(a_shape, b_shape, a_dtype=None, b_dtype=None, **opts):
    """(proc, bindings) for ``a @ b`` with these shapes.  The proc's parameters
    are ``a``, ``b``, ``c`` with the shapes of the operands and the result
    (``[k]`` for ``[n] @ [n, k]``).  Raises ``NodeError`` for bad shapes."""
    import numpy as np

    for nm, dt in (("a", a_dtype), ("b", b_dtype)):
        if dt is not None:
            dt_ = dt if not str(dt).startswith("torch.") else str(dt)[6:]
            require(np.dtype(dt_) == np.float32,
                    f"{nm} is {dt}; the standard library works on float32",
                    "convert with .astype(np.float32)")
    a_shape = tuple(int(d) for d in a_shape)
    b_shape = tuple(int(d) for d in b_shape)
    for nm, s in (("a", a_shape), ("b", b_shape)):
        require(len(s) in (1, 2, 3), f"{nm} has {len(s)} dimension(s); matmul takes 1 to 3")
        require(all(d > 0 for d in s), f"{nm} has an empty dimension: shape {s}")
    o = dict(DEFAULTS, **opts)
    ra, rb = len(a_shape), len(b_shape)
    if ra == 1:
        require(rb == 2, f"a vector-matrix product needs b of rank 2, not {rb}")
        require(a_shape[0] == b_shape[0],
                f"inner dimensions differ: a {a_shape} and b {b_shape}")
        return vecmat_kernel(), dict(n=a_shape[0], k=b_shape[1])
    require(ra == rb, f"a has rank {ra} and b rank {rb}; matmul takes [m,n]@[n,k], "
            "[n]@[n,k] or [b,m,n]@[b,n,k]")
    if ra == 3:
        require(a_shape[0] == b_shape[0],
                f"batch dimensions differ: a {a_shape} and b {b_shape}")
    require(a_shape[-1] == b_shape[-2],
            f"inner dimensions differ: a {a_shape} and b {b_shape}")
    m, n, k = a_shape[-2], a_shape[-1], b_shape[-1]
    bind = dict(m=m, n=n, k=k)
    batched = ra == 3
    if batched:
        bind["nb"] = a_shape[0]
    if _big_ok(m, n, k, o):
        return big_kernel(batched, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"],
                          o["vec"]), bind
    variant, vec = matmul_variant(m, n, k, o)
    if variant == "tiles":  # edges in the tiled kernel: one launch (docs/decisions.md)
        return guarded_tiles_kernel(batched, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"],
                                    o["vec"]), bind
    if variant == "cut":  # a tiled part whose edges are empty: one launch
        return cut_kernel(batched, vec, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"]), bind
    return guarded_kernel(batched), bind


def matmul_variant(m: int, n: int, k: int, o: dict) -> tuple[str, int]:
    """The variant :func:`matmul_kernel` runs for ``[m, n] @ [n, k]`` with the options
    ``o`` (DEFAULTS filled in): ``("big" | "cut" | "tiles" | "guarded", vec)``.

    At least a tile: ``big`` where the tiles divide; ``cut`` where only the reduction
    has a tail (the cut's edge kernels are empty: one launch, float4 copies); else
    ``tiles``, the one-kernel guarded big tile (the cut variant would launch two or
    three kernels, its edges one block per row).  Smaller: ``guarded``."""
    if m % o["bm"] == 0 and k % o["bn"] == 0 and n % o["bk"] == 0:
        return "big", o["vec"]
    if m >= o["bm"] and k >= o["bn"]:
        if m % o["bm"] == 0 and k % o["bn"] == 0:
            return "cut", (o["vec"] if n % o["vec"] == 0 and k % o["vec"] == 0 else 1)
        return "tiles", o["vec"]
    return "guarded", 1


# ---------------------------------------------------------------- tuning


def matmul_space(bm=(32, 64, 128), bn=(32, 64, 128), bk=(8, 16), tm=(4, 8), tn=(4, 8),
                 wm=(0, 16, 32, 64), wn=(0, 16, 32, 64)):
    """The big-tile schedule's parameters as an autotuning space (SPEC section 8):
    tiles that divide, at most 1024 threads per block; a warp tile ``wm x wn`` (0 x 0:
    none) that divides the block tile and holds 32 thread tiles."""
    from ..autotune.space import Space

    return Space(bm=list(bm), bn=list(bn), bk=list(bk), tm=list(tm), tn=list(tn),
                 wm=list(wm), wn=list(wn),
                 where=lambda c: c.bm % c.tm == 0 and c.bn % c.tn == 0
                 and 32 <= (c.bm // c.tm) * (c.bn // c.tn) <= 1024 and _warp_ok(c))


def _warp_ok(c) -> bool:
    wm, wn = c.get("wm", 0), c.get("wn", 0)
    if not wm or not wn:
        return not wm and not wn
    # wm > 32 with bk = 16: the padded A tile's pitch (bm + 2) is no multiple of 4, the
    # register cache reads it one float at a time, and rows wm apart share a bank (a
    # 2-way conflict in the report)
    return (c.bm % wm == 0 and c.bn % wn == 0 and wm % c.tm == 0 and wn % c.tn == 0
            and (wm // c.tm) * (wn // c.tn) == 32 and (wm <= 32 or c.bk == 8))


def options_kernel(a_shape, b_shape, **opts):
    """``matmul_kernel`` with every option of :data:`DEFAULTS` applied, the warp tile
    ``wm``/``wn`` included: when the picker chose the big-tile kernel, that kernel
    warp-tiled.  What ``MatmulBuild`` builds and ``ops.matmul`` runs for a tuned
    winner (one kernel for one configuration)."""
    wm, wn = opts.pop("wm", 0), opts.pop("wn", 0)
    p, bind = matmul_kernel(a_shape, b_shape, **opts)
    if wm and wn:
        o = dict(DEFAULTS, **opts)
        args = (len(a_shape) == 3, o["bm"], o["bn"], o["bk"], o["tm"], o["tn"], o["vec"])
        if p is big_kernel(*args):  # the picker's call (lru_cache: the same object)
            p = big_kernel(*args, wm, wn)
    return p, bind


class MatmulBuild:
    """The schedule function ``gpudsl tune matmul`` tunes: a configuration of
    :func:`matmul_space` → the kernel ``gpudsl.ops.matmul`` runs for these shapes with
    those parameters (picklable, so candidates can be built in other processes)."""

    task = "matmul"

    def __init__(self, a_shape, b_shape):
        self.a_shape, self.b_shape = tuple(a_shape), tuple(b_shape)

    def __call__(self, config):
        return options_kernel(self.a_shape, self.b_shape, **dict(config))[0]

    def __repr__(self):
        return f"MatmulBuild({self.a_shape}, {self.b_shape})"


def tuned_options(a_shape, b_shape, target: str) -> dict:
    """The tuning database's winner for these shapes on ``target``'s device, or ``{}``
    (the defaults).  Never tunes."""
    from ..autotune.db import lookup_winner
    from ..autotune.env import env_key

    out = tuple(a_shape[:-1]) + (b_shape[-1],)
    shapes = {"a": (tuple(a_shape), "float32"), "b": (tuple(b_shape), "float32"),
              "c": (out, "float32")}
    try:
        w = lookup_winner(MatmulBuild.task, shapes, env_key(target))
    except Exception:  # an unreadable database never stops a matmul: the defaults
        w = None
    return {k: v for k, v in (w or {}).items() if k in DEFAULTS}


__all__ = ["matmul_space", "MatmulBuild", "options_kernel", "tuned_options", "schedule_matmul",
           "schedule_matmul_cut", "schedule_matmul_guarded",
           "schedule_matmul_guarded_tiles",
           "schedule_vecmat", "matmul_algorithm", "vecmat_algorithm", "matmul_kernel", "NodeError",
           "matmul_variant",
           "DEFAULTS"]
