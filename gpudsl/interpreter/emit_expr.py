"""Expressions → Python source, for the interpreter's compiled procs.

Names in the generated code (user names cannot collide with helpers, which
start with ``_``):

* ``v_<n>``: a control integer (size, index parameter, loop variable);
* ``sc_<n>``: a scalar parameter, or a local scalar when not watched for races;
* ``a_<n>``: the flat numpy buffer an array lives in, ``o_<n>`` its offset in
  it, ``s<k>_<n>`` the stride of dimension ``k``, ``d<k>_<n>`` its extent,
  ``tr_<n>`` its race-detector hook.  Arrays that the proc itself made
  contiguous (its top-level tensor arguments and its allocations) have offset 0
  and unit last stride, which the code uses as literals.
"""
from __future__ import annotations

import numpy as np

from ..ir.nodes import BinOp, Builtin, Collective, Const, Expr, Read, UnOp, Var
from ..ir.numeric import in_width
from ..ir.printer import print_expr
from ..ir.types import DType, INDEX
from ..ir.wgmma_meaning import TF32
from .runtime import AccessSite, wrap_expr
from .warp_execution import Site

READ, WRITE, ATOMIC = 1, 2, 3

_ARITH = ("+", "-", "*", "/", "//", "%", "&", "|", "^", "<<", ">>")
_CMP = ("==", "!=", "<", "<=", ">", ">=")
_WRAPPING = ("+", "-", "*", "<<", "//")  # may leave the range of a fixed-width int


class ArrInfo:
    """What the code generator knows about an array name in scope."""

    __slots__ = ("name", "ndim", "ty", "mem", "contig")

    def __init__(self, name: str, ndim: int, ty: DType, mem, contig: bool):
        self.name = name
        self.ndim = ndim
        self.ty = ty
        self.mem = mem
        self.contig = contig

    def dim(self, k: int) -> str:
        return f"d{k}_{self.name}"

    def stride(self, k: int) -> str:
        if self.contig and k == self.ndim - 1:
            return "1"
        return f"s{k}_{self.name}"

    def off(self) -> str:
        return "0" if self.contig else f"o_{self.name}"


def _is_simple(src: str) -> bool:
    return src.isidentifier() or src.lstrip("-").isdigit()


