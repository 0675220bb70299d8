"""``rms_norm(x, w)``: ``w * x / sqrt(mean(x^2) + 1e-5)`` over the last axis (SPEC
section 5): the readable algorithm, the default kernel (one block per row, a SHARED
tree reduction of the sum of squares, see :mod:`gpudsl.stdlib.reduce`) and the kernel
choice.  Rows are the leading axes merged: ``x`` is viewed as ``[r, n]``."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import make_proc
from .reduce import THREADS_PER_ROW, check_threads, strided, tree

EPS = "1e-5"


@lru_cache(maxsize=None)
def rms_norm_rows() -> Proc:
    """The algorithm: for each row, the sum of squares, then the scaled row."""
    text = (
        "def rms_norm_rows(r: size, n: size, x: f32[r, n], w: f32[n], out: f32[r, n]):\n"
        "    for i in seq(0, r):\n"
        "        ss: f32\n"
        "        ss = 0.0\n"
        "        for j in seq(0, n):\n"
        "            ss += x[i, j] * x[i, j]\n"
        "        scale: f32\n"
        f"        scale = 1.0 / sqrt(ss / f32(n) + {EPS})\n"
        "        for j in seq(0, n):\n"
        "            out[i, j] = w[j] * (x[i, j] * scale)\n")
    return make_proc("rms_norm", text)


@lru_cache(maxsize=None)
def rms_norm_kernel(threads: int = THREADS_PER_ROW) -> Proc:
    """One block per row: each thread sums the squares of its strided elements into
    ``part[t]``; the tree adds the parts; every thread then scales its elements by
    ``1 / sqrt(part[0] / n + eps)`` (all threads read the same ``part[0]`` after a
    barrier, no write in that phase)."""
    check_threads(threads)
    name = f"rms_norm_rows_t{threads}"
    text = (
        f"def {name}(r: size, n: size, x: f32[r, n], w: f32[n], out: f32[r, n]):\n"
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        part: f32[{threads}] @ SHARED\n"
        f"        for t in par(0, {threads}) @ THREADS:\n"
        "            acc: f32\n"
        "            acc = 0.0\n"
        + strided(threads, "n", "acc += x[i, {j}] * x[i, {j}]", 3) +
        "            part[t] = acc\n"
        "        sync()\n"
        + tree(threads, "+", 2) +
        f"        for t in par(0, {threads}) @ THREADS:\n"
        "            scale: f32\n"
        f"            scale = 1.0 / sqrt(part[0] / f32(n) + {EPS})\n"
        + strided(threads, "n", "out[i, {j}] = w[{j}] * (x[i, {j}] * scale)", 3))
    return make_proc("rms_norm", text)


def plan_rms_norm(n: int) -> Proc:
    """The kernel for rows of ``n`` elements: as many threads as help (a power of
    two, 32 to 256), so short rows do not idle 8 warps."""
    threads = 32
    while threads < THREADS_PER_ROW and threads < n:
        threads *= 2
    return rms_norm_kernel(threads)


__all__ = ["rms_norm_rows", "rms_norm_kernel", "plan_rms_norm", "EPS"]
