"""Loop primitive: ``merge_loops``, the inverse of ``divide_loop`` (Exo's
``mult_loops``): two directly nested loops become one loop over their product.

Used where one thread dimension must enumerate two loops (the rows and the
vector columns of a tile copy, so that every thread of a block takes part)."""
from __future__ import annotations

from ..ir.nodes import BinOp, Const, For, Var
from ..ir.types import INDEX
from ..ir.visitor import free_vars, substitute
from .edits import Moved, replace
from .loops import _check_new_names, _norm_block, _pe
from .primitive import LOOP, NAME, fail, primitive
from .simplify import const_value, normalize


def _e(op, a, b):
    return BinOp(op, a, b, INDEX)


@primitive("merge_loops", outer=LOOP, name=NAME)
def merge_loops(p, outer, name: str):
    """Merge a loop and the loop that is its whole body into one loop ``name``:
    ``for a in seq(0, A): for b in seq(0, B)`` becomes ``for name in seq(0, A * B)``
    with ``a = name // B`` and ``b = name % B`` (the same iterations in the same
    order).

    Legality: the inner loop is the only statement of the outer one; both start
    at 0, have the same kind and are not mapped; ``B`` is a positive constant (so
    ``A * B`` iterations are exactly the pairs, in order, also for ``A <= 0``) and
    the new name is free.

    Example: ``merge_loops(p, "i0x", "t")``
    """
    s: For = outer.node()
    if len(s.body) != 1 or not isinstance(s.body[0], For):
        raise fail(f"the body of loop {s.iter} is not a single loop", s.loc,
                   "merge two directly nested loops")
    t: For = s.body[0]
    for L in (s, t):
        if L.mapping is not None:
            raise fail(f"loop {L.iter} is mapped to {L.mapping.name}; merge before mapping",
                       L.loc)
        if const_value(L.lo) != 0:
            raise fail(f"loop {L.iter} starts at {_pe(L.lo)}, not 0", L.loc)
    if s.kind != t.kind:
        raise fail(f"loop {s.iter} is {s.kind} and loop {t.iter} is {t.kind}", s.loc)
    B = const_value(t.hi)
    if B is None or B <= 0:
        raise fail(f"the extent {_pe(t.hi)} of loop {t.iter} is not a positive constant",
                   t.loc)
    if s.iter in free_vars(t.hi):
        raise fail(f"the extent of loop {t.iter} uses {s.iter}", t.loc)
    _check_new_names(p, outer.addr, [name], s.loc, old=(s.iter, t.iter))
    v = Var(name)
    body = _norm_block(substitute(t.body, {s.iter: _e("//", v, Const(B)),
                                           t.iter: _e("%", v, Const(B))}))
    hi = normalize(_e("*", s.hi, Const(B)))
    new = For(name, Const(0), hi, body, s.kind, None, s.unroll or t.unroll, s.loc)
    a = outer.addr

    return replace(p.ir, a, [new], keep=[
        Moved((0,), a), Moved((0, "body", 0), a),  # the inner loop: now the merged loop
        Moved((0, "body", 0, "body"), a + ("body",))])
