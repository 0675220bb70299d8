"""Parsing the warp collectives (``shfl(v, lane)``, ``ballot(c)``, ``warp_sum(v)``...)
from the one table :data:`gpudsl.ir.collective_meaning.COLLECTIVES`."""
from __future__ import annotations

from ..ir.collective_meaning import COLLECTIVES, VALUE_TYPES
from ..ir.nodes import Builtin, Collective, Const
from ..ir.types import bool_, i64


def collective(parser, node, fname: str) -> Collective:
    """The collective ``fname(args)`` of the call ``node`` (``parser`` is the
    frontend's :class:`~gpudsl.frontend.exprs.ExprParser`)."""
    cd = COLLECTIVES[fname]
    if len(node.args) != cd.arity:
        raise parser.err(node, f"{fname}() takes {cd.arity} argument(s), got {len(node.args)}",
                         _usage(fname))
    if cd.operand == "cond":
        v = parser.bool_expr(node.args[0], f"the argument of {fname}()")
    else:
        v = parser.expr(node.args[0])
        if v.ty.kind == "index":  # a control integer, taken as i64
            v = Const(int(v.val), i64, v.loc) if isinstance(v, Const) else \
                Builtin("i64", (v,), i64, v.loc)
        if v.ty not in VALUE_TYPES:
            raise parser.err(node.args[0], f"{fname}() takes an f32, f64, i32 or i64 value, "
                             f"not {v.ty.name}", f"cast it first, e.g. {fname}(f32(...))")
    args = (v,)
    if cd.lane is not None:
        args += (parser.int_expr(node.args[1], f"the {cd.lane} of {fname}()"),)
    ty = cd.result_type(v.ty) if cd.operand == "value" else cd.result_type(bool_)
    return Collective(fname, args, ty, parser.src.loc(node))


def _usage(fname: str) -> str:
    cd = COLLECTIVES[fname]
    arg = "c" if cd.operand == "cond" else "v"
    return f"write {fname}({arg}{', ' + cd.lane.split()[-1] if cd.lane else ''})"
