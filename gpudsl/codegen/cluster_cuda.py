"""CUDA for thread block clusters (docs/hopper.md (clusters)).

- ``par(0, c) @ CLUSTERS``, the innermost loop of a kernel's BLOCKS nest, is the grid's
  ``x`` dimension (as any innermost BLOCKS loop: the rank is ``blockIdx.x``, and the grid's
  ``x`` extent is ``c``, a multiple of ``c``); the kernel is declared
  ``__cluster_dims__(c, 1, 1)``: a compile-time cluster size, which a plain launch
  (``cuLaunchKernel``) honours, so the launcher needs nothing more.
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


__all__ = ["SYNC_CLUSTER", "cluster_attribute", "cluster_size", "emit_sync_cluster"]
