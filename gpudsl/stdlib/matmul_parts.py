"""The parts the matmul kernels share: the readable algorithms (``matmul_algorithm``,
``vecmat_algorithm``) and the schedule steps of the big-tile kernels (their tile
geometry ``Tiles``, thread and warp loops, the accumulator, the k split, the staged
tiles and the copies that fill them, the register cache of a k step, the reduction
tail, float4 loads and stores).  The kernels are built in :mod:`.matmul` (big tile, cut,
fallbacks, the picker) and :mod:`.matmul_tiles` (one kernel of any shape)."""
from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from ..ir.types import BLOCKS, REGISTER, SHARED, THREADS  # noqa: F401
from ..proc import Proc
from ..schedule import (divide_loop, expand_dim, fission, insert_sync,  # noqa: F401
                        lift_alloc, merge_loops, pad_dim, parallelize_loop, rearrange_dim,
                        reorder_loops, set_blocks_per_sm, set_unroll, stage_mem, vectorize)
from .common import make_proc as _make


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



def _thread_loops(p, bm, bn, tm, tn, ncol, wcol, strided, tail: str = "perfect"):
    """Loops bi bj ti tj ri [rjg] rj: thread (ti, tj) owns rows ``tm * ti + ri`` and
    columns ``(bn // ncol) * rjg + wcol * tj + rj`` of the block tile.  ``tail``: how
    the rows and columns divide into block tiles (``"guard"``: the guards ``row < m``,
    ``col < k`` end up inside ``ri`` and ``rj``)."""
    p = divide_loop(p, "i", bm, ["bi", "ii"], tail=tail)
    p = divide_loop(p, "ii", tm, ["ti", "ri"], tail="perfect")
    p = divide_loop(p, "j", bn, ["bj", "jj"], tail=tail)
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


def _transposed_a_copy(p, bm, bk, ty, tx, vec, tm, zi, scalar: bool = False,
                       read_vec: int = 0):
    """The A tile ``As[bm, bk]`` stored transposed, ``[bk][bm + pad]``: each thread
    reads ``vec`` adjacent values of a row of A (float4, through registers ``ta``) and
    stores them down a column of ``As``; the pad puts the ``bk // vec`` column groups
    a warp stores on distinct banks.  ``scalar``: one element a copy, straight from
    global to shared memory (what ``make_async`` turns into 4-byte async copies), the
    thread loops outermost.  ``read_vec`` (0: ``vec``): the width the register cache
    would read ``As`` with, which the pad keeps (``a_pad``).  Returns (proc, the vector
    width the register cache may read ``As`` with)."""
    p = rearrange_dim(p, "As", [1, 0])
    vcols = bk // vec if vec > 1 and bk % vec == 0 and not scalar else 0
    if vcols:
        p = divide_loop(p, "As_in1", vec, ["i1o", "i1v"], tail="perfect")
        p = stage_mem(p, p.find_loop("i1v"),
                      f"a[{zi}{bm} * bi + As_in0, {bk} * po + {vec} * i1o:"
                      f"{bk} * po + {vec} * i1o + {vec}]", "ta", REGISTER)
        p = _vectorize_copy(p, "ta", vec)
        p = _spread(p, "As_in0", "i1o", bm * vcols, ty, tx, "ia")
    else:
        p = _spread(p, "As_in0", "As_in1", bm * bk, ty, tx, "ia")
    vw, groups = (vec, vcols) if vcols else (1, bk)
    rv = read_vec or vec
    pad = a_pad(bm, vw, groups, rv if rv > 1 and tm % rv == 0 else 1)
    if pad:
        p = pad_dim(p, "As", 1, bm + pad)
    pitch = bm + pad
    a_vec = vec if vec > 1 and pitch % vec == 0 and tm % vec == 0 else 1
    return p, a_vec


