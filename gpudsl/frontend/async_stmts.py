"""The asynchronous copies (docs/async_copies.md): ``async_copy(dst, src)``, ``async_commit()`` and
``async_wait(n)`` (meaning: :mod:`gpudsl.ir.async_copy_meaning`).

``dst`` is an element or a window ``s[i, j:j + n]`` of a SHARED array, ``src`` one of
a GLOBAL array with the same element type and the same number of elements; only the
last index may be a range, of a constant length, and the copy moves 4, 8 or 16 bytes.
``async_copy(dst, src, bar=b)`` (``bar=full[e]`` for a ring element) completes on the split
barrier ``b`` instead of a group (docs/hopper.md).
"""
from __future__ import annotations

import ast

from ..ir.async_copy_meaning import COPY_BYTES, const_extent as _extent
from ..ir.nodes import AsyncCommit, AsyncCopy, AsyncWait
from ..ir.types import GLOBAL, SHARED

ASYNC_FUNCS = ("async_copy", "async_commit", "async_wait")


def _side(parser, node, what, mem):
    """(name, first-element indices, element count, type) of one side of a copy."""
    if isinstance(node, ast.Name):
        raise parser.err(node, f"the {what} of async_copy is an element or a window, e.g. "
                         f"{node.id}[i] or {node.id}[i, 4 * j:4 * j + 4]")
    if not isinstance(node, ast.Subscript) or not isinstance(node.value, ast.Name):
        raise parser.err(node, f"the {what} of async_copy is an element or a window of an "
                         "array, e.g. s[t] or s[r, 4 * c:4 * c + 4]")
    name = node.value.id
    sym = parser.scope.lookup(name)
    if sym is None or sym.kind != "array":
        raise parser.err(node.value, f"'{name}' is not an array")
    if sym.mem != mem:
        raise parser.err(node.value, f"async_copy copies from a GLOBAL array to a SHARED "
                         f"array; the {what} '{name}' is in {sym.mem.name}",
                         "stage through a SHARED array allocated at block level")
    parts = node.slice.elts if isinstance(node.slice, ast.Tuple) else [node.slice]
    if len(parts) != len(sym.shape):
        raise parser.err(node, f"'{name}' has {len(sym.shape)} dimension(s), "
                         f"{len(parts)} given")
    idx, n = [], 1
    for k, part in enumerate(parts):
        if isinstance(part, ast.Slice):
            if k != len(parts) - 1 or part.step is not None or part.lower is None or \
                    part.upper is None:
                raise parser.err(part, "only the last index of an async copy may be a range "
                                 "lo:hi (contiguous elements)")
            lo = parser.ex.int_expr(part.lower, "a window bound")
            hi = parser.ex.int_expr(part.upper, "a window bound")
            n = _extent(lo, hi)
            if n is None or n < 1:
                raise parser.err(part, "the range of an async copy has a constant length: "
                                 "write lo:lo + n", "e.g. s[r, 4 * c:4 * c + 4]")
            idx.append(lo)
        else:
            idx.append(parser.ex.int_expr(part, "an index"))
    return name, tuple(idx), n, sym.ty


def parse_async_call(parser, s: ast.stmt, v: ast.Call, fname: str):
    loc = parser.src.loc(s)
    if v.keywords and (fname != "async_copy" or [k.arg for k in v.keywords] != ["bar"]):
        what = "takes only bar= as a keyword" if fname == "async_copy" else \
            "takes no keyword arguments"
        raise parser.err(v, f"{fname}() {what}")
    if fname == "async_commit":
        if v.args:
            raise parser.err(v, "async_commit() takes no arguments")
        return AsyncCommit(loc)
    if fname == "async_wait":
        a = v.args[0] if len(v.args) == 1 else None
        if not (isinstance(a, ast.Constant) and type(a.value) is int and a.value >= 0):
            raise parser.err(v, "async_wait(n) takes one integer constant n >= 0: the number "
                             "of the thread's committed groups that may stay pending",
                             "e.g. async_wait(0) (all landed) or async_wait(1)")
        return AsyncWait(a.value, loc)
    if len(v.args) != 2:
        raise parser.err(v, "async_copy(dst, src) takes the SHARED destination and the "
                         "GLOBAL source", "e.g. async_copy(s[t], x[32 * b + t])")
    dst, didx, dn, dty = _side(parser, v.args[0], "destination", SHARED)
    src, sidx, sn, sty = _side(parser, v.args[1], "source", GLOBAL)
    if dty != sty:
        raise parser.err(v, f"async_copy moves bits: the destination holds {dty.name}, the "
                         f"source {sty.name}", "copy between arrays of one element type")
    if dn != sn:
        raise parser.err(v, f"the destination has {dn} element(s), the source {sn}")
    nbytes = dn * dty.bits // 8
    if nbytes not in COPY_BYTES:
        raise parser.err(v, f"an async copy moves 4, 8 or 16 bytes; this one moves {nbytes} "
                         f"({dn} x {dty.name})", f"copy {16 // max(dty.bits // 8, 1)} "
                         f"{dty.name} elements at most, e.g. s[i, j:j + 4]")
    bar = index = None
    if v.keywords:
        from .sync_stmts import barrier_ref
        bar, index = barrier_ref(parser, v.keywords[0].value, "async_copy",
                                 "e.g. async_copy(s[t], x[t], bar=full[i % 2])")
    return AsyncCopy(dst, didx, src, sidx, dn, loc, bar, index)
