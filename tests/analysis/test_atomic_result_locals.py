"""An integer local that an atomic returns into holds data, never a control value:
check() must not read it as the last plain assignment (found when the atomics with
results and the index-valued locals of issue 13 met)."""
from __future__ import annotations

import gpudsl
from gpudsl import proc_from_source

NS = {k: getattr(gpudsl, k) for k in gpudsl.__all__}


def test_local_overwritten_by_an_atomic_result_is_data():
    p = proc_from_source('''@proc
def q(n: size, c: i32[1], out: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            j: i32
            j = t
            j = atomic_max(c[0], 5)
            out[j % 64] = 1.0
''', dict(NS))
    rep = p.check()
    # every thread may get the same old value: two threads write one element
    assert not rep.ok and "race" in rep.kinds()


def test_local_assigned_once_from_a_control_value_still_proves():
    p = proc_from_source('''@proc
def q(n: size, out: f32[64]):
    for b in par(0, 1) @ BLOCKS:
        for t in par(0, 64) @ THREADS:
            j: i32
            j = t
            out[j] = 1.0
''', dict(NS))
    assert p.check().ok
