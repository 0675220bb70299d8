"""Random kernels with thread block clusters for the differential test of the primitives
(docs/hopper.md (clusters)): clusters of ``C`` blocks (``par(0, C) @ CLUSTERS`` inside a
BLOCKS loop), each block writing its slot of a GLOBAL row, then, after a
``sync_cluster()`` (or an arrive on every block's barrier and a wait on the block's own,
``arrive(done, 0, T, cluster=True)``), reading another block's slot (its partner in the cluster, its own, or
now and then a block of another cluster), sometimes in a seq loop with a second
``sync_cluster()`` closing each iteration, sometimes through a SHARED tile.  Some are
broken on purpose (the barrier missing, a block barrier ``sync()`` in its place, the
barrier under a rank-dependent ``if``, the closing barrier missing): check() and the race
detector must agree, and the primitives must not turn a proved kernel into a racy one.
Only generated with ``GPUDSL_DIFF_FAMILY=clusters`` (or ``Gen(r, family="clusters")``)."""
from __future__ import annotations

import random

from .procgen import Program, pick_sizes


def _barrier(r: random.Random, ok: float = 0.8, T: int = 0) -> list:
    if T and r.random() < 0.4:            # the blocks meet at arrives on each other's barrier
        return _arrives(r, ok, T)
    if r.random() < ok:
        return ["sync_cluster()"]
    return r.choice([[], ["sync()"], ["if r == 0:", "    sync_cluster()"],
                     ["if b < n:", "    sync_cluster()", "else:", "    sync_cluster()"]])


def _arrives(r: random.Random, ok: float, T: int) -> list:
    """``arrive(done, 0, T, cluster=True)`` then ``wait(done, 0, T)``, or a broken form:
    an arrive of the block alone, a wait of half the threads, an arrive only rank 0
    makes."""
    if r.random() < ok:
        return [f"arrive(done, 0, {T}, cluster=True)", f"wait(done, 0, {T})"]
    return r.choice([[f"arrive(done, 0, {T})", f"wait(done, 0, {T})"],
                     [f"arrive(done, 0, {T}, cluster=True)", f"wait(done, 0, {max(T // 2, 1)})"],
                     ["if r == 0:", f"    arrive(done, 0, {T}, cluster=True)",
                      f"wait(done, 0, {T})"]])


def clusters_program(r: random.Random, name: str) -> Program:
    C = r.choice([1, 2, 2, 4])
    T = r.choice([2, 4])
    W = C * T
    loop = r.random() < 0.35
    partner = r.choice([f"(r + 1) % {C}", f"({C} - 1) - r", "r", f"(r + 1) % {C}"])
    other = r.random() < 0.08            # another cluster's row: never ordered
    row = "(b + 1) % n" if other else "b"
    src = r.choice([f"x[b, r * {T} + t] * 2.0 + a", f"a + f32(r)", f"y[b, r * {T} + t]"])
    write = [f"for t in par(0, {T}) @ THREADS:", f"    x[b, r * {T} + t] = {src}"]
    read_el = f"x[{row}, {partner} * {T} + {r.choice(['t', f'({T} - 1) - t'])}]"
    body = []
    if r.random() < 0.3:                  # through a SHARED tile of the block
        body += [f"s: f32[{T}] @ SHARED"]
        read = [f"for t in par(0, {T}) @ THREADS:", f"    s[t] = {read_el}", "sync()",
                f"for t in par(0, {T}) @ THREADS:", f"    y[b, r * {T} + t] += s[({T} - 1) - t]"]
    else:
        read = [f"for t in par(0, {T}) @ THREADS:", f"    y[b, r * {T} + t] += {read_el}"]
    inner = write + _barrier(r, T=T) + read
    if loop:
        inner += _barrier(r, 0.85)
        body += ["for it in seq(0, k):"] + ["    " + ln for ln in inner]
    else:
        body += inner
    if any("done" in ln for ln in body):
        body = ["done: barrier @ SHARED"] + body
    lines = ["for b in par(0, n) @ BLOCKS:", f"    for r in par(0, {C}) @ CLUSTERS:"] + \
        ["        " + ln for ln in body]
    head = (f"def {name}(n: size, k: size, a: f32, x: f32[n, {W}], y: f32[n, {W}]):\n"
            "    assert n >= 1\n")
    src = head + "\n".join("    " + ln for ln in lines) + "\n"
    return Program("clusters", name, src, pick_sizes(r, ["n >= 1"], ["n", "k"], lo=1, hi=3), [])


__all__ = ["clusters_program"]
