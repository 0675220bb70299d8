"""CUDA for thread block clusters (docs/hopper.md (clusters)).

- ``par(0, c) @ CLUSTERS``, the innermost loop of a kernel's BLOCKS nest, is the grid's
  ``x`` dimension (as any innermost BLOCKS loop: the rank is ``blockIdx.x``, and the grid's
  ``x`` extent is ``c``, a multiple of ``c``); the kernel is declared
  ``__cluster_dims__(c, 1, 1)``: a compile-time cluster size, which a plain launch
  (``cuLaunchKernel``) honours, so the launcher needs nothing more.
- ``arrive(bar[e], lo, hi, count=c, cluster=True)``: each thread of the range, for every
  rank ``q`` of the cluster, maps the barrier's shared address into block ``q``'s window
  (``mapa.shared::cluster``) and arrives there with ``mbarrier.arrive.release.cluster.
  shared::cluster`` (``c`` arrivals); the barrier expects ``c`` times the width times the
  cluster size.  Thread 0 initialises such a barrier, then ``fence.mbarrier_init.release.
  cluster`` and a ``sync_cluster()`` (instead of the block barrier) make it visible to
  every block before any arrives; waits on it acquire at cluster scope
  (``mbarrier.try_wait.parity.acquire.cluster``), so what the other blocks wrote before
  their arrive is seen.
- ``sync_cluster()``: ``barrier.cluster.arrive.release`` then ``barrier.cluster.wait.acquire``
  by every thread (the helper ``gpudsl_sync_cluster``; the emulator's header defines it as
  a barrier over the cluster's blocks, which it runs together).  Both need sm_90: compiling
  for an older target stops with an ``#error``.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import For

SYNC_CLUSTER = r"""
#ifndef GPUDSL_EMULATOR
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "gpudsl: thread block clusters (sync_cluster) need sm_90 or newer"
#endif
// sync_cluster(): every thread of every block of the cluster, memory ordered across it
__device__ __forceinline__ void gpudsl_sync_cluster() {
  asm volatile("barrier.cluster.arrive.release.aligned;\n\t"
               "barrier.cluster.wait.acquire.aligned;" ::: "memory");
}
#endif
"""


CLUSTER_ARRIVE = r"""
#ifndef GPUDSL_EMULATOR
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 900
#error "gpudsl: arrives on every block of a cluster (cluster=True) need sm_90 or newer"
#endif
// arrive(bar, lo, hi, count=c, cluster=True): on the barrier at bar's offset in the shared
// memory of the cluster's block `rank` (mapa), released at cluster scope
__device__ __forceinline__ void gpudsl_mbar_arrive_cluster(unsigned long long* bar,
                                                           unsigned rank, unsigned count) {
  unsigned a = gpudsl_smem_addr(bar), r;
  asm volatile("mapa.shared::cluster.u32 %0, %1, %2;" : "=r"(r) : "r"(a), "r"(rank));
  asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0], %1;"
               :: "r"(r), "r"(count) : "memory");
}
// a wait on a barrier other blocks arrive on: acquires at cluster scope
__device__ __forceinline__ void gpudsl_mbar_wait_cluster(unsigned long long* bar,
                                                         unsigned parity) {
  unsigned a = gpudsl_smem_addr(bar), done = 0;
  while (!done) {
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 "
                 "p, [%1], %2;\n selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(a), "r"(parity)
                 : "memory");
  }
}
// after mbarrier.init of a barrier other blocks arrive on, before the cluster barrier that
// lets them
__device__ __forceinline__ void gpudsl_mbar_init_fence_cluster() {
  asm volatile("fence.mbarrier_init.release.cluster;" ::: "memory");
}
#endif
"""


def cluster_size(chain: list) -> int:
    """The cluster size of a kernel's BLOCKS nest (its CLUSTERS loop's extent), 0: none."""
    for b in chain:
        if isinstance(b, For) and b.cluster:
            return b.hi.val - b.lo.val
    return 0


def cluster_attribute(chain: list) -> str:
    """The kernel's ``__cluster_dims__`` (with a leading space), or ``""``."""
    c = cluster_size(chain)
    return f" __cluster_dims__({c}, 1, 1)" if c else ""


def emit_sync_cluster(kw, s, level: str) -> None:
    if level != "block" or not getattr(kw, "cluster", 0):
        raise CompileError("sync_cluster() stands outside the block-level code of a CLUSTERS loop",
                   s.loc, "put it inside `par(0, c) @ CLUSTERS`, outside THREADS loops")
    kw.use_helper("gpudsl_sync_cluster")
    kw.w.line("gpudsl_sync_cluster();", s.loc)


__all__ = ["CLUSTER_ARRIVE", "SYNC_CLUSTER", "cluster_attribute", "cluster_size", "emit_sync_cluster"]
