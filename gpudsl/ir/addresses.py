"""Statement addresses in a proc body, and the edits that use them.

An *address* is a tuple ``(i0, f0, i1, f1, ..., ik)``: statement ``ik`` of the
block in field ``f{k-1}`` (``"body"`` or ``"orelse"``) of statement
``i{k-1}`` ... of the proc's body.  A *block address* is the odd-length prefix
ending in a field name; the proc's body is the block ``()``.  Cursors
(:mod:`gpudsl.schedule.cursors`) and legality contexts (:mod:`gpudsl.ir.smt`)
name statements this way.
"""
from __future__ import annotations

from .nodes import For, If, ProcDef, Stmt

Addr = tuple


def block_of(pdef: ProcDef, baddr: Addr) -> tuple:
    """The statement tuple at a block address."""
    blk = pdef.body
    for k in range(0, len(baddr), 2):
        s = blk[baddr[k]]
        blk = getattr(s, baddr[k + 1])
    return blk


def stmt_at(pdef: ProcDef, addr: Addr) -> Stmt:
    return block_of(pdef, addr[:-1])[addr[-1]]


def replace_block(pdef: ProcDef, baddr: Addr, new_block: tuple) -> ProcDef:
    """A copy of ``pdef`` whose block at ``baddr`` is ``new_block``."""

    def rec(blk: tuple, rest: Addr) -> tuple:
        if not rest:
            return tuple(new_block)
        i, fld = rest[0], rest[1]
        s = blk[i]
        s2 = s.with_(**{fld: rec(getattr(s, fld), rest[2:])})
        return blk[:i] + (s2,) + blk[i + 1:]

    return pdef.with_(body=rec(pdef.body, baddr))


def splice(pdef: ProcDef, addr: Addr, new_stmts) -> ProcDef:
    """Replace the statement at ``addr`` by the statements ``new_stmts``."""
    baddr, i = addr[:-1], addr[-1]
    blk = block_of(pdef, baddr)
    return replace_block(pdef, baddr, blk[:i] + tuple(new_stmts) + blk[i + 1:])


def iter_stmts(pdef: ProcDef):
    """(address, statement) of every statement, in program order (pre-order)."""

    def rec(blk, baddr):
        for i, s in enumerate(blk):
            a = baddr + (i,)
            yield a, s
            if isinstance(s, For):
                yield from rec(s.body, a + ("body",))
            elif isinstance(s, If):
                yield from rec(s.body, a + ("body",))
                yield from rec(s.orelse, a + ("orelse",))

    yield from rec(pdef.body, ())


def ancestors(pdef: ProcDef, addr: Addr) -> list[Stmt]:
    """The statements enclosing ``addr``, outermost first."""
    out = []
    for k in range(1, len(addr), 2):
        out.append(stmt_at(pdef, addr[:k]))
    return out


__all__ = ["Addr", "block_of", "stmt_at", "replace_block", "splice", "iter_stmts",
           "ancestors"]
