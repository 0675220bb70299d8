"""Legality contexts on the one SMT layer (:mod:`gpudsl.ir.smt`): the facts that
hold at one statement of a proc (sizes >= 1, the asserts, the ranges of the
enclosing loops, the enclosing conditions), dynamic instances of code below it,
queries on the shared solver and witnesses from models.  The scheduling
primitives' legality checks (:mod:`gpudsl.schedule.legality`) ask through a
:class:`Scope`."""
from __future__ import annotations

from contextlib import contextmanager

import z3

from .inline import written_names
from .nodes import Expr, For, If, Read
from .smt import Encoder, Result, ThreadEnv, Unsupported, _ids, pushed, solve
from .visitor import walk


def enclosing(p, addr) -> list:
    """(statement, field) of the statements enclosing the statement address ``addr``
    (alternating indices and field names), outermost first."""
    out = []
    blk = p.body
    for k in range(0, len(addr) - 1, 2):
        s = blk[addr[k]]
        out.append((s, addr[k + 1]))
        blk = getattr(s, addr[k + 1])
    return out


_proc_facts: dict = {}   # id(proc) -> (proc, written arrays, premises)
_premises_of: dict = {}  # (params, asserts) -> premises, for asserts that read no memory


def _premises(p, bindings, written) -> list:
    """The proc's premises (sizes >= 1, its asserts).  A schedule keeps the same
    parameters and asserts through many procs: when the asserts read no memory the
    premises depend on nothing else and are shared."""
    if bindings or any(isinstance(n, Read) for pr in p.preds for n in walk(pr)):
        return Encoder(p, bindings, written).premises()
    key = (p.params, p.preds)
    out = _premises_of.get(key)
    if out is None:
        if len(_premises_of) > 64:
            _premises_of.clear()
        out = _premises_of[key] = Encoder(p, None, written).premises()
    return out



class Instance:
    """One dynamic instance of something below a scope's statement: its own copies
    of the loop variables (``env``) and the constraints that it runs (``facts``)."""

    def __init__(self, env: dict, facts: list):
        self.env = env
        self.facts = facts

    def __getitem__(self, name):
        return self.env[name]


class Scope:
    """The context of one statement of a proc (see the module docstring)."""

    timeout_ms = 5000
    first_ms = 500      # the shared incremental solver's turn before a one-shot retry

    def __init__(self, p, addr=(), bindings: dict | None = None, written: set | None = None):
        self.p = p
        cached = _proc_facts.get(id(p)) if not bindings and written is None else None
        if cached is None or cached[0] is not p:
            w = written_names(p.body) if written is None else written
            cached = (p, w, _premises(p, bindings, w))
            if not bindings and written is None:
                if len(_proc_facts) > 64:
                    _proc_facts.clear()
                _proc_facts[id(p)] = cached
        self.enc = Encoder(p, bindings, cached[1])
        self.ctx = self.enc.thread("ctx")
        self.facts = list(cached[2])
        for s, fld in enclosing(p, addr):
            if isinstance(s, For):
                bounds = self._try(lambda: (self.ctx.expr(s.lo), self.ctx.expr(s.hi)))
                v = self.ctx.declare(s.iter)
                if bounds is not None:
                    self.facts += [v >= bounds[0], v < bounds[1]]
            elif isinstance(s, If):
                c = self._try(lambda: self.ctx.cond(s.cond))
                if c is not None:
                    self.facts.append(c if fld == "body" else z3.Not(c))

    @staticmethod
    def _try(f):
        try:
            return f()
        except Unsupported:
            return None  # a fact that cannot be encoded is dropped

    def thread(self, env: dict | None = None) -> ThreadEnv:
        t = self.enc.thread(f"q{next(_ids)}")
        t.vars.update(self.ctx.vars)
        t.vars.update(env or {})
        return t

    def int(self, e: Expr, env: dict | None = None):
        """``e`` in the context, ``env`` overriding variables; raises Unsupported."""
        r = self.thread(env).expr(e)
        if z3.is_bool(r):
            raise Unsupported("a condition where an integer is expected")
        return r

    def cond(self, e: Expr, env: dict | None = None):
        return self.thread(env).cond(e)

    def instance(self, loops, guards, tag: str, env: dict | None = None) -> Instance:
        """An instance of code nested in ``loops`` (For statements, outer first) and
        ``guards`` ((condition, positive) pairs) below the statement."""
        env = dict(env or {})
        facts = []
        for L in loops:
            bounds = self._try(lambda: (self.int(L.lo, env), self.int(L.hi, env)))
            v = z3.Int(f"{L.iter}{tag}#{next(_ids)}")
            env[L.iter] = v
            if bounds is not None:
                facts += [v >= bounds[0], v < bounds[1]]
        for c, pos in guards:
            g = self._try(lambda: self.cond(c, env))
            if g is not None:
                facts.append(g if pos else z3.Not(g))
        return Instance(env, facts)

    @contextmanager
    def session(self):
        """The context's facts on the shared solver; yields ``check(constraints)``."""
        with pushed(self.facts):
            yield lambda cons: solve(cons, self.timeout_ms, self.first_ms)

    def prove(self, goal) -> Result:
        """UNSAT when ``goal`` (a z3 bool) holds everywhere in the context."""
        with self.session() as check:
            return check([z3.Not(goal)])

    def witness(self, model, terms: dict | None = None) -> dict:
        """Sizes and index parameters, the enclosing loop variables, and ``terms``."""
        w = {k: v for k, v in self.enc.size_values(model).items()}
        for name, t in list(self.ctx.vars.items()) + list((terms or {}).items()):
            r = model.eval(t, model_completion=True)
            w[name] = r.as_long() if z3.is_int_value(r) else str(r)
        return w


__all__ = ["Scope", "Instance", "enclosing"]
