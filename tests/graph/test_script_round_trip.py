"""parse -> to_script -> parse gives the same graph, for every node kind of the script
language (docs/graph_script.md's script with every node), the attention nodes' optional
arguments and the keyword options (``precision=tf32``).  ``to_script`` of a parsed graph
raised AttributeError (a parsed ConstantTensor has no value)."""
from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from gpudsl import graph
from gpudsl.graph.script import SIGNATURES, keyword_options

PAGE = Path(__file__).resolve().parents[2] / "docs" / "graph_script.md"
EVERY_NODE = PAGE.read_text().split("## A script with every node", 1)[1] \
    .split('script = """', 1)[1].split('"""', 1)[0]
OPTIONS = """\
$1 = InputTensor(q, float32, [4, 3, 32]);
$2 = ConstantTensor(k, float32, [2, 8, 32]);
$3 = InputTensor(pos, int64, [1]);
$4 = AttentionNode($1, $2, $2, $3, 1, 4, 30.0, [0.5, 0.25, 0.125, 0.0625]);
$5 = AttentionNode($1, $2, $2, 8, 0, 0, 0, [0.5, 0.25, 0.125, 0.0625]);
$6 = AttentionNode($1, $2, $2, 8, 1, 2);
$7 = SumNode($4, $5);
$8 = SumNode($7, $6);
$9 = ReshapeNode($8, [12, 32]);
$10 = ConstantTensor(w, float32, [32, 32]);
$11 = MatMulNode($9, $10, precision=tf32);
$12 = MatMulNode($9, $10, precision=fp32);
$13 = SumNode($11, $12);
$14 = InputTensor(table, int64, [2, 2]);
$15 = InputTensor(lens, int64, [2]);
$16 = ReshapeNode($13, [4, 3, 32]);
$17 = ConstantTensor(cache, float32, [4, 16, 32]);
$18 = PagedAttentionNode($16, $17, $17, $14, $15, 1, 3, 10.0);
$19 = SlicedSoftmaxNode($18, $3);
result = $19;
"""


def _shape_of(g_result):
    """The graph as comparable data: per node in post order, its op, attrs, dtype,
    shape and the positions of its inputs."""
    order, index = [], {}

    def visit(n):
        if id(n) in index:
            return
        for i in n.inputs:
            visit(i)
        index[id(n)] = len(order)
        order.append((n.op, sorted((k, repr(v)) for k, v in n.attrs.items()), n.dtype,
                      tuple(n.shape), tuple(index[id(i)] for i in n.inputs)))

    visit(g_result)
    return order


@pytest.mark.parametrize("text", [EVERY_NODE, OPTIONS], ids=["every-node", "options"])
def test_parse_to_script_parse_is_the_same_graph(text):
    g = graph.parse(text)
    s = graph.to_script(g.result)
    assert s.constants == {}     # a parsed constant has no value: given at compile
    again = graph.parse(s.script)
    assert _shape_of(again.result) == _shape_of(g.result)
    assert graph.to_script(again.result).script == s.script
    assert graph.to_script(g).script == s.script      # the Graph itself


def test_the_scripts_cover_every_node_and_keyword_word():
    both = EVERY_NODE + OPTIONS
    for op in SIGNATURES:
        assert f"= {op}(" in both, op
    for op in SIGNATURES:
        for name, words in keyword_options(op).items():
            for w in words:
                assert f"{name}={w}" in both, (op, name, w)
    assert "precision=tf32" in graph.to_script(graph.parse(OPTIONS)).script


def test_a_parsed_graph_mixed_with_built_nodes_keeps_the_built_values():
    g = graph.parse("$1 = InputTensor(x, float32, [2, 4]);\n"
                    "$2 = ConstantTensor(w, float32, [4, 4]);\n$3 = MatMulNode($1, $2);\n"
                    "result = $3;\n")
    bias = np.arange(4, dtype=np.float32).reshape(1, 4)
    s = graph.to_script(g.result + graph.ConstantTensor(bias))
    assert list(s.constants) == ["constant_0"] and (s.constants["constant_0"] == bias).all()
    assert "ConstantTensor(w, float32, [4, 4]);" in s.script
