"""Issue 25: docs/graph_script.md documents every node of the script language, its two
dtype spellings and the errors of the parser (its examples run as doc tests)."""
from __future__ import annotations

from pathlib import Path

from gpudsl.graph.graph_nodes import DTYPES
from gpudsl.graph.script import SIGNATURES

PAGE = Path(__file__).resolve().parents[2] / "docs" / "graph_script.md"


def test_every_node_and_dtype_is_documented():
    text = PAGE.read_text()
    table = text.split("## Nodes", 1)[1].split("### Shapes", 1)[0]
    for node in SIGNATURES:
        assert f"| `{node}(" in table, node
    example = text.split("## A script with every node", 1)[1].split("## Errors", 1)[0]
    for node in SIGNATURES:
        assert f"= {node}(" in example, node
    for dtype in DTYPES:
        assert f"`{dtype}`" in text.split("## Dtypes", 1)[1].split("## Nodes", 1)[0]
