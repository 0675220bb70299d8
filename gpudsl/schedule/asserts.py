"""``add_assert``: a new precondition of a proc (an ``assert`` at its top).

The one primitive that does not keep the meaning everywhere: it narrows the proc's
domain.  On every argument that satisfies the new assertion the proc means what it
meant; an argument that does not is refused at launch (and by the interpreter),
and ``check()`` and the other primitives may assume it (a ``"perfect"``
``divide_loop`` by 4 once ``n % 4 == 0`` is asserted).
"""
from __future__ import annotations

import z3

from ..frontend.strings import parse_string, scope_of
from ..ir.nodes import Read, Var
from ..ir.visitor import walk
from .edits import unchanged, with_proc
from .legality import holds
from .primitive import TEXT, fail, primitive


@primitive("add_assert", cond=TEXT)
def add_assert(p, cond):
    """Add the precondition ``assert cond`` to the proc: a condition on its sizes and
    index parameters, written as in the proc (``"n % 4 == 0"``).  The new proc's
    domain is narrower: it means what ``p`` means on every argument that satisfies
    ``cond``, refuses the others at launch, and every later proof (``check()``,
    the primitives) may assume ``cond``.

    Legality: ``cond`` is a condition that uses only sizes and index parameters and
    reads no array (as an ``assert`` in a proc); the domain may not become empty:
    some sizes satisfy ``cond`` and the asserts already there (else every proof
    would hold vacuously).  A condition the asserts already imply is not added again.

    Example: ``add_assert(p, "n % 4 == 0")``
    """
    pdef = p.ir
    loc = pdef.loc
    e = parse_string(cond, scope_of(pdef.params, []), "add_assert", "bool", loc,
                     "the assertion")
    kinds = {q.name: q.kind for q in pdef.params}
    for n in walk(e):
        if isinstance(n, Read):
            raise fail(f"the assertion {cond!r} reads the array '{n.name}'; asserts state "
                       "preconditions on sizes and index parameters", loc)
        if isinstance(n, Var) and kinds.get(n.name) not in ("size", "index"):
            raise fail(f"the assertion {cond!r} uses '{n.name}', which is not a size or "
                       "index parameter", loc,
                       "asserts may use sizes and index parameters only")
    if holds(pdef, (), lambda sc, env: sc.cond(e, env)):
        return unchanged(pdef)  # implied already: nothing narrows
    if holds(pdef, (), lambda sc, env: z3.Not(sc.cond(e, env))):
        raise fail(f"no sizes satisfy the assertion {cond!r} together with the proc's "
                   "asserts: its domain would be empty", loc,
                   "check the condition against the asserts already there")
    return with_proc(pdef, preds=pdef.preds + (e,))


__all__ = ["add_assert"]
