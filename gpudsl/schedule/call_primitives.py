"""Calls: inline, replace (with an ``@instr``) and vectorize.

**The IR form of vectorized code.**  ``vectorize(p, loop, width)`` turns an
inner loop of ``width`` (2 or 4) contiguous ``f32`` copies

    for v in seq(0, 4):
        dst[r, 4 * c + v] = src[q, 4 * c + v]

into a call of a generated ``@instr`` proc (one per width and pair of memories):

    vcopy4_SHARED_GLOBAL(dst[r, 4 * c:4 * c + 4], src[q, 4 * c:4 * c + 4])

whose body is the loop (the interpreter and ``check()`` see the scalar meaning)
and whose template is::

    *reinterpret_cast<float4*>(&{dst}) = *reinterpret_cast<const float4*>(&{src});

(when one side is a REGISTER array, that side is accessed element by element,
``(&{dst})[k] = v.x`` or ``make_float4((&{src})[0], ...)``: taking a register
array's address as a ``float4*`` makes nvcc place it in local memory).

Template holes follow the ``@instr`` convention: ``{w}`` for a window
parameter ``w`` is the C lvalue of the window's first element, so ``&{w}`` is
its address; ``{n}`` for a size or scalar parameter is its value.  The call is
emitted only after Z3 proved that both first elements sit at element offsets
that are multiples of ``width`` in row-major order (arrays themselves are
16-byte aligned: cudaMalloc'd arguments, and code generation declares
shared/register arrays ``__align__(16)``), and the loop has exactly ``width``
iterations (divide it with ``tail="perfect"`` first).
"""
from __future__ import annotations

from ..ir.inline import Inliner, caller_names
from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Builtin, Call, Const, Expr, For, If,
                        Interval, Param, Point, ProcDef, Read, Reduce, UnOp, Var, WindowArg)
from ..ir.types import BLOCKS, GLOBAL, HALF_TYPES, INDEX, f16, f32, param_memory
from ..ir.visitor import free_vars, substitute
from .cursors import ancestors
from .edits import Into, replace as replace_stmts
from .legality import divisible, prove
from .patterns import scope_at
from .primitive import BLOCK, LOOP, PROC, STMT, choice, fail, primitive
from .simplify import const_value, normalize


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


# ------------------------------------------------------------------ inline


@primitive("inline", call=STMT)
def inline(p, call):
    """Replace a call of a proc by the proc's body (``gpudsl.ir.inline``, the
    one inliner of the code base).

    Legality: none needed: the body is the call's meaning, with scalar
    arguments passed by value (bound to fresh locals) and windows as aliases of
    the caller's arrays; the callee's names are renamed apart from the caller's.

    Example: ``inline(p, "vadd(_)")``
    """
    c = call
    s = c.node()
    if not isinstance(s, Call):
        raise fail("expected a call", s.loc)
    a = c.addr
    in_blocks = any(isinstance(x, For) and x.mapping == BLOCKS for x in ancestors(p.ir, a))
    body = Inliner(caller_names(p.ir), recursive=False, fold=normalize).expand(s, in_blocks)
    # the call's cursor points at the first statement of its body
    return replace_stmts(p.ir, a, body, keep=[Into((0,), a)] if body else [])


# ------------------------------------------------------------------ replace


class _NoMatch(Exception):
    pass


def _kind(s: For) -> str:
    return s.kind if s.mapping is None else f"{s.kind} @ {s.mapping.name}"


