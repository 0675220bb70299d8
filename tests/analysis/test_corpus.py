"""Every case of the corpus: the verdict, the diagnostic kind and, for races that do
not depend on data, that the witness reproduces in the interpreter's race detector."""
from __future__ import annotations

import pytest

import gpudsl

from .corpus import CASES
from .helpers import races_dynamically, sample_sizes


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_verdict(case):
    rep = case.proc.check(**case.bindings)
    if case.expect == "ok":
        assert rep.ok, str(rep)
        assert not rep.diagnostics
    else:
        want = case.expect if isinstance(case.expect, set) else {case.expect}
        assert not rep.ok
        assert rep.kinds() & want, str(rep)
        assert "unknown" not in rep.kinds(), str(rep)
        with pytest.raises(gpudsl.CheckError):
            rep.raise_if_failed()
    assert bool(rep.warnings) == case.warn, str(rep)
    text = str(rep)
    assert case.proc.name in text
    for d in rep.diagnostics:
        assert d.locations, d
        assert all(loc.line > 0 for loc in d.locations)


RACES = [c for c in CASES if c.expect == "race"]


@pytest.mark.parametrize("case", RACES, ids=[c.name for c in RACES])
def test_race_witness(case):
    rep = case.proc.check(**case.bindings)
    races = rep.of_kind("race")
    assert races
    d = races[0]
    w = d.witness
    assert len(d.locations) == 2
    for key in ("sizes", "array", "element", "thread1", "thread2"):
        assert key in w, w
    t1, t2 = w["thread1"], w["thread2"]
    assert (t1["block"], t1.get("threadIdx"), t1["loops"]) != \
        (t2["block"], t2.get("threadIdx"), t2["loops"]) or w["between"] in ("host", "iterations")
    assert "witness:" in str(d)
    src = d.locations[0].source_line()
    assert src and src.strip() in str(d)
    if not case.repro:
        assert w.get("data_dependent") or w["between"] in ("host", "iterations")
        return
    assert not w.get("data_dependent")
    err = races_dynamically(case.proc, w["sizes"])
    assert err is not None, f"witness {w} does not reproduce"


OKS = [c for c in CASES if c.expect == "ok"]


@pytest.mark.parametrize("case", OKS, ids=[c.name for c in OKS])
def test_safe_runs_clean(case):
    """A proc proved race-free runs without a race in the dynamic detector."""
    sizes = sample_sizes(case.proc, case.bindings)
    assert sizes is not None
    assert races_dynamically(case.proc, sizes) is None
