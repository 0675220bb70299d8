"""The one SMT layer: Z3 encoding of IR integer expressions, the facts of a
statement's context, witnesses, and the one shared incremental solver.  check()
(gpudsl.analysis) and every legality check of the rewrite primitives use it.

API::

    from gpudsl.ir.smt import Encoder, solve, Unsupported, SAT, UNSAT, UNKNOWN

    enc = Encoder(proc_def, bindings={"n": 256}, written={"x"})
    enc.premises()                 # [z3 bools]: sizes >= 1, the proc's asserts
    t1 = enc.thread("1")           # a symbolic thread: its own copy of every loop variable
    t1.declare(loop)               # -> z3 Int for loop.iter in this thread, with its range
    i1 = t1.expr(ir_expr)          # z3 Int / Bool; raises Unsupported for what it cannot model
    res = solve([...z3 bools...], timeout_ms=2000)
    res.status in (SAT, UNSAT, UNKNOWN); res.model; res.reason
    t1.value(res.model, "k")       # model value of thread 1's k (int or None)

Encoding: integers are mathematical integers (Z3 Int); ``+ - *`` are linear when one
side is a constant (sizes are constants when bound); ``//`` and ``%`` use Python's
floor semantics; ``<< >>`` by a constant are products/quotients by powers of two,
by a variable an ``ite`` over the shift amounts 0..24 (linear in the other operand,
an unknown beyond; an amount outside ``[0, width)`` acts as the width, see
:mod:`.numeric`); ``& | ^`` with a mask ``2**k - 1`` are ``% 2**k``; a bitwise
operation (or a shift by a non-constant) whose other operand depends only on loop
counters of small constant range (``ThreadEnv.ranges``, set by whoever asserts the
range) is an ``ite`` over their values, each case with constants (so ``t ^ (1 << k)``
is linear per ``k``); otherwise 32-bit two's complement bit-vectors (``Int2BV``/
signed ``BV2Int``) while both operands are i32 values (negative ones included), an
unknown beyond.  Operations on two constants fold.  ``min max abs select`` are ``ite``.  Reads of memory (data-dependent
indices) are unknowns: a read of an array nothing writes is an uninterpreted function
of the indices, shared by all threads (the same location gives the same value); any
other read is a fresh unknown per thread and occurrence, except that the reads of one
location within one top-level expression of one thread are one unknown; a warp
collective's value (``shfl``, ``warp_sum``...) is a fresh unknown per thread and
occurrence.  Comparisons
of float reads and float constants are over reals that may be NaN; other float
comparisons are fresh booleans.  Whenever an unknown is introduced ``enc.data_dependent`` becomes True, so
callers know a satisfying model may not be a real execution.

The solver is one ``z3.Solver`` in Z3's main context, reused for every query with
``push``/``pop`` (:mod:`gpudsl.ir.smt_solver`, whose names this module re-exports);
each query has its own timeout.  A timeout gives ``UNKNOWN``, never ``UNSAT``.
``queries()`` counts the queries of the process.

Legality questions ask about one statement of a proc::

    sc = Scope(proc_def, addr)     # (gpudsl.ir.smt_scope) sizes >= 1, asserts, enclosing loops and ifs
    sc.int(e, env) / sc.cond(e, env)   # encode in the context (env: name -> z3 term
                                       # overriding the context's variables)
    inst = sc.instance(loops, guards, tag)   # one dynamic instance below the statement
    with sc.session() as check:      # the context's facts pushed on the shared solver
        res = check([...])          # Result, each query in its own push/pop
    sc.witness(res.model, {"i": term})   # sizes and the named terms' values

Anything the encoder cannot model raises ``Unsupported``: a fact that cannot be
encoded is dropped (weaker assumptions: sound), a goal or a condition that cannot be
encoded makes the proof fail.  Only the two-argument ``min``/``max`` of the language
are modelled; other arities are ``Unsupported``.
"""
from __future__ import annotations

import z3

from .nodes import BinOp, Builtin, Collective, Const, Expr, Read, UnOp, Var, WindowArg
from .types import DTYPES
from .smt_ints import (_BITS, _RING, _WRAPPING, Unsupported, _bits_const, _fits, _fold, _int_bits,
                       _mask_bits, _wrap, floordiv, floormod, shift)
from .smt_solver import (DEFAULT_TIMEOUT_MS, SAT, UNKNOWN, UNSAT, Result,  # noqa: F401
                         pushed, queries, shared_solver, solve)
