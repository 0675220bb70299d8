"""The ``warp`` family of the differential test: kernels with warp collectives
(docs/language.md (synchronization)): shuffles, votes and warp reductions on small integer values (exact in
any order), in thread loops of 32 or 64 threads, butterflies in ``seq`` loops, a
SHARED exchange between warps, and now and then a lane-dependent ``if`` (check()
refuses those; the interpreter faults the same way before and after a rewrite)."""
from __future__ import annotations

import random

COLLS = ["shfl(v, (t + 3) % 32)", "shfl(v, 0)", "shfl_xor(v, 5)", "shfl_down(v, 2)",
         "shfl_up(v, 1)", "warp_sum(v)", "warp_max(v)", "warp_min(v)",
         "select(any_lanes(v > 2.0), v, 0.0)", "select(all_lanes(v > 0.0), 1.0, v)",
         "f32(ballot(v > 1.0) % 7)"]


def warp_program(r: random.Random, name: str):
    from .procgen import Program, pick_sizes

    T = r.choice([32, 64])
    lines = []

    def emit(d, t):
        lines.append("    " * d + t)

    emit(1, "for b in par(0, n) @ BLOCKS:")
    emit(2, f"s: f32[{T}] @ SHARED")
    emit(2, f"for t in par(0, {T}) @ THREADS:")
    emit(3, "v: f32")
    emit(3, r.choice(["v = x[b, t]", "v = x[b, t] + a", f"v = x[b, {T - 1} - t]"]))
    if r.random() < 0.4:
        k = r.choice([2, 3])
        emit(3, f"for k in seq(0, {k}):")
        emit(4, r.choice(["v += shfl_xor(v, 1 << k)", "v = v + shfl_down(v, k + 1)",
                          "v = max(v, shfl_up(v, 1 << k))"]))
    guard = r.random() < 0.15
    if guard:
        emit(3, r.choice(["if t % 2 == 0:", "if t < 16:", "if b == 0:", "if n > 1:"]))
    emit(3 + guard, f"y[b, t] = {r.choice(COLLS)}")
    if r.random() < 0.6:
        emit(3, "s[t] = v")
        emit(2, "sync()")
        emit(2, f"for t2 in par(0, {T}) @ THREADS:")
        emit(3, r.choice([f"y[b, t2] += warp_sum(s[({T - 1} - t2) % {T}])",
                          f"y[b, t2] = y[b, t2] + shfl(s[t2], (t2 + 1) % 32)",
                          f"y[b, t2] += s[(t2 + 1) % {T}]"]))
    head = (f"def {name}(n: size, a: f32, x: f32[n, {T}], y: f32[n, {T}]):\n"
            f"    assert n >= 1\n")
    return Program("warp", name, head + "\n".join(lines) + "\n",
                   pick_sizes(r, ["n >= 1"], ["n"], lo=1, hi=3), [])
