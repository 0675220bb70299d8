"""``sliced_softmax(x, prefix)``: along the last axis, the softmax of the first
``prefix`` entries, the entries after them unchanged (docs/graphs.md; HamKaas's
``SlicedSoftmaxNode``, the attention of one decoding step: ``prefix = pos + 1``).
``prefix`` is read from a one-element int64 tensor at run time; ``0 <= prefix <= n``
or the kernel writes a fault flag (one thread) that the host turns into an error.

The readable algorithm, the default kernel (one block per row, two block reductions
on warp collectives, the maximum then the sum of exponentials, see
:mod:`gpudsl.stdlib.block_reduce`) and the kernel choice.  Rows are the leading axes
merged: ``x`` is viewed as ``[r, n]``."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import make_proc
from .halves import halve_text, load, store
from .block_reduce import block_step, check_warps, warps
from .reduce import THREADS_PER_ROW, row_threads, strided
from .row_registers import RowShape, asserts, chunk_loop, each, load_row, plan_row, vectorized

_SIG = ("(r: size, n: size, x: f32[r, n], prefix: i64[1], out: f32[r, n], "
        "err: i32[1]):\n")


@lru_cache(maxsize=None)
def sliced_softmax_rows(dt: str = "f32") -> Proc:
    """The algorithm (as llama2.c's ``softmax(x, size)``): the maximum of the prefix
    for stability, the sum of exponentials, then each entry of the prefix divided by
    it; the rest copied.  ``x[i, 0]`` seeds the maximum: it is in every non-empty
    prefix and unused otherwise."""
    text = (
        "def sliced_softmax_rows" + _SIG +
        "    if prefix[0] < 0 or prefix[0] > n:\n"
        "        err[0] = 1\n"
        "    for i in seq(0, r):\n"
        "        m: f32\n"
        "        m = x[i, 0]\n"
        "        for j in seq(0, n):\n"
        "            if j < prefix[0]:\n"
        "                m = max(m, x[i, j])\n"
        "        s: f32\n"
        "        s = 0.0\n"
        "        for j in seq(0, n):\n"
        "            if j < prefix[0]:\n"
        "                s += exp(x[i, j] - m)\n"
        "        for j in seq(0, n):\n"
        "            out[i, j] = select(j < prefix[0], exp(x[i, j] - m) / s, x[i, j])\n")
    return make_proc("sliced_softmax", halve_text(text, dt, ("x",), ("out",)))


@lru_cache(maxsize=None)
def sliced_softmax_kernel(threads: int = THREADS_PER_ROW, dt: str = "f32") -> Proc:
    """One block per row, two block reductions of :mod:`gpudsl.stdlib.block_reduce`
    (warp reductions and one SHARED exchange each).  Phase 1: each thread's maximum
    over its strided entries of the prefix, a ``warp_max`` per warp into ``part``.
    Phase 2: every thread takes the row maximum from ``part`` into its register
    ``mx[t]``, sums ``exp(x - mx)`` over its entries, a ``warp_sum`` per warp into
    ``part2``.  Phase 3: every entry written, the prefix normalised by the row's sum,
    the rest copied.  Thread 0 of block 0 reports a prefix outside ``[0, n]``."""
    check_warps(threads)
    name = f"sliced_softmax_rows_t{threads}" + ("" if dt == "f32" else f"_{dt}")
    in_prefix = "{j} < prefix[0]"
    text = (
        f"def {name}" + _SIG +
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        part: f32[{warps(threads)}] @ SHARED\n"
        f"        part2: f32[{warps(threads)}] @ SHARED\n"
        f"        mx: f32[{threads}] @ REGISTER\n"
        f"        for t in par(0, {threads}) @ THREADS:\n"
        "            if i == 0 and t == 0 and (prefix[0] < 0 or prefix[0] > n):\n"
        "                err[0] = 1\n"
        "            acc: f32\n"
        "            acc = x[i, 0]\n"
        + strided(threads, "n", "acc = max(acc, x[i, {j}])", 3, guard=in_prefix)
        + block_step(threads, "max", "acc", "part", "m") +
        "            mx[t] = m\n"
        "            acc2: f32\n"
        "            acc2 = 0.0\n"
        + strided(threads, "n", "acc2 += exp(x[i, {j}] - mx[t])", 3, guard=in_prefix)
        + block_step(threads, "+", "acc2", "part2", "total")
        + strided(threads, "n", "out[i, {j}] = select({j} < prefix[0], "
                  "exp(x[i, {j}] - mx[t]) / total, x[i, {j}])", 3))
    # f16/bf16 rows: read widened, computed in f32, each output rounded once
    return make_proc("sliced_softmax", halve_text(text, dt, ("x",), ("out",)))


@lru_cache(maxsize=None)
def sliced_softmax_registers(rs: RowShape) -> Proc:
    """One block per row with the row in registers (:mod:`.row_registers`).
    Phase 1: each thread loads its vectors of x once (``vec``-wide loads, all issued
    before the first use) and takes the maximum of its entries in the prefix; block
    maximum (one barrier).  Phase 2: ``exp`` once per entry, of ``x - max`` in the
    prefix (of 0 past it, so that nothing overflows), kept in the registers in place of
    the prefix's entries and summed; block sum (the second barrier).  Phase 3: one
    reciprocal, every entry written from the registers (vector stores), the prefix
    scaled by it, the rest copied.  The prefix, clamped to ``[0, n]``, is read once
    into a 32-bit register ``lim[t]`` (the same comparisons as with ``prefix[0]`` for
    every entry of the row; ``n`` fits in 32 bits by the kernel's assert), so no
    comparison in the chunk loops is 64-bit.  Thread 0 of block 0 reports a prefix
    outside ``[0, n]``."""
    T = rs.threads
    name = f"sliced_softmax_rows_{rs.tag}"
    inp = "{b} + v < lim[t]"
    text = (
        f"def {name}" + _SIG + asserts(rs) +
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        part: f32[{warps(T)}] @ SHARED\n"
        f"        part2: f32[{warps(T)}] @ SHARED\n"
        f"        xr: f32[{T}, {rs.chunks}, {rs.vec}] @ REGISTER\n"
        f"        lim: i32[{T}] @ REGISTER\n"
        f"        for t in par(0, {T}) @ THREADS:\n"
        "            if i == 0 and t == 0 and (prefix[0] < 0 or prefix[0] > n):\n"
        "                err[0] = 1\n"
        "            lim[t] = i32(max(0, min(prefix[0], n)))\n"
        "            acc: f32\n"
        "            acc = x[i, 0]\n"
        + chunk_loop(rs, load_row(rs, "x[i, {e}]"), 3)
        + chunk_loop(rs, each(rs, f"if {inp}:\n"
                              "    acc = max(acc, xr[t, c, v])"), 3)
        + block_step(T, "max", "acc", "part", "m") +
        "            acc2: f32\n"
        "            acc2 = 0.0\n"
        + chunk_loop(rs, each(rs, "e: f32\n"
                              f"e = exp(select({inp}, xr[t, c, v] - m, 0.0))\n"
                              f"xr[t, c, v] = select({inp}, e, xr[t, c, v])\n"
                              f"acc2 += select({inp}, e, 0.0)"), 3)
        + block_step(T, "+", "acc2", "part2", "total") +
        "            inv: f32\n"
        "            inv = 1.0 / total\n"
        + chunk_loop(rs, f"o: f32[{rs.vec}]\n"
                     + each(rs, f"o[v] = select({inp}, xr[t, c, v] * inv, xr[t, c, v])") +
                     f"for vo in seq(0, {rs.vec}):\n"
                     "    out[i, {b} + vo] = o[vo]\n", 3))
    return vectorized(make_proc("sliced_softmax", text), rs)


def plan_sliced_softmax(n: int, dt: str = "f32") -> Proc:
    """The kernel for rows of ``n`` entries of type ``dt``: for f32 the row in
    registers when it fits (:func:`gpudsl.stdlib.row_registers.plan_row`), else (and
    for halves) the streaming kernel (32 to 256 threads, a power of two)."""
    rs = plan_row(n) if dt == "f32" else None
    if rs is not None:
        return sliced_softmax_registers(rs)
    return sliced_softmax_kernel(row_threads(n), dt)


@lru_cache(maxsize=None)
def softmax_kernel(threads: int, dt: str = "f32", causal: bool = False,
                   mdt: str | None = None) -> Proc:
    """``softmax(x / temperature + mask)`` along the rows of ``x`` (``gpudsl.ops.softmax``):
    one block per row, the streaming kernel's two block reductions (the maximum, then
    the sum of exponentials) on warp collectives.  ``mdt``: the dtype of an additive
    mask ``mask[mr, n]`` (row ``i`` adds row ``i % mr``: a mask broadcast over the
    leading axes), None for none.  ``causal``: row ``i`` is query ``q = i % m`` of an
    ``[m, n]`` score matrix and keeps the keys ``j <= q + n - m`` (``m <= n``; the
    others are 0).  Halves are read widened and each output rounded once."""
    check_warps(threads)
    name = (f"softmax_rows_t{threads}" + ("" if dt == "f32" else f"_{dt}")
            + ("_causal" if causal else "") + (f"_mask_{mdt}" if mdt else ""))
    z = f"{load('x[i, {j}]', dt)} / temperature"
    if mdt:
        z = f"({z} + {load('mask[i % mr, {j}]', mdt)})"
    keep = "{j} + m <= i % m + n" if causal else ""
    sig = (f"(r: size, n: size, {'m: size, ' if causal else ''}"
           f"{'mr: size, ' if mdt else ''}x: {dt}[r, n], temperature: f32, "
           f"{f'mask: {mdt}[mr, n], ' if mdt else ''}out: {dt}[r, n]):\n")
    text = (
        f"def {name}" + sig + ("    assert m <= n\n" if causal else "") +
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        part: f32[{warps(threads)}] @ SHARED\n"
        f"        part2: f32[{warps(threads)}] @ SHARED\n"
        f"        mx: f32[{threads}] @ REGISTER\n"
        f"        for t in par(0, {threads}) @ THREADS:\n"
        "            acc: f32\n"
        "            acc = -inf\n"
        + strided(threads, "n", f"acc = max(acc, {z})", 3, guard=keep)
        + block_step(threads, "max", "acc", "part", "top") +
        "            mx[t] = top\n"
        "            acc2: f32\n"
        "            acc2 = 0.0\n"
        + strided(threads, "n", f"acc2 += exp({z} - mx[t])", 3, guard=keep)
        + block_step(threads, "+", "acc2", "part2", "total")
        + strided(threads, "n", "out[i, {j}] = " + store(
            f"select({keep or 'True'}, exp({z} - mx[t]) / total, 0.0)", dt), 3))
    return make_proc("softmax", text)


def plan_softmax(n: int, dt: str = "f32", causal: bool = False,
                 mdt: str | None = None) -> Proc:
    """The kernel for rows of ``n`` entries: 32 to 256 threads (a power of two)."""
    return softmax_kernel(row_threads(n), dt, causal, mdt)


__all__ = ["sliced_softmax_rows", "sliced_softmax_kernel", "sliced_softmax_registers",
           "plan_sliced_softmax", "softmax_kernel", "plan_softmax"]
