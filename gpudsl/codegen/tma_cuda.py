"""CUDA for the bulk tensor copies (``tma_load``, docs/hopper.md "TMA loads").

A kernel that copies boxes of a GLOBAL array ``a`` takes one parameter per (array, box):
``gpudsl_tmap_<a>_<box>``, a pointer to the copy's *tensor map*, which the launch builds
from the argument (:mod:`gpudsl.runtime.tensor_maps`: ``cuTensorMapEncodeTiled`` on the
GPU, gpudsl's own record on the emulator).  ``tma_load(dst, src, bar=b)`` becomes

    gpudsl_tma_load<R>(&dst[start], map, &b, bytes, c0, ..., c{R-1});

(coordinates innermost first): ``mbarrier.expect_tx`` of the box's bytes on the barrier's
current phase, then ``cp.async.bulk.tensor.Rd ... mbarrier::complete_tx::bytes``.  The
emulator copies the box at once (zeros outside the array), a valid timing of the same
meaning.  Destinations are 128-byte aligned (the kernel writer aligns their arrays).

A copy into or out of a tile ``@ SHARED(swizzle=W)`` has a tensor map of its own
(``gpudsl_tmap_<a>_<box>_s<W>``) with the hardware's ``W``-byte swizzle mode; the
emulator's record holds the width too, and its copy moves each element to or from its
swizzled offset in the tile (:mod:`gpudsl.ir.swizzle_meaning`, the function ``gpudsl_swz``
applies), so that the tile's other accesses find it where the GPU puts it.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import Interval, TmaCommit, TmaLoad, TmaStore, TmaWait
from ..ir.tma_meaning import box, box_bytes, global_side


TMA = r"""
// tma_load: bulk tensor copies completing on an mbarrier (sm_90a); the emulator copies at once
#ifdef GPUDSL_EMULATOR
// the box at coordinates c (innermost first) between the array a map describes and a
// contiguous tile: loaded (elements outside the array: zeros) or stored (not written)
inline void gpudsl_tma_emulate(const unsigned long long* map, const int* c, int R,
                               unsigned char* tile, bool load) {
  unsigned char* base = (unsigned char*)map[0];
  const unsigned long long es = map[17];
  // a swizzled tile (map[18]: its width W in bytes, 0: none): the 16-byte chunk of each
  // byte offset XOR its 128-byte line modulo W / 16, as gpudsl_swz (the copy starts at
  // a multiple of the pattern's period in the tile)
  const unsigned long long wmask = map[18] ? map[18] / 16 - 1 : 0;
  long long n = 1;
  for (int k = 0; k < R; ++k) n *= (long long)map[12 + k];
  for (long long q = 0; q < n; ++q) {
    long long r = q, off = 0;
    bool in = true;
    for (int k = 0; k < R; ++k) {
      long long x = (long long)c[k] + r % (long long)map[12 + k];
      r /= (long long)map[12 + k];
      if (x < 0 || x >= (long long)map[2 + k]) in = false;
      else off += x * (long long)map[7 + k];
    }
    for (unsigned long long b = 0; b < es; ++b) {
      unsigned long long o = (unsigned long long)q * es + b;
      o ^= ((o >> 7) & wmask) << 4;
      if (load) tile[o] = in ? base[off + b] : 0;
      else if (in) base[off + b] = tile[o];
    }
  }
}
#endif
template <int R>
__device__ __forceinline__ void gpudsl_tma_load(void* dst, const unsigned long long* map,
                                                unsigned long long* bar, unsigned bytes,
                                                int c0, int c1 = 0, int c2 = 0, int c3 = 0,
                                                int c4 = 0) {
#ifdef GPUDSL_EMULATOR
  const int c[5] = {c0, c1, c2, c3, c4};
  gpudsl_tma_emulate(map, c, R, (unsigned char*)dst, true);
  (void)bar; (void)bytes;
#else
  const unsigned d = gpudsl_smem_addr(dst), m = gpudsl_smem_addr(bar);
  asm volatile("mbarrier.expect_tx.relaxed.cta.shared::cta.b64 [%0], %1;"
               :: "r"(m), "r"(bytes) : "memory");
  if (R == 1)
    asm volatile("cp.async.bulk.tensor.1d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3}], [%2];" :: "r"(d), "l"(map), "r"(m), "r"(c0) : "memory");
  else if (R == 2)
    asm volatile("cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4}], [%2];" :: "r"(d), "l"(map), "r"(m), "r"(c0), "r"(c1)
                 : "memory");
  else if (R == 3)
    asm volatile("cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5}], [%2];" :: "r"(d), "l"(map), "r"(m), "r"(c0),
                 "r"(c1), "r"(c2) : "memory");
  else if (R == 4)
    asm volatile("cp.async.bulk.tensor.4d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6}], [%2];" :: "r"(d), "l"(map), "r"(m), "r"(c0),
                 "r"(c1), "r"(c2), "r"(c3) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d.shared::cluster.global.tile.mbarrier::complete_tx::bytes"
                 " [%0], [%1, {%3, %4, %5, %6, %7}], [%2];" :: "r"(d), "l"(map), "r"(m),
                 "r"(c0), "r"(c1), "r"(c2), "r"(c3), "r"(c4) : "memory");
#endif
}
// tma_store / tma_commit / tma_wait: bulk tensor stores in bulk groups
template <int R>
__device__ __forceinline__ void gpudsl_tma_store(const unsigned long long* map, const void* src,
                                                 int c0, int c1 = 0, int c2 = 0, int c3 = 0,
                                                 int c4 = 0) {
#ifdef GPUDSL_EMULATOR
  const int c[5] = {c0, c1, c2, c3, c4};
  gpudsl_tma_emulate(map, c, R, (unsigned char*)src, false);
#else
  const unsigned s = gpudsl_smem_addr(src);
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
  if (R == 1)
    asm volatile("cp.async.bulk.tensor.1d.global.shared::cta.bulk_group [%0, {%2}], [%1];"
                 :: "l"(map), "r"(s), "r"(c0) : "memory");
  else if (R == 2)
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%2, %3}], [%1];"
                 :: "l"(map), "r"(s), "r"(c0), "r"(c1) : "memory");
  else if (R == 3)
    asm volatile("cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%2, %3, %4}], [%1];"
                 :: "l"(map), "r"(s), "r"(c0), "r"(c1), "r"(c2) : "memory");
  else if (R == 4)
    asm volatile("cp.async.bulk.tensor.4d.global.shared::cta.bulk_group [%0, {%2, %3, %4, %5}],"
                 " [%1];" :: "l"(map), "r"(s), "r"(c0), "r"(c1), "r"(c2), "r"(c3) : "memory");
  else
    asm volatile("cp.async.bulk.tensor.5d.global.shared::cta.bulk_group"
                 " [%0, {%2, %3, %4, %5, %6}], [%1];" :: "l"(map), "r"(s), "r"(c0), "r"(c1),
                 "r"(c2), "r"(c3), "r"(c4) : "memory");