class _Unifier:
    def __init__(self, instr: ProcDef):
        self.instr = instr
        self.params = {x.name: x for x in instr.params}
        self.bind: dict = {}  # size/index/scalar param -> expr
        self.win: dict = {}  # window param -> (buf, [dims]) dims: ("pt", e) | ("lo", e)
        self.iters: dict = {}  # instr iter -> block iter

    def fail(self, why):
        raise _NoMatch(why)

    def stmts(self, xs, ys):
        if len(xs) != len(ys):
            self.fail("the statements differ in number")
        for x, y in zip(xs, ys):
            self.stmt(x, y)

    def stmt(self, x, y):
        if type(x) is not type(y):
            self.fail(f"a {type(x).__name__} does not match a {type(y).__name__}")
        if isinstance(x, For):
            if (x.kind, x.mapping) != (y.kind, y.mapping):
                self.fail(f"loop {y.iter} is a {_kind(y)} loop, the instr's loop {x.iter} "
                          f"a {_kind(x)} loop")
            self.expr(x.lo, y.lo)
            self.expr(x.hi, y.hi)
            self.iters[x.iter] = y.iter
            self.stmts(x.body, y.body)
        elif isinstance(x, If):
            self.expr(x.cond, y.cond)
            self.stmts(x.body, y.body)
            self.stmts(x.orelse, y.orelse)
        elif isinstance(x, (Assign, Reduce, Atomic)):
            if getattr(x, "op", None) != getattr(y, "op", None):
                self.fail("different reduction operators")
            if isinstance(x, Atomic) and (x.result is not None or y.result is not None
                                          or x.cmp is not None or y.cmp is not None):
                self.fail("an atomic with an old value or a compare value")
            self.access(x.name, x.idx, y.name, y.idx)
            self.expr(x.rhs, y.rhs)
        elif isinstance(x, Alloc):
            if (x.ty, x.mem, len(x.shape)) != (y.ty, y.mem, len(y.shape)):
                self.fail("different allocations")
            for a, b in zip(x.shape, y.shape):
                self.expr(a, b)
            self.iters[x.name] = y.name
        elif x != y:
            self.fail("different statements")

    def _local(self):
        return set(self.iters.values())

    def access(self, xn, xidx, yn, yidx):
        prm = self.params.get(xn)
        if prm is None or not prm.is_array:
            if self.iters.get(xn, xn) != yn or len(xidx) != len(yidx):
                self.fail(f"{xn} does not match {yn}")
            for a, b in zip(xidx, yidx):
                self.expr(a, b)
            return
        local = self._local()
        tx = [normalize(substitute(e, {k: Var(v) for k, v in self.iters.items()}))
              for e in xidx]
        dims = []
        k = 0
        varying = [bool(free_vars(e) & local) for e in yidx]
        n_var = sum(varying)
        if n_var > len(tx):
            self.fail("the access varies in more dimensions than the instr's parameter")
        extra = len(tx) - n_var  # instr dims not varying: take trailing fixed dims
        trailing = set(range(len(yidx) - extra, len(yidx))) if extra else set()
        for d, e in enumerate(yidx):
            if varying[d] or d in trailing:
                if k >= len(tx):
                    self.fail("dimension mismatch")
                lo = normalize(_e("-", e, tx[k]))
                k += 1
                if free_vars(lo) & local:
                    self.fail("the access is not a window of the parameter")
                dims.append(("lo", lo))
            else:
                dims.append(("pt", normalize(e)))
        if k != len(tx):
            self.fail("dimension mismatch")
        got = (yn, dims)
        old = self.win.get(xn)
        if old is None:
            self.win[xn] = got
        elif old != got:
            self.fail(f"the parameter {xn} would stand for two different windows")

    def expr(self, x: Expr, y: Expr):
        if isinstance(x, Var):
            if x.name in self.iters:
                if not (isinstance(y, Var) and y.name == self.iters[x.name]):
                    self.fail("loop variables differ")
                return
            if x.name in self.params:
                self._bind(x.name, y)
                return
        if isinstance(x, Read):
            prm = self.params.get(x.name)
            if prm is not None and prm.kind == "scalar":
                self._bind(x.name, y)
                return
            if not isinstance(y, Read):
                self.fail("a read does not match")
            self.access(x.name, x.idx, y.name, y.idx)
            return
        if type(x) is not type(y):
            if x.ty.is_integer and y.ty.is_integer:
                xs = normalize(substitute(x, {**{k: Var(v) for k, v in self.iters.items()},
                                              **self.bind}))
                if xs == normalize(y):
                    return
            self.fail("expressions differ")
        if isinstance(x, Const):
            if x.val != y.val:
                self.fail("constants differ")
        elif isinstance(x, BinOp):
            if x.op != y.op:
                self.fail("operators differ")
            self.expr(x.lhs, y.lhs)
            self.expr(x.rhs, y.rhs)
        elif isinstance(x, UnOp):
            if x.op != y.op:
                self.fail("operators differ")
            self.expr(x.arg, y.arg)
        elif isinstance(x, Builtin):
            if x.name != y.name or len(x.args) != len(y.args):
                self.fail("builtins differ")
            for a, b in zip(x.args, y.args):
                self.expr(a, b)
        elif x != y:
            self.fail("expressions differ")

    def _bind(self, name, y):
        if free_vars(y) & self._local():
            self.fail(f"the parameter {name} would depend on the loop variables")
        old = self.bind.get(name)
        if old is None:
            self.bind[name] = y
        elif normalize(old) != normalize(y):
            self.fail(f"the parameter {name} would stand for two values")

    def args(self):
        out = []
        for prm in self.instr.params:
            if prm.kind in ("size", "index", "scalar"):
                if prm.name not in self.bind:
                    self.fail(f"nothing in the code determines {prm.name}")
                out.append(self.bind[prm.name])
            else:
                if prm.name not in self.win:
                    self.fail(f"nothing in the code uses {prm.name}")
                buf, dims = self.win[prm.name]
                shape = [normalize(substitute(s_, self.bind)) for s_ in prm.shape]
                idx, k = [], 0
                for kind, e in dims:
                    if kind == "pt":
                        idx.append(Point(e))
                    else:
                        idx.append(Interval(e, normalize(_e("+", e, shape[k]))))
                        k += 1
                out.append(WindowArg(buf, tuple(idx), prm.ty))
        return tuple(out)


