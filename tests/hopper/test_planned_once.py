"""The direct sm_90a entry points (``matmul_nt_sm90``, ``matmul_tf32_sm90``: the bench's
rows) choose their tile once per shape, dtype and options, not on every call (issue 36:
host time per call); refusals are raised every time."""
from __future__ import annotations

import pytest

from gpudsl.stdlib import matmul_sm90, matmul_sm90_tf32
from gpudsl.stdlib.shapes import NodeError


@pytest.mark.parametrize("module, plan, args", [
    (matmul_sm90, "plan_matmul_sm90", ("f16",)),
    (matmul_sm90_tf32, "plan_matmul_sm90_tf32", ()),
])
def test_the_tile_is_chosen_once_per_shape(module, plan, args, monkeypatch):
    chosen, derived = [], []
    choose = "choose_sm90" if plan == "plan_matmul_sm90" else "choose_sm90_tf32"
    real = getattr(module, choose)
    monkeypatch.setattr(module, choose, lambda *a, **k: chosen.append(a) or real(*a, **k))
    kernel = "sm90_kernel" if plan == "plan_matmul_sm90" else "sm90_tf32_kernel"
    monkeypatch.setattr(module, kernel, lambda *a, **tile: derived.append(tile) or object())
    f = getattr(module, plan)
    f.cache_clear()
    p, binds = f((256, 64), (512, 64), *args)
    q, again = f((256, 64), (512, 64), *args)
    assert q is p and again == binds == {"m": 256, "n": 512, "k": 64}
    again["m"] = 0                                    # the caller's copy
    assert f((256, 64), (512, 64), *args)[1]["m"] == 256
    assert len(chosen) == 1 and len(derived) == 1
    f((256, 64), (512, 64), *args, stages=3)          # other options: planned
    f((128, 64), (512, 64), *args)                    # another shape: planned
    assert len(chosen) == 3
    for _ in range(2):                                # a refusal, each time
        with pytest.raises(NodeError, match="refused|divides|use gpudsl"):
            f((256, 60), (512, 60), *args)
    assert len(chosen) == 5
    f.cache_clear()
