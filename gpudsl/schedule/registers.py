"""``set_registers``: a ``setmaxnreg`` placed by a primitive (docs/hopper.md, "setmaxnreg").

``setmaxnreg(n, lo, hi)`` has no meaning (the interpreter runs it as nothing), so no
dependence can forbid it; what can go wrong is the machine's side: a count the
instruction does not take, a range that is not whole warpgroups of the block, registers
the block does not have (a raising warpgroup would wait forever), a raise waiting behind
a barrier for a lowering.  Those are check()'s setmaxnreg obligations; the primitive
refuses a result for which they find a problem (``hopper_guard`` runs them on every
rewrite of a proc that holds a setmaxnreg, with the one statement added allowed).
"""
from __future__ import annotations

from ..ir.nodes import Const, For, SetMaxNReg
from ..ir.types import BLOCKS, INDEX
from .edits import insert
from .hopper_guard import hopper_issues
from .primitive import LOOP, POSITIVE_INT, fail, primitive


@primitive("set_registers", loop=LOOP, regs=POSITIVE_INT)
def set_registers(p, loop, regs: int, lo: int = 0, hi: int = 128):
    """Give the warpgroups of the threads ``[lo, hi)`` ``regs`` registers per thread:
    insert ``setmaxnreg(regs, lo, hi)`` at the top of the body of the kernel's
    innermost ``@ BLOCKS`` loop ``loop`` (after the setmaxnreg statements already
    there, so that calls keep their order: lower a producer's registers first, then
    raise the consumers').

    Legality: the meaning does not change (setmaxnreg places registers); the result
    must pass check()'s setmaxnreg obligations for sm_90a with nothing the input did
    not have: ``regs`` 24 to 256, a multiple of 8; ``[lo, hi)`` whole warpgroups of
    the block (128 threads from a multiple of 128); the warpgroups' counts summing to
    at most the block's registers (the launch's count times the warpgroups: 3 x 168
    for 384 threads, so 40 + 232 + 232); no barrier between a raise and a lowering.

    Example: ``set_registers(p, "bj", 40, 256, 384)``
    """
    c = loop
    L: For = c.node()
    if L.mapping != BLOCKS or any(isinstance(s, For) and s.mapping == BLOCKS
                                  for s in L.body):
        raise fail(f"loop {L.iter} is not the innermost @ BLOCKS loop of a kernel "
                   "(setmaxnreg stands at the top of the block's code)", L.loc)
    for v, what in ((lo, "lo"), (hi, "hi")):
        if isinstance(v, bool) or not isinstance(v, int):
            raise fail(f"{what} must be an integer, not {v!r}", L.loc)
    if not 0 <= lo < hi:
        raise fail(f"the range [{lo}, {hi}) is empty or negative", L.loc)
    k = 0
    while k < len(L.body) and isinstance(L.body[k], SetMaxNReg):
        k += 1
    stmt = SetMaxNReg(regs, Const(lo, INDEX, L.loc), Const(hi, INDEX, L.loc), L.loc)
    out = insert(p.ir, c.addr + ("body", k), [stmt])
    seen = {(kind, msg) for kind, msg, _, _ in hopper_issues(p.ir)}
    for kind, msg, loc, w in hopper_issues(out.ir):
        if (kind, msg) not in seen:
            raise fail(f"check() refuses `setmaxnreg({regs}, {lo}, {hi})` here: {msg}",
                       loc or L.loc, "e.g. 40 for a producer warpgroup, 232 for two "
                       "consumer warpgroups of a 384-thread block", w or None)
    return out


__all__ = ["set_registers"]
