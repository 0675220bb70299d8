"""check() tests the grid code generation launches for a grouped block pair
(``set_block_order``): the pair's product on ``blockIdx.x`` (below 2**31 blocks), not
each loop against its own dimension's limit.  A pair of 65536 x 65536 blocks was
proved by check() and refused by codegen; a third BLOCKS loop goes to y (grid-stride:
no limit), even where the pair encloses it."""
from __future__ import annotations

import pytest

import gpudsl
from gpudsl import CompileError
from gpudsl.proc import proc_from_source
from gpudsl.schedule import set_block_order

NS = {k: getattr(gpudsl, k) for k in gpudsl.__all__}


def _tiles(m: int, n: int, inner_batch: int = 0):
    batch = f"\n            for z in par(0, {inner_batch}) @ BLOCKS:" if inner_batch else ""
    pad = "    " if inner_batch else ""
    cond = "bi == 0 and bj == 0" + (" and z == 0" if inner_batch else "")
    text = f"""
def tiles(out: i32[1]):
    for bi in par(0, {m}) @ BLOCKS:
        for bj in par(0, {n}) @ BLOCKS:{batch}
            {pad}for t in par(0, 1) @ THREADS:
                {pad}if {cond}:
                    {pad}out[0] = 1
"""
    return proc_from_source(text.strip() + "\n", NS)


def _grid_refusals(p):
    r = p.check()
    return [d for d in r.diagnostics if d.kind == "resource" and "grid" in d.message]


def test_a_pair_whose_product_exceeds_x_is_refused_by_check_as_by_codegen():
    q = set_block_order(_tiles(65536, 65536), "bi", "bj", group=8)
    with pytest.raises(CompileError, match="blockIdx.x takes at most"):
        q.cuda_source()
    found = _grid_refusals(q)
    assert found and "65536 x 65536" in found[0].message, q.check()
    assert not q.check().ok


def test_a_pair_below_the_limit_is_proved_and_generated():
    q = set_block_order(_tiles(40000, 50000), "bi", "bj", group=8)   # 2e9 < 2**31
    assert q.check().ok and "blockIdx.x" in q.cuda_source()
    assert not _grid_refusals(_tiles(65536, 65536))      # ungrouped: bi on y (strided)


def test_a_batch_inside_the_pair_takes_y_and_has_no_limit():
    p = _tiles(2, 2, inner_batch=2 ** 31)
    assert _grid_refusals(p)                   # ungrouped, z is innermost: x
    q = set_block_order(p, "bi", "bj", group=2)
    src = q.cuda_source()
    assert "gridDim.y" in src                  # z strides over y
    assert not _grid_refusals(q), q.check()


def test_sizes_given_to_check_are_tested_as_codegen_tests_them():
    src = """
def tiles(m: size, n: size, out: i32[1]):
    for bi in par(0, m) @ BLOCKS:
        for bj in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                if bi == 0 and bj == 0:
                    out[0] = 1
"""
    q = set_block_order(proc_from_source(src.strip() + "\n", NS), "bi", "bj", group=8)
    assert q.check().ok                       # symbolic: checked at launch
    r = q.check(m=65536, n=65536)
    assert not r.ok and "bi x bj (65536 x 65536 blocks)" in str(r)
    with pytest.raises(CompileError, match="blockIdx.x takes at most"):
        q.cuda_source(m=65536, n=65536)
    assert q.check(m=40000, n=50000).ok
