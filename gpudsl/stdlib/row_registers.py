"""Rows held in registers, for the row kernels (``rms_norm``, ``sliced_softmax``):
each of the ``threads`` threads of a row's block loads its ``chunks`` vectors of
``vec`` consecutive entries once, with ``vec``-wide (128-bit for 4) loads, into a
block-level REGISTER array ``xr[t, c, v]`` (one row of it per thread), and every
later phase of the kernel reads the registers instead of the row.  Vector ``c`` of
thread ``t`` starts at entry ``vec * (threads * c + t)``: a warp's loads of one
chunk are contiguous (coalesced), and a vector is whole or absent because the kernel
asserts ``n % vec == 0``; the kernel also asserts ``n <= threads * chunks * vec``.

:func:`plan_row` picks the shape for a row length (None when the row does not fit
the register budget; the kernels then stream the row from memory in each phase);
the text helpers write the chunk loops, and :func:`vectorized` turns their copy loops
into vector copies (``vectorize``, which proves the alignment)."""
from __future__ import annotations

from dataclasses import dataclass

from ..errors import SchedulingError
from ..proc import Proc
from ..schedule import vectorize

ROW_FLOATS = 32  # entries of the row per thread: 32 registers (64 at most in total
#                  for 1024 threads; 256-thread blocks keep 3 blocks per SM)
MAX_THREADS = 1024
COPIES = ("vx", "vw", "vo")  # the copy loops made vector copies


@dataclass(frozen=True)
class RowShape:
    threads: int
    chunks: int
    vec: int

    @property
    def tag(self) -> str:
        return f"t{self.threads}_c{self.chunks}_v{self.vec}"


def plan_row(n: int, threads_cap: int = 256) -> RowShape | None:
    """The register layout for rows of ``n`` entries: 4-wide vectors when ``n % 4 ==
    0`` (else 2, else 1); up to ``threads_cap`` threads (a power of two, at least 32,
    no more than the row needs), more (up to 1024) when the row needs more than
    :data:`ROW_FLOATS` entries per thread; None past ``1024 * ROW_FLOATS`` entries."""
    vec = 4 if n % 4 == 0 else 2 if n % 2 == 0 else 1
    threads = 32
    while threads < threads_cap and threads * vec < n:
        threads *= 2
    while True:
        chunks = -(-n // (threads * vec))
        if chunks * vec <= ROW_FLOATS:
            return RowShape(threads, chunks, vec)
        if threads >= MAX_THREADS:
            return None
        threads *= 2


def asserts(rs: RowShape) -> str:
    vec = f"    assert n % {rs.vec} == 0\n" if rs.vec > 1 else ""
    return vec + f"    assert n <= {rs.threads * rs.chunks * rs.vec}\n"


def base(rs: RowShape) -> str:
    """The first entry of vector ``c`` of thread ``t``."""
    return f"{rs.vec} * ({rs.threads} * c + t)"


def _indent(text: str, indent: int) -> str:
    pad = "    " * indent
    return "".join(pad + ln + "\n" for ln in text.strip("\n").split("\n"))


def chunk_loop(rs: RowShape, body: str, indent: int) -> str:
    """``for c: if <vector c exists>: body`` (``{b}`` in ``body``: its first entry)."""
    b = base(rs)
    return _indent(f"for c in seq(0, {rs.chunks}, unroll=True):\n"
                   f"    if {b} < n:\n" + _indent(body.format(b=b), 2), indent)


def load_row(rs: RowShape, src: str) -> str:
    """Inside :func:`chunk_loop`: the vector's entries of ``src`` (e.g. ``x[i, {e}]``)
    into ``xr[t, c, :]``."""
    return (f"for vx in seq(0, {rs.vec}):\n"
            f"    xr[t, c, vx] = {src.format(e='{b} + vx')}\n")


def each(rs: RowShape, body: str, var: str = "v") -> str:
    """Inside :func:`chunk_loop`: ``body`` for each entry ``v`` of the vector."""
    return f"for {var} in seq(0, {rs.vec}):\n" + _indent(body, 1)


def vectorized(p: Proc, rs: RowShape) -> Proc:
    """The copy loops (``vx``, ``vw``, ``vo``) made ``vec``-wide vector copies."""
    if rs.vec == 1:
        return p
    for name in COPIES:
        try:
            loops = p.find_loop(name, many=True)
        except SchedulingError:  # a kernel without that copy
            continue
        for _ in range(len(loops)):
            p = vectorize(p, name, rs.vec)
    return p


__all__ = ["RowShape", "plan_row", "asserts", "chunk_loop", "load_row", "each", "vectorized",
           "ROW_FLOATS"]
