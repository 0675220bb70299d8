"""delete_sync of a barrier alone in a loop body (after fission split it off) left an
empty body that printed as ``pass`` and parsed back unequal (long differential run of
the merged code, seed 505, case 15082)."""
from __future__ import annotations

import gpudsl
from gpudsl.schedule import delete_sync, fission
from gpudsl.schedule.cursors import Cursor

SRC = '''@proc
def alone(n: size, a: f32, x: f32[n, 16], y: f32[n, 16]):
    assert n >= 1
    for b in par(0, n) @ BLOCKS:
        s: f32[16] @ SHARED
        for rr in seq(0, 2):
            for t in par(0, 16) @ THREADS:
                s[t] = x[b, t] + a + y[b, t]
            for t1 in par(0, 16) @ THREADS:
                if t1 < 8:
                    y[b, t1] = s[t1 + 8] - s[t1]
                else:
                    y[b, t1] = s[t1]
            sync()
'''


def test_delete_sync_leaves_a_pass_that_round_trips():
    p = gpudsl.proc_from_source(SRC)
    p = fission(p, Cursor(p, "gap", (0, "body", 1, "body", 2), None))
    q = delete_sync(p, Cursor(p, "stmt", (0, "body", 2, "body", 0), None))
    assert gpudsl.proc_from_source(str(q)).ir == q.ir
    assert "pass" in str(q)
