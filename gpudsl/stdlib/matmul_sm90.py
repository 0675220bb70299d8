"""The sm_90a half-precision GEMM main loop (H100/H200), derived by primitives from the
readable ``c = a @ bt^T`` (:func:`matmul_nt_algorithm`): TMA loads into a ring of
shared tiles, warpgroup MMAs (wgmma) reading them by descriptor, a producer thread and
one or two consumer warpgroups joined by two barrier rings.

**The readable algorithm** is the TN GEMM of linear layers (PyTorch's ``Linear`` keeps
its weight ``N x K``; CUTLASS's default Hopper GEMM): ``c[i, j] = sum_p a[i, p] *
bt[j, p]``, f16 or bf16 products summed in f32, rounded once.  Both operands are then
K-major, the layout wgmma reads without a transpose.

**The derivation** (:func:`schedule_matmul_sm90`, every step a primitive; the proc is
proved by check(target="sm_90a") for every size the algorithm's assertion admits):

1. the wgmma fragment: ``i = bm bi + 64 wg + 16 w + 8 rm + g`` and ``j = bn bj + 8 ni +
   2 t4 + rn`` (``divide_loop``), the lanes merged as ``t = 128 wg + 32 w + 4 g + t4``
   and the fragment as ``f = 4 ni + 2 rm + rn`` (``merge_loops``): a thread's
   accumulators are exactly the PTX ISA's wgmma fragment; with ``bm = 128 wgs`` (the
   256 x 128 tile) ``i = bm bi + 128 wg + 64 mi + 16 w + 8 rm + g``: two m64 tiles a
   warpgroup, accumulators ``s[t, mi, f]``, a wgmma per tile and k16 step (``make_wgmma``
   keeps ``mi`` a loop), the epilogue's slabs 32 columns wide;
2. the accumulators in registers (``expand_dim``, ``lift_alloc``), the k loop cut into
   ``bk`` tiles (``divide_loop``, ``fission``, ``reorder_loops``);
3. the tiles of A and B staged in SHARED (``stage_mem``) with rows of ``bk`` halves in
   the hardware's swizzled layout (``set_swizzle``: 128 bytes for ``bk = 64``); or, with
   ``swizzle=False``, cut into the canonical layout, two 8-column halves per k16 step
   (``divide_dim``, ``rearrange_dim``);
4. the staging loop split between a producer thread and the consumer warpgroups with
   a ``stages``-deep ring of tiles and barrier rings ``full`` / ``empty``
   (``warp_specialize(..., ring=True)``);
5. the producer's copies become TMA loads completing on ``full[i % stages]``
   (``make_tma``: one ``rows x bk`` box per operand, or one ``rows x 8`` box per half
   unswizzled), the consumers' product loops one wgmma per k16 step (``make_wgmma``,
   ``bk / 16`` chained, reading ``[rows, 16]`` windows of the swizzled tiles);
6. with ``inflight`` (the default) the consumers keep one wgmma group in flight
   (``pipeline_wgmma``): ``wgmma_wait(1)`` after a k tile's wgmmas, then the previous
   slot released (CUTLASS's mainloop; the SASS waits ``WARPGROUP.DEPBAR.LE gsb0, 0x1``);
7. with ``tma_store`` (the default) the epilogue goes through SHARED (:func:`_epilogue`):
   the fragment's slabs of 64 columns rounded into a (swizzled) tile ``Cs`` by
   ``stage_mem``, each stored by one thread's ``tma_store`` (``make_tma_store``).
8. with ``producer="warpgroup"`` (the default for two consumer warpgroups) the producer
   is a whole warpgroup, one thread of it issuing (``warp_specialize(..., issuers=)``),
   and ``setmaxnreg`` gives the consumers its registers (``set_registers``: 40 and 232,
   :func:`register_split`); code generation writes each role's code apart.

**Edges** (``clip=True``, the algorithm asserting only ``k % bk == 0``): the block tiles
are guarded (``divide_loop(tail="guard")``, the guards moved inside the fragment by
``reorder_loops``), the tiles staged with zeros past the array's edge
(``stage_mem(..., zeros=True)``: exactly what a TMA box reads there, so ``make_tma``
makes the same boxes), and the guards leave the accumulators' initialization and the
product (``remove_guard``: the rows and columns past the edge are computed and
dropped, which it proves: only the guarded epilogue reads them).  The main loop is the
unclipped one's.  With ``tma_store`` the epilogue is :func:`_epilogue` too: the writes
into ``Cs`` keep their guards, ``stage_mem`` copies the slab out under ``c``'s bounds
and ``make_tma_store`` makes that guarded copy a box the hardware clips (proving the
guard is exactly "inside ``c``"); a tensor map's rows are 16 bytes apart, so the
algorithm asserts ``n % 8 == 0`` (``(1, 8, bk)``); ``tma_store=False``: ``(1, 1, bk)``,
every n, the stores guarded.

It serves ``m % bm == 0``, ``n % bn == 0``, ``k % bk == 0`` (``clip``: every m,
``n % 8 == 0``, ``k % bk == 0``; with ``tma_store=False`` every n); :func:`sm90_space`
is its autotuning space.
"""
from __future__ import annotations

