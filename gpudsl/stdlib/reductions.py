"""One-line block reductions for users' kernels (``from gpudsl.stdlib import
block_sum``): procs called at block level, between thread loops, on one value per
thread held in a ``REGISTER`` array indexed by the thread:

```
    for r in par(0, rows) @ BLOCKS:
        part: f32[256] @ REGISTER
        total: f32[256] @ REGISTER
        for t in par(0, 256) @ THREADS:
            part[t] = ...                       # each thread's value
        block_sum(256, part, total)             # total[t]: the block's sum, every t
        for t in par(0, 256) @ THREADS:
            ... total[t] ...
```

A call means its body (``check()`` proves it inlined, code generation inlines it), which
is the standard library's warp-shuffle form (``gpudsl.stdlib.block_reduce``): a
``warp_sum`` / ``warp_max`` / ``warp_min`` per warp, lane 0 of each warp writes the
warp's result to ``SHARED``, one ``sync()``, then every warp reduces the warps' results
with one more collective.  The thread count ``n`` is a multiple of 32, at most 1024
(asserted); the caller's thread loop is ``par(0, n) @ THREADS``.  Floating-point sums
are added in the shuffle butterfly's order (the interpreter, the emulator and the GPU
agree bit for bit), not in index order.

``block_argmax(n, v, i, best_v, best_i)``: the largest value and its index (the
smallest index among equal values; NaN above every number, as ``numpy.argmax``), by
``shfl_xor`` steps on (value, index) pairs.  ``reduction(kind, T)`` gives the proc of
another dtype (``f64``, ``i32``, ``i64``; warp collectives take these and ``f32``).

A call in a loop needs a ``sync()`` before the next call: the next call's exchange
overwrites the ``SHARED`` slots this one reads (``check()`` reports the race otherwise).
"""
from __future__ import annotations

from functools import lru_cache

from ..language import REGISTER, SHARED, THREADS, f32, i64, par, seq, shfl_xor, size, sync  # noqa: F401
from ..proc import Proc, proc, proc_from_source
from ..schedule import rename

KINDS = ("sum", "max", "min")


# one block reduction: each warp reduces its values, its lane 0 stores the result in
# ``part``; then every warp reduces ``part`` (a lane past the warps' count takes the
# identity: 0 for a sum, ``part[0]`` for max and min, which any lane may repeat)
_BLOCK = """@proc
def block_{kind}(n: size, v: [{T}][n] @ REGISTER, out: [{T}][n] @ REGISTER):
    assert n % 32 == 0 and n <= 1024
    part: {T}[32] @ SHARED
    for t in par(0, n) @ THREADS:
        w: {T} @ REGISTER
        w = warp_{kind}(v[t])
        if t % 32 == 0:
            part[t // 32] = w
    sync()
    for t in par(0, n) @ THREADS:
        p: {T} @ REGISTER
        p = {identity}
        if t % 32 < n // 32:
            p = part[t % 32]
        out[t] = warp_{kind}(p)
"""


def _block(kind: str, T) -> Proc:
    import gpudsl

    identity = f"{T.name}(0)" if kind == "sum" else "part[0]"
    text = _BLOCK.format(kind=kind, T=T.name, identity=identity)
    ns = {k: getattr(gpudsl, k) for k in gpudsl.__all__}
    return proc_from_source(text, ns, file=f"<gpudsl.stdlib.block_{kind}>")


@lru_cache(maxsize=None)
def reduction(kind: str, T=f32) -> Proc:
    """The block reduction ``kind`` (``"sum"``, ``"max"``, ``"min"``) of values of type
    ``T`` (``f32``, ``f64``, ``i32``, ``i64``): ``block_sum`` (f32) or
    ``block_sum_f64``..., called ``NAME(n, v, out)``."""
    if kind not in KINDS:
        raise ValueError(f"kind must be one of {KINDS}, not {kind!r}")
    p = _block(kind, T)
    return p if T == f32 else rename(p, f"block_{kind}_{T.name}")


@proc
def block_argmax(n: size, v: [f32][n] @ REGISTER, i: [i64][n] @ REGISTER,
                 best_v: [f32][n] @ REGISTER, best_i: [i64][n] @ REGISTER):
    assert n % 32 == 0 and n <= 1024
    part_v: f32[32] @ SHARED
    part_i: i64[32] @ SHARED
    for t in par(0, n) @ THREADS:
        bv: f32 @ REGISTER
        bi: i64 @ REGISTER
        bv = v[t]
        bi = i[t]
        for s in seq(0, 5):
            ov: f32 @ REGISTER
            oi: i64 @ REGISTER
            ov = shfl_xor(bv, 16 >> s)
            oi = shfl_xor(bi, 16 >> s)
            if ov > bv or (ov == bv and oi < bi) or (ov != ov and (bv == bv or oi < bi)):
                bv = ov
                bi = oi
        if t % 32 == 0:
            part_v[t // 32] = bv
            part_i[t // 32] = bi
    sync()
    for t in par(0, n) @ THREADS:
        cv: f32 @ REGISTER
        ci: i64 @ REGISTER
        cv = part_v[0]
        ci = part_i[0]
        if t % 32 < n // 32:
            cv = part_v[t % 32]
            ci = part_i[t % 32]
        for s in seq(0, 5):
            ov: f32 @ REGISTER
            oi: i64 @ REGISTER
            ov = shfl_xor(cv, 16 >> s)
            oi = shfl_xor(ci, 16 >> s)
            if ov > cv or (ov == cv and oi < ci) or (ov != ov and (cv == cv or oi < ci)):
                cv = ov
                ci = oi
        best_v[t] = cv
        best_i[t] = ci


block_sum = reduction("sum")
block_max = reduction("max")
block_min = reduction("min")

__all__ = ["block_sum", "block_max", "block_min", "block_argmax", "reduction", "KINDS"]