from .smt_memo import EncodingMemo, FreshNames
from .visitor import substitute, walk

_ids = FreshNames()   # fresh names of unknowns: 0, 1, 2...


class Encoder:
    """Encodes IR expressions of one proc; see the module docstring."""

    def __init__(self, p, bindings: dict | None = None, written: set | None = None):
        self.p = p
        self.bindings = dict(bindings or {})
        self.written = set(written or ())
        self.data_dependent = False
        # local name -> a ticket (analysis/tickets.py): an atomic's old value whose
        # reads by one thread are one value, distinct between executions
        self.tickets: dict = {}
        self.params: dict[str, z3.ArithRef] = {}
        self.kinds = {q.name: q.kind for q in p.params}
        self.scalar_types = {q.name: q.ty for q in p.params if q.kind == "scalar"}
        self.funcs: dict = {}
        self.memo = EncodingMemo(self.params)   # kept encodings (gpudsl.ir.smt_memo)
        for q in p.params:
            if q.is_control:
                if q.name in self.bindings:
                    self.params[q.name] = z3.IntVal(int(self.bindings[q.name]))
                else:
                    self.params[q.name] = z3.Int(q.name)

    def premises(self) -> list:
        out = []
        for q in self.p.params:
            if q.kind == "size":
                out.append(self.params[q.name] >= 1)
        t = self.thread("pre")
        for pred in self.p.preds:
            try:
                out.append(t.expr(pred))
            except Unsupported:
                pass  # dropping an assumption is sound
        return out

    def size_values(self, model) -> dict:
        out = {}
        for q in self.p.params:
            if q.is_control:
                v = model.eval(self.params[q.name], model_completion=True) if model is not None \
                    else self.params[q.name]
                out[q.name] = v.as_long() if z3.is_int_value(v) else None
        return out

    def thread(self, tag: str) -> "ThreadEnv":
        return ThreadEnv(self, tag)

    def read_value(self, t: "ThreadEnv", e: Read):
        self.data_dependent = True
        if not e.ty.is_integer:
            raise _Float()
        if e.name in self.kinds and self.kinds[e.name] == "scalar":
            key = ("scalar", e.name)
            if key not in self.funcs:
                self.funcs[key] = z3.Int(f"{e.name}")
            return self.funcs[key]
        tk = self.tickets.get(e.name) if not e.idx else None
        if tk is not None:
            got = t.tickets.get(e.name)
            if got is None:
                got = t.tickets[e.name] = (tk, z3.Int(f"{e.name}(ticket)@{t.tag}#{next(_ids)}"))
            return got[1]
        if e.name not in self.written:
            idx = [t.expr(i) for i in e.idx]
            if not idx:
                key = ("scalar", e.name)
                if key not in self.funcs:
                    self.funcs[key] = z3.Int(f"{e.name}")
                return self.funcs[key]
            key = ("fn", e.name, len(idx))
            if key not in self.funcs:
                self.funcs[key] = z3.Function(f"{e.name}", *([z3.IntSort()] * len(idx)),
                                              z3.IntSort())
            return self.funcs[key](*idx)
        memo = t.same_reads
        if memo is not None:
            # one expression's reads of one location by one thread are equal: no
            # write of this thread comes between them, and another thread's would be
            # a race, reported on its own
            try:
                terms = [t.expr(i) for i in e.idx]
                key = (e.name,) + tuple(x.get_id() for x in terms)
            except Unsupported:
                key = None
            if key is not None:
                v = memo.get(key)
                if v is None:
                    v = memo[key] = z3.Int(f"{e.name}[?]@{t.tag}#{next(_ids)}")
                    if t.region is not None:   # see ThreadEnv.region
                        t.region.append(("i", e.name, terms, v))
                return v
        return z3.Int(f"{e.name}[?]@{t.tag}#{next(_ids)}")


    def collective_value(self, t: "ThreadEnv", e: Collective):
        """A warp collective's value is an unknown per thread and occurrence (it
        depends on the other lanes); floats and bools as float reads are."""
        self.data_dependent = True
        if not e.ty.is_integer:
            raise _Float()
        return z3.Int(f"{e.name}(?)@{t.tag}#{next(_ids)}")


def _value_or(t):
    """``t`` as a Z3 integer value when it simplifies to one, else ``t``."""
    if z3.is_int_value(t):
        return t
    v = z3.simplify(t)
    return v if z3.is_int_value(v) else t


class _Float(Unsupported):
    pass


