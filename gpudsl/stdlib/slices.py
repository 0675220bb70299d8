"""The row-slice nodes: ``slice`` (rows ``begin..end`` of a tensor) and
``replace_slice`` (``x[begin:end] = r`` with bounds read at run time): their readable
algorithms as procs, their default schedule
(:func:`gpudsl.stdlib.stream_schedule.schedule_stream`) and the kernel choice."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import make_proc, vec_assert
from .stream_schedule import THREADS_PER_BLOCK, pick_vec, schedule_stream

@lru_cache(maxsize=None)
def slice_rows(vec: int = 1) -> Proc:
    """Rows ``begin..begin+m-1`` of a [n, c] tensor (trailing axes merged into c)."""
    name = "slice_rows" + (f"_v{vec}" if vec > 1 else "")
    text = (
        f"def {name}(n: size, c: size, m: size, begin: index, x: f32[n, c], "
        "out: f32[m, c]):\n"
        "    assert begin >= 0\n"
        "    assert begin + m <= n\n" + vec_assert("c", vec) +
        "    for i in seq(0, m):\n"
        "        for j in seq(0, c):\n"
        "            out[i, j] = x[begin + i, j]\n")
    return make_proc(name, text)


@lru_cache(maxsize=None)
def replace_slice_rows(vec: int = 1, dt: str = "f32") -> Proc:
    """``x[begin:end] = r`` along the first axis, with ``begin`` and ``end`` read
    from one-element int64 tensors at run time.  Out-of-range or mismatched
    bounds write nothing; one thread records the fault in ``err`` for the host.
    ``dt``: the tensors' type (a copy: f16/bf16 copied as they are)."""
    name = "replace_slice_rows" + (f"_v{vec}" if vec > 1 else "") + \
        ("" if dt == "f32" else f"_{dt}")
    text = (
        f"def {name}(n: size, c: size, m: size, x: {dt}[n, c], r: {dt}[m, c], "
        "begin: i64[1], end: i64[1], err: i32[1]):\n" + vec_assert("c", vec) +
        "    for i in seq(0, m):\n"
        "        for j in seq(0, c):\n"
        # begin <= end first: end - begin is i64 arithmetic, which wraps (in C and in
        # check()), so with a very negative end it could equal m while begin + i >= n
        "            if begin[0] >= 0 and end[0] <= n and begin[0] <= end[0] and "
        "end[0] - begin[0] == m:\n"
        "                x[begin[0] + i, j] = r[i, j]\n"
        "            elif i == 0 and j == 0:\n"
        "                err[0] = 1\n")
    return make_proc(name, text)


@lru_cache(maxsize=None)
def slice_kernel(vec: int, threads: int = THREADS_PER_BLOCK):
    p = slice_rows(vec)
    return schedule_stream(p, rows=["i"], inner="j",
                           operands=[("x", "begin + i, "), ("out", "i, ")] if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_slice(c: int):
    return slice_kernel(pick_vec(c))


@lru_cache(maxsize=None)
def replace_slice_kernel(vec: int, threads: int = THREADS_PER_BLOCK, dt: str = "f32"):
    p = replace_slice_rows(vec, dt)
    # The write is guarded by a data-dependent condition, so only r is staged.
    return schedule_stream(p, rows=["i"], inner="j",
                           operands=[("r", "i, ")] if vec > 1 else [],
                           vec=vec, threads=threads)


def plan_replace_slice(c: int, dt: str = "f32"):
    """The kernel for rows of ``c`` elements of type ``dt`` (vector copies of up to
    128 bits: 4 floats or 8 halves)."""
    from .pointwise import half_widths

    return replace_slice_kernel(pick_vec(c, half_widths(dt)), dt=dt)


__all__ = ["slice_rows", "replace_slice_rows", "slice_kernel", "replace_slice_kernel",
           "plan_slice", "plan_replace_slice"]
