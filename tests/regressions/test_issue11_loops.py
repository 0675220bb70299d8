"""Issue 11: the loop primitives keep a proc's meaning or refuse with a reason.

Each accepted rewrite is compared with the original in the interpreter on
integer-valued inputs at several sizes, printed and parsed back, and (where the
original proves) still proves with check().
"""
from __future__ import annotations

import numpy as np
import pytest

import gpudsl
from gpudsl import (BLOCKS, THREADS, SHARED, SchedulingError, f32, par, proc, seq, size)
from gpudsl.proc import proc_from_source
from gpudsl.schedule import (fission, fuse, parallelize_loop, remove_loop, replace, simplify,
                             specialize, unroll_loop, vectorize)
from gpudsl.schedule.call_primitives import vector_copy_instr

from tests.schedule.helpers import _shape


def _args(p, sizes, seed):
    rng = np.random.default_rng(seed)
    out = {}
    for prm in p.ir.params:
        if prm.kind in ("size", "index"):
            out[prm.name] = sizes[prm.name]
        elif prm.kind == "scalar":
            out[prm.name] = float(rng.integers(-3, 4))
        else:
            out[prm.name] = rng.integers(-8, 9, size=_shape(prm, sizes)).astype(np.float32)
    return out


def _run(p, args):
    a = {k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in args.items()}
    try:
        gpudsl.interpret(p, **a)
    except Exception as e:  # a fault is a result too: both must give the same one
        return type(e).__name__
    return a


def same_meaning(p1, p2, sizes_list):
    for sizes in sizes_list:
        for seed in (0, 1, 2):
            args = _args(p1, sizes, seed)
            r1, r2 = _run(p1, args), _run(p2, args)
            if isinstance(r1, str) or isinstance(r2, str):
                assert r1 == r2, (sizes, r1, r2)
                continue
            for k, v in r1.items():
                if isinstance(v, np.ndarray):
                    np.testing.assert_array_equal(r2[k], v, err_msg=f"{k} at {sizes}")


def parses_back(p, **ns):
    q = proc_from_source(str(p), ns)
    assert q == p, str(p)


def accepted(p1, p2, sizes_list, check=None, **ns):
    same_meaning(p1, p2, sizes_list)
    parses_back(p2, **ns)
    if check is not None:
        assert p1.check(**check).ok
        assert p2.check(**check).ok, str(p2.check(**check))


N = [dict(n=1), dict(n=2), dict(n=5)]


# ------------------------------------------------------------------ specialize


@proc
def lone_alloc(n: size, out: f32[1]):
    a: f32
    a = 1.0
    out[0] = a


def test_specialize_of_a_lone_allocation_is_refused():
    with pytest.raises(SchedulingError) as e:
        specialize(lone_alloc, lone_alloc.find_alloc("a"), "n > 1")
    assert "out of scope" in str(e.value) and e.value.primitive == "specialize"


def test_specialize_of_the_allocation_and_its_uses_parses_back():
    c = lone_alloc.find_alloc("a")
    blk = c.as_block().expand(0, 2) if hasattr(c, "as_block") else None
    if blk is None:
        pytest.skip("no block cursor API")
    q = specialize(lone_alloc, blk, "n > 1")
    accepted(lone_alloc, q, N)


# ------------------------------------------------------------------ fuse


@proc
def fuse_capture(n: size, x: f32[4, 4], y: f32[4]):
    for i in seq(0, 4):
        y[i] = y[i] + 1.0
    for j in seq(0, 4):
        for i in seq(0, 4):
            x[j, i] = y[j] + x[j, i]


def test_fuse_does_not_capture_an_inner_loop_variable():
    q = fuse(fuse_capture, "i", "j")
    accepted(fuse_capture, q, N)


@proc
def fuse_allocs(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n):
        a: f32
        a = x[i]
        y[i] = a
    for j in seq(0, n):
        a: f32
        a = y[j] + 1.0
        x[j] = a


def test_fuse_renames_a_second_allocation_of_one_name():
    q = fuse(fuse_allocs, "i", "j")
    accepted(fuse_allocs, q, N)


def _two_kernels(read):
    src = f"""
def k(n: size, x: f32[n, 4], y: f32[n, 4], z: f32[n, 4]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[b, t] = x[b, t]
    for c in par(0, n) @ BLOCKS:
        for u in par(0, 4) @ THREADS:
            {read}
"""
    return proc_from_source(src, {})


def test_fuse_blocks_refuses_a_forward_dependence_between_blocks():
    p = _two_kernels("if c > 0:\n                z[c, u] = y[c - 1, u]")
    assert p.check().ok
    with pytest.raises(SchedulingError) as e:
        fuse(p, "b", "c")
    assert e.value.primitive == "fuse"


def test_fuse_blocks_refuses_a_dependence_between_threads_of_one_block():
    p = _two_kernels("z[c, u] = y[c, 3 - u]")
    assert p.check().ok
    with pytest.raises(SchedulingError) as e:
        fuse(p, "b", "c")
    assert "barrier" in str(e.value)


