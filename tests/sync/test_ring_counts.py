"""The closed-form counts of barrier-ring statements (issue 35, gpudsl.analysis.ring_counts)
equal counting by enumeration, for every element, offset, ring size and loop range."""
from __future__ import annotations

import itertools

from gpudsl.analysis.ring_counts import indicator, sum_over
from gpudsl.ir.control import evaluate
from gpudsl.ir.nodes import BinOp, Const, Var
from gpudsl.ir.types import INDEX


def _idx(form: str, c: int, k: int):
    i = Var("i")
    shifted = BinOp("+", i, Const(c), INDEX) if c else i
    return BinOp("%", shifted, Const(k), INDEX) if form == "mod" else shifted


def test_ring_sums_equal_enumeration():
    checked = 0
    for form, k, c, E, lo, hi in itertools.product(["mod", "plain"], [1, 2, 3, 6], [0, 1, 5],
                                                   range(-1, 7), range(-2, 5), range(-2, 14)):
        body = BinOp("*", Const(2), indicator(_idx(form, c, k), Const(E)), INDEX)
        got = sum_over(body, "i", Var("lo"), Var("hi"))
        assert got is not None
        want = sum(2 for i in range(lo, hi)
                   if ((i + c) % k if form == "mod" else i + c) == E)
        assert evaluate(got, {"lo": lo, "hi": hi}) == want, (form, k, c, E, lo, hi)
        checked += 1
    assert checked > 10000


def test_an_element_that_is_not_free_of_the_loop_variable_is_not_summed():
    body = indicator(_idx("mod", 0, 4), BinOp("%", Var("i"), Const(2), INDEX))
    assert sum_over(body, "i", Const(0), Var("n")) is None
