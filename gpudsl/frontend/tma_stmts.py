"""The bulk tensor copy statement (docs/hopper.md "TMA loads"): ``tma_load(dst, src, bar=b)``
(meaning: :mod:`gpudsl.ir.tma_meaning`).

``src`` is a window of a GLOBAL array naming every dimension (points and constant ranges:
the box), ``dst`` a contiguous window of a SHARED array with the same range extents,
``bar`` a split barrier or an element of a ring (``full[i % 4]``).
"""
from __future__ import annotations

import ast

from ..ir.nodes import Const, Interval, TmaCommit, TmaLoad, TmaStore, TmaWait, WindowArg
from ..ir.types import INDEX
from ..ir.tma_meaning import ELEM_TYPES, box, dst_problem, src_problem
from .sync_stmts import _ring_index

TMA_FUNCS = ("tma_load", "tma_store", "tma_commit", "tma_wait")

_FORM = ("tma_load(dst_s[slot, 0:64, 0:64], src[r0:r0 + 64, c0:c0 + 64], bar=full[i % 4]): "
         "one thread copies the box; it lands with the phase its next arrive on the "
         "barrier completes")


def _window(parser, node):
    w = parser.ex.window(node)
    sym = parser.scope.lookup(w.name)
    if not w.idx:
        w = WindowArg(w.name, tuple(Interval(Const(0, INDEX), e) for e in sym.shape), w.ty,
                      w.loc)
    return w, sym


def _barrier(parser, v: ast.Call):
    kw = {k.arg: k.value for k in v.keywords}
    if set(kw) != {"bar"}:
        raise parser.err(v, "tma_load(dst, src, bar=b) names the split barrier it completes "
                         "on as `bar=`, and takes no other keyword", _FORM)
    first = kw["bar"]
    node = first.value if isinstance(first, ast.Subscript) else first
    sym = parser.scope.lookup(node.id) if isinstance(node, ast.Name) else None
    if sym is None or sym.kind != "barrier":
        raise parser.err(first, "bar= names a split barrier (`bar: barrier @ SHARED`) or an "
                         "element of a ring (`full[i % 4]`)", _FORM)
    return node.id, _ring_index(parser, first, sym, "tma_load")


def parse_tma_call(parser, s: ast.stmt, v: ast.Call, fname: str):
    loc = parser.src.loc(s)
    if fname == "tma_commit":
        if v.args or v.keywords:
            raise parser.err(v, "tma_commit() takes no arguments")
        return TmaCommit(loc)
    if fname == "tma_wait":
        a = v.args[0] if len(v.args) == 1 and not v.keywords else None
        if not (isinstance(a, ast.Constant) and type(a.value) is int and a.value >= 0):
            raise parser.err(v, "tma_wait(n) takes one integer constant n >= 0: the number of "
                             "committed groups of bulk tensor stores that may stay pending",
                             "e.g. tma_wait(0) (all landed)")
        return TmaWait(a.value, loc)
    if fname == "tma_store":
        return _store(parser, v, loc)
    if len(v.args) != 2:
        raise parser.err(v, "tma_load(dst, src, bar=b) takes the SHARED destination and the "
                         "GLOBAL source box", _FORM)
    dst, src, shape = _box_and_tile(parser, v, "tma_load", glob_arg=1, form=_FORM)
    name, index = _barrier(parser, v)
    return TmaLoad(dst, src, name, shape, loc, index)


_STORE_FORM = ("tma_store(dst[r0:r0 + 64, c0:c0 + 64], src_s[0:64, 0:64]): one thread copies the "
               "tile to the box (clipped to the array); it lands at the tma_wait that "
               "completes its group (tma_commit closes one)")


def _store(parser, v: ast.Call, loc):
    if len(v.args) != 2 or v.keywords:
        raise parser.err(v, "tma_store(dst, src) takes the GLOBAL destination box and the "
                         "SHARED source", _STORE_FORM)
    dst, src, shape = _box_and_tile(parser, v, "tma_store", glob_arg=0, form=_STORE_FORM)
    return TmaStore(dst, src, shape, loc)


def _box_and_tile(parser, v: ast.Call, what: str, glob_arg: int, form: str):
    """``(dst, src, the GLOBAL array's shape)`` of ``what``'s two windows (argument
    ``glob_arg`` the GLOBAL box, the other the SHARED tile), checked."""
    dst, dsym = _window(parser, v.args[0])
    src, ssym = _window(parser, v.args[1])
    (g, gsym), (t, tsym) = ((dst, dsym), (src, ssym)) if glob_arg == 0 else \
        ((src, ssym), (dst, dsym))
    gnode, tnode = v.args[glob_arg], v.args[1 - glob_arg]
    if not gsym.mem.async_source or not tsym.mem.async_destination:
        raise parser.err(v, f"{what} copies between a GLOBAL box and a SHARED tile; '{g.name}' "
                         f"is in {gsym.mem.name}, '{t.name}' in {tsym.mem.name}", form)
    if src.ty != dst.ty:
        raise parser.err(v, f"{what} copies without converting: '{src.name}' holds "
                         f"{src.ty.name}, '{dst.name}' {dst.ty.name}")
    if g.ty.name not in ELEM_TYPES:
        raise parser.err(v, f"{what} copies {', '.join(ELEM_TYPES)} elements (a tensor map's "
                         f"types); '{g.name}' holds {g.ty.name}")
    why = src_problem(g, len(gsym.shape))
    if why is not None:
        raise parser.err(gnode, f"`{ast.unparse(gnode)}` of {what} is not a box a tensor map "
                         f"describes: {why}", form)
    why = dst_problem(t, tuple(tsym.shape), box(g))
    if why is not None:
        raise parser.err(tnode, f"`{ast.unparse(tnode)}` of {what} is not the tile of the "
                         f"box: {why}", form)
    return dst, src, tuple(gsym.shape)


__all__ = ["TMA_FUNCS", "parse_tma_call"]
