"""CUDA for ``setmaxnreg(n, lo, hi)`` (docs/hopper.md): the threads of ``[lo, hi)`` run
``setmaxnreg.inc.sync.aligned.u32 n`` when ``n`` is above the registers the kernel starts
with, else ``setmaxnreg.dec.sync.aligned.u32 n``.

A kernel that uses setmaxnreg is compiled with ``__launch_bounds__(threads, blocks)``
(``blocks`` 1 unless the BLOCKS loop says ``blocks_per_sm``): ptxas then gives every
thread exactly ``Target.launch_registers(threads, blocks)`` registers, the count the
choice of ``.inc``/``.dec`` and check()'s register proof start from (without the second
bound ptxas fixes no count and setmaxnreg may have no effect).  The instruction exists on
sm_90a only: compiling for another architecture stops with an ``#error``.  The emulator
has no registers to move: there the helpers do nothing, which is the statement's meaning.
"""
from __future__ import annotations

from ..errors import CompileError
from ..ir.nodes import SetMaxNReg
from ..ir.visitor import walk
from ..targets import EMULATED_TARGET, target

SETMAXNREG = r"""
// setmaxnreg(n, lo, hi): a warpgroup's registers per thread (sm_90a; nothing on the emulator)
#if !defined(GPUDSL_EMULATOR) && defined(__CUDA_ARCH__) && !defined(__CUDA_ARCH_FEAT_SM90_ALL)
#error "gpudsl: setmaxnreg needs sm_90a (an H100/H200's own architecture)"
#endif
template <int N> __device__ __forceinline__ void gpudsl_setmaxnreg_inc() {
#ifndef GPUDSL_EMULATOR
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;" :: "n"(N));
#endif
}
template <int N> __device__ __forceinline__ void gpudsl_setmaxnreg_dec() {
#ifndef GPUDSL_EMULATOR
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;" :: "n"(N));
#endif
}
"""


def uses_setmaxnreg(body) -> bool:
    return any(isinstance(n, SetMaxNReg) for n in walk(tuple(body)))


def launch_blocks(body, blocks_per_sm: int) -> int:
    """The second launch bound: ``blocks_per_sm``, or 1 where setmaxnreg needs one."""
    return max(1, blocks_per_sm) if uses_setmaxnreg(body) else blocks_per_sm


def emit_setmaxnreg(kw, s: SetMaxNReg, level: str, blocks_per_sm: int) -> None:
    """One setmaxnreg into the kernel writer ``kw``."""
    if level != "block":
        raise CompileError("setmaxnreg() stands at block level: it sets the registers of whole "
                           "warpgroups", s.loc, "put it inside the BLOCKS loop, outside the "
                           "THREADS loops")
    n = kw.syncs.nthreads()
    start = target(EMULATED_TARGET).launch_registers(n, max(1, blocks_per_sm))
    op = "inc" if s.regs > start else "dec"
    kw.use_helper("gpudsl_setmaxnreg")
    guard = kw.syncs.guard(s)
    kw.w.line(f"{guard} gpudsl_setmaxnreg_{op}<{s.regs}>();  // setmaxnreg({s.regs}, "
              f"{s.lo.val}, {s.hi.val}); the kernel starts with {start}".lstrip(), s.loc)


__all__ = ["SETMAXNREG", "uses_setmaxnreg", "launch_blocks", "emit_setmaxnreg"]
