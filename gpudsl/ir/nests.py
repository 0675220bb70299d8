"""The one thread-nest mapping (docs/language.md (meaning)): directly nested ``@ THREADS`` (or
``@ BLOCKS``) loops map to the ``z/y/x`` dimensions of ``threadIdx`` (``blockIdx``),
innermost to ``x``; the block extent in a dimension is the largest ``hi`` among the
kernel's thread loops of that dimension.

Code generation uses :func:`direct_nest` and :func:`nest_dims`; the interpreter's
race detector uses :func:`block_shape` (how many threads a block has and how many
thread dimensions: a block-level ``REGISTER`` array has one leading dimension per
thread dimension)."""
from __future__ import annotations

from .nodes import Call, Expr, For, If, Read, Stmt, Var
from .types import THREADS
from .visitor import substitute, walk

DIMS = ("x", "y", "z")


def direct_nest(f: For) -> list[For]:
    """The loops directly nested in ``f`` with ``f``'s mapping, ``f`` first (outer
    first): each is the only statement of the one before."""
    chain = [f]
    while (len(chain[-1].body) == 1 and isinstance(chain[-1].body[0], For)
           and chain[-1].body[0].mapping == f.mapping):
        chain.append(chain[-1].body[0])
    return chain


def nest_dims(n: int) -> tuple[str, ...]:
    """The dimensions of a nest of ``n`` (at most 3) loops, outer first: the
    innermost loop is ``x``."""
    return ("z", "y", "x")[3 - n:]


def nest_dim(inner: int) -> int:
    """The dimension (0 = x, 1 = y, 2 = z) of a ``@ THREADS`` loop with ``inner``
    loops of its nest directly below it: the innermost is x (as :func:`nest_dims`);
    in a nest deeper than 3 (a mapping error, reported by check()) the outer loops
    share z.  check()'s collector (gpudsl.analysis.proc_effects) numbers its loops with
    it and finds nests with :func:`direct_nest`."""
    return min(inner, 2)


def block_units(chain: list[For]) -> list[tuple[For, ...]]:
    """The BLOCKS nest ``chain`` (outer first) as units of one grid dimension each, in
    the order of :func:`nest_dims` (the last takes ``x``): a grouped pair ``(outer,
    inner)`` (``par(lo, hi, group=G)`` around a BLOCKS loop, ``set_block_order``) shares
    ``blockIdx.x`` (the product of its extents, below 2**31) and is moved last; the
    other loops keep their order.  Code generation launches this grid and check()
    tests it (a grouped loop followed by another grouped one is refused by codegen)."""
    units, i = [], 0
    while i < len(chain):
        if chain[i].group and i + 1 < len(chain):
            units.append((chain[i], chain[i + 1]))
            i += 2
        else:
            units.append((chain[i],))
            i += 1
    return [u for u in units if len(u) == 1] + [u for u in units if len(u) == 2]


def thread_nests(body: tuple[Stmt, ...]) -> list[list[Expr]]:
    """The ``hi`` bounds of every maximal nest of thread loops in ``body``
    (outermost first), seen through ``seq`` loops, ``if``s and calls (callee
    parameters replaced by the call's arguments).  A thread loop inside a thread
    loop extends the nest, as the interpreter's thread stack does."""
    out: list[list[Expr]] = []
    _collect(body, [], out, {})
    return out


def _collect(body, nest, out, env) -> bool:
    """Appends the maximal nests under ``body``; True if there was a thread loop."""
    found = False
    for s in body:
        if isinstance(s, For):
            if s.mapping == THREADS:
                found = True
                mine = nest + [substitute(s.hi, env) if env else s.hi]
                if not _collect(s.body, mine, out, env):
                    out.append(mine)
            else:
                found |= _collect(s.body, nest, out, env)
        elif isinstance(s, If):
            found |= _collect(s.body, nest, out, env)
            found |= _collect(s.orelse, nest, out, env)
        elif isinstance(s, Call):
            cenv = {}
            for p, a in zip(s.proc.params, s.args):
                if p.is_control:
                    cenv[p.name] = substitute(a, env) if env else a
            found |= _collect(s.proc.body, nest, out, cenv)
    return found


def block_shape(body: tuple[Stmt, ...], known: set[str]):
    """``(dims, depth)``: for each of x, y, z the bound expressions whose maximum
    is the block's extent (only those computable from ``known`` names and
    without memory reads), and the deepest thread nest."""
    nests = thread_nests(body)
    depth = max((len(n) for n in nests), default=0)
    dims: list[list[Expr]] = [[], [], []]
    for n in nests:
        inner = n[-3:]
        for hi, d in zip(inner, nest_dims(len(inner))):
            if _computable(hi, known):
                dims[DIMS.index(d)].append(hi)
    return dims, depth


def _computable(e: Expr, known: set[str]) -> bool:
    for n in walk(e):
        if isinstance(n, Read):
            return False
        if isinstance(n, Var) and n.name not in known:
            return False
    return True


__all__ = ["DIMS", "direct_nest", "nest_dims", "block_units", "thread_nests", "block_shape"]
