"""IR expressions → CUDA C expression text.

Parentheses follow C precedence, so only needed ones appear (plus a pair around
``&&`` inside ``||``, which compilers ask for).  Integer ``//`` and ``%`` are
plain C ``/`` and ``%`` when both operands are provably non-negative (sizes,
loop variables of non-negative ranges, thread and block indices, constants,
and ``+ * // % & >> min`` of those); otherwise they call the floor helpers of
:mod:`gpudsl.codegen.helpers`, which give Python's meaning.
"""
from __future__ import annotations

import re

import math
import struct

from ..errors import CompileError
from ..ir.nodes import BinOp, Builtin, Collective, Const, Expr, Read, UnOp, Var, WindowArg
from .collective_cuda import collective_c
from ..ir.types import DTYPES, INDEX, DType, bool_, f16, f32, f64, bf16, i64

# C precedence, higher binds tighter.
C_PREC = {"||": 4, "&&": 5, "|": 6, "^": 7, "&": 8, "==": 9, "!=": 9, "<": 10, "<=": 10,
          ">": 10, ">=": 10, "<<": 11, ">>": 11, "+": 12, "-": 12, "*": 13, "/": 13, "%": 13}
TERNARY = 3
UNARY = 14
ATOM = 16

_OPS = {"and": "&&", "or": "||"}
_WRAP_OPS = ("+", "-", "*", "<<", ">>")  # i32 / i64: through the wrapping helpers
HALF = (f16, bf16)

# C/C++ keywords and CUDA names a proc's identifiers must not take.
RESERVED = set("""
alignas alignof and and_eq asm auto bitand bitor bool break case catch char char8_t char16_t
char32_t class compl concept const consteval constexpr constinit const_cast continue co_await
co_return co_yield decltype default delete do double dynamic_cast else enum explicit export
extern false float for friend goto if inline int long mutable namespace new noexcept not
not_eq nullptr operator or or_eq private protected public register reinterpret_cast requires
restrict return short signed sizeof static static_assert static_cast struct switch template
this thread_local throw true try typedef typeid typename union unsigned using virtual void
volatile wchar_t while xor xor_eq threadIdx blockIdx blockDim gridDim warpSize min max abs
exp log sqrt tanh expf logf sqrtf tanhf fminf fmaxf fabsf fabs fmin fmax llabs dim3 half
main printf assert NULL INFINITY NAN signbit isnan isinf
EOF BUFSIZ FILE stdin stdout stderr errno EXIT_SUCCESS EXIT_FAILURE RAND_MAX MB_CUR_MAX
HUGE_VAL HUGE_VALF HUGE_VALL MAXFLOAT CHAR_BIT WCHAR_MIN WCHAR_MAX SIZE_MAX PTRDIFF_MIN
PTRDIFF_MAX INTPTR_MIN INTPTR_MAX UINTPTR_MAX INTMAX_MIN INTMAX_MAX UINTMAX_MAX L_tmpnam
TMP_MAX FILENAME_MAX FOPEN_MAX SEEK_SET SEEK_CUR SEEK_END CLOCKS_PER_SEC NDEBUG TRUE FALSE
size_t ssize_t ptrdiff_t intptr_t uintptr_t int8_t int16_t int32_t int64_t uint8_t uint16_t
uint32_t uint64_t std sin cos tan asin acos atan atan2 sinh cosh exp2 exp10 expm1 log2
log10 log1p pow floor ceil round trunc rint fmod remainder hypot cbrt erf erfc tgamma
lgamma copysign nan sinf cosf tanf powf floorf ceilf roundf truncf exp2f log2f log10f
fmodf rsqrt rsqrtf fma fmaf isfinite nextafter ldexp frexp modf float2 float3 float4 int2
int3 int4 uint2 uint3 uint4 double2 double3 double4 half2 nv_bfloat16 clock clock64
malloc free memcpy memset abort exit puts putchar sprintf snprintf atomicAdd atomicSub
atomicMin atomicMax atomicExch atomicCAS atomicAnd atomicOr atomicXor umin umax llmin llmax
signal raise time
""".split())
# Families of macros of the C, POSIX and CUDA headers (math.h's M_PI, limits.h's INT_MAX,
# errno's EINTR, signal.h's SIGINT, mman.h's PROT_*, ...), names C reserves (a leading
# underscore and a capital) and the emulator's own (gpudsl_*, GPUDSL_*).
_RESERVED_FORM = re.compile(
    r"(M|FP|FLT|DBL|LDBL|SA|SS|PROT|MAP|SEEK|CLOCK|FE|CU|CUDA|NVRTC|PTHREAD|O|S|W|RTLD|"
    r"SCHED|INT\d*|UINT\d*|U?LL|U?LONG|U?SHRT|U?CHAR|SCHAR|U?INT_LEAST\d+|"
    r"U?INT_FAST\d+)_\w+|SIG[A-Z0-9_]+|E[A-Z0-9]{2,}|_[A-Z_]\w*|[gG][pP][uU][dD][sS][lL]\w*")


