"""Where a witness's guard or index arithmetic wrapped around (issue 40).

Fixed-width integers (``i32``, ``i64``) wrap, in the interpreter, in check() and on the
GPU alike, so a guard such as ``begin[0] + 4 <= 64`` holds for ``begin[0]`` near the
largest ``i64``: the sum wraps to a negative number.  check() is right to refuse the
access it guards, but a witness ``y[9223372036854775804, 0]`` alone does not say why.
:func:`wrapped_at` evaluates, at the witness, each wrapping operation of the access's
guards and indices on the operands' values and reports those whose exact result lies
outside the type; :func:`explain` turns them into a sentence and a hint (the guard
written without the overflow: ``begin[0] <= 64 - 4``).
"""
from __future__ import annotations

import z3

from ..ir.nodes import BinOp, Const, UnOp
from ..ir.printer import print_expr
from ..ir.smt import Unsupported
from ..ir.smt_ints import _fold
from ..ir.visitor import walk

_OPS = ("+", "-", "*", "<<")


def _bits(ty):
    return ty.bits if ty.kind == "int" and ty.bits in (32, 64) else None


def _value(t, model, e, bits: int):
    """The value ``e`` has at the witness as an operand of ``bits``-bit arithmetic,
    or None when the model does not decide it (a symbol it does not mention)."""
    try:
        v = t._as_int(e, bits)
    except Unsupported:
        return None
    known = {d.name() for d in model.decls()}
    for s in _symbols(v):
        if s not in known:
            return None
    r = model.eval(v, model_completion=True)
    return r.as_long() if z3.is_int_value(r) else None


def _symbols(term) -> set:
    out, todo = set(), [term]
    while todo:
        x = todo.pop()
        if z3.is_const(x) and x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
            out.add(x.decl().name())
        elif z3.is_app(x):
            if x.decl().kind() == z3.Z3_OP_UNINTERPRETED:
                out.add(x.decl().name())
            todo.extend(x.children())
    return out


def wrapped_at(t, model, exprs) -> list:
    """The operations of ``exprs`` (guards, indices) that wrap at the witness
    ``model`` of thread ``t``: ``(expression, type name, exact value, wrapped value)``,
    innermost first, each once."""
    out, seen = [], set()
    for e in exprs:
        for n in reversed(list(walk(e))):
            if isinstance(n, BinOp) and n.op in _OPS:
                args = (n.lhs, n.rhs)
            elif isinstance(n, UnOp) and n.op == "-":
                args = (Const(0, n.ty), n.arg)
            else:
                continue
            bits = _bits(n.ty)
            text = print_expr(n)
            if bits is None or text in seen:
                continue
            vals = [_value(t, model, x, bits) for x in args]
            if None in vals:
                continue
            exact = _fold(n.op if isinstance(n, BinOp) else "-", *vals)
            half = 1 << (bits - 1)
            if exact is not None and not -half <= exact < half:
                seen.add(text)
                wrapped = (exact + half) % (2 * half) - half
                out.append((n, n.ty.name, exact, wrapped))
    return out


def explain(found, guards) -> tuple[str, str]:
    """(a sentence for the message, a hint) about the wrapped operations ``found``
    (from :func:`wrapped_at`) in the access's ``guards``."""
    first, ty, exact, wrapped = found[0]
    text = print_expr(first)
    sentence = (f"at this witness `{text}` overflows {ty}: its value {exact} is outside "
                f"the type and wraps to {wrapped}")
    in_guard = any(first is n for g in guards for n in walk(g))
    if in_guard:
        sentence += ", so the guard holds"
    better = _rewritten(first, guards)
    hint = ("write the guard so that its arithmetic cannot overflow: compare the value "
            "itself with a bound computed from constants and sizes"
            + (f", e.g. `{better}`" if better else " (move constants to the other side)"))
    return sentence, hint


def _rewritten(n, guards):
    """The comparison of ``guards`` holding ``n = x + c`` (``c`` a positive constant)
    written as ``x <op> k - c``, as text; None when it has another shape."""
    if not (isinstance(n, BinOp) and n.op == "+" and isinstance(n.rhs, Const)
            and isinstance(n.rhs.val, int) and n.rhs.val > 0):
        return None
    for g in guards:
        for cmp in walk(g):
            if isinstance(cmp, BinOp) and cmp.op in ("<", "<=") and cmp.lhs is n:
                k = cmp.rhs
                bound = (str(k.val - n.rhs.val) if isinstance(k, Const) and
                         isinstance(k.val, int) else f"{print_expr(k)} - {n.rhs.val}")
                return f"{print_expr(n.lhs)} {cmp.op} {bound}"
    return None


__all__ = ["wrapped_at", "explain"]