class ExprEmitter:
    """Turns IR expressions into Python expressions; subclasses emit statements."""

    def __init__(self, race: bool):
        self.race = race
        self.env: dict[str, object] = {}  # constants of the generated module
        self.arrays: dict[str, ArrInfo] = {}
        self.scalars: dict[str, DType] = {}  # names held in Python locals (sc_)
        self.in_warp = False  # emitting a lane of a warp-synchronous loop (a generator)
        self._n = 0

    # ------------------------------------------------------------ helpers

    def fresh(self, base: str = "_t") -> str:
        self._n += 1
        return f"{base}{self._n}"

    def const(self, value, base: str = "_K") -> str:
        name = self.fresh(base)
        self.env[name] = value
        return name

    def access(self, loc, text: str, how: str, name: str) -> str:
        return self.const(AccessSite(loc, text, how, name), "_A")

    # ------------------------------------------------------------ conversions

    def conv(self, src: str, frm: DType, to: DType, node: Expr | None = None) -> str:
        """``src`` (a value of type ``frm``) as a value of type ``to``."""
        if frm == to:
            return src
        if to.is_float:
            if isinstance(node, Const):
                return self.const(np.dtype(to.numpy).type(node.val))
            return f"_cv_{to.name}({src})"
        if to.kind == "int":
            if frm.is_float or frm.kind == "bool":
                return f"_cv_{to.name}({src})"
            if isinstance(node, Const) and -(1 << (to.bits - 1)) <= int(node.val) < (
                    1 << (to.bits - 1)):
                return src
            if frm.kind == "int" and frm.bits <= to.bits:
                return src
            return wrap_expr(src, to.bits)
        if to.kind == "bool":
            return src if frm.kind == "bool" else f"bool({src})"
        # index
        if frm.is_float:
            return f"_cv_i64({src})"
        if frm.kind == "bool":
            return f"int({src})"
        return src

    def ex_as(self, e: Expr, ty: DType) -> str:
        return self.conv(self.ex(e), e.ty, ty, e)

    # ------------------------------------------------------------ expressions

    def ex(self, e: Expr) -> str:
        if isinstance(e, Const):
            return self._const(e)
        if isinstance(e, Var):
            return f"v_{e.name}"
        if isinstance(e, Read):
            return self.read(e)
        if isinstance(e, BinOp):
            return self._binop(e)
        if isinstance(e, UnOp):
            if e.op == "not":
                return f"(not {self.ex(e.arg)})"
            out = f"(-{self.ex_as(e.arg, e.ty)})"
            return wrap_expr(out, e.ty.bits) if e.ty.kind == "int" else out
        if isinstance(e, Builtin):
            return self._builtin(e)
        if isinstance(e, Collective):
            return self._collective(e)
        raise TypeError(f"the interpreter cannot evaluate {e!r} here")

    def _const(self, e: Const) -> str:
        if e.ty.kind == "bool":
            return "True" if e.val else "False"
        if e.ty.is_float:
            return self.const(np.dtype(e.ty.numpy).type(e.val))
        v = int(e.val)
        return str(v) if v >= 0 else f"({v})"

    def _binop(self, e: BinOp) -> str:
        op = e.op
        if op in ("and", "or"):
            return f"({self.ex(e.lhs)} {op} {self.ex(e.rhs)})"
        if op in _CMP:
            lt, rt = e.lhs.ty, e.rhs.ty
            ty = lt if lt.is_float else rt if rt.is_float else None
            if ty is not None:
                return f"({self.ex_as(e.lhs, ty)} {op} {self.ex_as(e.rhs, ty)})"
            return f"({self.ex(e.lhs)} {op} {self.ex(e.rhs)})"
        ty = e.ty
        if op in ("<<", ">>"):
            out = self._shift(e)
        else:
            out = f"({self.ex_as(e.lhs, ty)} {op} {self.ex_as(e.rhs, ty)})"
        if ty.kind == "int" and op in _WRAPPING:
            return wrap_expr(out, ty.bits)  # fixed-width integers wrap (two's complement)
        return out

    def _shift(self, e: BinOp) -> str:
        """``a << s`` / ``a >> s``: plain Python for a constant amount within the width,
        else :func:`gpudsl.ir.numeric.shift_left` / ``shift_right`` (an amount outside
        ``[0, width)`` acts as the width)."""
        ty = e.ty
        bits = ty.bits if ty.kind == "int" else None
        a, s = self.ex_as(e.lhs, ty), self.ex_as(e.rhs, ty)
        if isinstance(e.rhs, Const):
            v = int(e.rhs.val)
            if bits is not None:
                v = (v + (1 << (bits - 1))) % (1 << bits) - (1 << (bits - 1))
            if in_width(v, bits):
                return f"({a} {e.op} {v})"
        fn = "_shl" if e.op == "<<" else "_shr"
        return f"{fn}({a}, {s}, {bits})"

    def _collective(self, e: Collective) -> str:
        """A warp collective: the lane yields its operand to the warp driver
        (:mod:`.warps`) and receives the result; outside a warp-synchronous thread
        loop, a run-time error."""
        site = self.const(Site(e.loc, print_expr(e), e.name, e.ty), "_W")
        if not self.in_warp:
            return f"_no_warp({site})"
        lane = self.ex(e.args[1]) if len(e.args) > 1 else "None"
        return f"(yield ({site}, {self.ex(e.args[0])}, {lane}))"

    def _builtin(self, e: Builtin) -> str:
        n, ty = e.name, e.ty
        if n in ("min", "max"):
            a, b = (self.ex_as(x, ty) for x in e.args)
            if ty.is_float:
                return f"_f{n}({a}, {b})"
            return f"{n}({a}, {b})"
        if n == "abs":
            out = f"abs({self.ex_as(e.args[0], ty)})"
            return wrap_expr(out, ty.bits) if ty.kind == "int" else out
        if n in ("exp", "log", "sqrt", "tanh", "sin", "cos", "erf", "rsqrt", "pow"):
            return f"_np_{n}({', '.join(self.ex_as(a, ty) for a in e.args)})"
        if n == TF32:   # an f32 operand of a tf32 wgmma, as the tensor cores read it
            return f"_tf32({self.ex(e.args[0])})"
        if n == "select":
            c, a, b = e.args
            return f"({self.ex_as(a, ty)} if {self.ex(c)} else {self.ex_as(b, ty)})"
        # a cast named by its type
        a = e.args[0]
        src = self.ex(a)
        if a.ty == ty:
            return src
        if ty.is_float:
            return f"_cv_{ty.name}({src})"
        if ty.kind == "int":
            if a.ty.is_integer and not (a.ty.kind == "int" and a.ty.bits <= ty.bits):
                return wrap_expr(src, ty.bits)
            return f"_cv_{ty.name}({src})" if not a.ty.is_integer else src
        if ty.kind == "bool":
            return f"bool({src})"
        return src

    # ------------------------------------------------------------ memory

    def flat(self, name: str, idx: tuple[Expr, ...], acc: str, kind: int) -> str:
        """The checked flat index of ``name[idx]`` in its buffer (race-watched)."""
        info = self.arrays[name]
        if info.ndim != len(idx):
            raise TypeError(f"{name} has {info.ndim} dimension(s), {len(idx)} indices given")
        if not idx:
            src = "0"
        else:
            vals, conds = [], []
            simple = True
            for k, i in enumerate(idx):
                s = self.ex_as(i, INDEX) if not i.ty.is_integer else self.ex(i)
                if _is_simple(s):
                    vals.append(s)
                    conds.append(f"0 <= {s} < {info.dim(k)}")
                else:
                    simple = False
                    t = self.fresh()
                    vals.append(t)
                    conds.append(f"0 <= ({t} := {s}) < {info.dim(k)}")
            if simple or len(conds) == 1:
                cond = " and ".join(conds)
            else:
                cond = " & ".join(f"({c})" for c in conds)
            terms = []
            if info.off() != "0":
                terms.append(info.off())
            for k, v in enumerate(vals):
                if v == "0":
                    continue
                st = info.stride(k)
                terms.append(v if st == "1" else f"{v} * {st}")
            lin = " + ".join(terms) or "0"
            dims = ", ".join(info.dim(k) for k in range(info.ndim))
            src = (f"(({lin}) if {cond} else _oob({acc}, ({', '.join(vals)},), "
                   f"({dims},)))")
        if self.race:
            return f"tr_{name}({src}, {kind}, {acc})"
        return src

    def read(self, e: Read) -> str:
        if e.name in self.scalars:
            return f"sc_{e.name}"
        info = self.arrays[e.name]
        acc = self.access(e.loc, print_expr(e), "read", e.name)
        k = self.flat(e.name, e.idx, acc, READ)
        if info.ty.is_float:
            return f"a_{e.name}[{k}]"
        return f"a_{e.name}.item({k})"