def test_fuse_blocks_where_each_thread_reads_its_own_write():
    p = _two_kernels("z[c, u] = y[c, u] + 1.0")
    q = fuse(p, "b", "c")
    accepted(p, q, N, check={})


# ------------------------------------------------------------------ mapping rules


@proc
def mapped(n: size, x: f32[n, 4], y: f32[n, 4]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[b, t] = x[b, t]


@proc
def thread_seq(n: size, x: f32[n, 4, 4], y: f32[n, 4, 4]):
    for b in par(0, n) @ BLOCKS:
        for u in par(0, 4) @ THREADS:
            for t in seq(0, 4):
                y[b, u, t] = x[b, u, t]


def test_unroll_of_a_threads_loop_is_refused():
    with pytest.raises(SchedulingError) as e:
        unroll_loop(mapped, "t")
    assert "THREADS" in str(e.value)


@pytest.mark.parametrize("loop,m", [("t", BLOCKS), ("b", THREADS), ("t", None)])
def test_remapping_a_mapped_loop_that_breaks_the_rules_is_refused(loop, m):
    assert mapped.check().ok
    with pytest.raises(SchedulingError) as e:
        parallelize_loop(mapped, loop, m)
    assert "mapping rule" in str(e.value)


def test_blocks_inside_a_thread_loop_is_refused():
    assert thread_seq.check().ok
    with pytest.raises(SchedulingError) as e:
        parallelize_loop(thread_seq, "t", BLOCKS)
    assert "mapping rule" in str(e.value)


def test_legal_mapping_still_accepted():
    q = parallelize_loop(thread_seq, "t", THREADS)
    accepted(thread_seq, q, N, check={})


@proc
def vcopy_threads(n: size, x: f32[n, 4], y: f32[n, 4]):
    for b in par(0, n) @ BLOCKS:
        for t in par(0, 4) @ THREADS:
            y[b, t] = x[b, t]


def test_vectorize_of_a_threads_loop_is_refused():
    with pytest.raises(SchedulingError) as e:
        vectorize(vcopy_threads, "t", 4)
    assert e.value.primitive == "vectorize"


def test_replace_does_not_match_a_threads_loop_with_a_seq_loop():
    with pytest.raises(SchedulingError) as e:
        replace(vcopy_threads, vcopy_threads.find_loop("t"),
                vector_copy_instr(4, gpudsl.GLOBAL, gpudsl.GLOBAL))
    assert "seq" in str(e.value)


# ------------------------------------------------------------------ names after moves


@proc
def unroll_alloc(n: size, x: f32[n, 2], y: f32[n, 2]):
    for r in seq(0, n):
        for i in seq(0, 2):
            a: f32
            a = x[r, i] * 2.0
            y[r, i] = a


def test_unroll_renames_the_copies_allocations():
    q = unroll_loop(unroll_alloc, "i")
    accepted(unroll_alloc, q, N)


@proc
def remove_alloc(n: size, x: f32[2], y: f32[2]):
    for i in seq(0, 1):
        a: f32
        a = x[0]
        y[0] = a
    a: f32
    a = x[1]
    y[1] = a


def test_remove_loop_renames_a_clashing_allocation():
    q = remove_loop(remove_alloc, "i")
    accepted(remove_alloc, q, N)


@proc
def simplify_alloc(n: size, x: f32[2], y: f32[2]):
    if 0 < n:
        a: f32
        a = x[0]
        y[0] = a
    a: f32
    a = x[1]
    y[1] = a


def test_simplify_renames_a_clashing_allocation():
    q = simplify(simplify_alloc)
    assert "if 0" not in str(q)
    accepted(simplify_alloc, q, N)


# ------------------------------------------------------------------ legal rewrites Exo performs


@proc
def maybe_empty(n: size, x: f32[n], y: f32[n]):
    for i in seq(0, n - 1):
        y[0] = x[n - 1]


def test_remove_loop_of_a_loop_that_may_not_run_adds_a_guard():
    q = remove_loop(maybe_empty, "i")
    assert "for i" not in str(q) and "if" in str(q)
    accepted(maybe_empty, q, N)


@proc
def same_value(n: size, y: f32[n]):
    t: f32
    for i in seq(0, n):
        t = 2.0
        y[i] = t + y[i]


def test_fission_across_a_write_of_the_same_value():
    q = fission(same_value, same_value.find("t = _").after())
    assert str(q).count("for i") == 2
    accepted(same_value, q, N)


@proc
def varying_value(n: size, x: f32[n], y: f32[n]):
    t: f32
    for i in seq(0, n):
        t = x[i]
        y[i] = t + y[i]


def test_fission_across_a_varying_write_is_still_refused():
    with pytest.raises(SchedulingError):
        fission(varying_value, varying_value.find("t = _").after())


@proc
def same_then_changed(n: size, y: f32[n]):
    t: f32
    for i in seq(0, n):
        t = 2.0
        if i == 0:
            t = 5.0
        y[i] = t + y[i]


def test_fission_refuses_when_an_iteration_ends_with_another_value():
    # iteration 0 leaves 5.0 in t, the others 2.0: after fission y[0] would read 2.0
    with pytest.raises(SchedulingError):
        fission(same_then_changed, same_then_changed.find("y[_] = _").before())
