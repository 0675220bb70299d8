"""``compile(..., trace=dict(block=..., thread=...))`` (docs/running.md): after each write, a
``printf`` run by the traced thread only, on the statement's own C line (so the
``#line`` mapping is unchanged): the source line, the array, the indices and the
value written."""
from __future__ import annotations

from ..errors import cell_label
from ..ir.nodes import Assign, Atomic, Reduce
from ..ir.types import DType, bf16, f16, i64
from .cexpr import ATOM
from .writer import c_string


def _trace_format(ty: DType):
    """The printf conversion of a traced value of type ``ty`` and the C that converts
    the value to the argument it takes (varargs: f16/bf16 through float)."""
    if ty == f16:
        return "%g", lambda v: f"(double)__half2float({v})"
    if ty == bf16:
        return "%g", lambda v: f"(double)__bfloat162float({v})"
    if ty.is_float:
        return "%g", lambda v: f"(double)({v})"
    if ty == i64:
        return "%lld", lambda v: f"(long long)({v})"
    return "%d", lambda v: f"(int)({v})"


def trace_text(self, s) -> str:  # self: the KernelWriter emitting the kernel
    """With ``compile(..., trace=...)``: a ``printf`` of what ``s`` wrote, run by the
    traced thread only, on the statement's own C line (``#line`` mapping unchanged);
    without it, nothing."""
    trace = self.m.trace
    if trace is None:
        return ""
    block, thread = trace
    conds = [f"blockIdx.{d} == {v}u" for d, v in zip("xyz", block)] + \
            [f"threadIdx.{d} == {v}u" for d, v in zip("xyz", thread)]
    info = self.lookup(s.name, s.loc)
    where = "?"
    if s.loc is not None and s.loc.file:
        cell = cell_label(s.loc.file)
        where = f"{cell}, line {s.loc.line}" if cell else \
            f"{s.loc.file.replace(chr(92), '/').rsplit('/', 1)[-1]}:{s.loc.line}"
    where, name = where.replace("%", "%%"), s.name.replace("%", "%%")
    args = [f"(long long)({self.expr(i)})" for i in s.idx]
    target = name + ("[" + ", ".join("%lld" for _ in s.idx) + "]" if s.idx else "")
    vfmt, conv = _trace_format(info.dtype)
    if isinstance(s, Atomic):
        # the operand: the location itself may change under other threads' atomics
        head = f"{where}: atomic_{s.op}({target}, {vfmt})"
        args.append(conv(self.cast_to(s.rhs, info.dtype, ATOM)))
    else:
        op = "=" if isinstance(s, Assign) else f"{s.op}="
        head = f"{where}: {target} {op} {vfmt}"
        if isinstance(s, Reduce):
            head += f" (now {vfmt})"
            args.append(conv(self.cast_to(s.rhs, info.dtype, ATOM)))
        args.append(conv(self.access(s.name, s.idx, s.loc)))
    fmt = c_string(head)[:-1] + '\\n"'
    return f" if ({' && '.join(conds)}) printf({fmt}, {', '.join(args)});"


__all__ = ["trace_text"]
