"""``complex_hadamard_product(a, b)``: the last axis has size 2 (real, imaginary); the
elementwise complex product, ``b`` broadcast like ``mul`` (docs/graphs.md; rotary
embeddings: ``[heads, hs/2, 2] * [1, hs/2, 2]``).

The readable algorithm (one proc per canonical broadcast pattern of the leading axes,
see ``shapes.py``), its default schedule
(:func:`gpudsl.stdlib.stream_schedule.schedule_stream`, over the innermost complex
axis; each thread computes both parts of one complex number) and the kernel choice."""
from __future__ import annotations

from functools import lru_cache

from ..proc import Proc
from .common import dims, loops, make_proc
from .halves import halve_text
from .shapes import Broadcast, broadcast_pattern, require
from .stream_schedule import THREADS_PER_BLOCK, schedule_stream


@lru_cache(maxsize=None)
def complex_mul(full: tuple[bool, ...], dt: str = "f32") -> Proc:
    """``out = a * b`` on complex numbers ``[..., 2]`` where leading axis k of b is
    full (``full[k]``) or broadcast.  ``dt`` f16/bf16: the parts read widened, each
    output part computed in f32 and rounded once."""
    rank = len(full)
    d = dims(rank)
    ashape = ", ".join(d + ["2"])
    bshape = ", ".join([d[k] if full[k] else "1" for k in range(rank)] + ["2"])
    ai = "".join(f"i{k}, " for k in range(rank))
    bi = "".join(f"i{k}, " if full[k] else "0, " for k in range(rank))
    key = "".join("f" if f else "b" for f in full)
    name = f"complex_mul_{key}" + ("" if dt == "f32" else f"_{dt}")
    sizes = ", ".join(f"{x}: size" for x in d)
    body = (f"out[{ai}0] = a[{ai}0] * b[{bi}0] - a[{ai}1] * b[{bi}1]\n"
            + "    " * (rank + 1) +
            f"out[{ai}1] = a[{ai}0] * b[{bi}1] + a[{ai}1] * b[{bi}0]")
    text = (f"def {name}({sizes}, a: f32[{ashape}], b: f32[{bshape}], "
            f"out: f32[{ashape}]):\n" + loops(rank, body) + "\n")
    return make_proc(name, halve_text(text, dt, ("a", "b"), ("out",)))


@lru_cache(maxsize=None)
def complex_mul_kernel(full: tuple[bool, ...], threads: int = THREADS_PER_BLOCK,
                       dt: str = "f32") -> Proc:
    rank = len(full)
    return schedule_stream(complex_mul(full, dt), rows=[f"i{k}" for k in range(rank - 1)],
                           inner=f"i{rank - 1}", operands=[], vec=1, threads=threads)


def plan_complex_mul(a_shape: tuple, b_shape: tuple, dt: str = "f32"):
    """(proc, canonical a shape, canonical b shape) for complex ``a * b``, shapes with
    the trailing axis of 2."""
    lead_a, lead_b = (1,) + tuple(a_shape[:-1]), (1,) + tuple(b_shape[:-1])
    bc: Broadcast = broadcast_pattern(lead_a, lead_b)
    if len(bc.dims) > 1 and bc.dims[0] == 1:  # the leading 1 added above, unmerged
        bc = Broadcast(bc.dims[1:], bc.full[1:])
    require(len(bc.dims) <= 3, "this broadcast pattern needs more than 3 merged axes")
    b_canon = tuple(d if f else 1 for d, f in zip(bc.dims, bc.full))
    return complex_mul_kernel(bc.full, dt=dt), bc.dims + (2,), b_canon + (2,)


__all__ = ["complex_mul", "complex_mul_kernel", "plan_complex_mul"]