class ThreadEnv:
    """One symbolic thread: its copies of loop variables and unknowns."""

    def __init__(self, enc: Encoder, tag: str):
        self.enc = enc
        self.tag = tag
        self.vars: dict[str, z3.ArithRef] = {}
        # name -> (lo, hi): loop counters whose constant range is a fact of the
        # query this thread is used in (set by whoever asserts the range)
        self.ranges: dict[str, tuple] = {}
        self.same_reads = None   # reads of the expression being encoded, by location
        self.tickets: dict = {}  # ticket local -> (Ticket, its value in this thread)
        # while a list: each new unknown read value of written memory is appended as
        # (kind, array, index terms, value), for a caller that knows no write comes
        # between these reads (gpudsl.analysis.obligations.Ctx.place)
        self.region = None

    def declare(self, name: str):
        v = z3.Int(f"{name}@{self.tag}")
        self.vars[name] = v
        return v

    def var(self, name: str):
        if name in self.vars:
            return self.vars[name]
        if name in self.enc.params:
            return self.enc.params[name]
        if name.startswith("__"):
            v = z3.Int(f"{name}@{self.tag}")
            self.vars[name] = v
            return v
        raise Unsupported(f"unknown variable '{name}'")

    def value(self, model, name: str):
        v = self.vars.get(name)
        if v is None or model is None:
            return None
        r = model.eval(v, model_completion=True)
        return r.as_long() if z3.is_int_value(r) else None

    # ------------------------------------------------------------------ exprs

    def expr(self, e: Expr):
        if self.same_reads is None:  # a top-level expression: its reads share values
            self.same_reads = {}
            try:
                return self._expr(e)
            finally:
                self.same_reads = None
        return self._expr(e)

    def _expr(self, e: Expr):
        memo = self.enc.memo
        term, shape = memo.lookup(self, e)
        if term is not None:
            return term
        if shape is None:
            return self._encode(e)
        fresh = _ids.n
        term = self._encode(e)
        if _ids.n == fresh:   # no fresh unknown: the same term every time (smt_memo)
            memo.keep(self, shape, term)
        return term

    def _encode(self, e: Expr):
        if isinstance(e, Const):
            if isinstance(e.val, bool) or e.ty.kind == "bool":
                return z3.BoolVal(bool(e.val))
            if e.ty.is_float or isinstance(e.val, float):
                raise _Float()
            return z3.IntVal(int(e.val))
        if isinstance(e, Var):
            return self.var(e.name)
        if isinstance(e, Read):
            return self.enc.read_value(self, e)
        if isinstance(e, UnOp):
            if e.op == "not":
                return z3.Not(self.cond(e.arg))
            if e.ty.is_float:
                raise _Float()
            bits = _int_bits(e.ty)
            if bits:  # -INT_MIN wraps to INT_MIN
                return _wrap(-self._as_int(e.arg, bits), bits)
            return -self.expr(e.arg)
        if isinstance(e, BinOp):
            return self.binop(e)
        if isinstance(e, Builtin):
            return self.builtin(e)
        if isinstance(e, WindowArg):
            raise Unsupported("a window is not a value")
        if isinstance(e, Collective):
            return self.enc.collective_value(self, e)
        raise Unsupported(f"cannot encode {type(e).__name__}")

    def cond(self, e: Expr):
        """A boolean; comparisons of floats become fresh unknown booleans."""
        if self.same_reads is None:
            self.same_reads = {}
            try:
                return self._cond(e)
            finally:
                self.same_reads = None
        return self._cond(e)

    def _cond(self, e: Expr):
        try:
            r = self.expr(e)
        except _Float:
            self.enc.data_dependent = True
            return z3.Bool(f"cond@{self.tag}#{next(_ids)}")
        if not z3.is_bool(r):
            return r != 0
        return r

    def binop(self, e: BinOp):
        op = e.op
        if op in ("and", "or"):
            a, b = self.cond(e.lhs), self.cond(e.rhs)
            return z3.And(a, b) if op == "and" else z3.Or(a, b)
        if op in ("==", "!=", "<", "<=", ">", ">="):
            if e.lhs.ty.is_float or e.rhs.ty.is_float:
                return self._float_cmp(e)
            a, b = self.expr(e.lhs), self.expr(e.rhs)
            if z3.is_bool(a) != z3.is_bool(b):
                raise Unsupported("mixed comparison")
            return {"==": lambda: a == b, "!=": lambda: a != b, "<": lambda: a < b,
                    "<=": lambda: a <= b, ">": lambda: a > b, ">=": lambda: a >= b}[op]()
        if e.ty.is_float or op == "/":
            raise _Float()
        bits = _int_bits(e.ty)
        if bits and op in _WRAPPING:
            # fixed-width arithmetic (i32, i64) wraps (the interpreter's meaning):
            # operands of a wider type are converted, the result wraps
            a, b = self._as_int(e.lhs, bits), self._as_int(e.rhs, bits)
            return _wrap(self._arith(e, op, a, b), bits)
        a, b = self.expr(e.lhs), self.expr(e.rhs)
        return self._arith(e, op, a, b)

    def _as_int(self, e, bits: int):
        v = self.expr(e)
        if z3.is_bool(v):
            return z3.If(v, 1, 0)
        return v if _fits(e, bits) else _wrap(v, bits)

    def _arith(self, e, op, a, b):
        if z3.is_int_value(a) and z3.is_int_value(b):
            r = _fold(op, a.as_long(), b.as_long())
            if r is not None:
                return z3.IntVal(r)
        if op in _BITS and not (z3.is_int_value(b) and op in ("<<", ">>")):
            r = self._enumerate(e, a, b)
            if r is not None:
                return r
        if op in _RING:
            return _RING[op](a, b)
        if op == "//":
            return floordiv(a, b)
        if op == "%":
            return floormod(a, b)
        if op in ("<<", ">>"):
            return shift(a, b, op == "<<", _int_bits(e.ty), f"shift@{self.tag}#{next(_ids)}")
        if op == "&":
            for x, y in ((a, b), (b, a)):
                if z3.is_int_value(y) and _mask_bits(y.as_long()) is not None:
                    return x % (2 ** _mask_bits(y.as_long()))
        if op in ("&", "|", "^"):
            a, b = _value_or(a), _value_or(b)  # abs(31), select(True, 4, 5): constants
            if z3.is_int_value(a) and z3.is_int_value(b):
                av, bv = a.as_long(), b.as_long()
                return z3.IntVal({"&": av & bv, "|": av | bv, "^": av ^ bv}[op])
            for x, y in ((a, b), (b, a)):
                if z3.is_int_value(y) and 0 <= y.as_long() and bin(y.as_long()).count("1") <= 8:
                    return _bits_const(op, x, y.as_long())
            # two's complement on 32 bits while both operands are i32 values, negative
            # ones included (Python's meaning, the interpreter's, for such values);
            # beyond, an unknown (64-bit vectors are too slow for the solver)
            A, B = z3.Int2BV(a, 32), z3.Int2BV(b, 32)
            r = z3.BV2Int({"&": A & B, "|": A | B, "^": A ^ B}[op], is_signed=True)
            h = 2 ** 31
            self.enc.data_dependent = True
            return z3.If(z3.And(a >= -h, a < h, b >= -h, b < h), r,
                         z3.Int(f"bits@{self.tag}#{next(_ids)}"))
        raise Unsupported(f"operator {op}")

    def _float_term(self, e):
        """(real value, is NaN) of a float constant or a read of memory; other float
        expressions are not modelled (``_Float``)."""
        if isinstance(e, Const) and not isinstance(e.val, bool):
            return z3.RealVal(float(e.val)), z3.BoolVal(False)
        arg = e.args[0] if (isinstance(e, Builtin) and e.ty.is_float and len(e.args) == 1
                            and e.name in DTYPES) else e
        if not arg.ty.is_float and arg.ty.is_integer:
            # an integer converted to float (``n > 0.5``, ``f32(i) < x[i]``): exact while
            # |value| <= 2^24 (every such integer is an f32); beyond, an uninterpreted
            # function of the integer (rounding is unknown but deterministic: equal
            # integers convert equally, so a uniform value stays uniform)
            a = self.expr(arg)
            if z3.is_bool(a):
                a = z3.If(a, 1, 0)
            lim = 2 ** 24
            rounded = z3.Function("int_to_float", z3.IntSort(), z3.RealSort())
            return (z3.If(z3.And(a >= -lim, a <= lim), z3.ToReal(a), rounded(a)),
                    z3.BoolVal(False))
        if isinstance(e, Read) and e.ty.is_float:
            self.enc.data_dependent = True
            key = None
            terms = None
            if self.same_reads is not None:
                try:
                    terms = [self._expr(i) for i in e.idx]
                    key = ("f", e.name) + tuple(x.get_id() for x in terms)
                except Unsupported:
                    key = None
                if key is not None and key in self.same_reads:
                    return self.same_reads[key]
            n = next(_ids)
            v = (z3.Real(f"{e.name}[?]@{self.tag}#{n}"), z3.Bool(f"nan:{e.name}@{self.tag}#{n}"))
            if key is not None:
                self.same_reads[key] = v
                if self.region is not None:
                    self.region.append(("f", e.name, terms, v))
            return v
        raise _Float()

    def _float_cmp(self, e: BinOp):
        """A comparison of float reads and constants: reals that may be NaN (every
        ordered comparison with a NaN is false, ``!=`` true), so a thread's two reads
        of one location in one expression are one value."""
        (a, na), (b, nb) = self._float_term(e.lhs), self._float_term(e.rhs)
        nan = z3.Or(na, nb)
        r = {"==": a == b, "!=": a != b, "<": a < b, "<=": a <= b, ">": a > b,
             ">=": a >= b}[e.op]
        if e.op == "!=":
            return z3.Or(nan, r)
        return z3.And(z3.Not(nan), r)

    def _enumerate(self, e: BinOp, a, b):
        """``e`` (a bitwise operation or a shift by a non-constant) by cases on the
        small loop counters (``self.ranges``: constant ranges, at most 64 cases) of
        the operand that would then be a constant: each case is the encoding with
        the counters replaced by their values, where masks and shifts by constants
        are linear (e.g. ``t ^ (1 << k)`` for ``k`` in ``seq(0, 6)``)."""
        ranges = self.ranges
        if not ranges:
            return None
        sides = (e.rhs,) if e.op in ("<<", ">>") else \
            ((e.rhs, e.lhs) if not z3.is_int_value(b) else ())
        if e.op not in ("<<", ">>") and (z3.is_int_value(a) or z3.is_int_value(b)):
            return None  # a constant operand has its own encodings
        for side in sides:
            names, ok = set(), True
            for n in walk(side):
                if isinstance(n, Read):
                    ok = False
                    break
                if isinstance(n, Var):
                    if n.name in ranges:
                        names.add(n.name)
                    elif n.name not in self.enc.params or \
                            not z3.is_int_value(self.enc.params[n.name]):
                        ok = False
                        break
            if not ok or not names:
                continue
            names = sorted(names)
            combos = [()]
            for nm in names:
                lo, hi = ranges[nm]
                combos = [c + (v,) for c in combos for v in range(lo, hi)]
                if len(combos) > 64:
                    break
            if not combos or len(combos) > 64:
                continue
            saved = {nm: self.vars.get(nm) for nm in names}
            out = None
            try:
                for combo in reversed(combos):
                    sub = substitute(e, {nm: Const(v) for nm, v in zip(names, combo)})
                    val = self.expr(sub)
                    if out is None:
                        out = val  # the last case: the ranges are facts of the query
                    else:
                        cond = z3.And(*[self.var(nm) == v for nm, v in zip(names, combo)])
                        out = z3.If(cond, val, out)
            finally:
                for nm, v in saved.items():
                    if v is not None:
                        self.vars[nm] = v
            return out
        return None

    def builtin(self, e: Builtin):
        n = e.name
        if n == "select":
            if len(e.args) != 3:
                raise Unsupported(f"select takes three arguments, not {len(e.args)}")
            c = self.cond(e.args[0])
            a, b = self.expr(e.args[1]), self.expr(e.args[2])
            return z3.If(c, a, b)
        if e.ty.is_float:
            raise _Float()
        if n in ("min", "max"):
            if len(e.args) != 2:
                raise Unsupported(f"{n} takes two arguments, not {len(e.args)}")
            vals = [self.expr(a) for a in e.args]
            r = vals[0]
            for v in vals[1:]:
                r = z3.If(v < r, v, r) if n == "min" else z3.If(v > r, v, r)
            return r
        if len(e.args) != 1:
            raise Unsupported(f"{n} takes one argument, not {len(e.args)}")
        if n == "abs":
            bits = _int_bits(e.ty)
            a = self._as_int(e.args[0], bits) if bits else self.expr(e.args[0])
            r = z3.If(a < 0, -a, a)
            return _wrap(r, bits) if bits else r  # abs(INT_MIN) wraps to INT_MIN
        if n in DTYPES:
            a = self.expr(e.args[0])
            if z3.is_bool(a):
                return z3.If(a, 1, 0)
            bits = _int_bits(e.ty)
            if bits and not _fits(e.args[0], bits):
                return _wrap(a, bits)  # i32(x) of a wider integer wraps, as in the interpreter
            return a
        raise Unsupported(f"builtin {n}")
