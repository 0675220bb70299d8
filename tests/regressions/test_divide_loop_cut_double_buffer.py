"""divide_loop(..., tail="cut") of a double-buffered loop (buf[i % 2] behind one sync)
keeps its proof: the main and tail loops are siblings, and check() counts their other
iterations as lying between two accesses (differential seed 31, case 3879: "before: ok;
after: race" before issue 28's sibling-loop fix)."""
from __future__ import annotations

import gpudsl
from gpudsl.schedule import divide_loop

SRC = '''@proc
def db(n: size, a: f32, x: f32[n, 64], y: f32[n, 64]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        buf: f32[2, 32] @ SHARED
        for i in seq(0, n):
            for t in par(0, 32) @ THREADS:
                buf[i % 2, t] = x[b, t]
            sync()
            for u in par(32, 64) @ THREADS:
                y[b, u] += buf[i % 2, 63 - u] + a
'''


def test_divided_double_buffer_still_proves():
    p = gpudsl.proc_from_source(SRC, {})
    assert p.check().ok
    q = divide_loop(p, "i", 16, ["o", "ii"], tail="cut")
    assert "n % 16" in str(q)
    rep = q.check()
    assert rep.ok, str(rep)
