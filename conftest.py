"""Runs every ```python block of README.md and docs/*.md as a test (Sybil; see
docs/decisions.md, "Documentation examples run").

Each block runs alone, in a fresh namespace, as a reader pasting it into a new
interpreter would run it: a block may not lean on names an earlier block defined. A
fragment that is not meant to run is marked with ``<!-- skip: next -->`` on the line
before it (an HTML comment: invisible on GitHub and in the MkDocs site)."""
from __future__ import annotations

from sybil import Sybil
from sybil.parsers.markdown import SkipParser
from sybil.parsers.markdown.codeblock import CodeBlockParser


def _run_alone(example):
    """Compile the block at its own lines of the .md file (so that ``@proc`` reads its
    source from there, and errors point into the page) and run it in a new namespace,
    without inheriting any ``__future__`` flag: the block states its own imports."""
    __tracebackhide__ = True
    source = "\n" * (example.line + example.parsed.line_offset) + example.parsed
    code = compile(source, example.path, "exec", dont_inherit=True)
    exec(code, {"__name__": "__doc_example__"})


pytest_collect_file = Sybil(
    parsers=[CodeBlockParser("python", _run_alone), SkipParser()],
    patterns=["README.md", "docs/*.md"],
).pytest()