@primitive("replace", block=BLOCK, instr=PROC)
def replace(p, block, instr):
    """Replace ``block`` by a call of ``instr`` (typically an ``@instr``) whose
    body, with the arguments found by unification, is exactly ``block``.

    Legality: the call means its body, and the body with the arguments
    substituted is the block (loop kinds and mappings included); each window
    argument is in the memory and of the type the parameter expects.

    Example: ``replace(p, "ii", axpy4)``
    """
    c = block
    ir_i = instr
    stmts = c.node()
    u = _Unifier(ir_i)
    try:
        u.stmts(ir_i.body, stmts)
        args = u.args()
    except _NoMatch as exc:
        raise fail(f"the code does not match the body of {ir_i.name}: {exc}",
                   stmts[0].loc) from None
    env = scope_at(p.ir, c.addr)
    for prm, a in zip(ir_i.params, args):
        if prm.is_array:
            ent = env.get(a.name)
            mem = _mem_of(p.ir, c.addr, a.name)
            if mem != param_memory(prm.mem):
                raise fail(f"{prm.name} of {ir_i.name} is in {param_memory(prm.mem).name} "
                           f"memory, '{a.name}' is in {mem.name}", stmts[0].loc)
            if ent and ent[1] != prm.ty:
                raise fail(f"{prm.name} holds {prm.ty.name}, '{a.name}' holds "
                           f"{ent[1].name}", stmts[0].loc)
    call = Call(ir_i, args, stmts[0].loc)
    # the statements, and what they held, became the call
    return replace_stmts(p.ir, c.addr, [call], n_old=len(stmts), keep=[Into((), c.addr)])


def _mem_of(pdef, addr, name):
    prm = pdef.param(name)
    if prm is not None:
        return prm.mem or GLOBAL
    from .cursors import iter_stmts

    for a, s in iter_stmts(pdef):
        if isinstance(s, Alloc) and s.name == name:
            return s.mem
    return GLOBAL


# ------------------------------------------------------------------ vectorize

_VEC_CACHE: dict = {}


