"""Loop primitives keep the meaning, and refuse what would change it."""
from __future__ import annotations

import pytest

from gpudsl import BLOCKS, THREADS, SchedulingError
from gpudsl.schedule import (cut_loop, divide_loop, fission, fuse, parallelize_loop,
                             remove_loop, rename, reorder_loops, simplify, specialize,
                             unroll_loop)

from . import procs as P
from .helpers import assert_refused, assert_same_meaning


@pytest.mark.parametrize("tail", ["guard", "cut", "perfect"])
def test_divide_loop_keeps_meaning(tail):
    q = divide_loop(P.saxpy, "i", 16 if tail == "perfect" else 5, ["io", "ii"], tail=tail)
    assert_same_meaning(P.saxpy, q, n=48)
    assert_same_meaning(P.saxpy, q, n=16)


@pytest.mark.parametrize("tail", ["guard", "cut"])
def test_divide_loop_nonzero_lower_bound(tail):
    q = divide_loop(P.prefix, "i", 4, ["io", "ii"], tail=tail)
    assert_same_meaning(P.prefix, q, n=11)


def test_divide_perfect_unproved_is_refused():
    with pytest.raises(SchedulingError) as e:
        divide_loop(P.axpy_any, "i", 16, ["io", "ii"], tail="perfect")
    text = assert_refused(e, "divide_loop", "procs.py")
    assert "divides" in text and e.value.witness["n"] % 16 != 0


def test_divide_loop_prints_clean_indices():
    q = divide_loop(P.saxpy, "i", 16, ["io", "ii"], tail="perfect")
    assert "y[16 * io + ii] = a * x[16 * io + ii] + y[16 * io + ii]" in str(q)


def test_divide_loop_name_clash():
    with pytest.raises(SchedulingError) as e:
        divide_loop(P.saxpy, "i", 16, ["n", "ii"], tail="perfect")
    assert_refused(e, "divide_loop", "procs.py")


def test_reorder_loops_legal():
    q = reorder_loops(P.transpose, "i")
    assert str(q).index("for j") < str(q).index("for i")
    assert_same_meaning(P.transpose, q, n=3, m=5)


def test_reorder_loops_against_dependence():
    with pytest.raises(SchedulingError) as e:
        reorder_loops(P.shift2d, "i")
    text = assert_refused(e, "reorder_loops", "procs.py")
    assert "x[" in text and e.value.witness


def test_reorder_needs_perfect_nest():
    with pytest.raises(SchedulingError) as e:
        reorder_loops(P.rowsum, "i")
    assert_refused(e, "reorder_loops", "procs.py")


def test_fission_legal():
    q = fission(P.rowsum, P.rowsum.find("s[_] = _").after())
    assert str(q).count("for i in") == 2
    assert_same_meaning(P.rowsum, q, n=4, m=3)


def test_fission_against_dependence():
    with pytest.raises(SchedulingError) as e:
        fission(P.carried, P.carried.find("y[_] = _").after())
    assert_refused(e, "fission", "procs.py")


def test_fuse_legal_and_backward_dependence():
    q = fuse(P.two_loops, "i", "j")
    assert str(q).count("for ") == 1
    assert_same_meaning(P.two_loops, q, n=7)
    with pytest.raises(SchedulingError) as e:
        fuse(P.two_loops_back, "i", "j")
    text = assert_refused(e, "fuse", "procs.py")
    assert "backward" in text and e.value.witness


def test_unroll_loop():
    q = divide_loop(P.saxpy, "i", 4, ["io", "ii"], tail="perfect")
    q = unroll_loop(q, "ii")
    assert "y[4 * io + 3]" in str(q)
    assert_same_meaning(P.saxpy, q, n=32)
    with pytest.raises(SchedulingError) as e:
        unroll_loop(P.saxpy, "i")
    assert_refused(e, "unroll_loop", "procs.py")


def test_cut_loop():
    q = cut_loop(P.two_loops_back, "i", 1)
    assert_same_meaning(P.two_loops_back, q, n=9)
    with pytest.raises(SchedulingError) as e:
        cut_loop(P.prefix, "i", 3)  # n may be 1
    assert e.value.witness["n"] < 3
    q = cut_loop(P.saxpy, "i", "n // 2")
    assert_same_meaning(P.saxpy, q, n=32)
    with pytest.raises(SchedulingError) as e:
        cut_loop(P.prefix, "i", "n + 1")
    assert_refused(e, "cut_loop", "procs.py")


def test_remove_loop():
    q = remove_loop(P.fill, "r")
    assert "for r" not in str(q)
    assert_same_meaning(P.fill, q, n=5)
    with pytest.raises(SchedulingError) as e:
        remove_loop(P.total, "i")
    assert_refused(e, "remove_loop", "procs.py")


