"""Diagnostic kinds are one enumeration, and Diagnostic is their one constructor."""
import pytest

from gpudsl.analysis import Diagnostic, DiagnosticKind
from gpudsl.analysis.check_report import KINDS


def test_kinds_are_the_spec_kinds():
    # "target" (SPEC 2.9): a construct the target architecture does not have
    assert set(KINDS) == {"race", "bounds", "divergence", "mapping", "resource", "target",
                          "unknown"}
    assert {k.value for k in DiagnosticKind} == set(KINDS) | {"warning"}


def test_constructor_coerces_and_compares_as_string():
    d = Diagnostic("race", "two threads write s[0]")
    assert d.kind is DiagnosticKind.RACE
    assert d.kind == "race" and f"{d.kind}" == "race" and str(d.kind) == "race"
    assert str(d).startswith("error[race]: ")


def test_misspelled_kind_is_refused_where_it_is_made():
    with pytest.raises(ValueError, match="unknown diagnostic kind 'raec'"):
        Diagnostic("raec", "x")
