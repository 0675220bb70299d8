"""Fresh names for statements that move into another scope.

gpudsl does not allow shadowing, and a block may not allocate one name twice.
Primitives that move a loop body or a branch into the enclosing block
(``unroll_loop``, ``remove_loop``, ``fuse``, ``simplify``) rename the allocations
that would then clash, so that the result still parses back.
"""
from __future__ import annotations

from ..ir.nodes import Alloc, Assign, Atomic, ProcDef, Read, Reduce, WindowArg
from ..ir.visitor import bound_names, free_vars, fresh_name, rename, walk
from .edits import delete


def proc_names(pdef: ProcDef) -> set:
    """Every name a proc binds or uses (parameters, loops, allocations)."""
    return {p.name for p in pdef.params} | bound_names(pdef.body) | free_vars(pdef.body)


def names_outside(pdef: ProcDef, addr) -> set:
    """The names of the proc with the statement at ``addr`` left out."""
    return proc_names(delete(pdef, addr).ir)


def freshen(stmts: tuple, clash: set, taken: set) -> tuple:
    """``stmts`` with every name they bind that is in ``clash`` renamed to a name
    outside ``taken`` (which grows by the names chosen)."""
    ren = {}
    avoid = taken | bound_names(stmts) | free_vars(stmts)
    for n in sorted(bound_names(stmts) & set(clash)):
        ren[n] = fresh_name(n, avoid | set(ren.values()))
    taken |= set(ren.values())
    return rename(tuple(stmts), ren) if ren else tuple(stmts)


def top_allocs(stmts) -> set:
    return {s.name for s in stmts if isinstance(s, Alloc)}


def freshen_top_allocs(stmts: tuple, taken: set) -> tuple:
    """``stmts`` (to be placed in a block whose other names are ``taken``) with
    the allocations at their top level renamed where they clash; ``taken`` grows
    by the names the block then holds."""
    out = freshen(stmts, top_allocs(stmts) & taken, taken)
    taken |= top_allocs(out)
    return out


def all_names(pdef: ProcDef) -> set:
    """The parameters and every name the body binds."""
    return bound_names(pdef.body) | {p.name for p in pdef.params}


def uses(stmts, buf: str) -> bool:
    """Do ``stmts`` read, write or pass a window of ``buf``?"""
    return any(isinstance(n, (Read, WindowArg, Assign, Reduce, Atomic)) and n.name == buf
               or isinstance(n, Atomic) and n.result == buf for n in walk(tuple(stmts)))


__all__ = ["proc_names", "names_outside", "freshen", "freshen_top_allocs", "top_allocs",
           "all_names", "uses"]
