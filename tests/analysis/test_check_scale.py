"""check() of long thread bodies (issue 28: a thread body of 1,000 statements took 62 s
and ended "unknown": every pair of its accesses was a solver question).  Accesses that
every race question treats alike are asked once; the work grows near-linearly."""
from __future__ import annotations

import time

import gpudsl
from gpudsl.analysis.check import _cache

NS = vars(gpudsl)


def _body(n: int) -> str:
    lines = ["def big(x: f32[64], y: f32[64], z: f32[64]):",
             "    for b in par(0, 1) @ BLOCKS:",
             "        for t in par(0, 64) @ THREADS:"]
    for k in range(n):
        lines.append(f"            y[t] = z[t] + x[(t + {k}) % 64]" if k % 2 else
                     f"            z[t] = y[t] * {k}.0")
    return "\n".join(lines) + "\n"


def test_thousand_statement_thread_body_is_proved_quickly():
    p = gpudsl.proc_from_source(_body(1000), namespace=NS)
    _cache.clear()
    t0 = time.perf_counter()
    rep = p.check()
    dt = time.perf_counter() - t0
    assert rep.ok, str(rep)[:500]
    assert rep.stats["queries"] < 50
    assert dt < 30   # 0.7 s here; 60 s (the budget, then "unknown") before


def test_a_racy_statement_among_many_is_still_found():
    src = _body(200).replace("z[t] = y[t] * 100.0", "z[(t + 1) % 64] = y[t] * 100.0")
    rep = gpudsl.proc_from_source(src, namespace=NS).check()
    assert "race" in rep.kinds()
    assert any("z[(t + 1) % 64]" in d.message for d in rep.of_kind("race"))
