"""The block reduction of the row kernels on warp collectives (docs/language.md (synchronization)): each warp
reduces its threads' values with one ``warp_sum`` / ``warp_max`` (a shuffle tree in
registers), lane 0 of each warp writes the warp's result to ``part[warp]`` in SHARED
memory, one barrier, then every warp reduces the ``threads / 32`` partial results
with one more warp collective.  One SHARED exchange and one barrier instead of the
``log2(threads)`` barriers of the SHARED tree (:func:`gpudsl.stdlib.reduce.tree`).

Like the tree it reassociates floating-point sums, so the kernels using it are their
own procs, proved by ``check()`` (whole warps, no lane-dependent condition around a
collective, no race on ``part``) and compared with numpy within a tolerance.

The text helpers below write the two halves; a kernel reads::

    for t in par(0, threads) @ THREADS:
        acc = ...                                # each thread's fold
        <warp_partial("+", "acc", "part")>       # part[t // 32] = warp_sum(acc)
    sync()
    for t in par(0, threads) @ THREADS:
        <block_total(threads, "+", "part", "total")>   # total = the whole block's sum
        ... total ...
"""
from __future__ import annotations

WARP = 32
_COLL = {"+": "warp_sum", "max": "warp_max"}


def check_warps(threads: int):
    """Threads per row for the warp reduction: a power of two, 32 to 1024."""
    if threads < WARP or threads > 1024 or threads & (threads - 1):
        raise ValueError(f"threads per row must be a power of two in 32..1024, not {threads}")


def warps(threads: int) -> int:
    """The SHARED slots of the exchange: one per warp."""
    return threads // WARP


def warp_partial(combine: str, acc: str, part: str, indent: int) -> str:
    """Inside the thread loop ``t``: the warp's reduction of ``acc`` into
    ``part[t // 32]`` (written by lane 0)."""
    pad = "    " * indent
    w = f"{acc}_w"
    return (f"{pad}{w}: f32\n"
            f"{pad}{w} = {_COLL[combine]}({acc})\n"
            f"{pad}if t % {WARP} == 0:\n"
            f"{pad}    {part}[t // {WARP}] = {w}\n")


def block_total(threads: int, combine: str, part: str, out: str, indent: int) -> str:
    """Inside a thread loop ``t`` after the barrier: ``out`` = the reduction of the
    warps' partial results (every warp computes it; lanes past the last warp
    contribute ``part[0]`` to a maximum, 0 to a sum)."""
    pad = "    " * indent
    v = f"{out}_p"
    identity = "0.0" if combine == "+" else f"{part}[0]"
    return (f"{pad}{v}: f32\n"
            f"{pad}{v} = {identity}\n"
            f"{pad}if t % {WARP} < {warps(threads)}:\n"
            f"{pad}    {v} = {part}[t % {WARP}]\n"
            f"{pad}{out}: f32\n"
            f"{pad}{out} = {_COLL[combine]}({v})\n")


def block_step(threads: int, combine: str, acc: str, part: str, out: str) -> str:
    """Inside the block loop's thread loop ``t`` (at indent 3): the block reduction of
    each thread's ``acc``, the warps' results through ``part``, one barrier; the text
    ends in a new thread loop ``t`` where ``out`` holds the block's result."""
    return (warp_partial(combine, acc, part, 3) +
            "        sync()\n"
            f"        for t in par(0, {threads}) @ THREADS:\n"
            + block_total(threads, combine, part, out, 3))


__all__ = ["WARP", "check_warps", "warps", "warp_partial", "block_total", "block_step"]
