"""Issue 25: docs/reference.md is rendered from the language's declarations (types,
memories, loop forms, statement and expression nodes, builtins, atomics) and stays
complete: a construct without an entry stops the rendering; every example runs (the
page's python blocks are doc tests, see conftest.py)."""
from __future__ import annotations

from pathlib import Path

import pytest

import gpudsl
from gpudsl.frontend import reference
from gpudsl.ir.nodes import ATOMIC_OPS, BUILTINS

DOC = Path(__file__).resolve().parents[1] / "docs" / "reference.md"


def test_docs_are_the_rendering_of_the_declarations():
    assert DOC.read_text() == reference.render(), (
        "docs/reference.md is out of date; regenerate it with\n"
        "    python -m gpudsl.frontend.reference > docs/reference.md")


def test_every_declared_construct_has_an_entry():
    assert reference.missing() == []
    keys = {e.key for e in reference.ENTRIES}
    assert set(BUILTINS) <= keys and set(ATOMIC_OPS) <= keys


def test_a_builtin_without_an_entry_fails(monkeypatch):
    monkeypatch.setattr(reference, "BUILTINS", BUILTINS + ("atan2",))
    assert reference.missing() == ["Builtins: atan2"]
    with pytest.raises(ValueError, match="no entry for Builtins: atan2"):
        reference.render()


def test_each_builtin_and_atomic_example_uses_it():
    for e in reference.ENTRIES:
        if e.section == "Builtins":
            assert f"{e.key}(" in e.example, e.key
        if e.section == "Atomics":
            assert f"atomic_{e.key}(" in e.example, e.key


def test_every_name_procs_use_is_on_the_page():
    text = DOC.read_text()
    for name in gpudsl.language.__all__:
        assert f"`{name}" in text or f" {name}(" in text or f"{name}[" in text, name
