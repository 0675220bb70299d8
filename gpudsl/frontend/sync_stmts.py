"""The synchronization statements of docs/language.md (synchronization): ``sync(lo, hi)``, the split barrier
allocation ``bar: barrier @ SHARED``, ``arrive(bar, lo, hi)`` (``arrive(bar, lo, hi,
count=c)``: each thread of the range stands for ``c`` arrivals, docs/hopper.md) and
``wait(bar, lo, hi)``.

Ranges are integer constants with ``0 <= lo < hi``; whether a range fits the block
(and is made of whole warps) is a question of the kernel, answered by check().
"""
from __future__ import annotations

import ast

from ..ir.nodes import Alloc, Arrive, Const, Sync, SyncCluster, Wait
from ..ir.types import MAX_CLUSTER
from ..ir.types import BARRIER, INDEX
from .scope import Sym

SYNC_FUNCS = ("sync", "arrive", "wait", "sync_cluster")


def _const(parser, node, what):
    v = node
    neg = False
    if isinstance(v, ast.UnaryOp) and isinstance(v.op, ast.USub):
        v, neg = v.operand, True
    if not (isinstance(v, ast.Constant) and type(v.value) is int):
        raise parser.err(node, f"{what} must be an integer constant",
                         "thread ranges of barriers are fixed: e.g. sync(0, 64)")
    return -v.value if neg else v.value


MAX_COUNT = (1 << 20) - 1   # an mbarrier's expected arrival count (PTX: 2^20 - 1 at most)


def _count(parser, v: ast.Call, fname: str) -> int:
    """The ``count=`` of an arrive (1 when not written)."""
    kws = {k.arg: k.value for k in v.keywords}
    if (fname != "arrive" and kws) or set(kws) - {"count", "cluster"}:
        what = "takes only count= and cluster= as keywords" if fname == "arrive" else \
            "takes no keyword"
        raise parser.err(v, f"{fname}() {what}", "e.g. arrive(bar, 0, 1, count=32)"
                         if fname == "arrive" else f"e.g. {fname}(bar, 0, 64)")
    if "count" not in kws:
        return 1
    node = kws["count"]
    if not (isinstance(node, ast.Constant) and type(node.value) is int and
            1 <= node.value <= MAX_COUNT):
        raise parser.err(node, "count= of an arrive is an integer constant, 1 to "
                         f"{MAX_COUNT}: the arrivals each thread of the range stands for",
                         "e.g. arrive(bar, 0, 1, count=32): one thread arrives for a warp")
    return node.value


def _cluster_flag(parser, v: ast.Call) -> bool:
    """The ``cluster=`` of an arrive: ``True`` (every block of the cluster) or ``False``."""
    node = next((k.value for k in v.keywords if k.arg == "cluster"), None)
    if node is None:
        return False
    if not (isinstance(node, ast.Constant) and type(node.value) is bool):
        raise parser.err(node, "cluster= of an arrive is True or False",
                         "e.g. arrive(empty[i % 4], 0, 128, cluster=True): the threads "
                         "arrive on the element of every block of the cluster")
    return node.value


def _range(parser, v: ast.Call, args, fn, keywords_ok=False):
    if len(args) != 2 or (v.keywords and not keywords_ok):
        what = "takes no arguments (the whole block) or" if fn == "sync" else "takes"
        raise parser.err(v, f"{fn}() {what} a thread range (lo, hi)",
                         f"e.g. {fn}({'bar, ' if fn != 'sync' else ''}0, 64)")
    lo = _const(parser, args[0], f"the low end of the {fn}() range")
    hi = _const(parser, args[1], f"the high end of the {fn}() range")
    if not 0 <= lo < hi:
        raise parser.err(v, f"the {fn}() range [{lo}, {hi}) is empty or negative",
                         "write lo < hi, both >= 0")
    return (Const(lo, INDEX, parser.src.loc(args[0])),
            Const(hi, INDEX, parser.src.loc(args[1])))


