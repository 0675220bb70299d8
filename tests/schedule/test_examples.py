"""The two example derivations: checked at every milestone, equal to numpy."""
from __future__ import annotations

import gpudsl


def test_transpose_derivation():
    from examples.transpose_schedule import derive

    p, log = derive(verify=True)
    assert [n for n, _ in log] == ["naive", "tiles", "shared", "coalesced", "padded"]
    assert gpudsl.check(p).ok
    assert "tile: f32[32, 33] @ SHARED" in str(p)


def test_matmul_derivation():
    from examples.matmul_schedule import derive, timed_derivation

    p, log = derive(check=True, interp=True)
    assert len(log) == 5
    assert gpudsl.check(p).ok
    text = str(p)
    assert text.count("sync()") == 2 and "As: f32[16, 16] @ SHARED" in text
    assert min(timed_derivation() for _ in range(2)) < 5.0  # target: under 1 s