def vector_copy_instr(width: int, dmem, smem, ty=f32):
    """The ``@instr`` of a ``width``-wide copy of ``ty`` values (f32: float2/float4;
    f16/bf16: 2, 4 or 8 halves as one 32-, 64- or 128-bit access, the half2 width
    and up) from ``smem`` to ``dmem``."""
    key = (width, dmem, smem, ty)
    if key in _VEC_CACHE:
        return _VEC_CACHE[key]
    from ..ir.nodes import ProcDef as PD

    if ty in HALF_TYPES:
        template = _half_copy_template(width, dmem, smem, ty)
    else:
        template = _f32_copy_template(width, dmem, smem)
    body = (For("v", Const(0), Const(width),
                (Assign("dst", (Var("v"),), Read("src", (Var("v"),), ty)),)),)
    params = (Param("dst", "window", ty, (Const(width),), dmem),
              Param("src", "window", ty, (Const(width),), smem))
    suffix = "" if ty == f32 else f"_{ty.name}"
    pd = PD(f"vcopy{width}{suffix}_{dmem.name}_{smem.name}", params, (), body, template)
    _VEC_CACHE[key] = pd
    return _VEC_CACHE[key]


def _f32_copy_template(width: int, dmem, smem) -> str:
    t = f"float{width}"
    comps = "xyzw"[:width]
    if dmem.per_thread and smem.per_thread:
        return "; ".join(f"(&{{dst}})[{k}] = (&{{src}})[{k}]" for k in range(width)) + ";"
    if dmem.per_thread:
        # one vector load, then element-wise register writes: a reinterpret_cast of
        # a register array's address would send the array to local memory
        return (f"{{ const {t} gpudsl_v = *reinterpret_cast<const {t}*>(&{{src}}); "
                + " ".join(f"(&{{dst}})[{k}] = gpudsl_v.{c};" for k, c in enumerate(comps))
                + " }")
    if smem.per_thread:
        return (f"*reinterpret_cast<{t}*>(&{{dst}}) = make_{t}("
                + ", ".join(f"(&{{src}})[{k}]" for k in range(width)) + ");")
    return f"*reinterpret_cast<{t}*>(&{{dst}}) = *reinterpret_cast<const {t}*>(&{{src}});"


_BITS = {2: ("unsigned int", ""), 4: ("uint2", "xy"), 8: ("uint4", "xyzw")}


