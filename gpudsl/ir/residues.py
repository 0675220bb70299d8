"""Residues of integer index expressions modulo a constant, decided without a nonlinear
query (issue 28: a proof must not depend on the solver's version or speed).

``residue(e, width, atom)`` follows ``+ - *`` and shifts by constants, so that
``i * n + 4 * j`` modulo 4 needs no product of unknowns: a factor whose residue is 0
makes the product 0 whatever the other factor is.  Only the atoms (variables, ``//`` /
``%`` terms, reads) are asked of ``atom(x)``, the caller's oracle: its residue, or None
where it does not know.  Used by the scheduling primitives' alignment proofs
(``schedule.legality.divisible``) and by check()'s alignment of async copies."""
from __future__ import annotations

from typing import Callable, Optional

from .nodes import BinOp, Const, Expr


def residue(e: Expr, width: int, atom: Callable[[Expr], Optional[int]]) -> Optional[int]:
    """``e mod width`` in every instance, or None when undecided."""
    if isinstance(e, Const) and not isinstance(e.val, (bool, float)):
        return int(e.val) % width
    if isinstance(e, BinOp) and e.op in ("+", "-"):
        a, b = residue(e.lhs, width, atom), residue(e.rhs, width, atom)
        if a is None or b is None:
            return None
        return (a + b if e.op == "+" else a - b) % width
    if isinstance(e, BinOp) and e.op == "*":
        a = residue(e.lhs, width, atom)
        if a == 0:
            return 0
        b = residue(e.rhs, width, atom)
        if b == 0 or a is None or b is None:
            return 0 if b == 0 else None
        return a * b % width
    if isinstance(e, BinOp) and e.op == "<<" and isinstance(e.rhs, Const) and \
            0 <= int(e.rhs.val) < 64:
        if (1 << int(e.rhs.val)) % width == 0:
            return 0
        a = residue(e.lhs, width, atom)
        return None if a is None else (a << int(e.rhs.val)) % width
    if e.ty.kind not in ("index", "int"):
        return None
    return atom(e)


__all__ = ["residue"]
