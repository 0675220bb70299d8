"""Block-level reductions in SHARED memory: the strided fold the row-reduction nodes
(``rms_norm``, ``sliced_softmax``) share, and the SHARED tree they used before the
warp-collective block reduction (:mod:`gpudsl.stdlib.block_reduce`): one block per
row, each of ``threads`` threads folds a strided part of the row into ``part[t]`` in
SHARED memory, then a tree halves the live part at each step,
``log2(threads)`` steps separated by barriers, until ``part[0]`` holds the row's value.

Why these kernels are written as procs rather than derived from the algorithm by
primitives: the tree adds (or takes maxima) in another order than the sequential
loop, i.e. it *reassociates* floating-point sums.  No rewrite primitive claims that
as meaning-preserving (it is not, bit for bit), so the scheduled kernel is its own
proc: ``check()`` proves it race-free, barrier-uniform and in bounds, and the tests
compare it with the algorithm proc and numpy within a float tolerance.

The text helpers below build those procs' source, so that each kernel reads as
what it is: a strided fold, ``sync()``, the tree, ``sync()``, the use of ``part[0]``.
"""
from __future__ import annotations

THREADS_PER_ROW = 256  # H100 default: 8 warps per row, enough for rows of a few K


def row_threads(n: int) -> int:
    """The threads of a streaming row kernel for rows of ``n`` entries: as many as help
    (a power of two, 32 to ``THREADS_PER_ROW``), so short rows do not idle 8 warps."""
    threads = 32
    while threads < THREADS_PER_ROW and threads < n:
        threads *= 2
    return threads


def check_threads(threads: int):
    if threads < 2 or threads > 1024 or threads & (threads - 1):
        raise ValueError(f"threads per row must be a power of two in 2..1024, not {threads}")


def strided(threads: int, extent: str, body: str, indent: int, guard: str = "") -> str:
    """``for jo: if j < extent [and guard]: body`` where ``j = threads*jo + t``; ``body``
    uses ``{j}`` for the element index."""
    pad = "    " * indent
    j = f"{threads} * jo + t"
    cond = f"{j} < {extent}" + (f" and {guard.format(j=j)}" if guard else "")
    return (f"{pad}for jo in seq(0, ({extent} + {threads - 1}) // {threads}):\n"
            f"{pad}    if {cond}:\n"
            f"{pad}        {body.format(j=j)}\n")


def tree(threads: int, combine: str, indent: int) -> str:
    """The tree over ``part[0:threads]``: at step ``s`` threads ``t < h`` (``h =
    threads/2 >> s``) combine ``part[t]`` with ``part[t + h]``; a barrier after each
    step.  ``combine`` is ``"+"`` or ``"max"``.  Starts and ends after a barrier."""
    pad = "    " * indent
    half = threads // 2
    steps = half.bit_length()  # half = 2^(steps-1)
    h = f"({half} >> s)"
    rhs = (f"part[t] + part[t + {h}]" if combine == "+" else
           f"max(part[t], part[t + {h}])")
    return (f"{pad}for s in seq(0, {steps}):\n"
            f"{pad}    for t in par(0, {half}) @ THREADS:\n"
            f"{pad}        if t < {h}:\n"
            f"{pad}            part[t] = {rhs}\n"
            f"{pad}    sync()\n")


__all__ = ["THREADS_PER_ROW", "row_threads", "check_threads", "strided", "tree"]