from ..ir.nodes import For
from ..ir.types import BLOCKS, SHARED, THREADS
from ..proc import Proc
from ..schedule import (divide_dim, divide_loop, expand_dim, fission, insert_sync,
                        lift_alloc, make_tma, make_tma_store, make_wgmma, merge_loops,
                        parallelize_loop, persist_blocks, pipeline_wgmma, rearrange_dim, remove_guard,
                        reorder_loops, set_registers, set_swizzle, set_unroll, simplify,
                        stage_mem, warp_specialize)
from .common import make_proc
from .matmul_parts import _permute_nest
from .raster import COLUMNS, RASTER, RASTERS, persistent_rows, with_column_groups, with_raster
from .shapes import NodeError, require
from .derivation_cache import derivation
from .sm90_plans import planned_once, tile_rows

DEFAULTS = dict(bn=128, wgs=1, bk=64, stages=4, swizzle=True)
WIDE = dict(bn=256, wgs=2, bk=64, stages=4, swizzle=True)   # CUTLASS's 128 x 256 tile
# 256 x 128: each consumer warpgroup two m64 tiles (where n is not a multiple of 256)
TALL = dict(bm=256, bn=128, wgs=2, bk=64, stages=4, swizzle=True)
# the ring depths whose persistent kernels check() proves in its time (6 slots: the
# ordering of two TMA copies of one slot is "unknown", docs/decisions.md)
PERSISTENT_STAGES = (2, 3, 4)
# the epilogue's slab columns when a warpgroup holds two m64 tiles (256 x 128): 32 halves
# (64-byte rows); slabs of 64 made a 4-stage ring overflow shared memory and spilled
SLAB_OF_TWO = 32


def matmul_nt_algorithm(dt: str, divisible: tuple | None = None,
                        batched: bool = False) -> Proc:
    """``c[m, n] = a[m, k] @ bt[n, k]^T`` in ``dt`` (f16 or bf16), products summed in
    f32 and rounded once; ``divisible = (dm, dn, dk)`` adds ``m % dm == 0 and ...``;
    ``batched``: over a leading batch axis ``z`` of ``nb`` (``c[z] = a[z] @ bt[z]^T``)."""
    line, tag = "", ""
    if divisible is not None:
        dm, dn, dk = divisible
        line = f"    assert m % {dm} == 0 and n % {dn} == 0 and k % {dk} == 0\n"
        tag = f"_{dm}x{dn}x{dk}"
    name = f"{'b' if batched else ''}matmul_nt_{dt}{tag}"
    return make_proc(name, nt_text(name, dt, line, "f32(a[{z}i, p]) * f32(bt[{z}j, p])",
                                   f"{dt}(s)", batched))


def nt_text(name: str, dt: str, line: str, product: str, result: str, batched: bool) -> str:
    """The text of a readable TN GEMM ``name``: ``product`` and ``result`` with ``{z}``
    where the batch index goes (``z, `` when ``batched``)."""
    nb, z, pad = ("nb: size, ", "z, ", "    ") if batched else ("", "", "")
    lead = "nb, " if batched else ""
    return (f"def {name}({nb}m: size, n: size, k: size, a: {dt}[{lead}m, k], "
            f"bt: {dt}[{lead}n, k], c: {dt}[{lead}m, n]):\n" + line +
            ("    for z in seq(0, nb):\n" if batched else "") +
            f"{pad}    for i in seq(0, m):\n"
            f"{pad}        for j in seq(0, n):\n"
            f"{pad}            s: f32 @ REGISTER\n"
            f"{pad}            s = 0.0\n"
            f"{pad}            for p in seq(0, k):\n"
            f"{pad}                s += {product.format(z=z)}\n"
            f"{pad}            c[{z}i, j] = {result}\n")


def batch_index(p) -> str:
    """``"z, "`` when ``p`` runs over a leading batch loop ``z``, else ``""``."""
    return "z, " if any(s.iter == "z" for s in p.ir.body if isinstance(s, For)) else ""


