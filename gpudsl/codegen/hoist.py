"""Loop-invariant reads of read-only arrays, loaded once before their loop.

A ``seq`` loop inside a thread nest (or in a one-thread host kernel) that reads a
GLOBAL element at an index that does not change with the loop, ``prefix[0]`` in
``for j ...: if j < prefix[0]: ...``, reads it again on every iteration in the C, and
``nvcc`` cannot move the load: as far as it knows another pointer of the kernel may
write it.  The generator knows better, and loads such an element once into a local
before the loop when all of these hold:

- the array is a GLOBAL tensor (a parameter or a launch temporary) that no statement
  of the kernel writes (assignments, reductions, atomics, asynchronous copies, the
  windows that calls write).  Then no thread of the launch writes it while the loop
  runs, and a launch refuses a written argument aliasing another, so the value
  before the loop is the value on every iteration;
- the index reads no memory and uses no variable bound inside the loop;
- the element is in bounds wherever the loop stands, proved by the SMT layer in the
  loop's context (sizes >= 1, the asserts, the enclosing loops' ranges and
  conditions).  The hoisted load runs even when the loop runs zero times or the
  read sits under a condition, so an index that is only in bounds under that
  condition (or only when the loop runs) is left in the loop.

The meaning is unchanged: the same value is read, once instead of on each
iteration.  :class:`Hoister` decides; :class:`gpudsl.codegen.kernel_cuda.KernelWriter`
emits ``const T gpudsl_hN = x[...];`` before the loop and the local wherever the
loop reads that element.
"""
from __future__ import annotations

import z3

from ..ir.inline import written_names
from ..ir.nodes import (Alloc, Assign, Atomic, Call, Collective, Expr, For, If, Read, Reduce,
                        Var, WindowArg)
from ..ir.printer import print_expr
from ..ir.smt import UNSAT, Unsupported
from ..ir.visitor import bound_names, walk


def addresses(body, prefix=()) -> dict:
    """``id(For) -> statement address`` (indices alternating with field names) for
    every loop of ``body``, as :mod:`gpudsl.ir.smt_scope` reads addresses."""
    out = {}
    for k, s in enumerate(body):
        addr = prefix + (k,)
        if isinstance(s, For):
            out[id(s)] = addr
            out.update(addresses(s.body, addr + ("body",)))
        elif isinstance(s, If):
            out.update(addresses(s.body, addr + ("body",)))
            out.update(addresses(s.orelse, addr + ("orelse",)))
    return out


def read_key(e: Read) -> tuple:
    """Reads of one element print alike (their locations aside)."""
    return (e.name, tuple(print_expr(i) for i in e.idx))


def _reads(stmts):
    """The reads in the expressions of ``stmts`` that the expression emitter prints
    (not the windows of calls or the operands of asynchronous copies)."""
    for s in stmts:
        if isinstance(s, For):
            yield from _reads_in((s.lo, s.hi))
            yield from _reads(s.body)
        elif isinstance(s, If):
            yield from _reads_in((s.cond,))
            yield from _reads(s.body)
            yield from _reads(s.orelse)
        elif isinstance(s, (Assign, Reduce)):
            yield from _reads_in(tuple(s.idx) + (s.rhs,))
        elif isinstance(s, Atomic):
            yield from _reads_in(tuple(s.idx) + (s.rhs,) + ((s.cmp,) if s.cmp is not None
                                                             else ()))
        elif isinstance(s, Alloc):
            yield from _reads_in(tuple(s.shape))


def _reads_in(exprs):
    for e in exprs:
        for n in walk(e):
            if isinstance(n, Read):
                yield n


class Hoister:
    """The hoisting decisions for the kernels of one proc.  ``proc`` carries the
    inlined body the kernels are cut from; ``bindings`` the sizes fixed at compile
    time."""

    def __init__(self, proc, bindings: dict):
        self.p = proc
        self.bindings = dict(bindings)
        self.addr = addresses(proc.body)

    def kernel_written(self, stmts) -> set:
        return written_names(stmts)

    def plan(self, loop: For, written: set, lookup, taken) -> list[Read]:
        """The reads of ``loop``'s body to load once before it: one per element, in
        first-read order.  ``lookup(name)`` gives the array's
        :class:`~gpudsl.codegen.kernel_cuda.ArrayInfo` (or None); ``taken`` holds the keys
        an enclosing loop already hoisted."""
        addr = self.addr.get(id(loop))
        if addr is None:
            return []
        inner = bound_names(loop.body) | {loop.iter}
        seen, picks = set(taken), []
        for r in _reads(loop.body):
            key = read_key(r)
            if key in seen:
                continue
            seen.add(key)
            info = lookup(r.name)
            if info is None or not info.pointer or r.name in written or \
                    len(r.idx) != len(info.shape):
                continue
            if not all(_invariant(i, inner) for i in r.idx):
                continue
            picks.append((r, info))
        if not picks:
            return []
        return [r for r, info in picks if self._in_bounds(addr, r, info.shape)]

    def _in_bounds(self, addr, r: Read, shape) -> bool:
        from ..ir.smt_scope import Scope

        try:
            sc = Scope(self.p, addr, self.bindings or None)
            goal = []
            for i, d in zip(r.idx, shape):
                iv = sc.int(i)
                goal += [iv >= 0, iv < sc.int(d)]
        except Unsupported:
            return False
        return sc.prove(z3.And(*goal) if goal else z3.BoolVal(True)).status == UNSAT


def _invariant(e: Expr, inner: set) -> bool:
    for n in walk(e):
        if isinstance(n, (Read, WindowArg, Collective, Call)):
            return False
        if isinstance(n, Var) and n.name in inner:
            return False
    return True


__all__ = ["Hoister", "addresses", "read_key"]
