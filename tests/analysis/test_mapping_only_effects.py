"""The scheduling primitives ask check()'s collector for the structural mapping
issues only (``collect(p, mapping_only=True)``: no accesses, no barrier positions).
That mode must find exactly the issues the full collection finds."""
from __future__ import annotations

import random

from gpudsl import proc_from_source
from gpudsl.analysis.proc_effects import collect
from tests.analysis.corpus import CASES
from tests.regressions.test_issue11_check_crash import _gen


def _issues(ir, mapping_only):
    return [(i.kind, i.message, tuple(map(str, i.locs)))
            for i in collect(ir, mapping_only=mapping_only).issues]


def test_mapping_only_finds_the_same_issues_on_the_corpus():
    for c in CASES:
        assert _issues(c.proc.ir, True) == _issues(c.proc.ir, False), c.name


def test_mapping_only_finds_the_same_issues_on_random_nests():
    rng = random.Random(5)
    seen = 0
    for _ in range(150):
        p = proc_from_source(_gen(rng))
        full = _issues(p.ir, False)
        assert _issues(p.ir, True) == full
        seen += bool(full)
    assert seen > 20  # the nests do break mapping rules


def test_mapping_only_records_no_accesses():
    eff = collect(CASES[0].proc.ir, mapping_only=True)
    assert eff.accesses == []
