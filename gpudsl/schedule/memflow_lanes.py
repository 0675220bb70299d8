"""A vector copy's scalar writes as one write with a lane loop, for :mod:`.memflow`.

A statement that copies ``L`` consecutive elements (a vectorized copy) has ``L``
write effects that differ only by ``+ 0 .. + L - 1`` in one index.  Asked whether they
cover a read, the solver gets ``L`` alternatives, each with its own divisions by
constants (``(v - j) // 8`` for every ``j``), and the explicit coverage question of the
sm_80 half GEMM's pipelined ``B`` tile timed out (issue 36, session 14).  Read as one
write ``base + lane`` with ``0 <= lane < L`` the same question has one alternative whose
index is a mixed-radix number (``lane`` its lowest digit), which :mod:`.memflow`'s
read-off names directly.  The two questions are equivalent: ``exists lane in [0, L)``
is the disjunction of the ``L`` writes.
"""
from __future__ import annotations

from dataclasses import replace

from ..ir.nodes import BinOp, Const, For, Var
from ..ir.types import INDEX
from ..ir.visitor import free_vars


def _split_const(e):
    """``(base, c)`` with ``e == base + c`` (``c`` an int constant, 0 if none)."""
    if isinstance(e, BinOp) and e.op == "+" and isinstance(e.rhs, Const) \
            and isinstance(e.rhs.val, int):
        return e.lhs, e.rhs.val
    return e, 0


def _group_key(site):
    a = site.acc
    return (a.mode, id(site.leaf), site.path, repr(a.guards), tuple(id(L) for L in a.loops),
            len(a.idx))


def _lane_dim(group):
    """The index that alone differs across ``group`` and its bases' common text and
    the members' constants, else None."""
    idxs = [s.acc.idx for s in group]
    dims = [d for d in range(len(idxs[0])) if len({repr(i[d]) for i in idxs}) > 1]
    if len(dims) != 1:
        return None
    d = dims[0]
    parts = [_split_const(i[d]) for i in idxs]
    if len({repr(base) for base, _ in parts}) != 1:
        return None
    offsets = sorted(c for _, c in parts)
    if offsets != list(range(offsets[0], offsets[0] + len(offsets))):
        return None
    return d, parts[0][0], offsets[0]


def _lane_name(acc) -> str:
    """``_lane``, or ``_lane1``, ... : a name none of the write's loops or indices uses
    (an instance binds loop variables by name)."""
    used = {L.iter for L in acc.loops} | {v for e in acc.idx for v in free_vars(e)}
    name, i = "_lane", 0
    while name in used:
        i += 1
        name = f"_lane{i}"
    return name


def merge_lanes(writes, site_type):
    """``writes`` with each vector copy's scalar writes replaced by one write whose
    lane is an innermost loop ``_lane`` (see the module's doc); the others unchanged."""
    groups: dict = {}
    for w in writes:
        groups.setdefault(_group_key(w), []).append(w)
    out = []
    for g in groups.values():
        found = _lane_dim(g) if len(g) > 1 else None
        if found is None:
            out.extend(g)
            continue
        d, base, lo = found
        lane = For(_lane_name(g[0].acc), Const(0), Const(len(g)), ())
        shifted = BinOp("+", base, Const(lo), INDEX) if lo else base
        idx = list(g[0].acc.idx)
        idx[d] = BinOp("+", shifted, Var(lane.iter, INDEX), INDEX)
        acc = replace(g[0].acc, idx=tuple(idx), loops=g[0].acc.loops + (lane,))
        out.append(site_type(acc, g[0].path, g[0].lpaths, g[0].leaf))
    return out


__all__ = ["merge_lanes"]
