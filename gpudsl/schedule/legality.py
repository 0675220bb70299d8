"""Legality checks of the rewrite primitives, decided with Z3.

Two kinds of questions:

- *facts*: ``prove(...)``: does an integer property hold at a statement for every
  value of the sizes (under the proc's asserts) and of the enclosing loop
  variables and conditions?  Used for "perfect" divides, cut points, window
  bounds, expand_dim indices, alignment of vector accesses.
- *dependences*: ``find_conflict(...)``: are there two dynamic instances of
  accesses in a region, related by a constraint on their loop variables (e.g.
  ``i1 < i2 and j1 > j2`` for a loop interchange), that touch the same element
  with at least one write?  A model is a witness.

The encoding over-approximates what it cannot express (a data-dependent value is
any integer, a float condition is any boolean), so "no conflict" and "proved"
are proofs, and a solver timeout counts as "not proved".
"""
from __future__ import annotations

from dataclasses import dataclass, field

import z3

from ..errors import SchedulingError
from ..ir.inline import Inliner
from ..ir.nodes import (Alloc, Assign, Atomic, BinOp, Builtin, Call, Const, Expr, For, If,
                        Interval, Point, ProcDef, Read, Reduce, Stmt, UnOp, Var, WindowArg)
from .cursors import ancestors, block_of

TIMEOUT_MS = 5000


class Unknown(Exception):
    pass


# ------------------------------------------------------------------ encoding


class Enc:
    """Encodes IR integer/boolean expressions as Z3 terms under a name map."""

    def __init__(self, pdef: ProcDef):
        self.pdef = pdef
        self.funcs: dict = {}
        self.fresh = 0

    def _free_int(self):
        self.fresh += 1
        return z3.Int(f"?v{self.fresh}")

    def _free_bool(self):
        self.fresh += 1
        return z3.Bool(f"?b{self.fresh}")

    def int(self, e: Expr, env: dict):
        if isinstance(e, Const):
            return z3.IntVal(int(e.val))
        if isinstance(e, Var):
            if e.name in env:
                return env[e.name]
            return z3.Int(e.name)
        if isinstance(e, BinOp) and e.op in ("+", "-", "*", "//", "%"):
            a, b = self.int(e.lhs, env), self.int(e.rhs, env)
            if e.op == "+":
                return a + b
            if e.op == "-":
                return a - b
            if e.op == "*":
                return a * b
            if e.op == "//":
                # floor division (Python); Z3 agrees for b > 0
                return z3.If(b > 0, a / b, self._free_int())
            return z3.If(b > 0, a % b, self._free_int())
        if isinstance(e, BinOp) and e.op in ("<<", ">>", "&") and isinstance(e.rhs, Const):
            a, k = self.int(e.lhs, env), int(e.rhs.val)
            if e.op == "<<" and 0 <= k < 63:
                return a * (2 ** k)
            if e.op == ">>" and 0 <= k < 63:
                return a / (2 ** k)  # operands are non-negative (SPEC 2.3)
            if e.op == "&" and k >= 0 and (k + 1) & k == 0:
                return a % (k + 1)
        if isinstance(e, UnOp) and e.op == "-":
            return -self.int(e.arg, env)
        if isinstance(e, Builtin) and e.name in ("min", "max") and e.ty.is_integer:
            a, b = self.int(e.args[0], env), self.int(e.args[1], env)
            return z3.If(a <= b, a, b) if e.name == "min" else z3.If(a >= b, a, b)
        if isinstance(e, Read) and e.ty.is_integer and e.idx:
            key = (e.name, len(e.idx))
            f = self.funcs.get(key)
            if f is None:
                f = z3.Function(f"{e.name}@", *([z3.IntSort()] * len(e.idx)), z3.IntSort())
                self.funcs[key] = f
            return f(*[self.int(i, env) for i in e.idx])
        return self._free_int()

    def bool(self, e: Expr, env: dict):
        if isinstance(e, Const):
            return z3.BoolVal(bool(e.val))
        if isinstance(e, BinOp):
            if e.op == "and":
                return z3.And(self.bool(e.lhs, env), self.bool(e.rhs, env))
            if e.op == "or":
                return z3.Or(self.bool(e.lhs, env), self.bool(e.rhs, env))
            if e.op in ("<", "<=", ">", ">=", "==", "!=") and e.lhs.ty.is_integer and \
                    e.rhs.ty.is_integer:
                a, b = self.int(e.lhs, env), self.int(e.rhs, env)
                return {"<": a < b, "<=": a <= b, ">": a > b, ">=": a >= b,
                        "==": a == b, "!=": a != b}[e.op]
        if isinstance(e, UnOp) and e.op == "not":
            return z3.Not(self.bool(e.arg, env))
        return self._free_bool()


