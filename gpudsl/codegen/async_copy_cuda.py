"""CUDA for the asynchronous copies (docs/async_copies.md).

- ``async_copy(dst, src)`` of 4, 8 or 16 bytes: ``cp.async.ca.shared.global`` (4 and 8
  bytes) or ``cp.async.cg.shared.global`` (16 bytes, past L1) on sm_80 and newer; a plain
  copy on older targets and on the emulator.
- ``async_copy(dst, src, bar=b)``: the same copy, then ``cp.async.mbarrier.arrive.shared.b64
  [b]`` (:mod:`.syncs`' ``gpudsl_cp_async_mbar_arrive``): ``b``'s current phase waits for
  the thread's copies to land (on the emulator, where copies are plain, nothing).
- ``async_commit()``: ``cp.async.commit_group``; ``async_wait(n)``:
  ``cp.async.wait_group n``; nothing where the copies are plain (they landed already).

The helpers are inline PTX under ``__CUDA_ARCH__ >= 800``; the generated code is the
same for every target.  Alignment (both addresses multiples of the copy's size) is what
check() proves; arrays themselves are 16-byte aligned (cudaMalloc'd arguments,
``__align__(16)`` shared arrays).
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import AsyncCommit, AsyncCopy, AsyncWait
from .wgmma_cuda import after_copies_fence

ASYNC_COPY = r"""
// async_copy / async_commit / async_wait: cp.async on sm_80+, plain copies elsewhere
#if !defined(GPUDSL_EMULATOR) && defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define GPUDSL_CP_ASYNC 1
#endif
template <int N>
__device__ __forceinline__ void gpudsl_cp_async(void* dst, const void* src) {
#ifdef GPUDSL_CP_ASYNC
  unsigned d;
  d = (unsigned)__cvta_generic_to_shared(dst);  // folded by ptxas (an asm is not)
  if (N == 16)
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" :: "r"(d), "l"(src) : "memory");
  else
    asm volatile("cp.async.ca.shared.global [%0], [%1], %2;" :: "r"(d), "l"(src), "n"(N)
                 : "memory");
#else
  if (N == 4) {
    *(unsigned int*)dst = *(const unsigned int*)src;
  } else if (N == 8) {
    *(unsigned long long*)dst = *(const unsigned long long*)src;
  } else {
    ((unsigned long long*)dst)[0] = ((const unsigned long long*)src)[0];
    ((unsigned long long*)dst)[1] = ((const unsigned long long*)src)[1];
  }
#endif
}
__device__ __forceinline__ void gpudsl_cp_async_commit() {
#ifdef GPUDSL_CP_ASYNC
  asm volatile("cp.async.commit_group;" ::: "memory");
#endif
}
template <int N>
__device__ __forceinline__ void gpudsl_cp_async_wait() {
#ifdef GPUDSL_CP_ASYNC
  asm volatile("cp.async.wait_group %0;" :: "n"(N) : "memory");
#endif
}
"""


def _err(msg, loc, hint=None):
    return CompileError(msg, loc, hint)


def emit_async(kw, s, level: str) -> None:
    """One async statement into the kernel writer ``kw`` (at ``level``)."""
    kw.use_helper("gpudsl_cp_async")
    w = kw.w
    if isinstance(s, AsyncCommit):
        w.line("gpudsl_cp_async_commit();", s.loc)
        return
    if isinstance(s, AsyncWait):
        w.line(f"gpudsl_cp_async_wait<{s.depth}>();", s.loc)
        after_copies_fence(kw)   # for wgmma's async proxy (docs/hopper.md)
        return
    assert isinstance(s, AsyncCopy)
    if level != "thread":
        raise _err("async_copy stands outside any @ THREADS loop: each copy is started by "
                   "one thread", s.loc, "put it inside a THREADS loop")
    dst, src = kw.lookup(s.dst, s.loc), kw.lookup(s.src, s.loc)
    if not dst.mem.async_destination or not src.mem.async_source:
        raise _err(f"async_copy copies from GLOBAL to SHARED memory; '{s.dst}' is in "
                   f"{dst.mem.name} and '{s.src}' in {src.mem.name}", s.loc,
                   "keep the destination SHARED and the source GLOBAL")
    nbytes = s.n * dst.dtype.bits // 8
    w.line(f"gpudsl_cp_async<{nbytes}>(&{kw.access(s.dst, s.dst_idx, s.loc)}, "
           f"&{kw.access(s.src, s.src_idx, s.loc)});", s.loc)
    if s.bar is not None:
        kw.use_helper("gpudsl_mbar")
        bar = kw.lookup(s.bar, s.loc).cname
        if s.index is not None:
            bar = f"{bar}[(unsigned)({kw.expr(s.index)})]"
        w.line(f"gpudsl_cp_async_mbar_arrive(&{bar});", s.loc)


__all__ = ["ASYNC_COPY", "emit_async"]
