"""set_block_order: the grouped (L2-friendly) block order of two nested BLOCKS loops.

The hint keeps the meaning (the interpreter and check() see the same loops); code
generation maps the pair onto one linear block index.  The mapping is checked here
on the emulator: every tile exactly once, in Triton's grouped order (with one worker
the emulator runs blocks in blockIdx order, so an atomic ticket is the block's id)."""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import CompileError, SchedulingError
from gpudsl.proc import proc_from_source
from gpudsl.schedule import (cut_loop, reorder_loops, reorder_stmts, set_block_order,
                             simplify)

from .helpers import assert_refused

NS = {k: getattr(gpudsl, k) for k in gpudsl.__all__}

TILES = """
def tiles(m: size, n: size, out: i32[m, n], ids: i32[m, n], counter: i32[1]):
    for bi in par(0, m) @ BLOCKS:
        for bj in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                out[bi, bj] += 1
                old: i32
                old = atomic_add(counter[0], 1)
                ids[bi, bj] = old
"""

BATCHED = """
def btiles(nb: size, m: size, n: size, out: i32[nb, m, n, 2]):
    for z in par(0, nb) @ BLOCKS:
        for bi in par(0, m) @ BLOCKS:
            for bj in par(0, n) @ BLOCKS:
                for t in par(0, 2) @ THREADS:
                    out[z, bi, bj, t] += t + 1
"""


def _proc(text):
    return proc_from_source(text.strip() + "\n", NS)