def test_parallelize_loop_legal():
    q = divide_loop(P.saxpy, "i", 16, ["b", "t"], tail="perfect")
    q = parallelize_loop(q, "b", BLOCKS)
    q = parallelize_loop(q, "t", THREADS)
    assert "par(0, 16) @ THREADS" in str(q)
    assert_same_meaning(P.saxpy, q, n=32)
    q2 = parallelize_loop(P.transpose, "i")
    assert "par(0, n):" in str(q2)


def test_parallelize_conflicting_iterations():
    with pytest.raises(SchedulingError) as e:
        parallelize_loop(P.prefix, "i", THREADS)
    text = assert_refused(e, "parallelize_loop", "procs.py")
    assert "conflict" in text and "i_1" in e.value.witness
    with pytest.raises(SchedulingError) as e:
        parallelize_loop(P.total, "i", BLOCKS)  # a reduction is a race in parallel
    assert_refused(e, "parallelize_loop", "procs.py")


def test_specialize_and_simplify_and_rename():
    q = specialize(P.axpy_any, "i", ["n % 16 == 0", "n < 8"])
    assert str(q).count("if") >= 2 or "elif" in str(q)
    assert_same_meaning(P.axpy_any, q, n=16)
    assert_same_meaning(P.axpy_any, q, n=5)
    q = rename(simplify(q), "axpy_spec")
    assert q.name == "axpy_spec"
    assert_same_meaning(P.axpy_any, q, n=9)


def test_simplify_removes_decided_guards():
    q = divide_loop(P.copy16, "i", 4, ["io", "ii"], tail="guard")
    assert "if" in str(q)
    q2 = simplify(q)
    assert "if" not in str(q2)
    assert_same_meaning(P.copy16, q2)


from hypothesis import given, settings, strategies as st  # noqa: E402


@settings(max_examples=15, deadline=None)
@given(st.integers(1, 7), st.sampled_from(["guard", "cut"]), st.integers(1, 13),
       st.booleans())
def test_random_divides_keep_meaning(factor, tail, n, reorder):
    q = divide_loop(P.rowsum, "j", factor, ["jo", "ji"], tail=tail)
    q = simplify(q)
    if reorder and tail == "guard":
        q = reorder_loops(q, "jo")
    assert_same_meaning(P.rowsum, q, seeds=(0,), n=3, m=n)


@pytest.mark.parametrize("tail", ["guard", "perfect"])
def test_a_blocks_loop_divides_into_two_blocks_loops(tail):
    """The column groups of the sm_90a GEMM (a grid whose shape orders the blocks):
    dividing a BLOCKS loop gives two BLOCKS loops; the meaning, the generated C on the
    emulator and the proof stay."""
    import numpy as np

    import gpudsl
    q = divide_loop(P.saxpy, "i", 16, ["b", "t"], tail="perfect")
    q = parallelize_loop(q, "b", BLOCKS)
    q = parallelize_loop(q, "t", THREADS)
    if tail == "perfect":   # 4 divides the blocks' count: said by a precondition
        from gpudsl.schedule import add_assert
        q = add_assert(q, "n % 64 == 0")
    r = divide_loop(q, "b", 4 if tail == "perfect" else 3, ["bo", "bi"], tail=tail)
    text = str(r)
    assert "for bo in par(" in text and "@ BLOCKS:\n" in text and "for bi in par(0, " in text
    assert text.count("@ BLOCKS") == 2
    n = 128 if tail == "perfect" else 80     # 8 or 5 blocks of 16: a short last group
    assert_same_meaning(q, r, n=n)
    assert r.check(n=n).ok
    x = np.arange(n, dtype=np.float32)
    want, got = np.ones(n, np.float32), np.ones(n, np.float32)
    gpudsl.interpret(q, n=n, a=2.0, x=x, y=want)
    r.compile("emulator")(n=n, a=2.0, x=x, y=got)
    assert (got == want).all()


def test_only_plain_blocks_loops_divide_once_mapped():
    q = divide_loop(P.saxpy, "i", 16, ["b", "t"], tail="perfect")
    q = parallelize_loop(q, "b", BLOCKS)
    q = parallelize_loop(q, "t", THREADS)
    with pytest.raises(SchedulingError, match="mapped to THREADS; divide it before"):
        divide_loop(q, "t", 4, ["to", "ti"], tail="perfect")
    with pytest.raises(SchedulingError, match="tail='guard' or 'perfect'"):
        divide_loop(q, "b", 4, ["bo", "bi"], tail="cut")
