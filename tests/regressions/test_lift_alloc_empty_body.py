"""Regression (differential run of the warp family, seed 202, case 2349): lifting the
only statement of a loop out of it left the loop's body empty; printed as ``pass``, it
parsed back to a different proc.  The emptied body is a ``pass`` now."""
from __future__ import annotations

import gpudsl
from gpudsl.schedule import lift_alloc


def test_lifting_the_only_statement_leaves_a_pass():
    p = gpudsl.proc_from_source('''@proc
def p(n: size, y: f32[n, 64]):
    for b in par(0, n) @ BLOCKS:
        s: f32[64] @ SHARED
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            y[b, t] = 1.0
''', {})
    q = lift_alloc(p, "s")
    assert gpudsl.proc_from_source(str(q), {}) == q
    assert "    pass\n" in str(q)