def triton_order(m: int, n: int, g: int) -> np.ndarray:
    """The block id of each tile in Triton's matmul tutorial order (GROUP_SIZE_M)."""
    ids = np.full((m, n), -1, np.int64)
    for pid in range(m * n):
        group = pid // (g * n)
        first = group * g
        rows = min(m - first, g)
        ids[first + (pid % (g * n)) % rows, (pid % (g * n)) // rows] = pid
    return ids


@pytest.fixture
def one_worker(monkeypatch):
    """Blocks run one after the other, in blockIdx order."""
    monkeypatch.setenv("GPUDSL_EMU_WORKERS", "1")


def _launch(k, m, n):
    out, ids = np.zeros((m, n), np.int32), np.full((m, n), -1, np.int32)
    k(out=out, ids=ids, counter=np.zeros(1, np.int32))
    return out, ids


@pytest.mark.parametrize("g", [1, 2, 3, 4, 5])
def test_every_tile_once_in_grouped_order_symbolic_sizes(one_worker, g):
    q = set_block_order(_proc(TILES), "bi", "bj", group=g)
    assert f"par(0, m, group={g}) @ BLOCKS" in str(q)
    k = q.compile("emulator")
    for m in range(1, 13):
        for n in range(1, 13):
            out, ids = _launch(k, m, n)
            assert (out == 1).all(), (m, n, g)                    # each tile exactly once
            np.testing.assert_array_equal(ids, triton_order(m, n, g), err_msg=f"{m}x{n}")


@pytest.mark.parametrize("m, n, g", [(6, 5, 3), (7, 5, 3), (2, 9, 8), (12, 1, 4)])
def test_grouped_order_with_sizes_fixed(one_worker, m, n, g):
    """Bound sizes: rows is the constant G where G divides the rows (the fast form)."""
    q = set_block_order(_proc(TILES), "bi", "bj", group=g)
    src = q.cuda_source(m=m, n=n)
    assert ("gpudsl_bi_rows" in src) == (m % g != 0 and m > g)
    out, ids = _launch(q.compile("emulator", m=m, n=n), m, n)
    assert (out == 1).all()
    np.testing.assert_array_equal(ids, triton_order(m, n, g))


@pytest.mark.parametrize("pair", [("bi", "bj"), ("z", "bi")])
def test_a_third_blocks_loop_takes_y(pair):
    q = set_block_order(_proc(BATCHED), *pair, group=2)
    src = q.cuda_source()
    assert "blockIdx.y" in src and "blockIdx.z" not in src
    assert src.count("blockIdx.x") == 1
    k = q.compile("emulator")
    for nb, m, n in [(3, 5, 4), (1, 1, 7), (2, 7, 3)]:
        out = np.zeros((nb, m, n, 2), np.int32)
        k(out=out)
        assert (out == [1, 2]).all(), (nb, m, n)


def test_meaning_and_proof_are_unchanged():
    p = _proc(TILES)
    q = set_block_order(p, "bi", "bj", group=4)
    assert q.check().ok
    args = dict(out=np.zeros((5, 3), np.int32), ids=np.zeros((5, 3), np.int32),
                counter=np.zeros(1, np.int32))
    gpudsl.interpret(q, **args)
    assert (args["out"] == 1).all() and sorted(args["ids"].ravel()) == list(range(15))
    assert proc_from_source(str(q), NS) == q          # prints and parses back


def test_refused_not_blocks_loops():
    p = _proc(TILES)
    with pytest.raises(SchedulingError) as e:
        set_block_order(p, "bj", "t", group=2)
    assert "not a BLOCKS loop" in assert_refused(e, "set_block_order", "<string")


def test_refused_not_directly_nested():
    p = _proc(BATCHED)
    with pytest.raises(SchedulingError) as e:
        set_block_order(p, "z", "bj", group=2)        # bi stands between
    assert "not directly nested" in assert_refused(e, "set_block_order", "<string")
    with pytest.raises(SchedulingError):
        set_block_order(p, "bj", "bi", group=2)       # inside out


@pytest.mark.parametrize("g", [0, -1, 2.0, True])
def test_refused_group_below_one(g):
    with pytest.raises(SchedulingError, match="group"):
        set_block_order(_proc(TILES), "bi", "bj", group=g)


def test_refused_twice_in_one_nest():
    q = set_block_order(_proc(BATCHED), "bi", "bj", group=2)
    with pytest.raises(SchedulingError, match="already in a grouped pair"):
        set_block_order(q, "z", "bi", group=2)
    with pytest.raises(SchedulingError, match="already in a grouped pair"):
        set_block_order(set_block_order(_proc(BATCHED), "z", "bi", group=2), "bi", "bj")


def test_refused_triangular_tiles():
    p = _proc("""
def tri(m: size, out: i32[m, m]):
    for bi in par(0, m) @ BLOCKS:
        for bj in par(0, bi) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                out[bi, bj] = 1
""")
    with pytest.raises(SchedulingError, match="depend on bi"):
        set_block_order(p, "bi", "bj")


def test_primitives_that_break_the_pair_drop_the_hint():
    q = set_block_order(_proc(TILES), "bi", "bj", group=3)
    assert "group=" not in str(reorder_loops(q, "bi"))       # the pair swapped
    assert "group=" not in str(cut_loop(q, "bj", "n // 2"))          # two loops in bi's body
    assert str(cut_loop(q, "bi", "m // 2")).count("group=3") == 2    # two pairs, each grouped
    # a rewrite inside the tile keeps it
    kept = simplify(reorder_stmts(q, q.find("out[_] += _").expand(0, 1)))
    assert "par(0, m, group=3) @ BLOCKS" in str(kept)
    # a reordered batch nest does not carry the hint over to another pair
    b = set_block_order(_proc(BATCHED), "bi", "bj", group=2)
    assert "group=" not in str(reorder_loops(b, "z"))


def test_two_grouped_loops_in_one_nest_are_refused_by_codegen():
    p = _proc(BATCHED.replace("par(0, nb)", "par(0, nb, group=2)")
              .replace("par(0, m)", "par(0, m, group=2)"))
    with pytest.raises(CompileError, match="both grouped"):
        p.cuda_source()


def test_source_group_needs_a_blocks_pair():
    with pytest.raises(gpudsl.ProcError, match="group="):
        _proc(TILES.replace("par(0, n) @ BLOCKS", "par(0, n, group=2) @ BLOCKS"))
    with pytest.raises(gpudsl.ProcError, match="group="):
        _proc(TILES.replace("par(0, m) @ BLOCKS", "par(0, m, group=0) @ BLOCKS"))


def test_too_many_blocks_for_x_is_refused():
    q = set_block_order(_proc(TILES), "bi", "bj", group=2)
    with pytest.raises(CompileError, match="blockIdx.x takes at most"):
        q.cuda_source(m=70000, n=70000)


def test_setting_it_again_changes_the_group():
    q = set_block_order(set_block_order(_proc(TILES), "bi", "bj", group=3), "bi", "bj", group=5)
    assert "group=5" in str(q) and "group=3" not in str(q)
    assert "5 rows of bi" in q.cuda_source()


def test_differential_tiles_family():
    """A short run of the differential test on grids of tiles (the long one:
    ``GPUDSL_DIFF_FAMILY=tiles python -m tests.schedule.differential --seconds 1200``):
    set_block_order and every primitive after it keep the meaning and parse back."""
    from tests.schedule.differential.run import Runner

    r = Runner(seed=0, family="tiles")
    r.run(300, max_cases=150)
    assert not r.failures, r.failures[0].repro()
    assert r.stats.accepted["set_block_order"] > 0, r.stats.table()
    assert r.stats.refused["set_block_order"] > 0, r.stats.table()
    assert r.stats.skipped < r.stats.cases / 4, r.stats.table()


@pytest.mark.parametrize("bits", [32, 64])
def test_nvrtc_builds_the_mapping_at_both_index_widths(bits):
    from gpudsl.codegen import generate

    nvrtc = pytest.importorskip("gpudsl.runtime.nvrtc")
    try:
        nvrtc.compiler_version()
    except Exception as e:  # pragma: no cover - NVRTC is part of the test extras
        pytest.skip(f"NVRTC not available: {e}")
    q = set_block_order(_proc(TILES), "bi", "bj", group=3)
    src = generate(q.ir, {}, bits).source
    u, t = ("unsigned", "int") if bits == 32 else ("unsigned long long", "long long")
    assert f"const {u} gpudsl_bi_pid = blockIdx.x;" in src
    assert f"const {t} bi = ({t})(gpudsl_bi_first" in src
    nvrtc.compile_cubin(src, "sm_80")


def test_the_span_cannot_wrap_when_the_group_exceeds_the_rows():
    """G N in 32-bit unsigned wrapped for M < G with N near 2^31 / G (M N still a legal
    grid): the span is min(G, M) N <= M N, at run time where M is a size."""
    q = set_block_order(_proc(TILES), "bi", "bj", group=5)
    src = q.cuda_source()
    assert "const unsigned gpudsl_bi_g = (unsigned)(m) < 5u ? (unsigned)(m) : 5u;" in src
    assert "const unsigned gpudsl_bi_span = gpudsl_bi_g * (unsigned)(n);" in src
    fixed = q.cuda_source(m=2)                  # a constant M below G: G is M
    assert "gpudsl_bi_span = 2u * (unsigned)(n);" in fixed


def test_a_grid_beyond_blockidx_x_is_refused_at_launch():
    """Runtime sizes: the launch computes the grid (M N) and refuses it before running."""
    p = _proc("""
def big(m: size, n: size, out: i32[1]):
    for bi in par(0, m) @ BLOCKS:
        for bj in par(0, n) @ BLOCKS:
            for t in par(0, 1) @ THREADS:
                if bi == 0 and bj == 0:
                    out[0] = 1
""")
    k = set_block_order(p, "bi", "bj", group=4).compile("emulator")
    with pytest.raises(gpudsl.LaunchError, match="gridDim.x"):
        k(m=70000, n=70000, out=np.zeros(1, np.int32))