def _fragment(p, bm: int, bn: int, wgs: int, clip: bool = False):
    """Step 1: the rows and columns cut into the wgmma fragment, the lanes merged into
    ``t`` (128 per consumer warpgroup), the fragment into ``f``; blocks and threads.
    With ``bm = 128 wgs`` a warpgroup's 128 rows are two m64 tiles ``mi`` (``i = bm bi +
    128 q + 64 mi + 16 w + 8 rm + g``; two accumulators, two wgmmas per k16 step).
    ``clip``: the block tiles guarded at the edges (``if i < m: if j < n:``, moved
    inside the fragment's loops); a batch loop ``z`` runs over blocks too."""
    if batch_index(p):
        p = parallelize_loop(p, "z", BLOCKS)
    edge = "guard" if clip else "perfect"
    two = bm == 128 * wgs
    p = divide_loop(p, "i", bm, ["bi", "ii"], tail=edge)
    if two:
        p = divide_loop(p, "ii", 128, ["q", "i128"], tail="perfect")
        p = divide_loop(p, "i128", 64, ["mi", "r64"], tail="perfect")
    p = divide_loop(p, "r64" if two else "ii", 16, ["w", "i16"], tail="perfect")
    p = divide_loop(p, "i16", 8, ["rm", "g"], tail="perfect")
    p = divide_loop(p, "j", bn, ["bj", "jj"], tail=edge)
    p = divide_loop(p, "jj", 8, ["ni", "j8"], tail="perfect")
    p = divide_loop(p, "j8", 2, ["t4", "rn"], tail="perfect")
    rows = ["q", "mi", "w"] if two else ["w"]
    warps = ["q", "w"] if two else ["w"]
    tiles = ["mi"] if two else []
    p = _permute_nest(p, ["bi", *rows, "rm", "g", "bj", "ni", "t4", "rn"],
                      ["bi", "bj", *warps, "g", "t4", *tiles, "ni", "rm", "rn"])
    if clip:   # the row guard sits between rm and rn: move it inside rn
        p = reorder_loops(p, "rm")
        p = reorder_loops(p, "rn")
    if two:
        p = merge_loops(p, "q", "w4")   # the warps: 4 per warpgroup
    p = merge_loops(p, "w4" if two else "w", "wg")      # 4 wgs warps: t // 32
    p = merge_loops(p, "wg", "t")       # with the lanes: t = 32 w + 4 g + t4
    p = merge_loops(p, "ni", "nr")
    p = merge_loops(p, "nr", "f")       # f = 4 ni + 2 rm + rn
    for lp, mapping in (("bi", BLOCKS), ("bj", BLOCKS), ("t", THREADS)):
        p = parallelize_loop(p, lp, mapping)
    return p