def ascii_ident(name: str) -> str:
    """A non-ASCII identifier (``données``) as an ASCII one NVRTC takes:
    ``gpudslU`` + letters and digits as written, ``_`` as ``__``, any other character
    as ``_x<hex>_``, then ``Z``.  It cannot collide with a user's name: those starting
    with ``gpudsl`` get a trailing ``_`` (see :func:`cname`), a mangled one ends in Z."""
    if name.isascii():
        return name
    out = []
    for ch in name:
        if ch.isascii() and ch.isalnum():
            out.append(ch)
        elif ch == "_":
            out.append("__")
        else:
            out.append(f"_x{ord(ch):x}_")
    return "gpudslU" + "".join(out) + "Z"


def ascii_text(text: str) -> str:
    """Comment text with non-ASCII characters as ``\\u`` escapes."""
    return text if text.isascii() else text.encode("ascii", "backslashreplace").decode()


def cname(name: str) -> str:
    """The C spelling of a proc identifier, one-to-one by construction: names that C,
    C++, CUDA, the system headers or the emulator use (keywords, library functions,
    macros such as ``M_PI`` or ``EOF``) and every name that already ends in ``_`` get
    one more trailing ``_``; non-ASCII names are mangled (:func:`ascii_ident`); every
    other name is kept as written.  So a kept name never ends in ``_``, an escaped one
    always does, and dropping the last ``_`` of an escaped name gives back the proc's
    name: ``printf`` → ``printf_``, ``printf_`` → ``printf__``, ``x`` → ``x``."""
    if not name.isascii():
        return ascii_ident(name)
    if name.endswith("_") or name in RESERVED or name.startswith("__") or \
            _RESERVED_FORM.fullmatch(name):
        return name + "_"
    return name


def ctype(ty: DType, index_ctype: str) -> str:
    return index_ctype if ty == INDEX else ty.ctype


def float_literal(v: float, ty: DType) -> str:
    """A C literal of float type ``ty`` (inf and nan through bit patterns)."""
    v = float(v)
    if ty == f64:
        if math.isfinite(v):
            return repr(v)
        bits = struct.unpack("<q", struct.pack("<d", v))[0]
        return f"__longlong_as_double({bits}LL)"
    if math.isfinite(v):
        text = repr(float(struct.unpack("<f", struct.pack("<f", v))[0]))
        text = text if ("e" in text or "." in text) else text + ".0"
        lit = text + "f"
    else:
        bits = struct.unpack("<I", struct.pack("<f", v))[0]
        lit = f"__uint_as_float({bits:#010x}u)"
    if ty == f16:
        return f"__float2half({lit})"
    if ty == bf16:
        return f"__float2bfloat16({lit})"
    return lit


def _wide_shift(e: Expr) -> bool:
    """An index ``x << s`` by a non-constant amount: computed in 64 bits even in a
    32-bit translation unit (``1 << s`` for ``s`` up to 40 is exact in the interpreter
    and in check(); in a C ``int`` it overflows)."""
    return isinstance(e, BinOp) and e.op == "<<" and e.ty == INDEX and \
        not isinstance(e.rhs, Const)