def _solver():
    s = z3.Solver()
    s.set("timeout", TIMEOUT_MS)
    return s


def base_facts(pdef: ProcDef, enc: Enc) -> list:
    facts = []
    for p in pdef.params:
        if p.kind == "size":
            facts.append(z3.Int(p.name) >= 1)
    for pr in pdef.preds:
        facts.append(enc.bool(pr, {}))
    return facts


def context_facts(pdef: ProcDef, addr, enc: Enc, env: dict | None = None) -> list:
    """Ranges of the loops and conditions enclosing the statement at ``addr``."""
    env = env if env is not None else {}
    facts = []
    for k in range(1, len(addr), 2):
        blk = block_of(pdef, addr[:k - 1])
        s = blk[addr[k - 1]]
        fld = addr[k]
        if isinstance(s, For):
            v = env.get(s.iter, z3.Int(s.iter))
            facts += [v >= enc.int(s.lo, env), v < enc.int(s.hi, env)]
        elif isinstance(s, If):
            c = enc.bool(s.cond, env)
            facts.append(c if fld == "body" else z3.Not(c))
    return facts


def _model_int(m, t):
    v = m.eval(t, model_completion=True)
    try:
        return v.as_long()
    except AttributeError:
        return str(v)


def _witness(m, pdef: ProcDef, extra: dict) -> dict:
    w = {}
    for p in pdef.params:
        if p.kind in ("size", "index"):
            w[p.name] = _model_int(m, z3.Int(p.name))
    for k, t in extra.items():
        w[k] = _model_int(m, t)
    return w


def prove(pdef: ProcDef, addr, prop, prim: str, what: str, loc, hint=None,
          env_vars: tuple = ()):
    """Prove ``prop(enc, env)`` (a Z3 bool) in the context of ``addr``; raise
    SchedulingError with a witness otherwise."""
    enc = Enc(pdef)
    s = _solver()
    s.add(*base_facts(pdef, enc))
    s.add(*context_facts(pdef, addr, enc))
    goal = prop(enc, {})
    s.add(z3.Not(goal))
    r = s.check()
    if r == z3.unsat:
        return
    if r == z3.sat:
        m = s.model()
        names = {}
        for a in ancestors(pdef, addr):
            if isinstance(a, For):
                names[a.iter] = z3.Int(a.iter)
        for v in env_vars:
            names[v] = z3.Int(v)
        raise SchedulingError(prim, f"needs {what}, which fails for the witness below", loc,
                              hint,
                              witness=_witness(m, pdef, names))
    raise SchedulingError(prim, f"could not prove that {what} (solver: {s.reason_unknown()})",
                          loc, hint)


# ------------------------------------------------------------------ accesses


@dataclass
class Access:
    buf: str
    mode: str  # "r", "w", "+", "-", "*" (reductions), "atomic"
    idx: tuple
    loops: tuple  # For statements between the region and the access (outer first)
    guards: tuple  # (cond, positive) pairs
    stmt: Stmt
    local: bool = False  # buffer allocated inside the region

    @property
    def writes(self) -> bool:
        return self.mode != "r"


def collect(stmts: tuple, loops=(), guards=(), locals_=frozenset(), out=None) -> list:
    """Every memory access in ``stmts`` with its loops and guards."""
    out = [] if out is None else out
    locals_ = set(locals_)

    def reads(e: Expr, s, loops, guards):
        from ..ir.visitor import walk

        for n in walk(e):
            if isinstance(n, Read):
                out.append(Access(n.name, "r", n.idx, loops, guards, s, n.name in locals_))

    for s in stmts:
        if isinstance(s, Alloc):
            locals_.add(s.name)
        elif isinstance(s, (Assign, Reduce, Atomic)):
            reads(s.rhs, s, loops, guards)
            for i in s.idx:
                reads(i, s, loops, guards)
            mode = "w" if isinstance(s, Assign) else ("atomic" if isinstance(s, Atomic)
                                                       else s.op)
            out.append(Access(s.name, mode, s.idx, loops, guards, s, s.name in locals_))
        elif isinstance(s, For):
            reads(s.lo, s, loops, guards)
            reads(s.hi, s, loops, guards)
            collect(s.body, loops + (s,), guards, locals_, out)
        elif isinstance(s, If):
            reads(s.cond, s, loops, guards)
            collect(s.body, loops, guards + ((s.cond, True),), locals_, out)
            collect(s.orelse, loops, guards + ((s.cond, False),), locals_, out)
        elif isinstance(s, Call):
            # the callee's names are renamed away from every caller name the body
            # can meet after substitution: the arguments' names, the enclosing
            # loops and the region's allocations
            taken = {L.iter for L in loops} | set(locals_)
            body = Inliner(taken).expand(s)
            n0 = len(out)
            collect(body, loops, guards, locals_, out)
            for a in out[n0:]:
                a.stmt = s
    return out


