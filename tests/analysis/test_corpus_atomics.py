"""The atomics/CONST corpus (issue 13): verdict, kind, and that each race found by
check() with a data-independent witness reproduces in the interpreter's detector."""
from __future__ import annotations

import pytest

from .corpus_atomics import CASES
from .helpers import races_dynamically
from .test_corpus import test_race_witness as _witness, test_verdict as _verdict


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verdict(case):
    _verdict(case)


RACES = [c for c in CASES if c.expect == "race"]


@pytest.mark.parametrize("case", RACES, ids=[c.name for c in RACES])
def test_race_witness(case):
    _witness(case)


@pytest.mark.parametrize("case", [c for c in CASES if c.expect == "ok"],
                         ids=[c.name for c in CASES if c.expect == "ok"])
def test_safe_twins_run_clean_in_the_detector(case):
    sizes = {q.name: 40 for q in case.proc.ir.params if q.kind == "size"}
    assert races_dynamically(case.proc, sizes) is None
