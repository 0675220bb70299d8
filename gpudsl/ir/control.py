"""The one evaluator of control expressions: sizes, index parameters, loop bounds,
grid sizes, shapes and asserts, over Python ints with Python's meaning of ``//``
and ``%`` (docs/language.md (statements)).  The interpreter, the argument binder, code generation and
the launcher all compute control values here."""
from __future__ import annotations

from .nodes import BinOp, Builtin, Const, Expr, UnOp, Var
from .numeric import shift_left, shift_right


class NotConstant(Exception):
    """An expression needs a value that is not known (a memory read or a free name)."""

    def __init__(self, names=()):
        self.names = set(names)


def _floordiv(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("division by zero in a control expression")
    return a // b


def _mod(a: int, b: int) -> int:
    if b == 0:
        raise ZeroDivisionError("modulo by zero in a control expression")
    return a % b


_OPS = {
    "+": lambda a, b: a + b, "-": lambda a, b: a - b, "*": lambda a, b: a * b,
    "/": lambda a, b: a / b, "//": _floordiv, "%": _mod,
    "&": lambda a, b: a & b, "|": lambda a, b: a | b, "^": lambda a, b: a ^ b,
    "<<": shift_left, ">>": shift_right,  # an amount below 0 gives 0 / the sign (.numeric)
    "==": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b,
    "<=": lambda a, b: a <= b, ">": lambda a, b: a > b, ">=": lambda a, b: a >= b,
}


def evaluate(e: Expr, env: dict) -> int | bool:
    """The value of a control expression; ``env`` maps names to ints.  Raises
    :class:`NotConstant` naming the unknown names (none for a memory read or an
    operation that has no control value), ``ZeroDivisionError`` for ``x // 0`` and
    ``x % 0``."""
    if isinstance(e, Const):
        return e.val
    if isinstance(e, Var):
        if e.name in env:
            return env[e.name]
        raise NotConstant({e.name})
    if isinstance(e, BinOp):
        if e.op in ("and", "or"):
            a = evaluate(e.lhs, env)
            if e.op == "and":
                return bool(a) and bool(evaluate(e.rhs, env))
            return bool(a) or bool(evaluate(e.rhs, env))
        missing, unknown = set(), False
        vals = []
        for x in (e.lhs, e.rhs):
            try:
                vals.append(evaluate(x, env))
            except NotConstant as exc:
                missing |= exc.names
                unknown = True  # a memory read names nothing, yet has no value
        if unknown:
            raise NotConstant(missing)
        op = _OPS.get(e.op)
        if op is not None:
            return op(*vals)
    if isinstance(e, UnOp):
        v = evaluate(e.arg, env)
        return (not v) if e.op == "not" else -v
    if isinstance(e, Builtin):
        vals = [evaluate(a, env) for a in e.args]
        if e.name == "min": return min(vals)  # noqa: E701
        if e.name == "max": return max(vals)  # noqa: E701
        if e.name == "abs": return abs(vals[0])  # noqa: E701
        if e.name == "select": return vals[1] if vals[0] else vals[2]  # noqa: E701
        if e.name in ("i32", "i64"): return int(vals[0])  # noqa: E701
    raise NotConstant(set())


def control_names(e) -> set[str]:
    """The names a control expression reads."""
    from .visitor import walk

    return {n.name for n in walk(e) if isinstance(n, Var)}


__all__ = ["NotConstant", "evaluate", "control_names"]