#endif
}
__device__ __forceinline__ void gpudsl_tma_commit() {
#ifndef GPUDSL_EMULATOR
  asm volatile("cp.async.bulk.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void gpudsl_tma_wait() {
#ifndef GPUDSL_EMULATOR
  asm volatile("cp.async.bulk.wait_group %0;" :: "n"(N) : "memory");
#endif
}
__device__ __forceinline__ void gpudsl_tma_fence() {
#ifndef GPUDSL_EMULATOR
  asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
#endif
}
__device__ __forceinline__ void gpudsl_mbar_init_fence() {
#ifndef GPUDSL_EMULATOR
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
#endif
}
__device__ __forceinline__ void gpudsl_tma_fence_global() {
#ifndef GPUDSL_EMULATOR
  asm volatile("fence.proxy.async.global;" ::: "memory");
#endif
}
"""


def map_name(src: str, extents, swizzle: int = 0) -> str:
    """The kernel parameter holding the tensor map of ``src`` read in boxes of
    ``extents`` (into tiles swizzled with ``swizzle`` bytes)."""
    from .cexpr import cname
    tail = f"_s{swizzle}" if swizzle else ""
    return f"gpudsl_tmap_{cname(src)}_{'x'.join(map(str, extents))}{tail}"


def tile_swizzles(body) -> dict:
    """The swizzle widths of the SHARED arrays allocated in ``body`` under each name (0:
    none; two allocations of one name in different scopes may differ)."""
    from ..ir.nodes import Alloc
    from ..ir.visitor import walk
    out: dict = {}
    for n in walk(tuple(body)):
        if isinstance(n, Alloc):
            out.setdefault(n.name, []).append(n.swizzle)
    return {k: sorted(set(v)) for k, v in out.items()}


def src_box(s) -> tuple:
    """The box's extent along every dimension of the GLOBAL array (1 at points)."""
    g = global_side(s)
    it = iter(box(g))
    return tuple(next(it) if isinstance(p, Interval) else 1 for p in g.idx)


def tma_dsts(body) -> set:
    """The SHARED arrays bulk tensor copies write in ``body`` (aligned to 128 bytes)."""
    from ..ir.visitor import walk
    return {n.dst.name if isinstance(n, TmaLoad) else n.src.name for n in walk(tuple(body))
            if isinstance(n, (TmaLoad, TmaStore))}


def tensor_map_params(stmts, proc) -> list:
    """The ``"tensormap"`` parameters of a kernel (``stmts``: its body), one per source
    array and box, in the order the copies first name them."""
    from ..ir.visitor import walk
    from .host_plan import KernelParam
    from ..ir.tma_meaning import shared_side
    shapes = {q.name: tuple(q.shape) for q in proc.params if q.is_array}
    swz = tile_swizzles(stmts)
    out, seen = [], set()
    for n in walk(tuple(stmts)):
        if isinstance(n, (TmaLoad, TmaStore)):
            ext, g = src_box(n), global_side(n)
            for w in swz.get(shared_side(n).name, [0]):
                name = map_name(g.name, ext, w)
                if name not in seen:
                    seen.add(name)
                    out.append(KernelParam(name, name, "tensormap", g.ty,
                                           "const unsigned long long* __restrict__", False,
                                           False, (g.name, ext, shapes.get(g.name, n.shape), w)))
    return out


def scan_stores(kw, body) -> None:
    """The SHARED tiles the kernel's bulk tensor stores read, and the GLOBAL arrays its
    bulk tensor copies read or write (their generic writers fence)."""
    from ..ir.visitor import walk
    nodes = [n for n in walk(tuple(body)) if isinstance(n, (TmaStore, TmaLoad))]
    kw.tma_store_srcs = {n.src.name for n in nodes if isinstance(n, TmaStore)}
    kw.tma_globals = {(n.dst if isinstance(n, TmaStore) else n.src).name for n in nodes}
    kw.tma_loads = any(isinstance(n, TmaLoad) for n in nodes)


def _generic_writes(body) -> set:
    """Arrays a thread loop's body writes through the generic proxy (not only by bulk
    tensor stores, which written_names counts among the generic writes)."""
    from ..ir.inline import written_names
    from ..ir.nodes import Assign, Atomic, Reduce
    from ..ir.visitor import walk
    nodes = list(walk(tuple(body)))
    stored = {n.dst.name for n in nodes if isinstance(n, TmaStore)}
    plain = {n.name for n in nodes if isinstance(n, (Assign, Reduce, Atomic))}
    return written_names(tuple(body), generic_only=True) - (stored - plain)


def store_writer_fence(kw, body) -> None:
    """At the end of a thread loop's body that writes a tile a bulk tensor store reads: the
    generic proxy's writes, made visible to the async proxy (``fence.proxy.async``) by the
    threads that made them, before the barrier that orders them before the store."""
    from ..ir.inline import written_names
    srcs = getattr(kw, "tma_store_srcs", None)
    if srcs and written_names(tuple(body), generic_only=True) & srcs:
        kw.use_helper("gpudsl_tma")
        kw.w.line("gpudsl_tma_fence();  // the generic proxy's writes, seen by tma_store")
    gl = getattr(kw, "tma_globals", None)
    if gl and _generic_writes(body) & gl:
        # a GLOBAL array that a bulk tensor copy of this kernel reads or writes, written
        # here by threads: the async proxy sees those writes only after this fence
        kw.use_helper("gpudsl_tma")
        kw.w.line("gpudsl_tma_fence_global();  // the generic proxy's writes, seen by TMA")


def emit_tma(kw, s, level: str) -> None:
    """One ``tma_load`` / ``tma_store`` / ``tma_commit`` / ``tma_wait`` into ``kw``."""
    kw.use_helper("gpudsl_mbar")
    kw.use_helper("gpudsl_tma")
    if isinstance(s, TmaCommit):
        kw.w.line("gpudsl_tma_commit();", s.loc)
        return
    if isinstance(s, TmaWait):
        kw.w.line(f"gpudsl_tma_wait<{s.depth}>();", s.loc)
        return
    if level != "thread":
        raise CompileError("tma_load stands outside any @ THREADS loop: each copy is started "
                           "by one thread", s.loc, "put it inside a THREADS loop")
    from ..ir.tma_meaning import shared_side
    from ..ir.tma_meaning import swizzle_problem
    tile = kw.lookup(shared_side(s).name, s.loc)
    why = swizzle_problem(s, tile.swizzle) if tile.swizzle else None
    if why is not None:
        raise CompileError(f"the bulk tensor copy into or out of the swizzled tile "
                           f"'{shared_side(s).name}' cannot use the hardware's swizzle mode: "
                           f"{why}", s.loc, "check() refuses it too")
    if isinstance(s, TmaStore):
        return _store(kw, s, tile.swizzle)
    w = kw.w
    start = tuple(p.lo if isinstance(p, Interval) else p.pt for p in s.dst.idx)
    coords = [p.lo if isinstance(p, Interval) else p.pt for p in s.src.idx]
    cs = ", ".join(f"(int)({kw.expr(c)})" for c in reversed(coords))
    bar = kw.lookup(s.name, s.loc).cname
    bar = f"&{bar}" if s.index is None else f"&{bar}[(unsigned)({kw.expr(s.index)})]"
    w.line(f"gpudsl_tma_load<{len(coords)}>(&{kw.access(s.dst.name, start, s.loc)}, "
           f"{map_name(s.src.name, src_box(s), tile.swizzle)}, {bar}, {box_bytes(s)}u, {cs});",
           s.loc)


def _store(kw, s: TmaStore, swizzle: int) -> None:
    start = tuple(p.lo if isinstance(p, Interval) else p.pt for p in s.src.idx)
    coords = [p.lo if isinstance(p, Interval) else p.pt for p in s.dst.idx]
    cs = ", ".join(f"(int)({kw.expr(c)})" for c in reversed(coords))
    kw.w.line(f"gpudsl_tma_store<{len(coords)}>({map_name(s.dst.name, src_box(s), swizzle)}, "
              f"&{kw.access(s.src.name, start, s.loc)}, {cs});", s.loc)


__all__ = ["scan_stores", "store_writer_fence", "TMA", "tensor_map_params", "map_name", "src_box", "tma_dsts", "emit_tma"]
