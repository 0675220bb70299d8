"""``setmaxnreg(n, lo, hi)`` (docs/hopper.md): the warpgroups of the threads ``[lo, hi)``
own ``n`` registers per thread from here on.

``n``, ``lo`` and ``hi`` are integer constants with ``0 <= lo < hi``; whether ``n`` is one
the hardware takes (24..256, a multiple of 8), the range whole warpgroups of the block
and the block's registers enough is a question of the kernel and its target, answered
by check().
"""
from __future__ import annotations

import ast

from ..ir.nodes import Const, SetMaxNReg
from ..ir.types import INDEX

SETMAXNREG_FUNCS = ("setmaxnreg",)


def _int(parser, node, what):
    if not (isinstance(node, ast.Constant) and type(node.value) is int):
        raise parser.err(node, f"{what} must be an integer constant",
                         "registers and warpgroups are fixed: e.g. setmaxnreg(240, 128, 384)")
    return node.value


def parse_setmaxnreg(parser, s: ast.stmt, v: ast.Call, fname: str):
    if len(v.args) != 3 or v.keywords:
        raise parser.err(v, "setmaxnreg() takes the registers per thread and a thread range "
                         "of whole warpgroups: setmaxnreg(n, lo, hi)",
                         "e.g. setmaxnreg(240, 128, 384): threads 128-383 get 240 registers")
    n = _int(parser, v.args[0], "the register count of setmaxnreg()")
    lo = _int(parser, v.args[1], "the low end of the setmaxnreg() range")
    hi = _int(parser, v.args[2], "the high end of the setmaxnreg() range")
    if n < 1:
        raise parser.err(v.args[0], f"setmaxnreg({n}, ...) asks for no registers",
                         "a warpgroup owns 24 to 256 registers per thread")
    if not 0 <= lo < hi:
        raise parser.err(v, f"the setmaxnreg() range [{lo}, {hi}) is empty or negative",
                         "write lo < hi, both >= 0")
    return SetMaxNReg(n, Const(lo, INDEX, parser.src.loc(v.args[1])),
                      Const(hi, INDEX, parser.src.loc(v.args[2])), parser.src.loc(s))


__all__ = ["SETMAXNREG_FUNCS", "parse_setmaxnreg"]
