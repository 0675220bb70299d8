"""CUDA for the synchronization of docs/language.md (synchronization): ranged barriers as named barriers and
split barriers as mbarriers.

- ``sync(lo, hi)``: ``bar.sync id, hi - lo`` for the threads whose flat index lies in
  ``[lo, hi)``; ids are allocated per kernel from 1, one per distinct range (id 0 is
  ``__syncthreads``; the whole block's range is ``__syncthreads()`` itself); at most
  15 ranges a kernel.
- ``bar: barrier @ SHARED``: a 64-bit ``__shared__`` word; thread 0 initialises it
  (``mbarrier.init``) with the width of the barrier's arrive range, then the block
  synchronises so that every thread sees the initialised barrier.  Each thread keeps
  the number of its waits (``gpudsl_phase_<bar>``): its k-th wait waits on parity k % 2.
- ``arrive``: ``mbarrier.arrive``; ``arrive(..., count=c)``: ``mbarrier.arrive.release.cta.
  shared::cta.b64 _, [bar], c`` on sm_90 (the count operand needs sm_90), on sm_80
  ``c`` plain arrives; the barrier's expected
  count is the arrive range's width times ``c``.  ``async_copy(..., bar=b)`` is followed
  by ``cp.async.mbarrier.arrive.shared.b64 [b]`` (docs/decisions.md: the form without
  ``.noinc``);  ``wait``: a loop on ``mbarrier.test_wait.parity``
  (``try_wait.parity`` on sm_90, which may suspend the thread).  mbarriers need sm_80:
  compiling for an older target stops with a clear ``#error``.

The helpers are inline PTX on a GPU; the emulator's header defines them with the same
semantics (gpudsl_emu_bars.h), so the generated code is the same for both.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import Arrive, Sync, Wait
from ..ir.visitor import walk
from .role_split import conjunction
from .warp_roles import lower, upper

TID = "(threadIdx.x + blockDim.x * (threadIdx.y + blockDim.y * threadIdx.z))"

NAMED_BARRIER = r"""
#ifndef GPUDSL_EMULATOR
// sync(lo, hi): a named barrier of hi - lo threads (whole warps)
__device__ __forceinline__ void gpudsl_bar_sync(unsigned id, unsigned count) {
  asm volatile("bar.sync %0, %1;" :: "r"(id), "r"(count) : "memory");
}
#endif
"""

MBARRIER = r"""
#ifndef GPUDSL_EMULATOR
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 800
#error "gpudsl: split barriers (arrive/wait) are mbarriers, which need sm_80 or newer"
#endif
__device__ __forceinline__ unsigned gpudsl_smem_addr(const void* p) {
  unsigned a;
  a = (unsigned)__cvta_generic_to_shared(p);  // folded by ptxas (an asm is not)
  return a;
}
__device__ __forceinline__ void gpudsl_mbar_init(unsigned long long* bar, unsigned count) {
  asm volatile("mbarrier.init.shared.b64 [%0], %1;" :: "r"(gpudsl_smem_addr(bar)), "r"(count)
               : "memory");
}
__device__ __forceinline__ void gpudsl_mbar_arrive(unsigned long long* bar) {
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.shared.b64 st, [%0];\n}"
               :: "r"(gpudsl_smem_addr(bar)) : "memory");
}
__device__ __forceinline__ void gpudsl_mbar_arrive_n(unsigned long long* bar, unsigned count) {
#if __CUDA_ARCH__ >= 900
  asm volatile("{\n .reg .b64 st;\n mbarrier.arrive.release.cta.shared::cta.b64 st, [%0], %1;\n}"
               :: "r"(gpudsl_smem_addr(bar)), "r"(count) : "memory");
#else
  // sm_80: the count operand needs sm_90 (or .noComplete, undefined should it complete
  // the phase); c plain arrivals mean the same
#pragma unroll 1
  for (unsigned k = 0; k < count; ++k) gpudsl_mbar_arrive(bar);
#endif
}
// async_copy(..., bar=b): the pending count of b's current phase grows by one now and
// drops by one when the thread's earlier cp.async copies have landed
__device__ __forceinline__ void gpudsl_cp_async_mbar_arrive(unsigned long long* bar) {
  asm volatile("cp.async.mbarrier.arrive.shared.b64 [%0];" :: "r"(gpudsl_smem_addr(bar))
               : "memory");
}
__device__ __forceinline__ void gpudsl_mbar_wait(unsigned long long* bar, unsigned parity) {
  unsigned a = gpudsl_smem_addr(bar), done = 0;
  while (!done) {
#if __CUDA_ARCH__ >= 900
    asm volatile("{\n .reg .pred p;\n mbarrier.try_wait.parity.shared.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(a), "r"(parity) : "memory");
#else
    asm volatile("{\n .reg .pred p;\n mbarrier.test_wait.parity.shared.b64 p, [%1], %2;\n"
                 " selp.u32 %0, 1, 0, p;\n}" : "=r"(done) : "r"(a), "r"(parity) : "memory");
#endif
  }
}
#endif
"""


def _err(msg, loc, hint=None):
    return CompileError(msg, loc, hint)


class SyncWriter:
    """The synchronization statements of one kernel (``kw``: its KernelWriter)."""

    def __init__(self, kw, body):
        self.kw = kw
        self.ids: dict = {}
        self.counts: dict = {}
        self.cluster_bars = {s.name for s in walk(tuple(body))
                             if isinstance(s, Arrive) and s.cluster}
        for s in walk(tuple(body)):
            if isinstance(s, Arrive):
                r = (s.hi.val - s.lo.val) * s.count
                if self.counts.setdefault(s.name, r) != r:
                    raise _err(f"the arrives on '{s.name}' bring different numbers of "
                               "arrivals (range width times count): a split barrier expects "
                               "the same number of arrivals each phase",
                               s.loc, "use one split barrier per group of arriving threads")

    def nthreads(self) -> int:
        d = self.kw.block_dim
        return d[0] * d[1] * d[2]

    def tid(self) -> str:
        d = self.kw.block_dim
        return "threadIdx.x" if d[1] == d[2] == 1 else TID

    def guard(self, s) -> str:
        """The condition that the thread is in the statement's range."""
        lo, hi, tid = s.lo.val, s.hi.val, self.tid()
        conds = conjunction(([lower(self.kw, lo, tid)] if lo else []) +
                            ([upper(self.kw, hi, tid)] if hi < self.nthreads() else []))
        return f"if ({conds})" if conds else ""

    def ranged(self, s: Sync) -> None:
        w, n = self.kw.w, self.nthreads()
        lo, hi = s.lo.val, s.hi.val
        if (lo, hi) == (0, n):
            w.line("__syncthreads();", s.loc)
            return
        if hi > n:
            raise _err(f"sync({lo}, {hi}) names threads past the block of {n} threads", s.loc,
                       "keep the range inside the block")
        tgt = self.kw.m.target   # its warp size and named barriers (check() refuses first)
        warp, named = tgt.warp_size, tgt.named_barriers
        if lo % warp or hi % warp:
            raise _err(f"sync({lo}, {hi}) is not made of whole warps: bar.sync counts warps",
                       s.loc, f"use multiples of {warp}")
        if (lo, hi) not in self.ids:
            if len(self.ids) >= named - 1:   # id 0 is __syncthreads
                raise _err(f"more than {named - 1} distinct ranged barriers in kernel "
                           f"{self.kw.name}: {tgt.name} has {named} named barriers (id 0 is "
                           "the block's)", s.loc, "use fewer distinct thread ranges")
            self.ids[(lo, hi)] = len(self.ids) + 1
        self.kw.use_helper("gpudsl_bar_sync")
        w.line(f"{self.guard(s)} gpudsl_bar_sync({self.ids[(lo, hi)]}, {hi - lo});  "
               f"// sync({lo}, {hi})", s.loc)

    def barrier_init(self, s) -> None:
        """After the ``__shared__`` declaration of a split barrier."""
        self.kw.use_helper("gpudsl_mbar")
        w, name = self.kw.w, self.kw.lookup(s.name, s.loc).cname
        count = self.counts.get(s.name, 1)
        if s.name in self.cluster_bars:   # every block of the cluster arrives on each
            count *= max(getattr(self.kw, "cluster", 0), 1)
        w.line("__syncthreads();  // nobody uses an earlier barrier in this word", s.loc)
        # TMA loads complete on the barrier through the async proxy, which sees the
        # mbarrier.init only after a fence (CUTLASS's fence_barrier_init)
        fence = ""
        if getattr(self.kw, "tma_loads", False):
            self.kw.use_helper("gpudsl_tma")
            fence = " gpudsl_mbar_init_fence();"
        if s.shape:  # a ring: every element, and one parity bit per element
            k = s.shape[0].val
            w.line(f"if ({self.tid()} == 0) {{ for (int gpudsl_j = 0; gpudsl_j < {k}; "
                   f"++gpudsl_j) gpudsl_mbar_init(&{name}[gpudsl_j], {count});{fence} }}"
                   if fence else
                   f"if ({self.tid()} == 0) for (int gpudsl_j = 0; gpudsl_j < {k}; ++gpudsl_j) "
                   f"gpudsl_mbar_init(&{name}[gpudsl_j], {count});", s.loc)
            self._visible(s, "ring")
            w.line(f"unsigned gpudsl_phase_{name} = 0;  // bit e: parity of the next wait on "
                   f"{s.name}[e]", s.loc)
            return
        w.line(f"if ({self.tid()} == 0) {{ gpudsl_mbar_init(&{name}, {count});{fence} }}"
               if fence else f"if ({self.tid()} == 0) gpudsl_mbar_init(&{name}, {count});",
               s.loc)
        self._visible(s, "barrier")
        w.line(f"unsigned gpudsl_phase_{name} = 0;  // waits done on {s.name}", s.loc)

    def _visible(self, s, what: str) -> None:
        """After the initialisation: every thread (of every block of the cluster, for a
        barrier other blocks arrive on) sees the initialised barrier."""
        w = self.kw.w
        if s.name not in self.cluster_bars:
            w.line(f"__syncthreads();  // the initialised {what} is visible to every thread",
                   s.loc)
            return
        self.kw.use_helper("gpudsl_cluster_arrive")
        self.kw.use_helper("gpudsl_sync_cluster")
        w.line(f"if ({self.tid()} == 0) gpudsl_mbar_init_fence_cluster();", s.loc)
        w.line(f"gpudsl_sync_cluster();  // the initialised {what} is visible to every "
               "block of the cluster", s.loc)

    def _arrive(self, s, bar: str) -> str:
        if not s.cluster:
            return _arrive(s, bar)
        self.kw.use_helper("gpudsl_cluster_arrive")
        c = max(getattr(self.kw, "cluster", 0), 1)
        return (f"for (unsigned gpudsl_q = 0; gpudsl_q < {c}u; ++gpudsl_q) "
                f"gpudsl_mbar_arrive_cluster({bar}, gpudsl_q, {s.count}u);")

    def _wait_fn(self, s) -> str:
        if s.name in self.cluster_bars:
            self.kw.use_helper("gpudsl_cluster_arrive")
            return "gpudsl_mbar_wait_cluster"
        return "gpudsl_mbar_wait"

    def split(self, s) -> None:
        w, name = self.kw.w, self.kw.lookup(s.name, s.loc).cname
        n = self.nthreads()
        if s.hi.val > n:
            raise _err(f"the range [{s.lo.val}, {s.hi.val}) is past the block of {n} threads",
                       s.loc, "keep the range inside the block")
        if s.index is not None:
            return self._ring(s, name)
        if isinstance(s, Arrive):
            w.line(f"{self.guard(s)} {self._arrive(s, '&' + name)}".lstrip(), s.loc)
        else:
            assert isinstance(s, Wait)
            fence = self._copies_fence(s)
            wait = f"{self._wait_fn(s)}(&{name}, gpudsl_phase_{name}++ & 1u);"
            w.line(f"{self.guard(s)} {{ {wait} {fence} }}".lstrip() if fence else
                   f"{self.guard(s)} {wait}"
                   .lstrip(), s.loc)

    def _copies_fence(self, s) -> str:
        """After a wait for cp.async copies (``bar=``) into wgmma operands: the copies
        were written through the generic proxy, wgmma reads through the async one, and
        the issuing thread's fence ran before they landed (docs/hopper.md)."""
        if s.name not in getattr(self.kw, "wait_fence_bars", ()):
            return ""
        self.kw.use_helper("gpudsl_wgmma")
        return "gpudsl_proxy_fence();"


    def _ring(self, s, name) -> None:
        """``arrive(bar[e], ...)`` / ``wait(bar[e], ...)`` on an element of a ring."""
        w, e = self.kw.w, self.kw.expr(s.index)
        head = f"{self.guard(s)} {{".lstrip()
        w.line(head, s.loc)
        w.indent += 1
        w.line(f"const unsigned gpudsl_e = (unsigned)({e});", s.loc)
        if isinstance(s, Arrive):
            w.line(self._arrive(s, f"&{name}[gpudsl_e]"), s.loc)
        else:
            w.line(f"{self._wait_fn(s)}(&{name}[gpudsl_e], (gpudsl_phase_{name} >> gpudsl_e) "
                   "& 1u);", s.loc)
            w.line(f"gpudsl_phase_{name} ^= 1u << gpudsl_e;", s.loc)
            fence = self._copies_fence(s)
            if fence:
                w.line(fence + "  // the landed copies, seen by wgmma", s.loc)
        w.indent -= 1
        w.line("}", s.loc)


def _arrive(s: Arrive, bar: str) -> str:
    """The call of one thread's arrive (``count=``: that many arrivals)."""
    if s.count == 1:
        return f"gpudsl_mbar_arrive({bar});"
    return f"gpudsl_mbar_arrive_n({bar}, {s.count}u);"


__all__ = ["NAMED_BARRIER", "MBARRIER", "SyncWriter"]
