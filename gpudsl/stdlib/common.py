"""What the node families of the standard library share: procs from source text,
and the split "the tiled kernel on the largest multiple of the tile, edge kernels
on the rest" (:func:`tiles_and_edges`)."""
from __future__ import annotations

from typing import Callable

from ..ir.printer import print_expr
from ..proc import Proc, proc_from_source
from ..schedule import cut_loop, fission, simplify


def make_proc(name: str, text: str) -> Proc:
    """The proc ``text`` defines, in the namespace of ``from gpudsl import *``; its
    file name is ``<gpudsl.stdlib.NAME>`` so that ``print(p)`` and errors show it."""
    import gpudsl

    from . import reductions

    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    ns.update({k: getattr(reductions, k) for k in reductions.__all__})  # callable procs
    return proc_from_source(text, ns, file=f"<gpudsl.stdlib.{name}>")


def dims(rank: int) -> list[str]:
    return [f"d{i}" for i in range(rank)]


def loops(rank: int, body: str) -> str:
    lines = []
    for i in range(rank):
        lines.append("    " * (i + 1) + f"for i{i} in seq(0, d{i}):")
    lines.append("    " * (rank + 1) + body)
    return "\n".join(lines)


def vec_assert(name: str, vec: int) -> str:
    return f"    assert {name} % {vec} == 0\n" if vec > 1 else ""


def extent(p: Proc, loop: str) -> str:
    """The upper bound of ``loop``, as text."""
    return print_expr(p.find_loop(loop).node().hi)


def tiles_and_edges(p: Proc, outer: str, outer_tile: int, inner: str, inner_tile: int,
                    batched: bool, tiled: Callable[[Proc], Proc],
                    edges: Callable[[Proc], Proc]) -> Proc:
    """Any extent of the ``outer`` x ``inner`` loop nest (optionally under one batch
    loop): ``cut_loop`` splits it into three nests, each its own kernel, in this
    order: the largest multiples ``[0, O0) x [0, I0)`` of the tiles, scheduled by
    ``tiled``; then ``[0, O0) x [I0, I)`` and ``[O0, O) x [0, I)``, the edges, which
    ``edges`` schedules (the first loops still named ``outer``/``inner`` after
    ``tiled`` are theirs).  An empty part launches nothing."""
    p = cut_loop(p, outer, f"{outer_tile} * ({extent(p, outer)} // {outer_tile})")
    if batched:
        p = fission(p, p.find_loop(outer).after())
    p = cut_loop(p, inner, f"{inner_tile} * ({extent(p, inner)} // {inner_tile})")
    p = fission(p, p.find_loop(inner).after(), n_lifts=2 if batched else 1)
    p = tiled(p)
    p = edges(p)
    return simplify(p)


__all__ = ["make_proc", "dims", "loops", "vec_assert", "extent", "tiles_and_edges"]