def conflicts(a: Access, b: Access, allow_reduce: bool = True) -> bool:
    """Could these two accesses conflict (same buffer, order matters)?"""
    if a.buf != b.buf or a.local or b.local:
        return False
    if not (a.writes or b.writes):
        return False
    if a.mode == "atomic" and b.mode == "atomic":
        return False
    if allow_reduce and a.mode == b.mode and a.mode in ("+", "*"):
        return False  # reductions commute (as in Exo)
    return True


def _instance(enc: Enc, a: Access, tag: str, shared: dict):
    """(env, facts) for one dynamic instance of access ``a``."""
    env = dict(shared)
    facts = []
    for L in a.loops:
        v = z3.Int(f"{L.iter}{tag}")
        lo, hi = enc.int(L.lo, env), enc.int(L.hi, env)
        env[L.iter] = v
        facts += [v >= lo, v < hi]
    for c, pos in a.guards:
        g = enc.bool(c, env)
        facts.append(g if pos else z3.Not(g))
    return env, facts


def find_conflict(pdef: ProcDef, addr, accs1: list, accs2: list, relate,
                  allow_reduce: bool = True, tags=("_1", "_2"), region_env=None):
    """The first pair (a, b, witness) of conflicting instances related by
    ``relate(env1, env2)``, or None.  ``addr``: the region's statement (its
    enclosing loops and conditions are shared by both instances)."""
    enc = Enc(pdef)
    s = _solver()
    s.add(*base_facts(pdef, enc))
    s.add(*context_facts(pdef, addr, enc))
    for a in accs1:
        for b in accs2:
            if not conflicts(a, b, allow_reduce) or len(a.idx) != len(b.idx):
                continue
            s.push()
            env1, f1 = _instance(enc, a, tags[0], region_env or {})
            env2, f2 = _instance(enc, b, tags[1], region_env or {})
            s.add(*f1, *f2)
            for i, j in zip(a.idx, b.idx):
                s.add(enc.int(i, env1) == enc.int(j, env2))
            s.add(relate(env1, env2))
            r = s.check()
            if r == z3.sat:
                m = s.model()
                names = {}
                for L in ancestors(pdef, addr):
                    if isinstance(L, For):
                        names[L.iter] = z3.Int(L.iter)
                for L in a.loops:
                    names[f"{L.iter}{tags[0]}"] = env1[L.iter]
                for L in b.loops:
                    names[f"{L.iter}{tags[1]}"] = env2[L.iter]
                w = _witness(m, pdef, names)
                s.pop()
                return a, b, w
            if r == z3.unknown:
                s.pop()
                return a, b, None
            s.pop()
    return None


def describe(a: Access) -> str:
    from ..ir.printer import print_expr

    kind = {"r": "read", "w": "write", "atomic": "atomic update"}.get(a.mode, "reduction")
    idx = f"[{', '.join(print_expr(i) for i in a.idx)}]" if a.idx else ""
    where = f" at line {a.stmt.loc.line}" if a.stmt.loc else ""
    return f"the {kind} of {a.buf}{idx}{where}"


def raise_conflict(prim: str, why: str, hit, loc, hint=None):
    a, b, w = hit
    if w is None:
        raise SchedulingError(prim, f"could not prove that {describe(a)} and {describe(b)} "
                              f"do not conflict ({why})", loc, hint)
    raise SchedulingError(prim, f"{why}: {describe(a)} and {describe(b)} touch the same "
                          "element", loc, hint, w)


__all__ = ["Enc", "prove", "collect", "find_conflict", "Access", "conflicts",
           "raise_conflict", "describe", "Unknown", "field", "Interval", "Point",
           "WindowArg"]
