"""``rms_norm(x, w)``: ``w * x / sqrt(mean(x^2) + eps)`` over the last axis, ``eps``
1e-5 unless given (docs/graphs.md): the readable algorithm, the default kernel (one
block per row, the sum of squares by warp reductions and one SHARED exchange, see
:mod:`gpudsl.stdlib.block_reduce`) and the kernel choice.  Rows are the leading axes
merged: ``x`` is viewed as ``[r, n]``.  ``w`` may have another float dtype than ``x``
(PyTorch's mixed precision: a bfloat16 ``x`` with float32 weights): both are read
widened, computed in f32, and the output, of ``x``'s dtype, rounded once."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import make_proc
from .halves import load, store
from .block_reduce import block_step, check_warps, warps
from .reduce import THREADS_PER_ROW, row_threads, strided
from .row_registers import RowShape, asserts, chunk_loop, each, load_row, plan_row, vectorized

#: the epsilon of ``rms_norm`` when none is given: the node's declaration, its reference,
#: ``gpudsl.ops.rms_norm``, graphs, ``gpudsl bench`` and ``gpudsl.torch`` read it here
DEFAULT_EPS = 1e-5
EPS = repr(DEFAULT_EPS).replace("e-0", "e-")  # as the procs' source writes it: "1e-5"


def eps_text(eps: float) -> str:
    """``eps`` as a literal of the proc (the default as it always read)."""
    return EPS if eps == DEFAULT_EPS else repr(float(eps))


def _tag(dt: str, wdt: str, eps: float) -> str:
    """The kernel name's suffix for the precision, the weights' and ``eps``."""
    tag = "" if dt == "f32" else f"_{dt}"
    if wdt != dt:
        tag += f"_w{wdt}"
    if eps != DEFAULT_EPS:
        tag += "_eps" + repr(float(eps)).replace(".", "p").replace("-", "m").replace("+", "")
    return tag


def _params(dt: str, wdt: str | None = None) -> str:
    return f"r: size, n: size, x: {dt}[r, n], w: {wdt or dt}[n], out: {dt}[r, n]"


def _sq(j: str, dt: str) -> str:
    return f"{load(f'x[i, {j}]', dt)} * {load(f'x[i, {j}]', dt)}"


def _scaled(j: str, dt: str, wdt: str | None = None) -> str:
    """``out[i, j]``: in f32, rounded once to ``dt``."""
    value = store(f"{load(f'w[{j}]', wdt or dt)} * ({load(f'x[i, {j}]', dt)} * scale)", dt)
    return f"out[i, {j}] = {value}"


@lru_cache(maxsize=None)
def rms_norm_rows(dt: str = "f32", wdt: str | None = None, eps: float = DEFAULT_EPS) -> Proc:
    """The algorithm: for each row, the sum of squares, then the scaled row (f16/bf16
    rows: computed in f32, each output rounded once)."""
    text = (
        f"def rms_norm_rows({_params(dt, wdt)}):\n"
        "    for i in seq(0, r):\n"
        "        ss: f32\n"
        "        ss = 0.0\n"
        "        for j in seq(0, n):\n"
        f"            ss += {_sq('j', dt)}\n"
        "        scale: f32\n"
        f"        scale = 1.0 / sqrt(ss / f32(n) + {eps_text(eps)})\n"
        "        for j in seq(0, n):\n"
        f"            {_scaled('j', dt, wdt)}\n")
    return make_proc("rms_norm", text)


@lru_cache(maxsize=None)
def rms_norm_kernel(threads: int = THREADS_PER_ROW, dt: str = "f32", wdt: str | None = None,
                    eps: float = DEFAULT_EPS) -> Proc:
    """One block per row: each thread sums the squares of its strided elements; the
    block reduction of :mod:`gpudsl.stdlib.block_reduce` (a ``warp_sum`` per warp, one
    SHARED exchange, a ``warp_sum`` of the warps' sums) gives every thread the row's
    sum of squares; every thread then scales its elements by
    ``1 / sqrt(ss / n + eps)``."""
    check_warps(threads)
    name = f"rms_norm_rows_t{threads}" + _tag(dt, wdt or dt, eps)
    text = (
        f"def {name}({_params(dt, wdt)}):\n"
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        part: f32[{warps(threads)}] @ SHARED\n"
        f"        for t in par(0, {threads}) @ THREADS:\n"
        "            acc: f32\n"
        "            acc = 0.0\n"
        + strided(threads, "n", "acc += " + _sq("{j}", dt), 3)
        + block_step(threads, "+", "acc", "part", "ss") +
        "            scale: f32\n"
        f"            scale = 1.0 / sqrt(ss / f32(n) + {eps_text(eps)})\n"
        + strided(threads, "n", _scaled("{j}", dt, wdt), 3))
    return make_proc("rms_norm", text)


@lru_cache(maxsize=None)
def rms_norm_registers(rs: RowShape, eps: float = DEFAULT_EPS) -> Proc:
    """One block per row with the row in registers (:mod:`.row_registers`): each
    thread loads its vectors of x once (``vec``-wide loads, all issued before the first
    use) and sums their squares;
    the block reduction (one barrier) gives the sum of squares; one reciprocal square
    root; each thread scales its vectors from the registers, loads w and stores out
    with vector accesses.  x is read once from memory."""
    T = rs.threads
    name = f"rms_norm_rows_{rs.tag}" + _tag("f32", "f32", eps)
    text = (
        f"def {name}(r: size, n: size, x: f32[r, n], w: f32[n], out: f32[r, n]):\n"
        + asserts(rs) +
        "    for i in par(0, r) @ BLOCKS:\n"
        f"        part: f32[{warps(T)}] @ SHARED\n"
        f"        xr: f32[{T}, {rs.chunks}, {rs.vec}] @ REGISTER\n"
        f"        for t in par(0, {T}) @ THREADS:\n"
        "            acc: f32\n"
        "            acc = 0.0\n"
        + chunk_loop(rs, load_row(rs, "x[i, {e}]"), 3)
        + chunk_loop(rs, each(rs, "acc += xr[t, c, v] * xr[t, c, v]"), 3)
        + block_step(T, "+", "acc", "part", "ss") +
        "            scale: f32\n"
        f"            scale = 1.0 / sqrt(ss / f32(n) + {eps_text(eps)})\n"
        + chunk_loop(rs, f"wr: f32[{rs.vec}]\n"
                     f"for vw in seq(0, {rs.vec}):\n"
                     "    wr[vw] = w[{b} + vw]\n"
                     f"o: f32[{rs.vec}]\n"
                     + each(rs, "o[v] = wr[v] * (xr[t, c, v] * scale)") +
                     f"for vo in seq(0, {rs.vec}):\n"
                     "    out[i, {b} + vo] = o[vo]\n", 3))
    return vectorized(make_proc("rms_norm", text), rs)


def plan_rms_norm(n: int, dt: str = "f32", wdt: str | None = None,
                  eps: float = DEFAULT_EPS) -> Proc:
    """The kernel for rows of ``n`` elements of type ``dt`` (weights of type ``wdt``,
    ``dt`` by default): for f32 the row in registers when it fits
    (:func:`gpudsl.stdlib.row_registers.plan_row`: up to 32 entries per thread, 1024
    threads), else (and for halves or mixed weights) the streaming kernel with as many
    threads as help (a power of two, 32 to 256), so short rows do not idle 8 warps."""
    wdt = None if wdt in (None, dt) else wdt
    more = () if wdt is None and eps == DEFAULT_EPS else (float(eps),)  # one cache key
    rs = plan_row(n) if dt == "f32" and wdt is None else None
    if rs is not None:
        return rms_norm_registers(rs, *more)
    return rms_norm_kernel(row_threads(n), dt, *((wdt,) + more if more else ()))


__all__ = ["rms_norm_rows", "rms_norm_kernel", "rms_norm_registers", "plan_rms_norm", "EPS",
           "DEFAULT_EPS"]