def _half_copy_template(width: int, dmem, smem, ty) -> str:
    """Halves move as raw bits: 32-bit words of two halves (``__half_as_ushort``
    and back), so register arrays stay in registers (no address is taken)."""
    t, comps = _BITS[width]
    words = [f"gpudsl_v.{c}" for c in comps] if comps else ["gpudsl_v"]
    to_bits, from_bits = (("__half_as_ushort", "__ushort_as_half") if ty == f16 else
                          ("__bfloat16_as_ushort", "__ushort_as_bfloat16"))
    if dmem.per_thread and smem.per_thread:
        return "; ".join(f"(&{{dst}})[{k}] = (&{{src}})[{k}]" for k in range(width)) + ";"
    if dmem.per_thread:
        parts = []
        for k in range(width):
            w = words[k // 2]
            bits = f"{w} & 0xffffu" if k % 2 == 0 else f"{w} >> 16"
            parts.append(f"(&{{dst}})[{k}] = {from_bits}((unsigned short)({bits}));")
        return (f"{{ const {t} gpudsl_v = *reinterpret_cast<const {t}*>(&{{src}}); "
                + " ".join(parts) + " }")
    if smem.per_thread:
        packed = [f"((unsigned int){to_bits}((&{{src}})[{2 * j}]) | "
                  f"((unsigned int){to_bits}((&{{src}})[{2 * j + 1}]) << 16))"
                  for j in range(width // 2)]
        value = packed[0] if width == 2 else f"make_{t}({', '.join(packed)})"
        return f"*reinterpret_cast<{t}*>(&{{dst}}) = {value};"
    return f"*reinterpret_cast<{t}*>(&{{dst}}) = *reinterpret_cast<const {t}*>(&{{src}});"


@primitive("vectorize", loop=LOOP, width=choice(2, 4, 8))
def vectorize(p, loop, width: int):
    """Turn a loop of ``width`` contiguous copies into one vector copy (a call of a
    generated ``@instr``, see the module docs): f32 by 2 or 4 (float2/float4),
    f16/bf16 by 2, 4 or 8 (one 32-, 64- or 128-bit access).

    Legality: the loop is a seq loop of exactly ``width`` iterations whose body is
    one copy ``dst[..., b + v] = src[..., b' + v]`` between arrays of one type
    (f32, f16 or bf16); proves
    that both first elements are aligned to ``width`` elements; then as
    ``replace`` (errors still name ``vectorize``).

    Example: ``vectorize(p, "v", 4)``
    """
    c = loop
    s: For = c.node()
    if s.kind != "seq":
        raise fail(f"loop {s.iter} is a {_kind(s)} loop: one vector copy would run on one "
                   "thread instead of one element per iteration", s.loc,
                   "vectorize a seq loop inside the thread loop")
    if const_value(s.lo) != 0 or const_value(s.hi) != width:
        raise fail(f"loop {s.iter} must run exactly {width} times (seq(0, {width}))", s.loc,
                   f"divide_loop it by {width} with tail=\"perfect\" first")
    if len(s.body) != 1 or not isinstance(s.body[0], Assign) or \
            not isinstance(s.body[0].rhs, Read):
        raise fail(f"the body of loop {s.iter} must be one copy dst[...] = src[...]", s.loc)
    st = s.body[0]
    env = scope_at(p.ir, c.addr)
    ty = _vector_type(env, st, width)
    for name, idx in ((st.name, st.idx), (st.rhs.name, st.rhs.idx)):
        ent = env.get(name)
        for d, e in enumerate(idx):
            e = normalize(e)
            if d < len(idx) - 1:
                if s.iter in free_vars(e):
                    raise fail(f"only the last index of '{name}' may use {s.iter}", st.loc)
            else:
                base = normalize(_e("-", e, Var(s.iter)))
                if s.iter in free_vars(base):
                    raise fail(f"the last index of '{name}' must be base + {s.iter} "
                           "(contiguous)", st.loc)
        shape = ent[2]
        first = [normalize(substitute(e, {s.iter: Const(0)})) for e in idx]

        def aligned(enc, e_, first=first, shape=shape):
            off = enc.int(first[0], e_)
            for e, ext in zip(first[1:], shape[1:]):
                off = off * enc.int(ext, e_) + enc.int(e, e_)
            return off % width == 0

        flat = first[0]
        for e, ext in zip(first[1:], shape[1:]):
            flat = _e("+", _e("*", flat, ext), e)
        if divisible(p.ir, c.addr, flat, width):
            continue  # decided by residues: no nonlinear query (solver-version proof)
        prove(p.ir, c.addr, aligned,
              f"the accesses of '{name}' are aligned to {width} elements", st.loc,
              "make the row length and the offsets multiples of the width (pad_dim "
              "breaks alignment)")
    dmem = _mem_of(p.ir, c.addr, st.name)
    smem = _mem_of(p.ir, c.addr, st.rhs.name)
    return replace(p, c, vector_copy_instr(width, dmem, smem, ty))


def _vector_type(env, st, width: int):
    """The element type both arrays of the copy ``st`` hold (f32, f16 or bf16)."""
    tys = []
    for name, idx in ((st.name, st.idx), (st.rhs.name, st.rhs.idx)):
        ent = env.get(name)
        if ent is None or ent[1] not in (f32,) + HALF_TYPES or not idx:
            raise fail(f"'{name}' must be an f32, f16 or bf16 array", st.loc)
        tys.append(ent[1])
    if tys[0] != tys[1]:
        raise fail(f"'{st.name}' holds {tys[0].name} and '{st.rhs.name}' {tys[1].name}: a "
                   "vector copy moves one type", st.loc)
    if tys[0] == f32 and width == 8:
        raise fail("8 f32 values are 256 bits: the widest access is 128 bits (width 4)",
                   st.loc)
    return tys[0]


__all__ = ["inline", "replace", "vectorize", "vector_copy_instr"]