def parse_sync_call(parser, s: ast.stmt, v: ast.Call, fname: str):
    """``sync()``, ``sync(lo, hi)``, ``arrive(bar, lo, hi)``, ``wait(bar, lo, hi)``."""
    loc = parser.src.loc(s)
    if fname == "sync_cluster":
        if v.args or v.keywords:
            raise parser.err(v, "sync_cluster() takes no arguments (every thread of every "
                             "block of the cluster)")
        return SyncCluster(loc)
    if fname == "sync":
        if not v.args and not v.keywords:
            return Sync(loc)
        lo, hi = _range(parser, v, v.args, "sync")
        return Sync(loc, lo, hi)
    first = v.args[0] if v.args else None
    node = first.value if isinstance(first, ast.Subscript) else first
    if not isinstance(node, ast.Name):
        raise parser.err(v, f"{fname}() names a split barrier first: {fname}(bar, lo, hi)",
                         "allocate it at block level: `bar: barrier @ SHARED`")
    name = node.id
    sym = parser.scope.lookup(name)
    if sym is None or sym.kind != "barrier":
        raise parser.err(node, f"'{name}' is not a split barrier",
                         f"allocate it at block level: `{name}: barrier @ SHARED`")
    index = _ring_index(parser, first, sym, fname)
    lo, hi = _range(parser, v, v.args[1:], fname, keywords_ok=True)
    count = _count(parser, v, fname)
    if fname == "arrive":
        return Arrive(name, lo, hi, loc, index, count, _cluster_flag(parser, v))
    return Wait(name, lo, hi, loc, index)


def barrier_ref(parser, first, fname: str, form: str):
    """``(name, ring index or None)`` of the split barrier named by ``bar=`` (``first``)."""
    node = first.value if isinstance(first, ast.Subscript) else first
    sym = parser.scope.lookup(node.id) if isinstance(node, ast.Name) else None
    if sym is None or sym.kind != "barrier":
        raise parser.err(first, "bar= names a split barrier (`bar: barrier @ SHARED`) or an "
                         "element of a ring (`full[i % 4]`)", form)
    return node.id, _ring_index(parser, first, sym, fname)


def _ring_index(parser, first, sym, fname):
    """The element ``e`` of ``bar[e]`` (a ring), None for a single barrier."""
    ring = bool(sym.shape)
    if not isinstance(first, ast.Subscript):
        if ring:
            raise parser.err(first, f"'{sym.name}' is a ring of {sym.shape[0].val} split "
                             "barriers: name one element", f"e.g. {fname}({sym.name}[i % "
                             f"{sym.shape[0].val}], lo, hi)")
        return None
    if not ring:
        raise parser.err(first, f"'{sym.name}' is a single split barrier, not a ring",
                         f"write {fname}({sym.name}, lo, hi), or allocate a ring: "
                         f"`{sym.name}: barrier[k] @ SHARED`")
    if isinstance(first.slice, ast.Tuple):
        raise parser.err(first, "a barrier ring has one dimension", "e.g. full[i % 4]")
    return parser.ex.control_expr(first.slice, "the element of a barrier ring",
                                  allowed=("size", "index", "loop"))


MAX_RING = 32   # elements of a barrier ring (the generated code keeps one parity bit each)


def parse_barrier_alloc(parser, s: ast.AnnAssign, name, shape, mem, loc):
    """``bar: barrier @ SHARED``: one split barrier per block; ``bar: barrier[k] @
    SHARED``: a ring of ``k`` (a constant, 1 to 32)."""
    if len(shape) > 1 or not mem.holds_barriers or s.value is not None:
        raise parser.err(s, "a split barrier is allocated alone or as a ring, in SHARED "
                         "memory", f"write `{name}: barrier @ SHARED` or `{name}: "
                         "barrier[4] @ SHARED`")
    if shape and not (isinstance(shape[0], Const) and 1 <= shape[0].val <= MAX_RING):
        raise parser.err(s, f"a barrier ring has a constant number of elements, 1 to "
                         f"{MAX_RING}", f"e.g. `{name}: barrier[4] @ SHARED`")
    if not parser.in_blocks:
        raise parser.err(s, "a split barrier belongs to a block: allocate it inside a "
                         "@ BLOCKS loop", "move it into the BLOCKS loop, at block level")
    parser.scope.bind(Sym(name, "barrier", BARRIER, shape, mem, loc), loc)
    return Alloc(name, BARRIER, shape, mem, loc)


def check_cluster_extent(parser, node, lo, hi) -> None:
    """``par(lo, hi) @ CLUSTERS``: constant bounds, 1 to ``MAX_CLUSTER`` iterations (the
    portable cluster size, docs/hopper.md (clusters))."""
    if not (isinstance(lo, Const) and isinstance(hi, Const)) or \
            not 1 <= hi.val - lo.val <= MAX_CLUSTER:
        raise parser.err(node, f"a CLUSTERS loop runs a constant number of blocks from 1 to "
                         f"{MAX_CLUSTER} (the portable cluster size)",
                         "write par(0, c) @ CLUSTERS with c a constant, e.g. par(0, 2)")
