"""The statements that call out of the kernel's own code: CUDA atomics (``atomic_add``
and the rest, with the helpers of types CUDA lacks) and ``@instr`` calls (the template
with its holes filled: parameters, window origins, data pointers and strides).  A mixin
of :class:`gpudsl.codegen.kernel_cuda.KernelWriter`, which provides ``lookup``,
``index_text``, ``expr``, ``cast_to``, ``access``, ``use_helper``, ``trace_text`` and
the writer ``w``."""
from __future__ import annotations

import re

from ..errors import CompileError
from ..ir.nodes import Atomic, BinOp, Call, Const, Expr, Interval, Point, WindowArg
from ..ir.types import INDEX, bf16, f16, f32, f64, i32, i64
from .cexpr import ATOM
from .swizzle_cuda import refuse_window


def _err(msg, loc, hint=None):
    return CompileError(msg, loc, hint)


class CallWriter:
    """Atomics and ``@instr`` calls (see the module)."""

    def atomic(self, s: Atomic) -> None:
        """One CUDA atomic; ``old = atomic_<op>(...)`` assigns its return value."""
        info = self.lookup(s.name, s.loc)
        ty = info.dtype
        lv = self.index_text(info, s.idx, s.loc)
        val = self.cast_to(s.rhs, ty)
        ull = "unsigned long long"
        wide = ty == i64  # CUDA's 64-bit integer atomics take unsigned long long
        op = s.op

        def native(fn, *args):
            if wide:
                cast = ", ".join(f"({ull})({a})" for a in args)
                back = "(long long)" if s.result is not None else ""
                return f"{back}{fn}(({ull}*)&{lv}, {cast})"
            return f"{fn}(&{lv}, {', '.join(args)})"

        ok = {"add": (f32, f64, i32, i64, f16, bf16), "sub": (f32, f64, i32, i64),
              "min": (f32, f64, i32, i64), "max": (f32, f64, i32, i64),
              "exch": (f32, f64, i32, i64), "cas": (i32, i64), "and": (i32, i64),
              "or": (i32, i64), "xor": (i32, i64), "inc": (i32, i64)}.get(op, ())
        if ty not in ok:
            raise _err(f"atomic_{op} on {ty.name} is not supported", s.loc,
                       "types: " + ", ".join(t.name for t in ok))
        if op == "add":
            text = native("atomicAdd", val)
        elif op == "sub":
            text = native("atomicSub", val) if ty == i32 else \
                native("atomicAdd", f"0ull - ({ull})({val})") if wide else \
                f"atomicAdd(&{lv}, -({val}))"
        elif op in ("min", "max"):
            if ty.is_float and s.result is None:  # the helpers of earlier versions
                self.use_helper("gpudsl_atomic_f32" if ty == f32 else "gpudsl_atomic_f64")
                text = f"gpudsl_atomic_{op}(&{lv}, {val})"
            elif ty.is_float:
                self.use_helper("gpudsl_atomic_old")
                text = f"gpudsl_atomic_{op}_old(&{lv}, {val})"
            else:
                text = f"{'atomicMin' if op == 'min' else 'atomicMax'}(&{lv}, {val})"
        elif op == "exch":
            if ty == f64:
                self.use_helper("gpudsl_atomic_old")
                text = f"gpudsl_atomic_exch(&{lv}, {val})"
            else:
                text = native("atomicExch", val)
        elif op == "cas":
            text = native("atomicCAS", self.cast_to(s.cmp, ty), val)
        elif op in ("and", "or", "xor"):
            text = native("atomic" + op.capitalize(), val)
        else:  # inc
            self.use_helper("gpudsl_atomic_old")
            text = f"gpudsl_atomic_inc(&{lv}, {val})"
        if s.result is not None:
            text = f"{self.access(s.result, (), s.loc)} = {text}"
        self.w.line(text + ";" + self.trace_text(s), s.loc)

    # ------------------------------------------------------------ @instr

    _HOLE = re.compile(r"\{\{|\}\}|\{(\w+)\}")

    def window_holes(self, pname: str, arg: WindowArg, loc) -> dict:
        info = self.lookup(arg.name, loc)
        if getattr(info, "swizzle", 0):
            refuse_window(info, loc)
        if not arg.idx:
            n = len(info.shape) + info.drop
            origin = tuple(Const(0, INDEX) for _ in range(n))
            kept = list(range(n))
        else:
            origin = tuple(p.pt if isinstance(p, Point) else p.lo for p in arg.idx)
            kept = [k for k, p in enumerate(arg.idx) if isinstance(p, Interval)]
        if info.pointer:
            shape = list(info.shape)
            if not shape:
                lv = f"{info.cname}[0]"
            else:
                lv = self.index_text(info, origin, loc)
            strides = []
            for k in kept:
                st: Expr = Const(1, INDEX)
                for d in shape[k + 1:]:
                    st = d if (isinstance(st, Const) and st.val == 1) else \
                        BinOp("*", st, d, INDEX)
                strides.append(self.expr(st))
        else:
            lv = self.index_text(info, origin, loc)
            shape = list(info.shape)
            strides = []
            for k in kept:
                k2 = k - info.drop
                if k2 < 0:
                    raise _err(f"a window of '{arg.name}' spans a dropped thread dimension",
                               loc, "index the thread dimensions with points")
                st = 1
                for d in shape[k2 + 1:]:
                    st *= d
                strides.append(str(st))
        holes = {pname: lv, f"{pname}_data": f"&{lv}" if not lv.startswith("*") else lv[1:]}
        for k, st in enumerate(strides):
            holes[f"{pname}_stride_{k}"] = st
        return holes

    def instr(self, s: Call) -> None:
        callee = s.proc
        if callee.instr is None:
            raise _err(f"the call of {callee.name} was not inlined", s.loc)
        holes: dict[str, str] = {}
        for p, a in zip(callee.params, s.args):
            if p.is_array:
                holes.update(self.window_holes(p.name, a, s.loc))
            else:
                holes[p.name] = self.expr(a, ATOM) if p.kind != "scalar" else \
                    self.cast_to(a, p.ty, ATOM)

        def sub(m):
            if m.group(0) == "{{":
                return "{"
            if m.group(0) == "}}":
                return "}"
            key = m.group(1)
            if key not in holes:
                raise _err(f"the template of @instr {callee.name} has the hole {{{key}}}, which "
                           "names no parameter", s.loc,
                           "holes: " + ", ".join("{" + h + "}" for h in holes))
            return holes[key]

        text = self._HOLE.sub(sub, callee.instr.strip("\n"))
        self.w.line(f"// {callee.name}", s.loc)
        for ln in text.split("\n"):
            self.w.line(ln)


__all__ = ["CallWriter"]
