"""Runs every ```python block of README.md and docs/*.md as a test (Sybil; see
docs/decisions.md, "Documentation examples run").

Each block runs alone, in a fresh namespace, as a reader pasting it into a new
interpreter would run it: a block may not lean on names an earlier block defined. A
fragment that is not meant to run is marked with ``<!-- skip: next -->`` on the line
before it (an HTML comment: invisible on GitHub and in the MkDocs site); a block that
imports torch is skipped where torch is not installed."""
from __future__ import annotations

import atexit
import importlib.util
import os
import re
import shutil
import tempfile

import pytest
from sybil import Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.codeblock import CodeBlockParser


# optional dependencies a block may import: skipped (not failed) where one is missing
_OPTIONAL = {"torch": re.compile(r"^\s*(import|from)\s+(torch|gpudsl\.torch)\b", re.M)}


def _skip_without_optional(source: str) -> None:
    for module, uses in _OPTIONAL.items():
        if uses.search(source) and importlib.util.find_spec(module) is None:
            pytest.skip(f"needs {module} (pip install 'gpudsl[{module}]')")


def _run_alone(example):
    """Compile the block at its own lines of the .md file (so that ``@proc`` reads its
    source from there, and errors point into the page) and run it in a new namespace,
    without inheriting any ``__future__`` flag: the block states its own imports.  A
    block importing an optional dependency that is not installed (torch) is skipped."""
    __tracebackhide__ = True
    _skip_without_optional(example.parsed)
    source = "\n" * (example.line + example.parsed.line_offset) + example.parsed
    code = compile(source, example.path, "exec", dont_inherit=True)
    exec(code, {"__name__": "__doc_example__"})


pytest_collect_file = Sybil(
    parsers=[CodeBlockParser("python", _run_alone), SkipParser()],
    patterns=["README.md", "docs/*.md"],
).pytest()


# Each test process tunes into a database of its own, not the user's
# (~/.cache/gpudsl/tune.optuna.sqlite): the suite runs in several processes at once
# (pytest-xdist, README), and tests and examples that tune must neither race on one
# SQLite file nor read winners an earlier run left.  A GPUDSL_TUNE_DB already set wins.
if not os.environ.get("GPUDSL_TUNE_DB"):
    _TUNE_DIR = tempfile.mkdtemp(prefix="gpudsl-tests-tune-")
    os.environ["GPUDSL_TUNE_DB"] = os.path.join(_TUNE_DIR, "tune.optuna.sqlite")
    atexit.register(shutil.rmtree, _TUNE_DIR, ignore_errors=True)