def _accumulators_and_k(p, bn: int, wgs: int, bk: int, clip: bool = False,
                        two: bool = False):
    """Step 2: the accumulators ``s[t, f]`` (``two``: ``s[t, mi, f]``) in registers at
    block level; the k loop as ``po`` tiles of ``bk``, outside the threads, each ``bk /
    16`` wgmma steps ``kq`` (outside the row tiles ``mi``).  ``clip``: through the edge
    guards."""
    lifts = (4 if clip else 2) + int(two)   # the loops f, (mi,) t, and the edge guards
    p = expand_dim(p, "s", bn // 2, "f")
    if two:
        p = expand_dim(p, "s", 2, "mi")
    p = expand_dim(p, "s", 128 * wgs, "t")
    p = lift_alloc(p, "s", n_lifts=lifts)
    p = divide_loop(p, "p", bk, ["po", "pi"], tail="perfect")
    p = fission(p, p.find("s[_] = 0.0").after(), n_lifts=lifts)
    p = fission(p, p.find_loop("po").after(), n_lifts=lifts)
    for lp in ("f #1", "mi #1", "t #1") if two else ("f #1", "t #1"):
        p = reorder_loops(p, lp)
    p = divide_loop(p, "pi", 16, ["kq", "pk"], tail="perfect")
    p = reorder_loops(p, "f #1")     # the k16 steps outside the fragment
    return reorder_loops(p, "mi #1") if two else p


def _tiles(p, bm: int, bn: int, bk: int, swizzle: bool, clip: bool = False):
    """Step 3: the A and B tiles of a k step in SHARED: swizzled rows of ``bk`` halves
    (``2 bk`` bytes: one box per operand), or the canonical layout ``[bk / 8, rows, 8]``
    (a box per 8-column half, ``X_h``); their copies as one-thread loops (``X_o``).
    ``clip``: rows past the array's edge read as zeros (``zeros=True``: a TMA box)."""
    compute, zi = p.find_loop("t #1"), batch_index(p)
    for buf, src, rows, blk in (("As", "a", bm, "bi"), ("Bs", "bt", bn, "bj")):
        p = stage_mem(p, p.forward(compute),
                      f"{src}[{zi}{rows} * {blk}:{rows} * {blk} + {rows}, {bk} * po:{bk} * po + {bk}]",
                      buf, SHARED, zeros=clip)
        if swizzle:
            p = set_swizzle(p, buf, 2 * bk)
        else:
            p = divide_dim(p, buf, 1, 8)
            p = rearrange_dim(p, buf, [1, 0, 2])
            p = divide_loop(p, f"{buf}_in1", 8, [f"{buf}_h", f"{buf}_j"], tail="perfect")
        p = divide_loop(p, f"{buf}_in0", rows, [f"{buf}_o", f"{buf}_r"], tail="perfect")
        p = parallelize_loop(p, f"{buf}_o", THREADS)
        p = lift_alloc(p, buf)
    p = insert_sync(p, p.find_loop("po").body().before())
    return insert_sync(p, p.forward(compute).before())


def _unguard(p):
    """Step 3b (``clip``): the accumulators of rows and columns past the edge are
    computed and dropped: the edge guards leave the initialization and the main loop's
    product (``remove_guard``: nothing reads those accumulators but the guarded
    epilogue), so that a warpgroup MMA computes whole tiles."""
    for anchor in ("s[_] = 0.0", "pk"):
        for _ in range(2):
            at = p.find_loop(anchor) if anchor == "pk" else p.find(anchor)
            p = remove_guard(p, at.parent())
    return p


def _epilogue(p, bm: int, bn: int, swizzled: bool, eb: int = 2, lead: str = "",
              slab: int = 0):
    """The accumulators leave through SHARED: slabs of ``w = min(bn, 128 / eb)`` columns
    (128-byte rows of ``eb``-byte elements; ``slab``: ``w = slab``; a thread's ``w / 2``
    elements of each, of every m64 tile it holds),
    rounded to ``c``'s type in a tile ``Cs[bm, w]``, a barrier, one thread's bulk tensor
    store of the slab (``make_tma_store``), a barrier before the next slab's writes; the
    slab loop unrolled (the registers are named by constants).  ``swizzled``: the tile
    swizzled with its ``eb w`` bytes where that is a swizzle (128 for a full slab: the 8
    rows a warp's fragment writes at once fall in 8 groups of banks, not one).  ``lead``:
    the window's leading points (``"z, "``: a batch's matrix).

    Clipped (the writes guarded by ``if i < m: if j < n:``): the guards stay on the
    writes into ``Cs``; ``stage_mem`` copies the slab out under the array's bounds (no
    copy in: it proves the copy out reads only elements the guarded writes wrote), and
    ``make_tma_store`` takes that guarded copy as a box the hardware clips (it proves the
    guard is exactly "inside ``c``")."""
    w = slab or min(bn, 128 // eb)
    f_loop = p.find("c[_] = _").parent()
    while not isinstance(f_loop.node(), For):      # clipped: through the edge guards
        f_loop = f_loop.parent()
    outer = f_loop.parent()
    p = divide_loop(p, f_loop, w // 2, ["ch", "cf"], tail="perfect")
    while True:       # the slabs outside the row tiles (``mi``) and the threads
        p = reorder_loops(p, p.forward(outer))
        if outer.node().mapping == THREADS:
            break
        outer = p.forward(outer).parent().parent()
    p = stage_mem(p, p.find_loop("ch").body(),
                  f"c[{lead}{bm} * bi:{bm} * bi + {bm}, {bn} * bj + {w} * ch:{bn} * bj + {w} * ch + {w}]",
                  "Cs", SHARED)
    if swizzled and eb * w in (32, 64, 128):
        p = set_swizzle(p, "Cs", eb * w)
    p = divide_loop(p, "Cs_out0", bm, ["Cs_o", "Cs_r"], tail="perfect")
    p = parallelize_loop(p, "Cs_o", THREADS)
    p = insert_sync(p, p.find_loop("Cs_o").before())
    p = insert_sync(p, p.find_loop("Cs_o").after())
    p = lift_alloc(p, "Cs")
    p = make_tma_store(p, "Cs_o")
    return set_unroll(p, "ch", True)


def _enclosing(c, name: str):
    """The loop ``name`` around cursor ``c``."""
    while not (isinstance(c.node(), For) and c.node().iter == name):
        c = c.parent()
    return c


def schedule_matmul_sm90(p: Proc, *, bm: int = 0, bn: int = 128, wgs: int = 1, bk: int = 64,
                         stages: int = 4, swizzle: bool = True, inflight: bool = True,
                         tma_store: bool = True, clip: bool = False,
                         producer: str | None = None, registers: bool = True,
                         raster: int = RASTER, persistent: int = 0) -> Proc:
    """The sm_90a schedule of ``matmul_nt_algorithm(dt, (bm, bn, bk))`` (module docs):
    ``wgs`` consumer warpgroups of ``64 x bn`` each (``bm`` 0 or ``64 wgs``), or of two
    m64 tiles, ``128 x bn`` (``bm = 128 wgs``: 256 x 128 with two), ``bk`` columns of k
    per ring slot, ``stages`` slots.  Threads per block: ``128 wgs + 1`` (the producer).
    ``inflight``: the consumers keep one wgmma group in flight (``wgmma_wait(1)``, the
    previous slot released after it: ``pipeline_wgmma``), else wait for each k tile's.
    ``tma_store``: the epilogue through a swizzled SHARED tile and bulk tensor stores
    (:func:`_epilogue`), else each thread stores its fragment to global memory.
    ``clip=True`` schedules ``matmul_nt_algorithm(dt, (1, 8, bk))``: every m and n
    with ``n % 8 == 0`` (the rows of ``c`` 16 bytes apart, as a tensor map needs), the
    tiles past the edges clipped, the epilogue's TMA boxes too (module docs); with
    ``tma_store=False``, ``(1, 1, bk)``: every m and n, the epilogue's stores guarded.
    ``producer="warpgroup"``: the producer is a whole warpgroup (threads ``128 wgs`` to
    ``128 wgs + 128``; its first thread issues the loads, the others idle), and with
    ``registers`` (the default) ``setmaxnreg`` moves registers from it to the consumers
    (:func:`register_split`: 40 and 232 for two consumer warpgroups); ``"thread"``: one
    producer thread (``128 wgs + 1`` threads).  The default (None) is the warpgroup where
    setmaxnreg gains the consumers registers (two consumer warpgroups), else the thread
    (docs/performance.md has the machine code of both).
    ``raster``: the block order's group of rows of tiles (``set_block_order``,
    :mod:`.raster`; 0: row order).  ``persistent=G`` (0: off): ``G`` blocks per column
    of tiles, each walking the rows ``G ti + bi`` (``persist_blocks``: the ring set up
    once per block, its steps padded to whole turns of the ring, the epilogue's
    barriers the consumers' own, so the producer loads the next tile's first slots
    while the consumers store this one's); the block order is then the grid's own."""
    require(wgs in (1, 2), f"wgs={wgs}: one or two consumer warpgroups")
    producer = producer or default_producer(wgs)
    require(producer in ("thread", "warpgroup"),
            f"producer={producer!r}: 'thread' or 'warpgroup'")
    require(bn % 16 == 0 and 16 <= bn <= 256, f"bn={bn}: a multiple of 16 up to 256")
    require(bk % 16 == 0 and 16 <= bk <= 128, f"bk={bk}: a multiple of 16 up to 128")
    require(2 <= stages <= 8, f"stages={stages}: 2 to 8")
    require(not swizzle or 2 * bk in (32, 64, 128),
            f"bk={bk}: a swizzled tile's rows are 16, 32 or 64 halves (swizzle=False: any)")
    bm, zi = bm or 64 * wgs, batch_index(p)
    require(bm in (64 * wgs, 128 * wgs), f"bm={bm}: 64 or 128 rows per consumer warpgroup "
            f"({64 * wgs} or {128 * wgs})")
    two = bm == 128 * wgs              # two m64 tiles a consumer warpgroup
    p = _fragment(p, bm, bn, wgs, clip)
    p = _accumulators_and_k(p, bn, wgs, bk, clip, two=two)
    p = _tiles(p, bm, bn, bk, swizzle, clip)
    if clip:
        p = _unguard(p)
    if tma_store:     # batched: the slab's box at the block's matrix z
        p = _epilogue(p, bm, bn, swizzled=_swizzled_slab(wgs, producer, registers), lead=zi,
                      slab=SLAB_OF_TWO if two else 0)
    elif two:   # the stores name the tiles' registers by constants
        p = set_unroll(p, _enclosing(p.find("c[_] = _"), "mi"), True)
    first = 128 * wgs                  # the producer's first thread
    width = 128 if producer == "warpgroup" else 1
    p = warp_specialize(p, "po", producers=(first, first + width), issuers=(first, first + 1),
                        consumers=(0, first), stages=stages, ring=True)
    p = make_tma(p, "As_o")
    p = make_tma(p, "Bs_o")
    p = make_wgmma(p, "t #1")
    if inflight:
        p = pipeline_wgmma(p, "po")
    if producer == "warpgroup" and registers:
        p = _set_registers(p, wgs)
    if persistent:
        require(not zi, "persistent blocks walk the tiles of one matrix (batched: no)")
        return persist_blocks(simplify(p), "bi", persistent)
    return with_raster(simplify(p), raster)


def default_producer(wgs: int) -> str:
    """A producer warpgroup where setmaxnreg gains the consumers registers (two consumer
    warpgroups), else one producer thread."""
    return "warpgroup" if register_split(wgs) else "thread"


def register_split(wgs: int, target: str = "sm_90a") -> tuple[int, int] | None:
    """``(producer, consumers)`` registers per thread for a block of a producer warpgroup
    and ``wgs`` consumer warpgroups: the producer keeps 40 (it only issues TMA loads),
    the consumers share the rest of the block's registers (the launch's count times the
    warpgroups: 3 x 168 for 384 threads), a multiple of 8, at most 256: 232 for two.
    None where that raises the consumers by less than 8 (one consumer warpgroup: a block
    of 256 threads starts with 255 registers each)."""
    from ..targets import target as get_target

    start = get_target(target).launch_registers(128 * (wgs + 1))
    mine = 40
    theirs = min(256, (start * (wgs + 1) - mine) // wgs // 8 * 8)
    return (mine, theirs) if theirs >= start + 8 else None


def _set_registers(p, wgs: int):
    """setmaxnreg at the top of the block's code: the producer warpgroup's registers
    lowered, then the consumers' raised (``set_registers``; check() proves the sums)."""
    split = register_split(wgs)
    if split is None:
        return p
    mine, theirs = split
    p = set_registers(p, "bj", mine, 128 * wgs, 128 * wgs + 128)
    return set_registers(p, "bj", theirs, 0, 128 * wgs)


def _swizzled_slab(wgs: int, producer: str, registers: bool) -> bool:
    """Whether the epilogue's slab tile is swizzled: with one consumer warpgroup, or
    with a producer warpgroup (its roles written apart: no spills at 168 registers, and
    none at 232 with setmaxnreg); two consumer warpgroups and a producer thread (257
    threads, one body) spilled the swizzle's addresses (docs/decisions.md)."""
    return wgs == 1 or producer == "warpgroup"


def sm90_kernel(dt: str, bn: int = 128, wgs: int = 1, bk: int = 64, stages: int = 4,
                swizzle: bool = True, inflight: bool = True, tma_store: bool = True,
                clip: bool = False, producer: str | None = None,
                registers: bool = True, raster: int | None = None,
                batched: bool = False, persistent: int = 0, columns: int = 0,
                bm: int = 0) -> Proc:
    """The derived sm_90a GEMM for ``dt`` and the tile (cached): ``bm`` rows (0: ``64
    wgs``; ``128 wgs``: two m64 tiles per warpgroup) by ``bn`` columns; ``clip``: for every m
    and n (edges clipped); ``producer``: a thread or a warpgroup (None:
    :func:`default_producer`);
    ``raster``: the block order (:mod:`.raster`; None: :data:`RASTER`, except 0 for an
    unclipped kernel whose roles codegen writes apart, below, and a clipped one of two m64
    tiles a warpgroup: ptxas serialized its wgmmas in the grouped order, C7515);
    ``batched``: ``[nb, m, k] @ [nb, n, k]^T``, blocks over the batch too (the epilogue's boxes at the block's
    matrix ``z``, as the 2-D kernel's); ``persistent=G``: ``G`` blocks per column of
    tiles walking its rows (``persist_blocks``, :func:`schedule_matmul_sm90`; the block
    order is then the grid's, ``raster`` ignored); ``columns=G``: the tiles in column
    groups of ``G`` set by the grid's shape (:func:`.raster.with_column_groups`; the
    kernel then needs ``G`` to divide the columns of tiles; ``raster`` must be 0).

    The unclipped 128 x 256 kernel with a producer warpgroup keeps the row order by
    default: in the grouped order ptxas serializes its wgmmas (C7514: "non wgmma
    instructions reading accumulator registers ... between start and end of the pipeline
    stage"), which it does not in row order, nor for the clipped kernel or a producer
    thread (docs/decisions.md)."""
    producer = producer or default_producer(wgs)
    registers = bool(registers) and producer == "warpgroup"
    if columns:
        require(not batched and not raster and not clip,
                "column groups order the tiles of one unclipped matrix in row order "
                "(batched, raster and clip: no)")
        raster = 0
    if raster is None:
        two = bool(bm) and bm == 128 * wgs
        raster = 0 if producer == "warpgroup" and (not clip or two) else RASTER
    args = (dt, bn, wgs, bk, stages, bool(swizzle), bool(inflight), bool(tma_store),
            bool(clip), producer, registers, int(bm) or 64 * wgs)
    if persistent:
        require(not batched, "persistent blocks walk the tiles of one matrix (batched: no)")
        return _persistent_kernel(args, int(persistent))
    if columns:
        return _column_kernel(args, int(columns))
    return _sm90_kernel(*args[:-1], int(raster), bool(batched), args[-1])


@derivation
def _column_kernel(args: tuple, columns: int) -> Proc:
    """The derived kernel (row order), then its column groups (cached)."""
    return with_column_groups(_sm90_kernel(*args[:-1], 0, False, args[-1]), columns)


@derivation
def _persistent_kernel(args: tuple, blocks: int) -> Proc:
    """The derived kernel (row order), then ``persist_blocks`` (cached)."""
    return persist_blocks(_sm90_kernel(*args[:-1], 0, False, args[-1]), "bi", blocks)


@derivation
def _sm90_kernel(dt, bn, wgs, bk, stages, swizzle, inflight, tma_store, clip, producer,
                 registers, raster, batched, bm) -> Proc:
    if raster:   # the same derivation (cached), then the hint
        return with_raster(_sm90_kernel(dt, bn, wgs, bk, stages, swizzle, inflight,
                                        tma_store, clip, producer, registers, 0, batched, bm),
                           raster)
    edge = (1, 8 if tma_store else 1, bk)      # a tensor map's rows are 16 bytes apart
    algo = matmul_nt_algorithm(dt, edge if clip else (bm, bn, bk), batched)
    return schedule_matmul_sm90(algo, bm=bm, bn=bn, wgs=wgs, bk=bk, stages=stages, swizzle=swizzle,
                                inflight=inflight, tma_store=tma_store, clip=clip,
                                producer=producer, registers=registers, raster=0)


def shared_bytes(bn: int, wgs: int, bk: int, stages: int, tma_store: bool = True,
                 bm: int = 0, **_) -> int:
    """The SHARED tiles of a configuration: the ring, and the epilogue's slab."""
    bm = bm or 64 * wgs
    ring = stages * (bm + bn) * bk * 2
    slab = SLAB_OF_TWO if bm == 128 * wgs else 64
    return ring + (bm * min(bn, slab) * 2 if tma_store else 0)


def sm90_space(smem_bytes: int = 227 * 1024, rasters=RASTERS) -> list[dict]:
    """The autotuning space: tiles and stages whose ring (and epilogue slab) fits
    ``smem_bytes``, each in the block orders ``rasters`` (:mod:`.raster`) and, for rings
    of :data:`PERSISTENT_STAGES` slots, persistent (``persistent=True``: the blocks per
    column chosen for the shape, :func:`plan_matmul_sm90`); with two consumer warpgroups both producers (the default,
    a warpgroup with setmaxnreg, and ``producer="thread"``)."""
    out = []
    for wgs, bm, bn in _block_tiles():
        for bk in (32, 64):
            for stages in (2, 3, 4, 6):
                if shared_bytes(bn, wgs, bk, stages, bm=bm) > smem_bytes:
                    continue
                persist = ("persistent",) if stages in PERSISTENT_STAGES else ()
                for r in tuple(rasters) + persist:
                    cfg = dict(bn=bn, wgs=wgs, bk=bk, stages=stages, swizzle=True, raster=r)
                    if bm != 64 * wgs:
                        cfg = dict(bm=bm, **cfg)
                    if r == "persistent":
                        cfg = dict(cfg, raster=0, persistent=True)
                    out.append(cfg)
                    if register_split(wgs) is not None:
                        out.append(dict(cfg, producer="thread"))
    return out


def _block_tiles():
    """``(wgs, bm, bn)`` of the space: one or two consumer warpgroups of one or two m64
    tiles, at most 128 accumulators per thread (``bm bn / 128 wgs``)."""
    return [(wgs, bm, bn) for wgs in (1, 2) for bm in (64 * wgs, 128 * wgs)
            for bn in (64, 128, 256) if bm * bn // (128 * wgs) <= 128]


@planned_once
def plan_matmul_sm90(shape_a: tuple, shape_bt: tuple, dt: str, **opts) -> tuple[Proc, dict]:
    """The derived kernel for ``a[m, k] @ bt[n, k]^T`` (or batched, ``[nb, m, k] @ [nb,
    n, k]^T``) and its size arguments (:func:`choose_sm90`)."""
    from .sm90_plans import binds_of

    opts = dict(opts)
    persistent = opts.pop("persistent", 0)
    tile, clip, dims = choose_sm90(shape_a, shape_bt, dt, **opts)
    if persistent is True:    # as many blocks as fill the multiprocessors
        persistent = persistent_rows(dims[0], dims[1], tile_rows(tile),
                                     tile.get("bn", DEFAULTS["bn"]))
    if persistent and dims[3] is None:   # the walk is the order: no column groups
        tile = {k: v for k, v in tile.items() if k != "columns"}
        tile = dict(tile, persistent=int(persistent))
    return sm90_kernel(dt, **tile, clip=clip, batched=dims[3] is not None), binds_of(dims)


def choose_sm90(shape_a: tuple, shape_bt: tuple, dt: str, **opts) -> tuple[dict, bool, tuple]:
    """``(tile, clip, dims)`` for ``a[m, k] @ bt[n, k]^T`` (or batched): ``opts`` (a tile
    of :func:`sm90_space`), else the 128 x 256 tile where it divides the shape, else 64 x
    128; a shape neither divides is served by a clipped kernel (``clip=True``: edges
    clipped) whose ``bk`` (64, 32 or 16) divides ``k``, its epilogue's stores through TMA
    where ``n % 8 == 0`` (else ``tma_store=False``); a ``k`` none divides is refused (use
    ``gpudsl.ops.matmul``) (:func:`gpudsl.stdlib.sm90_plans.choose_tile`)."""
    from .sm90_plans import choose_tile, operand_shapes, refused

    require(dt in ("f16", "bf16"), f"the sm_90a GEMM multiplies f16 or bf16, not {dt}")
    dims = operand_shapes(shape_a, shape_bt, True, "the sm_90a GEMM")
    ks = (opts["bk"],) if opts.get("bk") else (64, 32, 16)
    got = choose_tile(dims, DEFAULTS, (WIDE, TALL), opts, ks)
    if got is None:
        raise refused("the sm_90a GEMM", ks, dims, "use gpudsl.ops.matmul, whose kernels "
                      "take every shape")
    tile, clip = got
    if clip and dims[1] % 8:   # c's rows not 16 bytes apart: no tensor map, guarded stores
        tile = dict(tile, tma_store=False)
    return column_groups(tile, clip, dims), clip, dims


def column_groups(tile: dict, clip: bool, dims: tuple) -> dict:
    """``tile`` with ``columns=COLUMNS`` where the kernel keeps the row order (the
    unclipped 2-D 128 x 256 kernel with a producer warpgroup, whose grouped order ptxas
    serializes) and the column groups divide its columns of tiles: the grid then orders
    the blocks as the grouped order would (:func:`.raster.with_column_groups`); a tile
    that names its own order (``raster``, ``persistent``, ``columns``) is kept."""
    if clip or dims[3] is not None or {"raster", "persistent", "columns"} & set(tile):
        return tile
    producer = tile.get("producer") or default_producer(tile["wgs"])
    if producer != "warpgroup" or (dims[1] // tile["bn"]) % COLUMNS:
        return tile
    return dict(tile, columns=COLUMNS)


def matmul_nt_sm90(a, bt, **opts):
    """``a @ bt^T`` of float16 or bfloat16 arrays (numpy or torch, ``a[m, k]``,
    ``bt[n, k]``, or batched ``[nb, m, k]``, ``[nb, n, k]``) by the derived sm_90a kernel (:func:`plan_matmul_sm90`), run where
    ``gpudsl.ops`` runs (the GPU needs sm_90a: an H100 or H200; the emulator anywhere);
    ``gpudsl bench``'s rows ``matmul_f16_sm90`` and ``matmul_bf16_sm90`` time it."""
    from .halves import NUMPY, common_dtype
    from .op_arguments import contig, empty, run_where_ops_run

    dt = common_dtype("matmul", a=a, b=bt)
    sa, sb = tuple(int(d) for d in a.shape), tuple(int(d) for d in bt.shape)
    p, binds = plan_matmul_sm90(sa, sb, dt, **opts)
    a, bt = contig(a), contig(bt)
    c = empty(a, sa[:-1] + sb[-2:-1], NUMPY[dt])
    run_where_ops_run(p, a=a, bt=bt, c=c, **binds)
    return c


def plan_on_device(shape_a: tuple, shape_bt: tuple, dt: str):
    """``(proc, bindings)`` of the derived TN kernel for ``a[m, k] @ bt[n, k]^T`` on the
    current sm_90a GPU, or None: none serves the shape, or its first run there, on a
    small exact case, did not equal numpy (:mod:`~gpudsl.stdlib.first_run`: a warning
    says so once).  ``ops.matmul(a, b)`` takes it where ``b`` is the transpose of a
    contiguous array (``w.T``: a linear layer's weight), with no copy of ``b``."""
    from .first_run import checked_on_device
    from .sm90_plans import binds_of, small_case_shape

    if dt not in ("f16", "bf16") or len(shape_a) != 2:
        return None
    try:
        tile, clip, dims = choose_sm90(shape_a, shape_bt, dt)
    except NodeError:
        return None
    p = sm90_kernel(dt, **tile, clip=clip)
    if not checked_on_device(p, lambda: _first_case(dt, *small_case_shape(tile, clip, 8))):
        return None
    return p, binds_of(dims)


def _first_case(dt: str, m: int, n: int, k: int):
    """A small exact case of a TN kernel: products and sums of small integers."""
    import ml_dtypes
    import numpy as np

    npdt = np.float16 if dt == "f16" else ml_dtypes.bfloat16
    rng = np.random.default_rng(19)
    a = rng.integers(-3, 4, (m, k)).astype(npdt)
    bt = rng.integers(-3, 4, (n, k)).astype(npdt)
    want = (a.astype(np.float32) @ bt.astype(np.float32).T).astype(npdt)
    return dict(a=a, bt=bt, c=np.zeros((m, n), npdt)), {"c": want}


__all__ = ["plan_on_device", "choose_sm90", "column_groups", "matmul_nt_algorithm", "nt_text", "batch_index", "plan_matmul_sm90", "matmul_nt_sm90", "schedule_matmul_sm90", "sm90_kernel", "sm90_space",
           "shared_bytes", "DEFAULTS"]