def store_conflicts(pitch: int, vw: int, groups: int) -> int:
    """The bank conflict degree of a warp's transposing store into the A tile of row
    pitch ``pitch``: lane ``t`` stores element ``t // groups`` of column group
    ``t % groups``, the groups ``vw`` rows of the tile apart."""
    banks = [((t % groups) * vw * pitch + t // groups) % 32 for t in range(32)]
    return max(banks.count(b) for b in set(banks))


def a_pad(bm: int, vw: int, groups: int, read_vec: int) -> int:
    """The pad of the transposed A tile's rows: the fewest bank conflicts of the
    transposing stores (``store_conflicts``) among the pitches the register cache can
    read ``read_vec`` wide (a multiple of ``read_vec``: a float4 read of a thread's rows
    matters more than a conflict of the stores, 16 times fewer), the smallest pad of
    those.  bk = 8 (two groups of float4): pitch bm + 4, no conflict; bk = 16 (four):
    bm + 4, 2-way (a conflict-free pitch, bm + 2, would read the rows one float at a
    time)."""
    if groups <= 1 or 32 % groups:
        return 0
    ok = [d for d in range(32) if (bm + d) % read_vec == 0]
    return min(ok, key=lambda d: (store_conflicts(bm + d, vw, groups), d))


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


# ---------------------------------------------------------------- steps of both big-tile kernels


def expand_acc(p, wcol, ncol, tm, tx, ty):
    """The accumulator ``acc`` (one register per output) expanded to the thread's
    register tile (``[ncol] x wcol`` columns, ``tm`` rows) and the block's threads."""
    p = expand_dim(p, "acc", wcol, "rj")
    if ncol > 1:
        p = expand_dim(p, "acc", ncol, "rjg")
    p = expand_dim(p, "acc", tm, "ri")
    p = expand_dim(p, "acc", tx, "tj")
    return expand_dim(p, "acc", ty, "ti")


def split_k(p, bk, lifts, cj):
    """The k loop in ``bk`` steps, split (``fission`` through ``lifts`` levels) from the
    accumulator's initialisation and write-back, moved outside the thread loops, the k
    step outside the register tile (``cj``: its column loops)."""
    p = divide_loop(p, "p", bk, ["po", "pi"], tail="perfect")
    p = fission(p, p.find("acc[_] = 0.0").after(), n_lifts=lifts)
    p = fission(p, p.find_loop("po").after(), n_lifts=lifts)
    reg_loops = [x + " #1" for x in reversed(["ri"] + cj)]
    for lp in reg_loops + ["tj #1", "ti #1"]:
        p = reorder_loops(p, lp)
    for lp in reg_loops:
        p = reorder_loops(p, lp)
    return p


def stage_tiles(p, bm, bn, bk, zi="", nest="ti #1"):
    """The block's A and B tiles of one k step staged in SHARED (``As``, ``Bs``) around
    the compute nest (the loop ``nest``; ``zi``: the batch index prefix); returns the
    proc and the compute nest's cursor."""
    compute = p.find_loop(nest)
    p = stage_mem(p, compute, f"a[{zi}{bm} * bi:{bm} * bi + {bm}, {bk} * po:{bk} * po + {bk}]",
                  "As", SHARED)
    p = stage_mem(p, p.forward(compute),
                  f"b[{zi}{bk} * po:{bk} * po + {bk}, {bn} * bj:{bn} * bj + {bn}]", "Bs", SHARED)
    return p, compute


def async_pipeline(p, stages: int, loop: str = "po", bufs=("As", "Bs")):
    """The tiles' copies as async copies in a ``stages``-deep circular buffer, by
    primitives: the tiles lifted out of ``loop`` (``lift_alloc``), their copy loops made
    async (``make_async``: 4-byte copies of the transposed A tile, 16-byte copies of the
    B tile), the loop pipelined (``pipeline_loop``): ``stages - 1`` tiles in flight
    while one is computed on, one barrier per k step."""
    from ..ir.nodes import Sync
    from ..schedule import lift_alloc, make_async, pipeline_loop
    from ..schedule.cursors import Cursor

    for b in bufs:
        p = lift_alloc(p, b)
    for seq_loop in ("ias", "ibs"):  # the thread loops of a copy at block level
        while _has_loop(p, seq_loop) and p.find_loop(seq_loop).node().body and \
                getattr(p.find_loop(seq_loop).node().body[0], "mapping", None) == THREADS:
            p = reorder_loops(p, seq_loop)
    body = p.find_loop(loop).node().body
    syncs = [i for i, s in enumerate(body) if isinstance(s, Sync)]
    if len(syncs) != 2 or syncs[0] != 0:
        raise ValueError(f"async_pipeline: loop {loop} is not 'sync; copies; sync; compute'")
    a = p.find_loop(loop).addr + ("body", 1)
    p = make_async(p, Cursor(p, "block", a, syncs[1]))
    return pipeline_loop(p, loop, stages=stages)


def double_buffer(p, loop: str = "po", bufs=("As", "Bs")):
    """Two SHARED buffers per staged tile and one barrier per k step, by primitives:
    the tiles lifted out of ``loop`` and given a leading dimension of 2 indexed by
    ``loop % 2`` (``lift_alloc``, ``expand_dim``); the copy of step ``loop + 1``
    rotated into step ``loop`` (``rotate_loop``); the barrier between the compute of
    step ``loop`` and that copy deleted (``delete_sync``: check() proves through the
    ``% 2`` that the two touch different buffers).  The compute of
    step ``loop`` then comes before the copy of step ``loop + 1``, with no barrier
    between them: ptxas hoists the next tile's global loads over the FMAs
    (docs/decisions.md, issue 23)."""
    from ..ir.nodes import Sync
    from ..schedule import delete_sync, expand_dim, lift_alloc, rotate_loop
    from ..schedule.cursors import Cursor

    for b in bufs:
        p = lift_alloc(p, b)
        p = expand_dim(p, b, "2", f"{loop} % 2")
    body = p.find_loop(loop).node().body
    syncs = [i for i, s in enumerate(body) if isinstance(s, Sync)]
    if len(syncs) != 2 or syncs[0] != 0:
        raise ValueError(f"double_buffer: loop {loop} is not 'sync; copies; sync; compute'")
    n_copy = syncs[1]  # the leading barrier and the copies
    p = rotate_loop(p, loop, n_copy)
    a = p.find_loop(loop).addr
    n_compute = len(body) - n_copy  # the barrier before the compute, the compute
    p = delete_sync(p, Cursor(p, "stmt", a + ("body", n_compute), None))
    return p


# ---------------------------------------------------------------- the tile geometry and steps built on it


@dataclass(frozen=True)
class Tiles:
    """How a big-tile kernel divides C: a ``bm x bn`` block tile per thread block, the
    ``bk``-deep k step, a ``tm x tn`` register tile for each of the ``ty x tx`` threads,
    its columns ``ncol`` groups of ``wcol`` adjacent columns ``gstep`` apart (when
    ``strided``) or one group.  ``arow``, ``bcol``: the thread's first row and first
    column (of each group) in the block tile, as the index expressions write them."""
    bm: int
    bn: int
    bk: int
    tm: int
    tn: int
    vec: int
    batched: bool
    strided: bool
    ty: int
    tx: int
    arow: str
    bcol: str
    gstep: int

    @property
    def zi(self) -> str:
        """The batch index of a subscript."""
        return "z, " if self.batched else ""

    @property
    def ncol(self) -> int:
        return self.tn // self.vec if self.strided else 1

    @property
    def wcol(self) -> int:
        return self.vec if self.strided else self.tn

    @property
    def cj(self) -> list[str]:
        """The register tile's column loops."""
        return ["rjg", "rj"] if self.strided else ["rj"]

    @property
    def nl(self) -> int:
        """The register and thread loops around one output."""
        return 4 + self.strided

    def c_window(self) -> str:
        """The thread's output ``c[...]`` inside the register tile loops."""
        col = (f"{self.bn} * bj + {self.gstep} * rjg + {self.bcol} + rj" if self.strided
               else f"{self.bn} * bj + {self.bcol} + rj")
        return f"c[{self.zi}{self.bm} * bi + {self.arow} + ri, {col}]"


def tile_shape(p, bm, bn, bk, tm, tn, vec, strided_cols: bool = True) -> Tiles:
    """The :class:`Tiles` of ``p`` (batched when it has a loop ``z``) without warp tiles:
    thread (ti, tj) owns rows ``tm * ti + ri`` and columns ``gstep * rjg + wcol * tj +
    rj``; the columns are strided when ``strided_cols`` and ``tn > vec``."""
    batched = _has_loop(p, "z")
    assert bm % tm == 0 and bn % tn == 0 and tn % vec == 0
    strided = strided_cols and tn > vec
    ncol = tn // vec if strided else 1
    wcol = vec if strided else tn
    return Tiles(bm, bn, bk, tm, tn, vec, batched, strided, bm // tm, bn // tn,
                 f"{tm} * ti", f"{wcol} * tj", bn // ncol)


def parallelize_tiles(p, batched: bool):
    """The loops ``[z] bi bj`` over blocks, ``ti tj`` over threads."""
    if batched:
        p = parallelize_loop(p, "z", BLOCKS)
    p = parallelize_loop(p, "bi", BLOCKS)
    p = parallelize_loop(p, "bj", BLOCKS)
    p = parallelize_loop(p, "ti", THREADS)
    return parallelize_loop(p, "tj", THREADS)


def stage_acc(p, t: Tiles, target, window: str, guards: int = 0):
    """The accumulator: the thread's output ``window`` staged in a register ``acc``
    around ``target``, expanded to the register tile and the block's threads, allocated
    at block level (lifted through ``guards`` guards too); then the k loop in ``bk``
    steps (``split_k``)."""
    p = stage_mem(p, target, window, "acc", REGISTER)
    p = expand_acc(p, t.wcol, t.ncol, t.tm, t.tx, t.ty)
    p = lift_alloc(p, "acc", n_lifts=t.nl + guards)
    return split_k(p, t.bk, t.nl + guards, t.cj)


def shared_tiles(p, t: Tiles, copy_a, vec: int):
    """The A and B tiles of each k step in SHARED (``stage_tiles``): ``copy_a(p)`` maps
    the A tile's copy onto the threads and returns (proc, the width the register cache
    may read ``As`` with); the B tile's copy ``vec`` wide over every thread of the
    block; a barrier before the copies and one before the compute.  Returns (proc, that
    width)."""
    p, compute = stage_tiles(p, t.bm, t.bn, t.bk, t.zi)
    p, a_vec = copy_a(p)
    p = _copy_all_threads(p, "Bs_in0", "Bs_in1", t.bk, t.bn, t.ty, t.tx, vec)
    p = insert_sync(p, p.find_loop("po").body().before())
    return insert_sync(p, p.forward(compute).before()), a_vec


def cache_k_step(p, t: Tiles, awin: str, vec: int, a_vec: int):
    """The A column (the window ``awin`` of ``As``) and the B row of each k step in
    registers ``ra`` and ``rb`` (strided columns: ``ra`` for the k step, ``rb`` for each
    column group); with ``vec > 1`` they are read from the shared tiles ``a_vec`` and
    ``vec`` wide."""
    if t.strided:  # pi rjg ri rj
        p = reorder_loops(p, "ri #1")
        p = stage_mem(p, p.find_loop("rjg #1"), awin, "ra", REGISTER)
        p = stage_mem(p, p.find_loop("ri #1"),
                      f"Bs[pi, {t.gstep} * rjg + {t.bcol}:"
                      f"{t.gstep} * rjg + {t.bcol} + {t.wcol}]", "rb", REGISTER)
    else:
        inner = p.find_loop("ri #1")
        p = stage_mem(p, inner, awin, "ra", REGISTER)
        p = stage_mem(p, p.forward(inner), f"Bs[pi, {t.bcol}:{t.bcol} + {t.tn}]", "rb",
                      REGISTER)
    if vec > 1:
        if a_vec > 1:
            p = _vectorize_copy(p, "ra", a_vec)
        p = _vectorize_copy(p, "rb", vec)
    return p


def tail_outside(p, n_lifts: int, n_moves: int):
    """A reduction tail that ``cut_loop`` left (loop ``p``), split off (``fission``
    through ``n_lifts`` levels) and moved ``n_moves`` loops out (past a guard), outside
    the register tile loops, whose constant trip counts keep the accumulator in
    registers."""
    if not _has_loop(p, "p"):
        return p
    p = fission(p, p.find_loop("p").after(), n_lifts=n_lifts)
    for _ in range(n_moves):
        q = p.find_loop("p").parent()
        if q.node().__class__.__name__ == "If":
            q = q.parent()
        p = reorder_loops(p, q)
    return p


def unroll_k_step(p, batched: bool, blocks_per_sm: int):
    """The k step unrolled: nvcc overlaps the shared loads of the steps with the FMAs;
    that needs many registers, so ask for ``blocks_per_sm`` resident blocks (2 fit in
    128 registers without spills)."""
    p = set_unroll(p, "pi")
    if blocks_per_sm:
        p = set_blocks_per_sm(p, "z" if batched else "bi", blocks_per_sm)
    return p
