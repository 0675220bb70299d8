"""Schedules for the bandwidth-bound nodes: elementwise ops, slice and
replace_slice.

All of them are loop nests ``for rows...: for j in seq(0, d): body(j)`` whose
innermost loop walks contiguous memory.  The schedule

1. divides ``j`` by the vector width (a proved, "perfect" divide: the
   algorithm variant states ``d % vec == 0``) and then by the threads per
   block (with a guard for the last block);
2. stages each contiguous operand's ``vec`` elements in REGISTER and turns
   the copies into float2/float4 accesses with ``vectorize``;
3. maps the row loops and the chunk loop to BLOCKS (the chunk loop to
   blockIdx.x; row loops beyond 65535 blocks are grid-stride loops in the
   generated code) and the thread loop to THREADS.
"""
from __future__ import annotations

from ..ir.nodes import Assign, Const, For, Read
from ..ir.types import BLOCKS, REGISTER, THREADS
from ..schedule import divide_loop, parallelize_loop, stage_mem, vectorize
from ..schedule.cursors import Cursor

THREADS_PER_BLOCK = 256  # H100 default: 256 threads x float4 = 4 KB per block step

def _find_loops(p, pred) -> list[Cursor]:
    """Cursors to every loop of ``p`` satisfying ``pred`` (pre-order)."""
    out: list[Cursor] = []

    def visit(block, base):
        for i, s in enumerate(block):
            addr = base + (i,)
            if isinstance(s, For) and pred(s):
                out.append(Cursor(p, "stmt", addr))
            for field in ("body", "orelse"):
                sub = getattr(s, field, None)
                if isinstance(sub, tuple):
                    visit(sub, addr + (field,))

    visit(p.ir.body, ())
    return out


def _is_copy_of(names: set[str], vec: int):
    def pred(s: For) -> bool:
        if len(s.body) != 1 or not isinstance(s.body[0], Assign):
            return False
        st = s.body[0]
        return isinstance(s.hi, Const) and s.hi.val == vec and isinstance(st.rhs, Read) \
            and (st.name in names or st.rhs.name in names)
    return pred


def schedule_stream(p, *, rows: list[str], inner: str, operands: list[tuple[str, str]],
                    vec: int = 4, threads: int = 256):
    """Derive a streaming kernel from an algorithm proc.

    ``rows``: the loops outside ``inner`` (outermost first); ``inner``: the
    contiguous loop; ``operands``: ``(array, row_index_prefix)`` for every
    array accessed contiguously along ``inner`` (reads and the written output),
    e.g. ``("a", "i0, ")`` for ``a[i0, i1]``, with ``vec > 1`` only.
    """
    if vec > 1:
        p = divide_loop(p, inner, vec, ["jc", "v"], tail="perfect")
        p = divide_loop(p, "jc", threads, ["jb", "t"], tail="guard")
        v = p.find_loop("v")
        base = f"{vec * threads} * jb + {vec} * t"
        staged = set()
        for k, (arr, prefix) in enumerate(operands):
            name = f"{arr}_r"
            p = stage_mem(p, p.forward(v), f"{arr}[{prefix}{base}:{base} + {vec}]", name,
                          REGISTER)
            staged.add(name)
        for c in _find_loops(p, _is_copy_of(staged, vec)):
            p = vectorize(p, p.forward(c), vec)
    else:
        p = divide_loop(p, inner, threads, ["jb", "t"], tail="guard")
    for r in rows:
        p = parallelize_loop(p, r, BLOCKS)
    p = parallelize_loop(p, "jb", BLOCKS)
    p = parallelize_loop(p, "t", THREADS)
    return p


def pick_vec(extent: int, widths=(4, 2)) -> int:
    for w in widths:
        if extent % w == 0:
            return w
    return 1


__all__ = ["schedule_stream", "pick_vec"]