class ExprEmitter:
    """Turns expressions into C text.  A kernel writer supplies the context:
    ``index_ctype``, :meth:`access` (array element lvalues), :meth:`var_text`,
    :meth:`nonneg_var` and :meth:`use_helper`."""

    index_ctype = "int"

    # ---- context hooks (overridden by the kernel writer)

    def access(self, name: str, idx: tuple, loc) -> str:
        raise NotImplementedError

    def var_text(self, name: str) -> str:
        return cname(name)

    def nonneg_var(self, name: str) -> bool:
        return False

    def use_helper(self, name: str) -> None:
        pass

    def read_text(self, e: Read) -> str:
        """A read in an expression (a code generator may substitute a local)."""
        return self.access(e.name, e.idx, e.loc)

    # ---- types

    def cint(self, e: Expr) -> str:
        """The C integer type an integer expression evaluates in."""
        if isinstance(e, Const):
            if e.ty == i64 or abs(int(e.val)) >= 2 ** 31:
                return "long long"
            # the C type of the literal as printed (no suffix: int), whatever the
            # index width: overloads are chosen by it
            return "int" if e.ty == INDEX else e.ty.ctype
        if isinstance(e, Var):
            return self.index_ctype
        if isinstance(e, Read):
            return self.index_ctype if e.ty == INDEX else e.ty.ctype
        if e.ty == INDEX and (self.index_ctype == "long long" or _wide_shift(e)):
            return "long long"  # index operations widen their operands (see _widen)
        if e.ty.kind == "int" and isinstance(e, (BinOp, UnOp, Builtin)) and \
                not (isinstance(e, Builtin) and e.name in DTYPES):
            return e.ty.ctype  # the wrapping helpers return it (see _wrapping)
        if isinstance(e, BinOp) and e.op in ("<<", ">>"):
            return self.cint(e.lhs)  # a C shift has the type of its left operand
        if isinstance(e, (BinOp, Builtin)):
            kids = (e.lhs, e.rhs) if isinstance(e, BinOp) else e.args
            if isinstance(e, Builtin) and e.name in DTYPES:
                return e.ty.ctype
            types = [self.cint(k) for k in kids if k.ty.is_integer]
            return "long long" if "long long" in types else (types[0] if types else "int")
        if isinstance(e, UnOp):
            return self.cint(e.arg)
        if isinstance(e, Collective) and e.ty.kind == "int":
            return e.ty.ctype
        return self.index_ctype

    # ---- non-negativity (for plain / and %)

    def nonneg(self, e: Expr) -> bool:
        if isinstance(e, Const):
            return not isinstance(e.val, bool) and e.val >= 0
        if isinstance(e, Var):
            return self.nonneg_var(e.name)
        if isinstance(e, BinOp):
            if e.op in ("+", "*", "//", "%", ">>", "<<", "|", "^"):
                return self.nonneg(e.lhs) and self.nonneg(e.rhs)
            if e.op == "&":
                return self.nonneg(e.lhs) or self.nonneg(e.rhs)
            return False
        if isinstance(e, Builtin):
            if e.name == "min":
                return all(self.nonneg(a) for a in e.args)
            if e.name == "max":
                return any(self.nonneg(a) for a in e.args)
            if e.name == "abs":
                return True
            if e.name == "select":
                return self.nonneg(e.args[1]) and self.nonneg(e.args[2])
        return False

    # ---- printing

    def expr(self, e: Expr, prec: int = 0) -> str:
        text, p = self._expr(e)
        return f"({text})" if p < prec else text

    def cast_to(self, e: Expr, ty: DType, prec: int = 0) -> str:
        """``e`` converted to ``ty`` where C would not do it implicitly (half types)
        or would lose the meaning (bool ↔ numbers)."""
        if e.ty == ty or (ty == INDEX and not e.ty.is_float) or \
                (e.ty.is_integer and ty.is_integer):
            return self.expr(e, prec)
        if isinstance(e, Const) and ty.is_float:
            return float_literal(e.val, ty)
        if ty in HALF:
            conv = "__float2half" if ty == f16 else "__float2bfloat16"
            return f"{conv}((float){self.expr(e, UNARY)})"
        if e.ty in HALF:
            text = f"(float){self.expr(e, UNARY)}"
            if ty != f32:
                text = f"({ty.ctype}){text}"
            return text if UNARY >= prec else f"({text})"
        if ty.is_float and e.ty.is_integer:
            return self.expr(e, prec)  # C converts integers to floats
        if e.ty.is_float and ty.is_integer:
            return self.float_to_int(e, ty)
        text = f"({ty.ctype}){self.expr(e, UNARY)}"
        return text if UNARY >= prec else f"({text})"

    def float_to_int(self, e: Expr, ty: DType) -> str:
        """A float converted to an integer type: the GPU's saturating conversion
        (``gpudsl_f2i32``/``64``, :mod:`gpudsl.ir.numeric`); a C cast is undefined out
        of range."""
        self.use_helper("gpudsl_f2i")
        wide = ty == i64 or (ty == INDEX and self.index_ctype == "long long")
        arg = f"(float){self.expr(e, UNARY)}" if e.ty in HALF else self.expr(e)
        return f"gpudsl_f2i{64 if wide else 32}({arg})"

    def _expr(self, e: Expr) -> tuple[str, int]:
        if isinstance(e, Const):
            return self._const(e)
        if isinstance(e, Var):
            return self.var_text(e.name), ATOM
        if isinstance(e, Read):
            return self.read_text(e), ATOM
        if isinstance(e, BinOp):
            return self._binop(e)
        if isinstance(e, UnOp):
            if e.op == "not":
                return "!" + self.expr(e.arg, UNARY), UNARY
            if e.ty.kind == "int":
                self.use_helper("gpudsl_wrap")
                return f"gpudsl_neg_i{e.ty.bits}({self.expr(e.arg)})", ATOM
            return "-" + self._widen(e, e.arg, UNARY + 1), UNARY
        if isinstance(e, Builtin):
            return self._builtin(e)
        if isinstance(e, Collective):
            return collective_c(self, e, ATOM, UNARY)
        if isinstance(e, WindowArg):
            raise CompileError("a window can only be an argument of a call", e.loc)
        raise CompileError(f"cannot generate CUDA for the expression {e!r}")

    def _const(self, e: Const) -> tuple[str, int]:
        if e.ty == bool_:
            return ("true" if e.val else "false"), ATOM
        if e.ty.is_float:
            text = float_literal(e.val, e.ty)
            return text, (UNARY if text.startswith("-") else ATOM)
        v = int(e.val)
        suffix = "LL" if (e.ty == i64 or abs(v) >= 2 ** 31) else ""
        return f"{v}{suffix}", (UNARY if v < 0 else ATOM)

    def _binop(self, e: BinOp) -> tuple[str, int]:
        op = _OPS.get(e.op, e.op)
        if e.op in ("//", "%"):
            if self.nonneg(e.lhs) and self.nonneg(e.rhs):
                op = "/" if e.op == "//" else "%"
            else:
                helper = "gpudsl_floordiv" if e.op == "//" else "gpudsl_floormod"
                self.use_helper(helper)
                t = "long long" if "long long" in (self.cint(e), self.cint(e.lhs),
                                                   self.cint(e.rhs)) else "int"
                a = self.expr(e.lhs) if self.cint(e.lhs) == t else \
                    f"({t}){self.expr(e.lhs, UNARY)}"
                b = self.expr(e.rhs) if self.cint(e.rhs) == t else \
                    f"({t}){self.expr(e.rhs, UNARY)}"
                return f"{helper}({a}, {b})", ATOM
        if e.ty.kind == "int" and e.op in _WRAP_OPS:
            w = self._wrapping(e)
            if w is not None:
                return w, ATOM
        if e.ty == INDEX and e.op in ("<<", ">>") and not self.nonneg(e.rhs):
            return self._index_shift(e), ATOM
        p = C_PREC[op]
        target = e.ty
        if e.op in ("==", "!=", "<", "<=", ">", ">="):
            lt, rt = e.lhs.ty, e.rhs.ty
            target = lt if lt.is_float else rt if rt.is_float else lt
        lp, rp = p, p + 1
        if (op in ("+", "*", "&&", "&", "|", "^") and e.ty.is_integer or op == "&&") \
                and isinstance(e.rhs, BinOp) and e.rhs.op == e.op:
            rp = p  # associative on integers: a + (b + c) prints as a + b + c
            # (only for the same operator: 4 * (n / 4) is not 4 * n / 4)
        if op == "||":
            lp = rp = C_PREC["&&"] + 1
        if e.ty.is_float or target.is_float:
            lhs, rhs = self.cast_to(e.lhs, target, lp), self.cast_to(e.rhs, target, rp)
        else:
            lhs, rhs = self._widen(e, e.lhs, lp), self.expr(e.rhs, rp)
        return f"{lhs} {op} {rhs}", p

    def _widen(self, e: Expr, operand: Expr, prec: int) -> str:
        """``operand`` of the index operation ``e``, converted to ``long long`` in a
        64-bit translation unit when no operand of ``e`` is one already: the operation
        then computes in 64 bits (``i32(a) << 3`` is an index, exact in the
        interpreter), and its C type is the one :meth:`cint` says."""
        if _wide_shift(e):
            return f"(long long){self.expr(operand, UNARY)}"
        if e.ty == INDEX and self.index_ctype == "long long":
            kids = (e.lhs, e.rhs) if isinstance(e, BinOp) else \
                (e.args[1:] if isinstance(e, Builtin) else (e.arg,))
            if isinstance(e, BinOp) and e.op in ("<<", ">>"):
                kids = (e.lhs,)  # a shift has the type of its left operand
            if all(self.cint(k) != "long long" for k in kids):
                return f"(long long){self.expr(operand, UNARY)}"
        return self.expr(operand, prec)

    def _wrapping(self, e: BinOp) -> str | None:
        """i32 / i64 ``+ - * << >>`` through the wrapping helpers (the interpreter's
        meaning); None for a ``>>`` by a constant below the width (plain C)."""
        n = f"i{e.ty.bits}"
        if e.op == ">>" and isinstance(e.rhs, Const) and 0 <= int(e.rhs.val) < e.ty.bits \
                and self.cint(e.lhs) == e.ty.ctype:
            return None
        self.use_helper("gpudsl_wrap")
        name = {"+": "add", "-": "sub", "*": "mul", "<<": "shl", ">>": "shr"}[e.op]
        return f"gpudsl_{name}_{n}({self.expr(e.lhs)}, {self.expr(e.rhs)})"

    def _index_shift(self, e: BinOp) -> str:
        """An index shift by an amount that may be negative: through the i32 / i64 shift
        helpers, which give 0 (``<<``) or the sign (``>>``) for it (``ir/numeric.py``)."""
        self.use_helper("gpudsl_wrap")
        t = self.cint(e)
        lhs = self.expr(e.lhs) if self.cint(e.lhs) == t else f"({t}){self.expr(e.lhs, UNARY)}"
        name = "shl" if e.op == "<<" else "shr"
        return f"gpudsl_{name}_i{64 if t == 'long long' else 32}({lhs}, {self.expr(e.rhs)})"

    def _builtin(self, e: Builtin) -> tuple[str, int]:
        name, args, ty = e.name, e.args, e.ty
        if name in DTYPES:
            a = args[0]
            if isinstance(a, Const) and a.ty.is_integer and ty.kind == "int":
                # a literal of the cast's type (its C type is then the cast's)
                h = 1 << (ty.bits - 1)
                return self._const(Const((int(a.val) + h) % (2 * h) - h, ty))
            if a.ty == ty or (ty == i64 and a.ty == INDEX and self.index_ctype == "long long"):
                return self.expr(a, ATOM), ATOM
            if a.ty.is_float and ty.is_integer:
                return self.float_to_int(a, ty), ATOM
            if ty in HALF or a.ty in HALF or isinstance(a, Const):
                return self.cast_to(a, ty, UNARY), UNARY
            return f"({ty.ctype}){self.expr(a, UNARY)}", UNARY
        if name == "select":
            c = self.expr(args[0], TERNARY + 1)
            a, b = self.cast_to(args[1], ty, TERNARY + 1), self.cast_to(args[2], ty, TERNARY)
            if ty.is_integer:
                a = self._widen(e, args[1], TERNARY + 1)
            return f"{c} ? {a} : {b}", TERNARY
        if name == "tf32":   # the low 13 mantissa bits cleared (wgmma_meaning.tf32_truncate)
            self.use_helper("gpudsl_tf32")
            return f"gpudsl_tf32({self.expr(args[0])})", ATOM
        if ty.is_float:
            fname = {"min": "fmin", "max": "fmax", "abs": "fabs"}.get(name, name)
            if name in ("min", "max"):  # the GPU's meaning on the emulator too
                self.use_helper("gpudsl_fminmax:" + ("double" if ty == f64 else "float"))
                fname = "gpudsl_" + fname
            elif ty in (f32,) + HALF:
                fname += "f"
            if ty in HALF:
                conv = "__float2half" if ty == f16 else "__float2bfloat16"
                inner = ", ".join(f"(float){self.expr(a, UNARY)}" for a in args)
                return f"{conv}({fname}({inner}))", ATOM
            return f"{fname}({', '.join(self.cast_to(a, ty) for a in args)})", ATOM
        # integers
        t = self.cint(e)
        if name == "abs":
            if ty.kind == "int":
                self.use_helper("gpudsl_wrap")
                return f"gpudsl_abs_i{ty.bits}({self.expr(args[0])})", ATOM
            return f"{'llabs' if t == 'long long' else 'abs'}({self.expr(args[0])})", ATOM
        if name in ("min", "max"):
            parts = [self.expr(a) if self.cint(a) == t else f"({t}){self.expr(a, UNARY)}"
                     for a in args]
            return f"{name}({', '.join(parts)})", ATOM
        raise CompileError(f"{name}() needs a float argument", e.loc)
